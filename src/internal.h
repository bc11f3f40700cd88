/* Declarations shared by the library's source files.  Not installed. */
#ifndef TDACL_INTERNAL_H
#define TDACL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdarg.h>
#include <stdbool.h>

#include "tdacl.h"

#define TDACL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TDACL_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* ---- errors and log (status.c, log.c) ---- */

/* Record `msg` as the last error of ctx (may be NULL) and of this thread, log it at debug
 * level and return st.  Messages read "call: what was wrong". */
tdacl_status tdacl__fail(const tdacl_context *ctx, tdacl_status st, const char *fmt, ...)
    TDACL_PRINTF(3, 4);
/* For a failed OpenCL call: maps the code to a status and names it in the message. */
tdacl_status tdacl__fail_cl(const tdacl_context *ctx, cl_int err, const char *fmt, ...)
    TDACL_PRINTF(3, 4);
const char *tdacl__cl_error_name(cl_int err);
tdacl_status tdacl__cl_status(cl_int err);
void tdacl__clear_error(const tdacl_context *ctx);

void tdacl__log(const tdacl_context *ctx, tdacl_log_level level, const char *fmt, ...)
    TDACL_PRINTF(3, 4);
int tdacl__log_enabled(const tdacl_context *ctx, tdacl_log_level level);
int tdacl__log_level_from_env(void);

/* ---- devices (device.c) ---- */

typedef struct tdacl_device_entry {
    cl_platform_id platform;
    cl_device_id device;
    tdacl_device_info info;
} tdacl_device_entry;

/* Enumerates once per process; NULL on failure (message recorded). */
tdacl_status tdacl__devices(const tdacl_device_entry **list, int *count);

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

/* ---- program cache (cache.c) ---- */

typedef struct tdacl_cache {
    int enabled;
    char dir[512];
    tdacl_cache_stats stats;
} tdacl_cache;

void tdacl__cache_init(tdacl_context *ctx, const tdacl_context_desc *desc);
/* Returns 1 and a malloc'ed binary on a valid entry for `key`, 0 otherwise.  Invalid
 * entries (truncated, corrupted, foreign) are deleted and logged. */
/* Validates a whole cache entry in memory against `key`: NULL and the payload's place, or
 * the reason it is refused.  No I/O (the cache-entry fuzz target calls it directly). */
const char *tdacl__cache_entry_check(const unsigned char *buf, size_t len, const char *key, size_t *payload_at,
                                     size_t *payload_len);
int tdacl__cache_load(tdacl_context *ctx, const char *key, unsigned char **bin, size_t *size);
void tdacl__cache_store(tdacl_context *ctx, const char *key, const unsigned char *bin,
                        size_t size);
/* Deletes the entry of `key` (after a binary the driver refused). */
void tdacl__cache_discard(tdacl_context *ctx, const char *key);
/* Path of the entry file for key (for tests). */
void tdacl__cache_entry_path(const tdacl_context *ctx, const char *key, char *path, size_t n);

/* ---- embedded kernel sources (generated kernels_embed.c) ---- */

typedef struct tdacl_embedded_source {
    const char *name;  /* file name in cl/, e.g. "attention.cl" */
    const char *text;
    size_t size;
} tdacl_embedded_source;
extern const tdacl_embedded_source tdacl_embedded_sources[];
extern const int tdacl_embedded_source_count;
const tdacl_embedded_source *tdacl__find_source(const char *name);

/* ---- programs (program.c) ---- */

/* One row of the program table: a program is the concatenation of its source files. */
typedef struct tdacl_program_def {
    const char *name;
    const char *files[4];
} tdacl_program_def;
const tdacl_program_def *tdacl__program_def(const char *name);

/* Build (or fetch from the context registry / the disk cache) program `name` with the
 * given -D options appended to the device's base options.  The registry owns it. */
tdacl_status tdacl__program_get(tdacl_context *ctx, const char *name, const char *options,
                                cl_program *program);
/* Kernel object `kernel` of that program, created once and owned by the registry. */
tdacl_status tdacl__kernel_get(tdacl_context *ctx, const char *program, const char *options,
                               const char *kernel, cl_kernel *out);
/* Test hook: build arbitrary source text through the same path (cache included). */
tdacl_status tdacl__program_build_source(tdacl_context *ctx, const char *label,
                                         const char *source, const char *options,
                                         cl_program *program);
/* Options every program gets on this device (-D TDACL_* capability macros). */
const char *tdacl__base_options(const tdacl_context *ctx);
void tdacl__programs_release(tdacl_context *ctx);

/* ---- context ---- */

typedef struct tdacl_program_entry tdacl_program_entry;
enum { TDACL_SCRATCH_STATS, TDACL_SCRATCH_NORMS, TDACL_SCRATCH_PARTIAL, TDACL_SCRATCH_ML,
       TDACL_SCRATCH_MODEL, TDACL_SCRATCH_GEMV, TDACL_SCRATCH_SLOTS };
struct tdacl_tuning_db;

struct tdacl_context {
    int device_index;
    tdacl_device_info info;
    cl_platform_id platform;
    cl_device_id device;
    cl_context cl;
    cl_command_queue queue;

    tdacl_log_fn log_fn;
    void *log_user;
    int log_level;

    char last_error[2048];
    char *build_log;
    char base_options[512];

    tdacl_cache cache;
    tdacl_program_entry *programs;
    struct tdacl_tuning_db *tuning;
    int use_tuning_db;

    int live_tensors;
    uint64_t staging_limit; /* bytes of one upload/download staging buffer; 0 = max allocation */
    tdacl_tensor *tensors; /* live tensors: tdacl_context_destroy releases any left */
    /* higher-level objects made on this context (models): destroyed with it, first */
    struct tdacl_child { void *obj; tdacl_status (*destroy)(void *obj); } *children;
    int nchildren, children_cap;
    cl_mem scratch[TDACL_SCRATCH_SLOTS]; /* reusable device scratch, one buffer per use */
    size_t scratch_bytes[TDACL_SCRATCH_SLOTS];
    struct tdacl_profile *profile; /* TDACL_PROFILE: per-kernel device time (profile.c) */
};

/* ---- per-kernel profile (profile.c) ---- */
typedef struct tdacl_profile tdacl_profile;
void tdacl__profile_init(tdacl_context *ctx);
void tdacl__profile_add(tdacl_context *ctx, const char *name, cl_event ev);
void tdacl__profile_report(tdacl_context *ctx); /* logs the summary and frees it */

/* Registers an object that tdacl_context_destroy destroys (before the tensors) if the user
 * has not; the object's own destroy calls tdacl__child_remove. */
tdacl_status tdacl__child_add(tdacl_context *ctx, void *obj, tdacl_status (*destroy)(void *obj));
void tdacl__child_remove(tdacl_context *ctx, void *obj);

/* Reusable scratch buffer `slot` of at least `bytes` (grown on demand, owned by ctx). */
tdacl_status tdacl__scratch(tdacl_context *ctx, int slot, size_t bytes, cl_mem *mem);

/* ---- tensors (tensor.c) ---- */

typedef struct tdacl_storage {
    cl_mem mem;
    size_t bytes;
    int refs;
} tdacl_storage;

struct tdacl_tensor {
    tdacl_context *ctx;
    tdacl_storage *storage;
    tdacl_dtype dtype;
    int ndim;
    int64_t shape[TDACL_MAX_DIMS];
    int64_t strides[TDACL_MAX_DIMS];
    int64_t offset; /* elements */
    tdacl_tensor *live_prev, *live_next; /* the context's live list (released at its end) */
};

int tdacl__tensor_is_contiguous(const tdacl_tensor *t);
/* 1 when no two elements of the view share a storage location (an output must be). */
int tdacl__view_is_injective(const tdacl_tensor *t);
int64_t tdacl__numel(const tdacl_tensor *t);
/* Fills a contiguous tensor with mean + stddev * N(0,1), deterministic in seed (device-side). */
tdacl_status tdacl__tensor_fill_normal(tdacl_tensor *t, uint32_t seed, float mean, float stddev);

/* ---- timing (timing.c) ---- */

/* Elapsed device time of a completed event in milliseconds (profiling queue). */
tdacl_status tdacl__event_ms(tdacl_context *ctx, cl_event ev, double *ms);
/* Monotonic host clock in seconds. */
double tdacl__now(void);

/* Enqueue helper: round `global` up to a multiple of `local` per dimension. */
tdacl_status tdacl__launch(tdacl_context *ctx, cl_kernel k, cl_uint dims, const size_t *global,
                           const size_t *local, cl_event *ev, const char *what);

/* Set kernel args from a list: pairs of (size, pointer); ends at size 0. */
tdacl_status tdacl__set_args(tdacl_context *ctx, cl_kernel k, const char *what, ...);

#endif
