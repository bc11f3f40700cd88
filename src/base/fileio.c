/* File utilities: see fileio.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"

int tdacl__open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

FILE *tdacl__fopen_regular(const char *path)
{
    int fd = tdacl__open_regular(path);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

char *tdacl__read_regular(const char *path, size_t max, size_t *len)
{
    int fd = tdacl__open_regular(path);
    if (fd < 0) return NULL;
    struct stat sb;
    if (fstat(fd, &sb) || (uint64_t)sb.st_size > (uint64_t)max) {
        close(fd);
        errno = EFBIG;
        return NULL;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0; /* a file that shrank while read gives what was there */
    *len = got;
    return buf;
}

const char *tdacl__file_error(int err) { return err == EINVAL ? "not a regular file" : strerror(err); }

int tdacl__mkdir_p(const char *dir, unsigned mode)
{
    char tmp[TDACL_PATH_LIMIT];
    size_t n = strlen(dir);
    if (n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, dir, n + 1);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, (mode_t)mode) && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(tmp, (mode_t)mode) && errno != EEXIST) return -1;
    struct stat sb;
    if (stat(tmp, &sb)) return -1;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

FILE *tdacl__atomic_open(tdacl_atomic_file *a, const char *path, unsigned mode)
{
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    memcpy(a->path, path, strlen(path) + 1);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(a->tmp);
    if (fd < 0) return NULL;
    if (fchmod(fd, (mode_t)mode) || !(a->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(a->tmp);
        errno = e;
        return NULL;
    }
    return a->f;
}

int tdacl__atomic_commit(tdacl_atomic_file *a, int ok)
{
    int e = ok ? 0 : errno ? errno : EIO;
    if (fflush(a->f) && !e) e = errno;
    if (fsync(fileno(a->f)) && !e) e = errno;
    if (fclose(a->f) && !e) e = errno;
    a->f = NULL;
    if (!e && rename(a->tmp, a->path)) e = errno;
    if (e) unlink(a->tmp);
    return e;
}
