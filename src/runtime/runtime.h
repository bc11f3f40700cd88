/* The runtime layer: devices, the program cache, program builds, contexts, tensors,
 * timing, and the tuning database.  It knows no kernel: what a program is made of and how
 * it is tuned comes from the ops layer above.  Not installed. */
#ifndef TDACL_RUNTIME_H
#define TDACL_RUNTIME_H

#include "base/base.h"

/* ---- devices (device.c) ---- */

typedef struct tdacl_device_entry {
    cl_platform_id platform;
    cl_device_id device;
    tdacl_device_info info;
} tdacl_device_entry;

/* Enumerates once per process; NULL on failure (message recorded). */
tdacl_status tdacl__devices(const tdacl_device_entry **list, int *count);

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

/* A program: a label (cache entries, logs) and the cl/ files it concatenates.  The ops
 * layer's variant registry holds these; the runtime only builds what it is given. */
typedef struct tdacl_program_def {
    const char *name;
    const char *files[8];
    /* 1: lines of the PTX body marked "//@sm_90a@ " (cl/wgmma.cl) are sm_90a instructions, which
     * NVIDIA's OpenCL compiler (it targets sm_90) passes as comments: its PTX is then loaded
     * retargeted to sm_90a with the marks removed */
    int sm90a;
} tdacl_program_def;

/* Build (or fetch from the context registry / the disk cache) program `def` with the
 * given -D options appended to the device's base options.  The registry owns it. */
tdacl_status tdacl__program_get(tdacl_context *ctx, const tdacl_program_def *def, const char *options,
                                cl_program *program);
/* Kernel object `kernel` of that program, created once and owned by the registry. */
tdacl_status tdacl__kernel_get(tdacl_context *ctx, const tdacl_program_def *def, const char *options,
                               const char *kernel, cl_kernel *out);
/* Test hook: build arbitrary source text through the same path (cache included). */
tdacl_status tdacl__program_build_source(tdacl_context *ctx, const char *label,
                                         const char *source, const char *options,
                                         cl_program *program);
/* Options every program gets on this device (-D TDACL_* capability macros). */
const char *tdacl__base_options(const tdacl_context *ctx);
/* Options the device's class adds to program `program` (register mode, sub-group size), or "". */
const char *tdacl__program_class_options(const tdacl_context *ctx, const char *program);
/* Replaces the capability record the lookups and build options see (offline tools describe a
 * device that is not there: tdacl __programs); programs are not rebuilt. */
/* Whether the space-separated extension list `exts` names extension `name` exactly. */
int tdacl__has_extension(const char *exts, const char *name);
void tdacl__context_retarget(tdacl_context *ctx, const tdacl_device_info *info);
/* Sets info->arch, the tuning class, from the capability record (platform, vendor, name, type,
 * NVIDIA compute capability) and Intel's IP version (0 when the driver does not report it). */
void tdacl__classify_device(tdacl_device_info *info, uint32_t intel_ip_version);
void tdacl__programs_release(tdacl_context *ctx);

/* ---- context ---- */

typedef struct tdacl_program_entry tdacl_program_entry;
/* the inverse norms of q, k, q2, k2 have a buffer each (TDACL_SCRATCH_NORMS + view): sub-buffers
 * of one, made and released every call, made NVIDIA's OpenCL wait (bench/results/prefill-h200/) */
enum { TDACL_SCRATCH_STATS, TDACL_SCRATCH_NORMS, TDACL_SCRATCH_NORMS_LAST = TDACL_SCRATCH_NORMS + 3,
       TDACL_SCRATCH_PARTIAL, TDACL_SCRATCH_ML,
       TDACL_SCRATCH_VIEWS, TDACL_SCRATCH_VIEWS_LAST = TDACL_SCRATCH_VIEWS + 1, /* attention.mma_views' f32 views */
       TDACL_SCRATCH_MODEL, TDACL_SCRATCH_GEMV, TDACL_SCRATCH_ARRIVALS, TDACL_SCRATCH_SLOTS };
struct tdacl_tuning_db;

struct tdacl_context {
    tdacl_diag diag; /* first: the base layer's view of a context (base.h) */
    int device_index;
    tdacl_device_info info;
    cl_platform_id platform;
    cl_device_id device;
    cl_context cl;
    cl_command_queue queue;


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
    uint64_t launches;             /* kernels enqueued (tests and the bench count a decode step's) */
    int compile_announced;         /* the first compile from source was announced (program.c) */
    int borrowed;                  /* cl and queue came from the caller (retained, released at destroy) */
    int queue_profiling;           /* the queue records event times (a caller's queue may not) */
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
/* At least `count` zeroed uint arrival counters (the one-launch split reductions: the last
 * work-group of a group to arrive combines, and puts its counter back to 0). */
tdacl_status tdacl__arrival_counters(tdacl_context *ctx, size_t count, cl_mem *mem);

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
/* A contiguous tensor over the sub-buffer of parent at byte origin (a multiple of the device's
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN); the parent must outlive it. */
tdacl_status tdacl__tensor_create_sub(tdacl_context *ctx, cl_mem parent, size_t origin, tdacl_dtype dtype, int ndim,
                                     const int64_t *shape, tdacl_tensor **out);
/* 1 when no two elements of the view share a storage location (an output must be). */
int tdacl__view_is_injective(const tdacl_tensor *t);
int64_t tdacl__numel(const tdacl_tensor *t);
/* Fills a contiguous tensor with mean + stddev * N(0,1), deterministic in seed (device-side). */
tdacl_status tdacl__tensor_fill_normal(tdacl_tensor *t, uint32_t seed, float mean, float stddev);

/* ---- timing (timing.c) ---- */

/* Elapsed device time of a completed event in milliseconds (profiling queue). */
tdacl_status tdacl__event_ms(tdacl_context *ctx, cl_event ev, double *ms);
/* From the start of ev[0] to the end of ev[1] (ev[1] NULL: ev[0] alone): a call of two kernels. */
tdacl_status tdacl__span_ms(tdacl_context *ctx, cl_event ev[2], double *ms);
/* Monotonic host clock in seconds. */
double tdacl__now(void);

/* Enqueue helper: round `global` up to a multiple of `local` per dimension. */
tdacl_status tdacl__launch(tdacl_context *ctx, cl_kernel k, cl_uint dims, const size_t *global,
                           const size_t *local, cl_event *ev, const char *what);

/* Set kernel args from a list: pairs of (size, pointer); ends at size 0. */
tdacl_status tdacl__set_args(tdacl_context *ctx, cl_kernel k, const char *what, ...);
/* The same from argument index `first` on (a kernel whose signature grows with its options). */
tdacl_status tdacl__set_args_from(tdacl_context *ctx, cl_kernel k, const char *what, unsigned first, ...);

#endif
