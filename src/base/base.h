/* The base layer: errors, log, hashing, strings.  Every other layer builds on it; it
 * includes nothing of the library but the public header.  Not installed. */
#ifndef TDACL_BASE_H
#define TDACL_BASE_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdarg.h>
#include <stdbool.h>

#include "tdacl.h"

#define TDACL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TDACL_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* ---- errors and log (status.c, log.c, clerror.c) ---- */

/* Where a context's messages go.  It is the first member of struct tdacl_context, so this
 * layer reaches it from a context pointer without knowing the rest (C11 6.7.2.1: a pointer
 * to a structure, converted, points to its first member). */
typedef struct tdacl_diag {
    tdacl_log_fn log_fn;
    void *log_user;
    int log_level;
    char last_error[2048];
} tdacl_diag;
static inline tdacl_diag *tdacl__diag(const tdacl_context *ctx) { return (tdacl_diag *)(void *)ctx; }

/* Record `msg` as the last error of ctx (may be NULL) and of this thread, log it at debug
 * level and return st.  Messages read "call: what was wrong". */
tdacl_status tdacl__fail(const tdacl_context *ctx, tdacl_status st, const char *fmt, ...)
    TDACL_PRINTF(3, 4);
/* For a failed OpenCL call: maps the code to a status and names it in the message. */
tdacl_status tdacl__fail_cl(const tdacl_context *ctx, cl_int err, const char *fmt, ...)
    TDACL_PRINTF(3, 4);
#ifdef __clang_analyzer__
/* clang's static analyzer (tools/analyze.sh) reads one translation unit at a time: it is told
 * here that a recorded failure is never TDACL_SUCCESS (every caller passes an error), or it
 * follows paths on which a failed step "succeeded" */
static inline tdacl_status tdacl__analyzer_failure(tdacl_status st)
{
    if (st == TDACL_SUCCESS) __builtin_unreachable();
    return st;
}
#define tdacl__fail(...) tdacl__analyzer_failure(tdacl__fail(__VA_ARGS__))
#define tdacl__fail_cl(...) tdacl__analyzer_failure(tdacl__fail_cl(__VA_ARGS__))
#endif
const char *tdacl__cl_error_name(cl_int err);
tdacl_status tdacl__cl_status(cl_int err);
void tdacl__clear_error(const tdacl_context *ctx);

void tdacl__log(const tdacl_context *ctx, tdacl_log_level level, const char *fmt, ...)
    TDACL_PRINTF(3, 4);
int tdacl__log_enabled(const tdacl_context *ctx, tdacl_log_level level);
/* 1 when a process-wide log callback is set (tdacl_log_set_callback). */
int tdacl__log_has_callback(void);
int tdacl__log_level_from_env(void);

/* The argument check of a getter: NULL `obj` or `out` fails with a message naming it
 * ("tdacl_tensor_dtype: dtype is NULL"); ctx_expr gives the object's context. */
#define TDACL_CHECK_GETTER(call, obj, obj_name, out, out_name, ctx_expr)                              \
    do {                                                                                          \
        if (!(obj) || !(out))                                                                     \
            return tdacl__fail((obj) ? (ctx_expr) : NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, \
                               (obj) ? out_name : obj_name);                                      \
    } while (0)

/* A whole getter: `tdacl_status fn(const obj_t *o, out_t *out)` that checks both pointers and
 * stores `value` (an expression in o). */
#define TDACL_GETTER(fn, obj_t, obj_name, out_t, out_name, value)           \
    tdacl_status fn(const obj_t *o, out_t *out)                             \
    {                                                                       \
        TDACL_CHECK_GETTER(#fn, o, obj_name, out, out_name, o->ctx);        \
        *out = (value);                                                     \
        return TDACL_SUCCESS;                                               \
    }

/* ---- hashing (hash.c) ---- */

uint64_t tdacl__fnv1a64(const void *data, size_t n, uint64_t seed);
#define TDACL_FNV_SEED 0xcbf29ce484222325ULL
typedef struct tdacl_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char buf[64];
    size_t fill;
} tdacl_sha256;
void tdacl__sha256_init(tdacl_sha256 *s);
void tdacl__sha256_update(tdacl_sha256 *s, const void *data, size_t n);
void tdacl__sha256_final(tdacl_sha256 *s, unsigned char out[32]);

/* ---- growable string (strbuf.c) ---- */

typedef struct tdacl_strbuf {
    char *data;
    size_t len, cap;
    int oom;
} tdacl_strbuf;
void tdacl__sb_printf(tdacl_strbuf *sb, const char *fmt, ...) TDACL_PRINTF(2, 3);
void tdacl__sb_free(tdacl_strbuf *sb);

/* ---- names of enums (dtype.c) ---- */

/* The tdacl_dtype named s ("f32", "bf16", "f16"), or -1. */
int tdacl__dtype_from_name(const char *s);

#endif
