/* Offline resolution of Hugging Face repo ids to snapshot directories (src/model/hub.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "model/hub.h"

static int is_dir(const char *p)
{
    struct stat s;
    return !stat(p, &s) && S_ISDIR(s.st_mode);
}

/* "name" or "org/name": letters, digits, '-', '_', '.', one '/' at most, no "..". */
static int looks_like_repo_id(const char *s)
{
    int slashes = 0;
    if (!*s || *s == '.' || *s == '/' || strstr(s, "..")) return 0;
    for (const char *c = s; *c; c++) {
        if (*c == '/') {
            if (++slashes > 1 || c[1] == 0 || c[1] == '.') return 0;
        } else if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                     *c == '_' || *c == '.'))
            return 0;
    }
    return 1;
}

static int hub_root(char *out, size_t n)
{
    const char *e = getenv("HF_HUB_CACHE");
    if (e && *e) return (size_t)snprintf(out, n, "%s", e) < n;
    e = getenv("HF_HOME");
    if (e && *e) return (size_t)snprintf(out, n, "%s/hub", e) < n;
    e = getenv("HOME");
    return e && *e && (size_t)snprintf(out, n, "%s/.cache/huggingface/hub", e) < n;
}

/* refs/main's revision, if the file holds one plain name */
static int read_ref(const char *repo, char *rev, size_t n)
{
    char path[TDACL_PATH_LIMIT];
    if ((size_t)snprintf(path, sizeof path, "%s/refs/main", repo) >= sizeof path) return 0;
    size_t len;
    char *text = tdacl__read_regular(path, 256, &len);
    if (!text) return 0;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ')) text[--len] = 0;
    int ok = len > 0 && len < n && !strchr(text, '/') && strcmp(text, ".") && strcmp(text, "..");
    if (ok) memcpy(rev, text, len + 1);
    free(text);
    return ok;
}

/* the newest snapshot directory */
static int newest_snapshot(const char *snapshots, char *rev, size_t n)
{
    DIR *d = opendir(snapshots);
    if (!d) return 0;
    double best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[TDACL_PATH_LIMIT];
        struct stat s;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", snapshots, e->d_name) >= sizeof p || stat(p, &s) || !S_ISDIR(s.st_mode))
            continue;
        if ((double)s.st_mtime > best && strlen(e->d_name) < n) best = (double)s.st_mtime, snprintf(rev, n, "%s", e->d_name);
    }
    closedir(d);
    return best >= 0;
}

tdacl_status tdacl__resolve_model_dir(const char *spec, char *out, size_t n)
{
    if (!spec || !*spec) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "model path is empty");
    if (is_dir(spec) || !looks_like_repo_id(spec)) {
        if ((size_t)snprintf(out, n, "%s", spec) >= n) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "model path too long");
        return TDACL_SUCCESS;
    }
    char root[TDACL_PATH_LIMIT], repo[TDACL_PATH_LIMIT], rev[256];
    if (!hub_root(root, sizeof root))
        return tdacl__fail(NULL, TDACL_ERR_IO, "%s is not a directory, and no Hugging Face cache is set ($HF_HUB_CACHE, $HF_HOME, $HOME)",
                           spec);
    /* models--org--name */
    char flat[256];
    size_t k = 0;
    for (const char *c = spec; *c && k + 3 < sizeof flat; c++) {
        if (*c == '/') flat[k++] = '-', flat[k++] = '-';
        else flat[k++] = *c;
    }
    flat[k] = 0;
    if ((size_t)snprintf(repo, sizeof repo, "%s/models--%s", root, flat) >= sizeof repo)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "model path too long");
    char snapshots[TDACL_PATH_LIMIT + 16];
    snprintf(snapshots, sizeof snapshots, "%s/snapshots", repo);
    if (!read_ref(repo, rev, sizeof rev) && !newest_snapshot(snapshots, rev, sizeof rev))
        return tdacl__fail(NULL, TDACL_ERR_IO,
                           "%s is not a directory, and the Hugging Face cache has no snapshot of it (looked in %s; "
                           "nothing is downloaded)",
                           spec, snapshots);
    if ((size_t)snprintf(out, n, "%s/%s", snapshots, rev) >= n)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "model path too long");
    if (!is_dir(out)) return tdacl__fail(NULL, TDACL_ERR_IO, "%s: refs/main names snapshot %s, which is missing", spec, out);
    return TDACL_SUCCESS;
}
