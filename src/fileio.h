/* File utilities shared by every layer: open only regular files (never block on a FIFO or
 * a device), read a whole file with a size cap, and mkdir -p. */
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

#endif
