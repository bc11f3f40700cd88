/* Tunable parameters, their constraint predicates and the tuning database lookup.
 *
 * Lookup order for (device, kernel, problem): the user database ($TDACL_TUNING_FILE or
 * $XDG_CONFIG_HOME/tdacl/tuning.tdb), then the database shipped inside the library, then a
 * device-class default, then the first entry of the kernel's generic ladder that passes the
 * constraints (a ladder, not one value, so that the fallback fits every head dim on every
 * device).  Each candidate is checked by the kernel's constraint predicate; a bad one is
 * reported with its file and line and skipped. */
#ifndef TDACL_TUNING_H
#define TDACL_TUNING_H

#include "runtime/runtime.h"

#define TDACL_MAX_PARAMS 20
#define TDACL_MAX_CANDIDATES 12
#define TDACL_END (-1)

typedef struct tdacl_tunable {
    const char *name;  /* the -D macro (or run-time knob when is_macro == 0) */
    int is_macro;
    int def;           /* value when not given: the kernel source's #ifndef default (a test checks) */
    int candidates[TDACL_MAX_CANDIDATES]; /* search space, ended by TDACL_END (0 is a value) */
    const char *doc;
} tdacl_tunable;

/* What a lookup is keyed on besides the device. */
typedef struct tdacl_problem {
    int kind;          /* tdacl_attention_kind, or -1 when the kernel has no kinds */
    tdacl_dtype dtype;
    int d, dv;         /* padded head dims */
    int64_t t;         /* key length; chooses the T bucket */
    int tq;            /* query rows (decode) */
    int native;        /* 1: the variant runs on the device's matrix units (not their portable body) */
    int mma_regs;      /* the matrix-unit body keeps fragments in registers (mma.sync), not local memory */
    int wide16;        /* 16-bit rows loaded 16 bytes at a time (the decode kernel's ALIGNED16) */
    int tile_bytes;    /* bytes per element of the matrix-unit variants' local tiles: 2, or 4 (tf32) */
    int adtype;        /* a matmul's activations (a) dtype; 0 (f32) for other kernels */
    int64_t bh;        /* batch x heads of an attention call; chooses the bh bucket (0: not one) */
    int lazy;          /* tra/tda on the matrix units form their weights lazily (beta >= 1: LAZY_W) */
} tdacl_problem;

typedef struct tdacl_param_values {
    int v[TDACL_MAX_PARAMS];
} tdacl_param_values;

typedef struct tdacl_class_default {
    const char *arch_prefix; /* matches tdacl_device_info.arch by prefix */
    int kind;                /* -1: any kind */
    int dmax;                /* applies up to this padded head dim; 0: any */
    const char *values;      /* "NAME=value ..."; parameters not named take their default */
    int unmeasured;          /* 1: chosen from offline compiler reports, never run on such a device */
} tdacl_class_default;

typedef struct tdacl_kernel_space tdacl_kernel_space;
struct tdacl_kernel_space {
    const char *kernel;  /* the name tuning-database entries use */
    const tdacl_tunable *params;
    int nparams;
    /* 0 when the candidate is valid for the problem; otherwise writes the reason.  Local
     * memory is checked separately, through local_bytes. */
    int (*check)(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                 const tdacl_param_values *v, char *why, size_t n);
    /* bytes of local memory the variant's main kernel declares (a test compares this with
     * CL_KERNEL_LOCAL_MEM_SIZE of the compiled kernel) */
    size_t (*local_bytes)(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v);
    const tdacl_class_default *class_defaults; /* terminated by arch_prefix == NULL */
    const char *const *ladder;                 /* generic fallbacks, best first, as "NAME=value ..." */
    int nladder;
    /* 1: the kernel declares one __local array of exactly local_bytes (no alignment padding
     * between arrays), so the check keeps no TDACL_LOCAL_HEADROOM for it */
    int local_exact;
};

typedef enum tdacl_tuned_source {
    TDACL_TUNED_USER = 0,
    TDACL_TUNED_SHIPPED = 1,
    TDACL_TUNED_CLASS = 2,
    TDACL_TUNED_GENERIC = 3
} tdacl_tuned_source;

typedef struct tdacl_tuned {
    tdacl_param_values values;
    tdacl_tuned_source source;
    char origin[320]; /* e.g. "user /root/.config/tdacl/tuning.tdb:12", "generic ladder #0" */
} tdacl_tuned;

const char *tdacl__tuned_source_name(tdacl_tuned_source s);
int tdacl__param_index(const tdacl_kernel_space *ks, const char *name);
/* The value of parameter `name` in v (-1 when the space has no such parameter). */
int tdacl__param(const tdacl_kernel_space *ks, const tdacl_param_values *v, const char *name);
/* Every parameter at its default, then the "NAME=value ..." assignments of text; -1 (and
 * why) on an unknown name or a malformed assignment. */
int tdacl__params_parse(const tdacl_kernel_space *ks, const char *text, tdacl_param_values *out, char *why, size_t n);
/* The whole constraint: the space's predicate, then local memory against the device, with
 * TDACL_LOCAL_HEADROOM bytes to spare: a compiler may pad each __local array to its
 * alignment (NVIDIA's reports 16 bytes more than the declarations for attention_fwd). */
#define TDACL_LOCAL_HEADROOM 64
int tdacl__params_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                        const tdacl_param_values *v, char *why, size_t n);
const char *tdacl__t_bucket(int64_t t);
/* "few" (batch x heads <= TDACL_BH_FEW: one sequence's heads, where a decode's key splits
 * must fill the device) or "many" */
#define TDACL_BH_FEW 32
const char *tdacl__bh_bucket(int64_t bh);
/* The dtype a database entry is keyed on: the storage dtype, or TDACL_KEY_TF32 ("dtype=tf32")
 * for fp32 storage on the matrix units as tf32, whose tiles differ from the 16-bit ones. */
#define TDACL_KEY_TF32 3
int tdacl__problem_key_dtype(const tdacl_problem *p);

/* Parameters of space ks for this context's device and problem: user database, shipped
 * database, class default, generic ladder (the first that passes tdacl__params_check). */
tdacl_status tdacl__tuned(tdacl_context *ctx, const tdacl_kernel_space *ks, const tdacl_problem *p,
                          tdacl_tuned *out);
/* "-DBM=64 -DBN=32 ..." for the macro parameters. */
void tdacl__params_options(const tdacl_kernel_space *ks, const tdacl_param_values *v,
                           tdacl_strbuf *sb);
/* "BM=64 BN=32 ..." for logs, JSON and database lines. */
void tdacl__params_text(const tdacl_kernel_space *ks, const tdacl_param_values *v, char *buf,
                        size_t n);

/* ---- the database ---- */

typedef struct tdacl_tdb_entry {
    char kernel[48];
    char device[128], vendor[128], driver[128], arch[64];
    int kind;       /* -1 any */
    int dtype;      /* -1 any */
    int adtype;     /* -1 any: a matmul's activations dtype */
    int d, dv;      /* 0 any */
    char tbucket[8];/* "" any */
    char bhbucket[8];/* "" any: "few" or "many" (batch x heads, tdacl__bh_bucket) */
    int lazy;       /* -1 any; "weights=lazy" 1, "weights=eager" 0 (tdacl_problem.lazy) */
    int tq;         /* 0 any */
    int nparams;
    char pname[TDACL_MAX_PARAMS][16];
    int pvalue[TDACL_MAX_PARAMS];
    char comment[160];
    int line;
} tdacl_tdb_entry;

typedef struct tdacl_tdb {
    char path[512];  /* "(shipped)" for the embedded one */
    tdacl_tdb_entry *entries;
    int count, cap;
} tdacl_tdb;

/* Parses text (one entry per line).  Malformed lines are logged with their line number
 * (through ctx, which may be NULL) and skipped. */
tdacl_status tdacl__tdb_parse(const tdacl_context *ctx, const char *text, size_t len,
                              const char *path, tdacl_tdb *db);
void tdacl__tdb_free(tdacl_tdb *db);
/* Formats one entry as a database line (without newline). */
void tdacl__tdb_format(const tdacl_tdb_entry *e, char *buf, size_t n);
/* An entry with every key absent (matching anything) and no parameters. */
void tdacl__tdb_entry_init(tdacl_tdb_entry *e);
/* Adds or replaces (same kernel and keys) an entry in the file at path, atomically. */
tdacl_status tdacl__tdb_upsert_file(tdacl_context *ctx, const char *path, const tdacl_tdb_entry *e);
/* Default user database path ($TDACL_TUNING_FILE, $XDG_CONFIG_HOME/tdacl/tuning.tdb, ~/.config/...). */
void tdacl__tdb_user_path(const char *override, char *buf, size_t n);

/* A user database is read up to this many bytes and entries; the rest is ignored with
 * one warning, so a huge or hostile file cannot slow every call. */
#define TDACL_TDB_MAX_BYTES ((size_t)4 << 20)
#define TDACL_TDB_MAX_ENTRIES 8192
/* Parse warnings printed per file; the rest are counted in one summary line. */
#define TDACL_TDB_MAX_WARNINGS 32

/* One remembered lookup: the database is consulted (and warns) once per distinct problem. */
typedef struct tdacl_tuned_memo {
    char kernel[48];
    tdacl_problem problem;
    tdacl_tuned tuned;
} tdacl_tuned_memo;
#define TDACL_TUNED_MEMO 64

struct tdacl_tuning_db {
    tdacl_tdb user, shipped;
    tdacl_tuned_memo memo[TDACL_TUNED_MEMO];
    int nmemo, next_memo;
};

tdacl_status tdacl__tuning_open(tdacl_context *ctx, const char *file);
/* Applies matching clblast_* entries through CLBlastOverrideParameters. */
void tdacl__clblast_overrides(tdacl_context *ctx);
/* Converts a CLBlast tuner result (clblast_xgemm_1_32.json) into an entry of db_path. */
tdacl_status tdacl__clblast_import(tdacl_context *ctx, const char *json_path, const char *db_path);
void tdacl__tuning_close(tdacl_context *ctx);


#endif
