/* File utilities shared by every layer: open only regular files (never block on a FIFO or
 * a device), read a whole file with a size cap, replace a file atomically, and mkdir -p. */
#ifndef TDACL_FILEIO_H
#define TDACL_FILEIO_H

#include <stddef.h>
#include <stdio.h>

/* open(O_RDONLY | O_NONBLOCK) then fstat: a FIFO, socket, device or directory is refused
 * without blocking (errno EINVAL for "not a regular file").  Returns a descriptor in
 * blocking mode, or -1 with errno set. */
int tdacl__open_regular(const char *path);
/* The same as a stdio stream ("rb"). */
FILE *tdacl__fopen_regular(const char *path);
/* Whole regular file, NUL-terminated, at most `max` bytes (errno EFBIG beyond).  NULL with
 * errno set on failure. */
char *tdacl__read_regular(const char *path, size_t max, size_t *len);
/* A reason for errno after the calls above ("not a regular file" for EINVAL). */
const char *tdacl__file_error(int err);
/* mkdir -p with `mode` for every directory it creates; 0 on success, -1 with errno.
 * Paths of PATH_LIMIT bytes or more are refused (ENAMETOOLONG), never truncated. */
#define TDACL_PATH_LIMIT 512
int tdacl__mkdir_p(const char *dir, unsigned mode);

/* Atomic replacement: writes go to a unique temporary file beside `path`, which commit
 * syncs and renames over path, so a reader sees the old file or the new one, never a part. */
typedef struct tdacl_atomic_file {
    FILE *f;
    char tmp[TDACL_PATH_LIMIT + 32];
    char path[TDACL_PATH_LIMIT];
} tdacl_atomic_file;
/* Opens the temporary file with permissions `mode`; NULL with errno on failure. */
FILE *tdacl__atomic_open(tdacl_atomic_file *a, const char *path, unsigned mode);
/* Closes and renames when ok (the caller's writes succeeded), else discards; 0 on
 * success, else the errno of the first failure (the temporary file is removed). */
int tdacl__atomic_commit(tdacl_atomic_file *a, int ok);

#endif
