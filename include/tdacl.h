/*
 * libtdacl: Threshold Rectified / Threshold Differential Attention and friends on any
 * OpenCL device.  This is the only header a user needs.
 *
 * Conventions
 *  - Every call returns a tdacl_status.  TDACL_SUCCESS is 0.  On failure,
 *    tdacl_last_error(ctx) returns a message naming the call, the argument and, for
 *    OpenCL failures, the OpenCL error name.  With ctx == NULL it returns the last message
 *    recorded on the calling thread (useful when tdacl_context_create itself fails).
 *  - Objects are opaque handles with create/destroy pairs.  Destroying NULL is a no-op.
 *  - Descriptors are plain structs; call the matching *_init() to get the defaults, then
 *    set the fields you care about.
 *  - Tensors are element counts plus strides in elements (not bytes), outermost first.
 *  - The library never calls exit() or abort() and never prints unless asked: the log goes
 *    to stderr at the level in $TDACL_LOG (debug|info|warn|error, default warn) or to a
 *    callback.  One note is shown without asking, and only when stderr is a terminal and no
 *    callback is set: a context's first kernel compile ("compiling kernels for <device>;
 *    cached for next time"), since it can take seconds to minutes.  TDACL_LOG=error hides it.
 *
 * Threads
 *  - Safe from any thread at any time: tdacl_version, tdacl_device_count/get_info/select,
 *    tdacl_status_str, the kind and dtype name functions, tdacl_last_error(NULL) (it reads
 *    the calling thread's own message), tokenizers (read-only after load).
 *  - A context and everything made on it (tensors, models) belong to one thread at a time:
 *    calls on one context must not overlap (serialise them with your own lock).  Different
 *    contexts, even on the same device, may be used from different threads at once
 *    (tests/test_interop.c runs two in parallel).
 *  - tdacl_log_set_callback: set it before other threads use the library.
 *
 * Asynchronous calls
 *  Work goes to the context's in-order command queue.  These calls enqueue and return
 *  before the device is done: tdacl_attention and tdacl_matmul (without stats),
 *  tdacl_tensor_copy, and the kernels of tdacl_model_prefill / tdacl_model_decode (their
 *  token upload blocks, so they start after earlier work finished).  These wait for the
 *  device: tdacl_tensor_upload/download, tdacl_model_logits, tdacl_finish, any call given a
 *  stats pointer (it reads times and counters back), tdacl_context_destroy.  Inputs may be overwritten by later calls on the same context
 *  (the queue orders them); host code reading a tensor's cl_mem directly must first call
 *  tdacl_finish or enqueue on the same queue (tdacl_context_get_cl).
 *
 * Environment
 *  TDACL_DEVICE     device selector (index or case-insensitive substring of platform name,
 *                   device name or class); default: the first GPU, else the first device.
 *  TDACL_LOG        debug | info | warn | error | off
 *  TDACL_CACHE      off disables the program binary cache
 *  TDACL_CACHE_DIR  cache directory (default $XDG_CACHE_HOME/tdacl or ~/.cache/tdacl)
 *  TDACL_PROFILE    1: log each kernel's summed device time at context destroy (level info, or
 *                   warn when info is not shown, so that it prints without TDACL_LOG)
 *  TDACL_TUNING_FILE  user tuning database (default $XDG_CONFIG_HOME/tdacl/tuning.tdb or
 *                     ~/.config/tdacl/tuning.tdb; format in docs/tuning.md).  A file named
 *                     here (or in tdacl_context_desc.tuning_file) that cannot be read, is not
 *                     a regular file or is over 4 MiB is reported once and ignored.
 *  TDACL_VARIANT    name[,name...]: each operation runs only on the kernel variants named
 *                   (attention.simt, attention.mma, attention_decode.simt,
 *                   attention_decode.mma, gemm.simt, gemm.mma, gemv.simt); an operation none of
 *                   them names is unrestricted.  When the
 *                   named ones cannot run a call, the call fails with the reason.
 *                   TDACL_LOG=debug says for every call which variant ran and why.
 *  TDACL_PRECISION  exact | tf32 | bf16: replaces tdacl_attention_desc.precision and
 *                   tdacl_matmul_desc.precision in every call, and sets the model forward's
 *                   (run an unchanged program with fp32 inputs on the matrix units)
 *  TDACL_GEMM_SPLIT_K  N: the tiled GEMMs split K into N chunks over work-groups (as far as K
 *                     allows); unset: they split only where their tiles are too few to fill
 *                     the device (docs/spec.md section 4b)
 *  TDACL_GEMV_STAGE  0 | 1: the transposed GEMV (b as [N, K], a tied LM head, M <= 8) reads
 *                    a's rows from global memory (0) or stages them in local memory first (1);
 *                    unset: staged where local memory is the device's own (GPUs), else read
 *                    directly (CPUs, where the copy only costs); any other value is an error
 *  TDACL_BUILD_OPTIONS  extra OpenCL C compiler options appended to every program the library
 *                       builds (part of the program-cache key), e.g. -cl-opt-disable, which the
 *                       test suite uses on PoCL, or -cl-nv-verbose
 *  TDACL_MMA_EMULATE  1 (or portable): run the tensor-core kernels (attention prefill, GEMM) on any
 *                     device through the portable body of their fragment layer; dpas8 | dpas16 |
 *                     mfma | wmma: through the Intel or AMD matrix-unit body with the vendor's
 *                     instruction emulated in plain OpenCL C from its documented lane layout
 *                     (slow; how CI checks those layouts); unset or 0: off; any other value
 *                     is refused by the matrix-unit variants, which say so in the debug log
 *  TDACL_EXPERIMENTAL_MATRIX  1: on Intel GPUs with cl_intel_subgroup_matrix_multiply_accumulate
 *                     (DPAS, Xe-HPG / Xe-HPC / Xe2) and AMD gfx90a / gfx94x (MFMA) and gfx11
 *                     (WMMA), the tensor-core kernels use those matrix units.  These bodies
 *                     are compiled offline in CI and checked on PoCL through their emulation,
 *                     but have not run on such hardware: off by default, and `tdacl devices`
 *                     says "compiled, not yet run on hardware"
 *
 * Numbers that are not finite: descriptor fields and checkpoint scalars (beta, lambda) that
 * are NaN or infinite are refused with TDACL_ERR_INVALID_ARGUMENT / TDACL_ERR_FORMAT; tensor
 * data (weights, inputs) is computed as given, and a model load warns once when its weights
 * hold non-finite values.
 *
 * Files: every file the library reads (checkpoints, config.json, .npy, the tuning database,
 * program cache entries) must be a regular file; FIFOs, devices and directories are refused
 * without blocking.  Symbolic links are followed (the Hugging Face hub cache links snapshots
 * to blobs).  The program cache trusts only entries and a directory owned by the calling
 * user and not writable by group or others (created 0700); anything else turns it off or
 * discards the entry, with a warning.
 */
#ifndef TDACL_H
#define TDACL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TDACL_API __declspec(dllexport)
#elif defined(__GNUC__)
#define TDACL_API __attribute__((visibility("default")))
#else
#define TDACL_API
#endif

#define TDACL_VERSION_MAJOR 0
#define TDACL_VERSION_MINOR 1
#define TDACL_VERSION_PATCH 0

/* ------------------------------------------------------------------------------------ */
/* Status and messages                                                                  */

typedef enum tdacl_status {
    TDACL_SUCCESS = 0,
    TDACL_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, out-of-range value, bad descriptor */
    TDACL_ERR_NO_DEVICE = 2,        /* no OpenCL platform/device, or selector matched none */
    TDACL_ERR_OPENCL = 3,           /* an OpenCL call failed; message names the call + code */
    TDACL_ERR_BUILD = 4,            /* kernel compilation failed; see tdacl_build_log() */
    TDACL_ERR_OUT_OF_MEMORY = 5,    /* host or device allocation failed */
    TDACL_ERR_TOO_LARGE = 6,        /* a buffer exceeds the device's maximum allocation */
    TDACL_ERR_SHAPE = 7,            /* shapes or strides do not agree */
    TDACL_ERR_DTYPE = 8,            /* unsupported or mismatched element type */
    TDACL_ERR_UNSUPPORTED = 9,      /* valid request this device or build cannot do */
    TDACL_ERR_IO = 10,              /* a file could not be read or written */
    TDACL_ERR_FORMAT = 11,          /* a file or text is malformed (npy, json, safetensors) */
    TDACL_ERR_INTERNAL = 12         /* a bug in libtdacl: please report it */
} tdacl_status;

/* Short fixed description of a status ("invalid argument"). Never NULL. */
TDACL_API const char *tdacl_status_str(tdacl_status status);

typedef struct tdacl_context tdacl_context;

/* Message of the last failed call on ctx (or on this thread when ctx is NULL).
 * Empty string when nothing failed.  Valid until the next failing call. */
TDACL_API const char *tdacl_last_error(const tdacl_context *ctx);

/* Library version "MAJOR.MINOR.PATCH" and the git revision it was built from. */
TDACL_API const char *tdacl_version(void);
TDACL_API const char *tdacl_git_revision(void);

/* ------------------------------------------------------------------------------------ */
/* Logging                                                                              */

typedef enum tdacl_log_level {
    TDACL_LOG_DEBUG = 0,
    TDACL_LOG_INFO = 1,
    TDACL_LOG_WARN = 2,
    TDACL_LOG_ERROR = 3,
    TDACL_LOG_OFF = 4
} tdacl_log_level;

typedef void (*tdacl_log_fn)(tdacl_log_level level, const char *message, void *user);

/* Process-wide log sink for messages not tied to a context (and for contexts created
 * without their own callback).  fn == NULL restores stderr.  level < 0 keeps $TDACL_LOG. */
TDACL_API tdacl_status tdacl_log_set_callback(tdacl_log_fn fn, void *user, int level);

/* ------------------------------------------------------------------------------------ */
/* Devices                                                                              */

typedef enum tdacl_device_type {
    TDACL_DEVICE_OTHER = 0,
    TDACL_DEVICE_CPU = 1,
    TDACL_DEVICE_GPU = 2,
    TDACL_DEVICE_ACCELERATOR = 3
} tdacl_device_type;

/* Capability record of one OpenCL device, filled at discovery. */
typedef struct tdacl_device_info {
    int index;                   /* position in tdacl's global device list */
    char platform_name[128];
    char platform_version[128];
    char name[128];
    char vendor[128];
    uint32_t vendor_id;
    char driver_version[128];
    char device_version[128];    /* "OpenCL 3.0 CUDA", ... */
    char opencl_c_version[128];  /* "OpenCL C 1.2 ..." */
    tdacl_device_type type;
    char arch[64];               /* class used for tuning fallback: "nvidia-sm_90", "intel-xe-hpc",
                                    "cpu-x86_64-avx512", "amd-gfx90a", ... */
    int has_fp16, has_fp64, has_subgroups, has_int64_atomics;
    int nv_cc_major, nv_cc_minor; /* NVIDIA compute capability, 0 when unknown */
    uint32_t compute_units;
    uint32_t clock_mhz;
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    uint64_t local_mem_bytes;
    int local_mem_is_dedicated;
    size_t max_work_group_size;
    size_t max_work_item_sizes[3];
    uint32_t vec_width_float, vec_width_half, vec_width_double; /* preferred */
    uint32_t mem_base_align_bits;
    int profiling_timer_ns;      /* timer resolution, ns */
    char extensions[4096];       /* truncated if longer (then ends in "...") */
} tdacl_device_info;

/* Number of OpenCL devices over all platforms (0 is not an error). */
TDACL_API tdacl_status tdacl_device_count(int *count);
/* Capability record of device `index` (0-based over all platforms). */
TDACL_API tdacl_status tdacl_device_get_info(int index, tdacl_device_info *info);
/* Resolve a selector: NULL or "" = $TDACL_DEVICE or the default device; digits = index;
 * anything else = case-insensitive substring of the platform name, device name or device
 * class (tdacl_device_info.arch, e.g. "pocl", "nvidia").
 * No match: TDACL_ERR_NO_DEVICE with a message listing the devices found. */
TDACL_API tdacl_status tdacl_device_select(const char *selector, int *index);

/* ------------------------------------------------------------------------------------ */
/* Context                                                                              */

typedef struct tdacl_context_desc {
    const char *device;      /* selector (see tdacl_device_select); NULL = default */
    int cache;               /* 1 on, 0 off, -1 = $TDACL_CACHE (on unless "off") */
    const char *cache_dir;   /* NULL = $TDACL_CACHE_DIR, $XDG_CACHE_HOME/tdacl, ~/.cache/tdacl */
    const char *tuning_file; /* NULL = $TDACL_TUNING_FILE or $XDG_CONFIG_HOME/tdacl/tuning.tdb */
    int use_tuning_db;       /* 1 (default): consult user + shipped database; 0: defaults only */
    tdacl_log_fn log_fn;     /* NULL = the process-wide sink */
    void *log_user;
    int log_level;           /* -1 = $TDACL_LOG (default warn) */
} tdacl_context_desc;

TDACL_API void tdacl_context_desc_init(tdacl_context_desc *desc);
TDACL_API tdacl_status tdacl_context_create(const tdacl_context_desc *desc, tdacl_context **ctx);
/* Releases every OpenCL object the context owns.  The context owns what is made on it:
 * models and tensors still alive are destroyed here too (a warning in the log), and their
 * handles are invalid afterwards -- destroy them before the context, never after. */
TDACL_API tdacl_status tdacl_context_destroy(tdacl_context *ctx);
/* The capability record of the context's device. */
TDACL_API tdacl_status tdacl_context_get_info(const tdacl_context *ctx, tdacl_device_info *info);
/* Wait for all work queued on the context. */
TDACL_API tdacl_status tdacl_finish(tdacl_context *ctx);

/* Interop with existing OpenCL code.  Handles are passed as void * (cl_context,
 * cl_device_id, cl_command_queue, cl_mem) so that this header needs no OpenCL headers.
 * tdacl_context_create_from_cl uses the caller's context and device (one of the devices
 * tdacl_device_get_info lists) and, when cl_command_queue is not NULL, the caller's in-order
 * queue: the library's work is then ordered with the caller's own.  Without profiling on that
 * queue, kernel times (stats.kernel_ms, TDACL_PROFILE) read 0.  The objects are retained and
 * released at tdacl_context_destroy.  desc may be NULL; desc.device is ignored. */
TDACL_API tdacl_status tdacl_context_create_from_cl(const tdacl_context_desc *desc, void *cl_context,
                                                    void *cl_device_id, void *cl_command_queue, tdacl_context **ctx);
/* The context's OpenCL objects (not retained for the caller); any out pointer may be NULL. */
TDACL_API tdacl_status tdacl_context_get_cl(const tdacl_context *ctx, void **cl_context, void **cl_device_id,
                                            void **cl_command_queue);

/* Full compiler log of the last kernel build on this context (failed or not). */
TDACL_API const char *tdacl_build_log(const tdacl_context *ctx);

/* Counters of the program cache since context creation. */
typedef struct tdacl_cache_stats {
    uint64_t hits, misses, rejected, writes, write_failures;
    int enabled;
    char dir[512];
} tdacl_cache_stats;
TDACL_API tdacl_status tdacl_context_cache_stats(const tdacl_context *ctx, tdacl_cache_stats *stats);

/* ------------------------------------------------------------------------------------ */
/* Tensors                                                                              */

typedef enum tdacl_dtype {
    TDACL_F32 = 0,
    TDACL_BF16 = 1, /* 16-bit pattern; works on every device */
    TDACL_F16 = 2   /* IEEE half storage (vload_half/vstore_half) */
} tdacl_dtype;

#define TDACL_MAX_DIMS 6

typedef struct tdacl_tensor tdacl_tensor;

TDACL_API const char *tdacl_dtype_name(tdacl_dtype dtype);
TDACL_API size_t tdacl_dtype_size(tdacl_dtype dtype);

/* Contiguous (row-major) device tensor, uninitialised. */
TDACL_API tdacl_status tdacl_tensor_create(tdacl_context *ctx, tdacl_dtype dtype, int ndim,
                                           const int64_t *shape, tdacl_tensor **out);
/* A view into `base`'s storage: shape, strides (elements, may be any order, >= 0) and an
 * element offset.  Every addressed element must lie inside base's storage.  The view keeps
 * the storage alive; destroy views and bases in any order. */
TDACL_API tdacl_status tdacl_tensor_view(tdacl_tensor *base, int ndim, const int64_t *shape,
                                         const int64_t *strides, int64_t offset,
                                         tdacl_tensor **out);
TDACL_API tdacl_status tdacl_tensor_destroy(tdacl_tensor *t);
/* A contiguous tensor over an existing buffer of the context's cl_context, starting
 * offset_bytes in (a multiple of the dtype's size); no copy.  The buffer is retained until
 * the last tensor or view on it is destroyed; the caller keeps its own reference. */
TDACL_API tdacl_status tdacl_tensor_from_cl_mem(tdacl_context *ctx, void *cl_mem, size_t offset_bytes,
                                                tdacl_dtype dtype, int ndim, const int64_t *shape, tdacl_tensor **out);
/* The buffer under a tensor (not retained for the caller) and the byte offset of its first
 * element. */
TDACL_API tdacl_status tdacl_tensor_get_cl_mem(const tdacl_tensor *t, void **cl_mem, size_t *offset_bytes);

TDACL_API tdacl_status tdacl_tensor_ndim(const tdacl_tensor *t, int *ndim);
/* shape/strides: arrays of at least ndim entries; either may be NULL. */
TDACL_API tdacl_status tdacl_tensor_shape(const tdacl_tensor *t, int64_t *shape, int64_t *strides);
TDACL_API tdacl_status tdacl_tensor_dtype(const tdacl_tensor *t, tdacl_dtype *dtype);
TDACL_API tdacl_status tdacl_tensor_numel(const tdacl_tensor *t, int64_t *numel);

/* Copy `count` elements of host data (row-major in t's shape, element type host_dtype)
 * into t, converting to t's dtype (round to nearest even).  count must equal numel(t).
 * Works on views (strided scatter).  Blocking: the host buffer may be reused on return. */
TDACL_API tdacl_status tdacl_tensor_upload(tdacl_tensor *t, const void *host,
                                           tdacl_dtype host_dtype, int64_t count);
/* The reverse: gather t into a row-major host buffer of host_dtype.  Blocking. */
TDACL_API tdacl_status tdacl_tensor_download(const tdacl_tensor *t, void *host,
                                             tdacl_dtype host_dtype, int64_t count);
/* dst <- src elementwise (same shape, any dtypes and strides). Asynchronous. */
TDACL_API tdacl_status tdacl_tensor_copy(tdacl_tensor *dst, const tdacl_tensor *src);

/* Host-side conversions (round to nearest even, NaN preserved). */
TDACL_API uint16_t tdacl_f32_to_bf16(float x);
TDACL_API float tdacl_bf16_to_f32(uint16_t x);
TDACL_API uint16_t tdacl_f32_to_f16(float x);
TDACL_API float tdacl_f16_to_f32(uint16_t x);

/* ------------------------------------------------------------------------------------ */
/* Attention                                                                            */

typedef enum tdacl_attention_kind {
    TDACL_ATTN_SOFTMAX = 0,      /* flash-style online softmax */
    TDACL_ATTN_RELA = 1,         /* max(scale*q.k, 0) */
    TDACL_ATTN_TRA = 2,          /* threshold rectified attention */
    TDACL_ATTN_TDA = 3,          /* threshold differential attention (two views) */
    TDACL_ATTN_DIFF_SOFTMAX = 4, /* differential softmax (two views) */
    TDACL_ATTN_ENTMAX = 5,       /* alpha-entmax with ASEntmax's length-adaptive temperature */
    TDACL_ATTN_TOPK_THETA = 6    /* Top-theta: softmax over the keys passing a calibrated threshold */
} tdacl_attention_kind;

/* The kind's name ("tra", ...), or NULL when kind is not a tdacl_attention_kind.  Kinds are
 * numbered from 0 without gaps, so a loop until NULL lists them all. */
TDACL_API const char *tdacl_attention_kind_name(tdacl_attention_kind kind);
/* The kind named `name` (as tdacl_attention_kind_name spells it); an unknown name is
 * TDACL_ERR_INVALID_ARGUMENT with a message listing the kinds. */
TDACL_API tdacl_status tdacl_attention_kind_from_name(const char *name, tdacl_attention_kind *kind);

typedef enum tdacl_head_norm {
    TDACL_NORM_NONE = 0,
    TDACL_NORM_RMS = 1
} tdacl_head_norm;

typedef enum tdacl_attention_path {
    TDACL_PATH_AUTO = 0,    /* decode (split keys) for Tq <= 16, else prefill */
    TDACL_PATH_PREFILL = 1,
    TDACL_PATH_DECODE = 2
} tdacl_attention_path;

/* What fp32 inputs may be rounded to so that the matrix units can take them (PyTorch's
 * allow_tf32, made a per-call setting).  16-bit storage goes to the matrix units as it is. */
typedef enum tdacl_precision {
    TDACL_PRECISION_EXACT = 0, /* fp32 storage computes in fp32 on the FP32 lanes (default) */
    TDACL_PRECISION_TF32 = 1,  /* tf32 (10-bit mantissa) allowed: attention (prefill, and decode
                                  of 2..16 rows) and matmul with f32 b on NVIDIA sm_80+ take fp32
                                  tiles to mma.sync tf32, each operand and attention weight rounded
                                  to tf32 (nearest, ties away) */
    TDACL_PRECISION_BF16 = 2   /* bf16 (7-bit mantissa) allowed: fp32 inputs are rounded to bf16
                                  as they are staged for the tensor-core kernel */
} tdacl_precision;

/* Top-theta's softmax denominator compensation (SDC) for the keys its pre-softmax threshold
 * drops (docs/spec.md section 1c): their share E of the denominator, estimated as */
typedef enum tdacl_sdc {
    TDACL_SDC_NONE = 0,          /* 0: the kept keys' weights sum to one */
    TDACL_SDC_EXACT = 1,         /* the exact sum of the dropped keys' exponentials */
    TDACL_SDC_EXP_THRESHOLD = 2, /* sdc_gamma * (n - kept) * e^theta (every dropped score is below theta) */
    TDACL_SDC_OFFLINE = 3        /* e^eta, eta calibrated per (head, row id): tensors.sdc_log_mass */
} tdacl_sdc;

/* Attention descriptor.  Defaults (tdacl_attention_desc_init) are the paper's setting:
 * kind tra, beta 1, kappa 1, power 2, lambda 0.5, normalize on, norm none; alpha 1.5,
 * temp_delta 1, temp_beta 0, temp_gamma 1; theta_post 0, sdc none, sdc_gamma 0.05, vmc 0. */
typedef struct tdacl_attention_desc {
    tdacl_attention_kind kind;
    float beta;        /* threshold scale (tra/tda), >= 0 */
    float kappa;       /* threshold length scale (tra/tda), > 0 */
    float power;       /* exponent p >= 1 of the rectifier (tra/tda) */
    float lambda;      /* differential weight; clamped to [0,1] for tda, as is for diff_softmax */
    float scale;       /* score scale; NAN = default: 1/sqrt(d) for softmax/rela/diff_softmax,
                          1 for tra/tda (cosine scores) */
    int normalize;     /* tra/tda: L2-normalise q and k first (default 1) */
    tdacl_head_norm norm; /* per-head epilogue over dv */
    float norm_eps;    /* rms epsilon, default 1e-5 */
    float out_scale;   /* multiplies the output after Norm (default 1) */
    int64_t offset;    /* absolute position of query 0; -1 = Tk - Tq (prefill: 0);
                          offset + Tq <= TDACL_MAX_POSITION */
    int want_stats;    /* fill tdacl_attention_stats.sparsity etc. (small extra cost) */
    tdacl_attention_path path;
    tdacl_precision precision; /* fp32 inputs on the matrix units (default exact; tf32 and bf16:
                                  the tensor-core prefill, where it runs);
                                  $TDACL_PRECISION=exact|tf32|bf16 replaces it for every call */
    /* entmax: alpha in (1, 8] (default 1.5; 2 is sparsemax), and the inverse temperature
     * temp_delta + temp_beta * (ln n)^temp_gamma multiplying the scores of a row that sees n
     * keys (defaults 1, 0, 1: plain alpha-entmax; docs/spec.md section 1b) */
    float alpha;
    float temp_delta, temp_beta, temp_gamma;
    /* topk_theta: the threshold of each (head, row id) in tensors.thresholds compares the
     * scores (theta_post 0, pre-softmax) or the softmax weights (1, post-softmax); sdc
     * (pre-softmax only) compensates the dropped keys' share of the denominator, sdc_gamma
     * (default 0.05) is exp-threshold's factor; vmc 1 adds the dropped weight times the mean V
     * row (docs/spec.md section 1c) */
    int theta_post;
    tdacl_sdc sdc;
    float sdc_gamma;
    int vmc;
} tdacl_attention_desc;

TDACL_API void tdacl_attention_desc_init(tdacl_attention_desc *desc);

/* The largest position (offset + Tq, and Tk) attention computes with: kernels hold
 * positions in 32-bit integers.  Larger ones are refused with TDACL_ERR_INVALID_ARGUMENT. */
#define TDACL_MAX_POSITION ((int64_t)2147483647)

/* Tensors of one call.  q,k,(q2,k2): [B,H,Tq|Tk,d]; v: [B,H,Tk,dv]; out: [B,H,Tq,dv].
 * Any strides: a token-major [B,T,H,d] buffer is passed as a view with strides
 * {T*H*d, d, H*d, 1}.  gain: optional [dv] (norm = rms).  q2/k2 only for two-view kinds.
 * lambdas: optional fp32 [H], a lambda per head replacing desc.lambda (tda, diff_softmax).
 * temps: optional fp32 [H, 3] for entmax (below). */
typedef struct tdacl_attention_tensors {
    const tdacl_tensor *q, *k, *v;
    const tdacl_tensor *q2, *k2;
    const tdacl_tensor *gain;
    tdacl_tensor *out;
    const tdacl_tensor *lambdas;
    const tdacl_tensor *temps; /* entmax: optional fp32 [H, 3], (delta, beta, gamma) per head
                                  replacing desc.temp_delta, temp_beta, temp_gamma */
    /* topk_theta: fp32 [H, R], the threshold of row id r = n - 1 (n the keys a row sees) at
     * column min(r, R - 1); -inf keeps every key */
    const tdacl_tensor *thresholds;
    /* topk_theta with sdc offline: fp32 [H, R], eta = ln of the dropped keys' summed e^score */
    const tdacl_tensor *sdc_log_mass;
    /* topk_theta with vmc: optional fp32 [B, H, dv], the sum of all Tk rows of v (a running sum
     * a KV cache keeps): the mean V row then reads only v's rows past a row's last visible key;
     * without it every visible V row is read for the mean */
    const tdacl_tensor *v_sum;
} tdacl_attention_tensors;

/* Which kernel ran a call (tdacl_attention_stats.variant; TDACL_LOG=debug says why). */
typedef enum tdacl_attention_variant {
    TDACL_VARIANT_SIMT = 0, /* the FP32 lanes: cl/attention.cl, cl/attention_decode.cl,
                               cl/attention_entmax.cl */
    TDACL_VARIANT_MMA = 1   /* matrix units: cl/attention_mma.cl through cl/mma.cl */
} tdacl_attention_variant;

typedef struct tdacl_attention_stats {
    /* Appendix E.1 of the TDA paper: exact zeros of the final weight among the causally
     * visible (query, key) pairs.  Softmax kinds count no zeros (weights are positive). */
    uint64_t visible_pairs;
    uint64_t zero_weights;
    double sparsity;          /* zero_weights / visible_pairs (equal to the per-head mean) */
    uint64_t survivors[2];    /* pairs with a non-zero weight in view 1 and view 2 */
    double kernel_ms;         /* device time of the attention kernels (profiling events) */
    uint64_t tiles_visited;   /* key tiles (or decode chunks) computed */
    uint64_t tiles_skipped_v; /* of those, tiles whose V loads and weight x V were skipped */
    tdacl_attention_path path;       /* the path actually taken */
    tdacl_attention_variant variant; /* the kernel that ran */
    /* entmax on the matrix units: query rows whose threshold its one-pass search left to
     * Newton launches (the row kept more scores above its bound than the pass has room for;
     * docs/spec.md section 1b); 0 for other kinds and variants */
    uint64_t threshold_rows_refined;
} tdacl_attention_stats;

/* out = Attention(q, k, v) for every batch and head.  Tq == 0 is a no-op.
 * stats may be NULL.  Errors name the offending field or tensor. */
TDACL_API tdacl_status tdacl_attention(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                       const tdacl_attention_tensors *tensors,
                                       tdacl_attention_stats *stats);

/* Nominal FLOPs of one call (docs/spec.md section 5): causal triangle, 2 products (3 for two-view
 * kinds) per head. */
TDACL_API double tdacl_attention_flops(tdacl_attention_kind kind, int64_t batch_heads,
                                       int64_t tq, int64_t tk, int64_t offset, int64_t d,
                                       int64_t dv);

/* ------------------------------------------------------------------------------------ */
/* Matmul                                                                               */

/* Epilogue steps of tdacl_matmul, applied in this order to each element c[m][n]. */
typedef enum tdacl_epilogue {
    TDACL_EPILOGUE_BIAS = 1,     /* + bias[n] */
    TDACL_EPILOGUE_GELU = 2,     /* gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    TDACL_EPILOGUE_RESIDUAL = 4  /* + residual[m][n] */
} tdacl_epilogue;

typedef struct tdacl_matmul_desc {
    int transpose_b;    /* 0: b is [K, N]; 1: b is [N, K] (a tied LM head) */
    unsigned epilogue;  /* tdacl_epilogue flags, or 0 */
    tdacl_precision precision; /* TDACL_PRECISION_BF16 with bf16 b: an a not stored as bf16 is
                                  rounded to bf16 for the matrix units; TDACL_PRECISION_TF32 with f32 b: a and b are
                                  rounded to tf32 there (default exact); $TDACL_PRECISION
                                  replaces it */
} tdacl_matmul_desc;

TDACL_API void tdacl_matmul_desc_init(tdacl_matmul_desc *desc);

/* c [M, N] = epilogue(a [M, K] @ B).  a and c are f32, bf16 or f16, residual in c's dtype,
 * bias f32; b is f32, bf16 or f16 (read as it is stored, accumulated in f32; the epilogue in
 * f32, rounded once to c's dtype).  Each 2-D tensor starts at its storage's
 * element 0 with unit column stride and any row stride >= its width; bias is [N] or [1, N]
 * contiguous; residual has c's shape and row stride and may be c itself; c must not overlap
 * a, b or bias.  M, N, K >= 1 and below 2^31.  Few rows (M <= 8) run the GEMV variant, more
 * the tiled GEMM: on NVIDIA tensor cores (compute capability >= 8.0) for bf16 b with bf16 a
 * (any precision) or at precision bf16, and f32 b at precision tf32, on the FP32 lanes otherwise (TDACL_LOG=debug says which
 * and why); each tuned per
 * device; asynchronous like tdacl_attention without stats. */
typedef struct tdacl_matmul_tensors {
    const tdacl_tensor *a, *b;
    const tdacl_tensor *bias;     /* with TDACL_EPILOGUE_BIAS, else NULL */
    const tdacl_tensor *residual; /* with TDACL_EPILOGUE_RESIDUAL, else NULL */
    tdacl_tensor *c;
} tdacl_matmul_tensors;

TDACL_API tdacl_status tdacl_matmul(tdacl_context *ctx, const tdacl_matmul_desc *desc, const tdacl_matmul_tensors *t);

/* ------------------------------------------------------------------------------------ */
/* Models: GPT-family decoders from Hugging Face style checkpoints                      */

typedef struct tdacl_model tdacl_model;

/* Load options.  Defaults (tdacl_model_desc_init): fp32 weights and activations, batch 1,
 * context = the config's n_positions. */
typedef struct tdacl_model_desc {
    const char *path;          /* directory with config.json and model.safetensors (or shards),
                                  or a Hugging Face repo id ("gpt2", "org/name") found offline
                                  in the hub cache ($HF_HUB_CACHE, $HF_HOME/hub,
                                  ~/.cache/huggingface/hub): its refs/main snapshot */
    tdacl_dtype weight_dtype;  /* device storage of the weights: TDACL_F32 or TDACL_BF16 */
    int max_batch;             /* sequences decoded together (KV cache rows) */
    int max_context;           /* KV cache length; 0 = n_positions */
    tdacl_dtype activation_dtype; /* TDACL_F32 or TDACL_BF16: the activations between kernels
                                     (norm outputs, q/k/v, attention output, MLP hidden) and the
                                     KV cache; the residual stream, statistics, accumulators and
                                     logits stay f32 (docs/spec.md section 4.6) */
    /* Top-theta (docs/spec.md sections 1c, 4.7): a threshold file (tdacl calibrate writes
     * one) that runs a softmax model's attention as topk_theta, or replaces the file a
     * topk_theta config names; NULL: the config's */
    const char *thresholds;
    int topk_sdc;  /* a tdacl_sdc replacing the config's attention.sdc, or -1 (default): the config's */
    int topk_vmc;  /* 0 / 1 replacing the config's attention.vmc, or -1 (default): the config's */
} tdacl_model_desc;

typedef enum tdacl_position_kind {
    TDACL_POSITION_LEARNED = 0, /* GPT-2 wpe */
    TDACL_POSITION_ROPE = 1     /* rotate-half RoPE on q and k views (docs/spec.md section 4) */
} tdacl_position_kind;

typedef struct tdacl_model_info {
    int n_layer, n_head, n_embd, vocab_size, n_positions, head_dim;
    tdacl_attention_kind attention;
    tdacl_position_kind position;
    tdacl_head_norm head_norm;
    int tied_lm_head;
    int max_batch, max_context;
    uint64_t parameters;       /* total parameter count */
    uint64_t weight_bytes;     /* device bytes of the weights */
    tdacl_dtype weight_dtype, activation_dtype;
} tdacl_model_info;

TDACL_API void tdacl_model_desc_init(tdacl_model_desc *desc);
/* The create of the model handle (load/destroy pair; tdacl_context_destroy also destroys
 * models left alive).  Parses and checks the whole checkpoint (every tensor's presence,
 * dtype and shape against config.json) before allocating; errors name the file and the
 * tensor. */
TDACL_API tdacl_status tdacl_model_load(tdacl_context *ctx, const tdacl_model_desc *desc, tdacl_model **model);
TDACL_API tdacl_status tdacl_model_destroy(tdacl_model *model);
TDACL_API tdacl_status tdacl_model_get_info(const tdacl_model *model, tdacl_model_info *info);

/* The KV cache has desc.max_batch slots, each holding one sequence of its own length.
 *
 * Prefill: runs `batch` sequences of `len` tokens each (tokens[b * len + t]) from position 0
 * into slots 0..batch-1; every slot's previous contents are discarded.  Logits of every
 * position become readable with tdacl_model_logits. */
TDACL_API tdacl_status tdacl_model_prefill(tdacl_model *model, int batch, int len, const int32_t *tokens);
/* Serving: starts the sequence of one slot with `len` tokens from position 0, leaving the
 * other slots as they are (logits [1, len, vocab]). */
TDACL_API tdacl_status tdacl_model_prefill_slot(tdacl_model *model, int slot, int len, const int32_t *tokens);
/* One decode step: appends tokens[b] to the sequence of each of slots 0..batch-1 (exactly
 * the slots from 0 that hold sequences, as after tdacl_model_prefill) and computes their
 * next-token logits from the KV cache.  tokens NULL: the ids the last tdacl_model_sample
 * drew, which never leave the device.  Up to 8 sequences, a step is five kernels a layer
 * (docs/spec.md section 4.2); the call returns once they are enqueued. */
TDACL_API tdacl_status tdacl_model_decode(tdacl_model *model, int batch, const int32_t *tokens);
/* Serving: one decode step of `count` sequences, row b extending the sequence of slot
 * slots[b] at its own position (distinct slots, each holding a sequence); logits
 * [count, 1, vocab] in the order of slots.  tokens NULL as for tdacl_model_decode, the draw
 * having `count` ids. */
TDACL_API tdacl_status tdacl_model_decode_slots(tdacl_model *model, int count, const int32_t *slots,
                                                const int32_t *tokens);
/* Draws the next token of each sequence on the device from its last row of logits, by the
 * rule of tdacl_sample evaluated in fp32 (docs/spec.md section 4.2; top_k must be 0..256 or
 * at least the vocabulary), *seed advancing as `batch` calls of tdacl_sample would.  Returns
 * once the draw is enqueued; the ids feed tdacl_model_decode(model, batch, NULL), and
 * tdacl_model_sampled waits for them.  So a generation loop enqueues step n + 1 before it
 * reads token n. */
TDACL_API tdacl_status tdacl_model_sample(tdacl_model *model, float temperature, int top_k, uint64_t *seed);
/* Waits for the ids of the last tdacl_model_sample (and nothing enqueued after it); count
 * must equal the batch. */
TDACL_API tdacl_status tdacl_model_sampled(tdacl_model *model, int32_t *tokens, int64_t count);
/* Logits of the last prefill ([batch, len, vocab]) or decode step ([batch, 1, vocab]) as
 * float32; count must equal batch * rows * vocab.  rows (may be NULL) receives len or 1. */
TDACL_API tdacl_status tdacl_model_logits(tdacl_model *model, float *logits, int64_t count, int *rows);
/* Current length of the cached sequences (0 before any prefill); an error when slots hold
 * sequences of different lengths. */
TDACL_API tdacl_status tdacl_model_position(const tdacl_model *model, int *position);
/* Length of the sequence in one slot (0: empty). */
TDACL_API tdacl_status tdacl_model_slot_position(const tdacl_model *model, int slot, int *position);

/* Top-theta calibration (docs/spec.md section 4.7, the Top-theta paper's Algorithm 1): runs
 * the model's softmax attention over calibration sequences and writes the threshold of every
 * (layer, head, row id) that keeps about k keys of a row, as a threshold file for
 * tdacl_model_desc.thresholds or config.json's attention.thresholds. */
typedef void (*tdacl_progress_fn)(void *user, int64_t done, int64_t total);

typedef struct tdacl_calibrate_desc {
    int k;                  /* keys a row keeps on average (default 64) */
    const int *k_per_layer; /* n_layer values replacing k, or NULL */
    float offset_std;       /* thresholds = mean + offset_std * standard deviation (default 0) */
    int seq_len;            /* tokens a calibration sequence (default 0: the model's max_context) */
    int theta_post;         /* 1: thresholds on the softmax weights (post-softmax); default 0: scores */
    int fit_degree;         /* -1 (default): a table of every row id; 0..3: per head a polynomial in
                               ln(row id + 1) fitted by least squares */
    tdacl_progress_fn progress; /* called after each sequence with tokens done / all, or NULL */
    void *progress_user;
} tdacl_calibrate_desc;

TDACL_API void tdacl_calibrate_desc_init(tdacl_calibrate_desc *desc);
/* Calibrates on tokens[0..count), cut into sequences of desc.seq_len (a shorter last one
 * included), each run from position 0 in cache slot 0 (which it leaves holding the last);
 * every layer keeps each row's top k scores while later layers are measured (the paper's
 * top-k at calibration).  The model must run softmax or topk_theta attention.  Writes the
 * file at path (replaced atomically). */
TDACL_API tdacl_status tdacl_model_calibrate(tdacl_model *model, const tdacl_calibrate_desc *desc,
                                             const int32_t *tokens, int64_t count, const char *path);

/* ------------------------------------------------------------------------------------ */
/* Tokenizer: GPT-2 byte-level BPE (docs/spec.md section 4.4), no device needed          */

typedef struct tdacl_tokenizer tdacl_tokenizer;

/* Loads the tokenizer of a model directory (or hub repo id, as tdacl_model_desc.path):
 * tokenizer.json (Hugging Face `tokenizers` format: BPE model, ByteLevel pre-tokenizer,
 * added tokens), else vocab.json + merges.txt.  Errors (tdacl_last_error(NULL)) name the
 * file and what is wrong; TDACL_ERR_IO when the directory has neither. */
TDACL_API tdacl_status tdacl_tokenizer_load(const char *dir, tdacl_tokenizer **tok);
TDACL_API tdacl_status tdacl_tokenizer_destroy(tdacl_tokenizer *tok);
/* Token ids of UTF-8 text[0..len) (TDACL_ERR_FORMAT naming the byte when it is not valid
 * UTF-8).  *count receives the number of ids; the first min(count, capacity) are written
 * (ids may be NULL with capacity 0 to ask for the count). */
TDACL_API tdacl_status tdacl_tokenizer_encode(const tdacl_tokenizer *tok, const char *text, size_t len, int32_t *ids,
                                              int64_t capacity, int64_t *count);
/* The bytes of ids[0..n) (UTF-8 for whole sequences; one token may hold part of a
 * character).  *len receives the byte count; the first min(len, capacity) are written, and
 * a NUL after them when there is room. */
TDACL_API tdacl_status tdacl_tokenizer_decode(const tdacl_tokenizer *tok, const int32_t *ids, int64_t n, char *text,
                                              size_t capacity, size_t *len);
/* One more than the largest token id. */
TDACL_API tdacl_status tdacl_tokenizer_vocab_size(const tdacl_tokenizer *tok, int32_t *size);

/* Picks the next token from a logits row: temperature 0 = greedy; top_k 0 = all tokens.
 * The seed makes it reproducible (same seed, same draw). */
TDACL_API tdacl_status tdacl_sample(const float *logits, int vocab, float temperature, int top_k,
                                    uint64_t *seed, int32_t *token);

/* ------------------------------------------------------------------------------------ */
/* Device peak probe (clpeak-style)                                                     */

typedef struct tdacl_peak {
    double fp32_gflops;      /* measured FMA rate */
    double bandwidth_gbs;    /* measured global-memory read bandwidth */
    double launch_us;        /* empty-kernel launch-to-completion latency */
    double mma_bf16_gflops;  /* measured bf16 mma.sync rate (f32 accumulation); 0 on devices
                                whose matrix units the library does not drive */
    double mma_tf32_gflops;  /* measured tf32 mma.sync rate (f32 accumulation); 0 likewise */
    double enqueue_us;       /* the host's time per launch of back-to-back launches of an empty
                                kernel with one pointer argument (the floor of a launch-bound step) */
    double enqueue_arg_us;   /* the host time each further pointer argument of a kernel's
                                signature adds to every launch of it (NULL or not) */
} tdacl_peak;

/* Runs short probe kernels (a fraction of a second on a GPU, a few seconds on a CPU). */
TDACL_API tdacl_status tdacl_measure_peak(tdacl_context *ctx, tdacl_peak *peak);

#ifdef __cplusplus
}
#endif
#endif /* TDACL_H */
