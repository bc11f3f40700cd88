/* The registry of kernel variants: one row per variant of an operation, with its program
 * sources, its tuning space, when it applies, the build options it generates from named
 * parameters, and its launch.  Dispatch takes the first row of the operation that supports
 * the call (rows are in order of preference) and logs why the ones before it did not. */
#ifndef TDACL_VARIANTS_H
#define TDACL_VARIANTS_H

#include "ops/spaces.h"

typedef enum tdacl_op {
    TDACL_OP_ATTENTION_PREFILL = 0,
    TDACL_OP_ATTENTION_DECODE,
    TDACL_OP_ATTENTION_PREP, /* row norms of the normalised kinds */
    TDACL_OP_MATMUL,         /* the model's matmuls: GEMM, GEMV for few rows */
    TDACL_OP_LAYERS,         /* layernorm, embeddings, RoPE, KV append, ... */
    TDACL_OP_DECODE_LAYER,   /* a whole decode layer in one launch */
    TDACL_OP_PEAK,           /* the device probes */
    TDACL_OP_COUNT
} tdacl_op;

typedef struct tdacl_variant_def tdacl_variant_def;
struct tdacl_variant_def {
    const char *name;              /* "attention.mma": logs, `tdacl devices --verbose`, bench rows */
    tdacl_op op;
    tdacl_program_def program;     /* program label and the cl/ files it concatenates */
    const tdacl_kernel_space *space; /* tuned parameters; NULL when nothing is tuned */
    int matrix_units;              /* runs on matrix units rather than the FP32 lanes: 1 mma.sync (or
                                      the vendor bodies), 2 Hopper's wgmma (cl/wgmma.cl) */
    /* 0 when the variant can run the call, otherwise writes why not; NULL: always */
    int (*supports)(const tdacl_context *ctx, const void *call, char *why, size_t n);
    /* the tuning-lookup key of the call (space != NULL) */
    void (*problem)(const tdacl_context *ctx, const void *call, tdacl_problem *p);
    /* -D options fixed by the call (kind, dtypes, dims); the tuned ones follow by name */
    void (*call_options)(const void *call, tdacl_strbuf *sb);
    /* enqueues the call with parameters v */
    tdacl_status (*launch)(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                           const tdacl_param_values *v);
    /* 1: the space belongs to another row of the operation, whose tuning entries this row's
     * problem looks up (the tuner tunes that row) */
    int borrows_space;
};

const tdacl_variant_def *tdacl__variant_at(int i); /* NULL past the end */
const tdacl_variant_def *tdacl__variant(const char *name);
/* 1 when $TDACL_VARIANT names the row `name` itself (a row may then run calls it would leave
 * to another row for speed alone). */
int tdacl__variant_pinned(const char *name);
/* The row whose tuning space is named `kernel` (tuning-database name; not a row borrowing it), or NULL. */
const tdacl_variant_def *tdacl__variant_of_space(const char *kernel);
/* The operation's only row (operations with one variant, such as the layer kernels). */
const tdacl_variant_def *tdacl__variant_of_op(tdacl_op op);
const char *tdacl__op_name(tdacl_op op);

/* The body of cl/mma.cl the matrix-unit rows compile with (matrix_units.c). */
enum { TDACL_MMA_PORTABLE = 0, TDACL_MMA_PTX = 1, TDACL_MMA_DPAS = 2, TDACL_MMA_MFMA = 3, TDACL_MMA_WMMA = 4 };
typedef struct tdacl_mma_choice {
    int body;         /* MMA_NATIVE, or -1: the matrix-unit rows do not run (why says so) */
    int sg;           /* DPAS: the sub-group size of its instruction */
    int emulate;      /* a vendor body with its instruction emulated in plain C ($TDACL_MMA_EMULATE) */
    int hardware;     /* the device's matrix units run */
    int experimental; /* a body not yet run on hardware, enabled by $TDACL_EXPERIMENTAL_MATRIX=1 */
    int wgmma;        /* Hopper's warpgroup products (cl/wgmma.cl): NVIDIA sm_90, or TDACL_MMA_EMULATE=wgmma */
    const char *name; /* "mma.sync", "Intel DPAS (sub-group 16)", "portable fragment body", ... */
    const char *offered; /* body == -1: the experimental body the device would take, if any */
    char why[240];
} tdacl_mma_choice;
/* From $TDACL_MMA_EMULATE (1|portable|dpas8|dpas16|mfma|wmma|wgmma: on any device), else the
 * device: mma.sync on NVIDIA sm_80+, the vendor bodies with $TDACL_EXPERIMENTAL_MATRIX=1. */
void tdacl__mma_choose(const tdacl_device_info *info, tdacl_mma_choice *c);
/* -DMMA_NATIVE=.. -DMMA_EMULATE=.. [-DMMA_SG=..] [-DTDACL_SUBGROUP=..] */
void tdacl__mma_options(const tdacl_mma_choice *c, tdacl_strbuf *sb);

/* *p replaced by $TDACL_PRECISION (exact|tf32|bf16) when that is set; an unknown value is an
 * error naming `call`. */
tdacl_status tdacl__precision_env(tdacl_context *ctx, const char *call, tdacl_precision *p);

/* The first row of `op` that supports the call.  why receives the choice and, for every row
 * passed over, the reason ("attention.mma: bf16 only; took attention.simt").  The
 * environment variable $TDACL_VARIANT=name[,name...] restricts the choice to the rows
 * named (a row of another operation is ignored); when it excludes every row that fits,
 * the call fails and says so. */
tdacl_status tdacl__variant_choose(tdacl_context *ctx, tdacl_op op, const void *call, const tdacl_variant_def **row,
                                   char *why, size_t n);
/* Build options of a call on `row` with parameters v: call options, then "-DNAME=value"
 * for every macro parameter of the space (the program cache key). */
void tdacl__variant_options(const tdacl_variant_def *row, const void *call, const tdacl_param_values *v,
                            tdacl_strbuf *sb);
/* The parameters a call runs with: `force` (checked against the constraints) or the
 * tuning lookup.  used (may be NULL) receives them and where they came from. */
tdacl_status tdacl__variant_params(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                   const tdacl_param_values *force, tdacl_tuned *used);
/* Kernel `kernel` of the row's program built with `options`. */
tdacl_status tdacl__variant_kernel(tdacl_context *ctx, const tdacl_variant_def *row, const char *options,
                                   const char *kernel, cl_kernel *k);

#endif
