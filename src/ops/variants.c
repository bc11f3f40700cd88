/* The variant table and the dispatch over it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/attention.h"
#include "ops/decode_layer.h"
#include "ops/gemm.h"
#include "ops/peak.h"
#include "ops/variants.h"

#define ATTENTION_SOURCES "common.cl", "attention_math.cl"

static const tdacl_variant_def rows[] = {
    /* attention prefill: matrix units first, the FP32 lanes everywhere; the two-view kinds one
     * view a launch first, on the one-view kinds' tiles (they borrow attention.mma's space) */
    {"attention.mma_views", TDACL_OP_ATTENTION_PREFILL,
     {"attention_mma_views", {ATTENTION_SOURCES, "mma.cl", "mma_units.cl", "attention_mma.cl", "attention_views.cl"}, 0},
     &tdacl__attention_mma_space, 1,
     tdacl__attention_views_supports, tdacl__attention_views_problem, tdacl__attention_views_call_options,
     tdacl__attention_views_launch, 1},
    {"attention.mma", TDACL_OP_ATTENTION_PREFILL, {"attention_mma", {ATTENTION_SOURCES, "mma.cl", "mma_units.cl", "attention_mma.cl"}, 0},
     &tdacl__attention_mma_space, 1, tdacl__attention_mma_supports, tdacl__attention_mma_problem,
     tdacl__attention_mma_call_options, tdacl__attention_prefill_launch, 0},
    {"attention.simt", TDACL_OP_ATTENTION_PREFILL, {"attention", {ATTENTION_SOURCES, "attention.cl"}, 0},
     &tdacl__attention_space, 0, tdacl__attention_simt_supports, tdacl__attention_problem, tdacl__attention_call_options,
     tdacl__attention_prefill_launch, 0},
    /* alpha-entmax: its own multi-pass kernel, for prefill and decode alike */
    {"attention.entmax", TDACL_OP_ATTENTION_PREFILL, {"attention_entmax", {ATTENTION_SOURCES, "attention_rows.cl", "attention_entmax.cl"}, 0},
     &tdacl__entmax_space, 0, tdacl__attention_entmax_supports, tdacl__attention_problem, tdacl__attention_rows_call_options,
     tdacl__attention_prefill_launch, 0},
    /* Top-theta: its own two-pass kernel in the same row tiling, for prefill and decode alike */
    {"attention.topk_theta", TDACL_OP_ATTENTION_PREFILL,
     {"attention_topk", {ATTENTION_SOURCES, "attention_rows.cl", "attention_topk.cl"}, 0}, &tdacl__topk_space, 0,
     tdacl__attention_topk_supports, tdacl__attention_problem, tdacl__attention_rows_call_options, tdacl__attention_prefill_launch, 0},
    /* attention decode: the matrix units for 2..16 query rows, the FP32 lanes everywhere */
    {"attention_decode.mma", TDACL_OP_ATTENTION_DECODE,
     {"attention_mma_decode", {ATTENTION_SOURCES, "mma.cl", "mma_units.cl", "attention_mma.cl", "attention_reduce.cl"}, 0},
     &tdacl__decode_mma_space, 1, tdacl__attention_decode_mma_supports, tdacl__attention_mma_problem,
     tdacl__attention_decode_mma_call_options, tdacl__attention_decode_mma_launch, 0},
    {"attention_decode.simt", TDACL_OP_ATTENTION_DECODE, {"attention_decode", {ATTENTION_SOURCES, "attention_decode.cl", "attention_reduce.cl"}, 0},
     &tdacl__decode_space, 0, tdacl__attention_simt_supports, tdacl__attention_problem, tdacl__attention_decode_call_options,
     tdacl__attention_decode_launch, 0},
    {"attention_decode.entmax", TDACL_OP_ATTENTION_DECODE, {"attention_entmax", {ATTENTION_SOURCES, "attention_rows.cl", "attention_entmax.cl"}, 0},
     &tdacl__entmax_decode_space, 0, tdacl__attention_entmax_supports, tdacl__attention_problem,
     tdacl__attention_rows_call_options, tdacl__attention_prefill_launch, 0},
    {"attention_decode.topk_theta", TDACL_OP_ATTENTION_DECODE,
     {"attention_topk", {ATTENTION_SOURCES, "attention_rows.cl", "attention_topk.cl"}, 0}, &tdacl__topk_decode_space, 0,
     tdacl__attention_topk_supports, tdacl__attention_problem, tdacl__attention_rows_call_options, tdacl__attention_prefill_launch, 0},
    {"attention_prep", TDACL_OP_ATTENTION_PREP, {"attention_prep", {"common.cl", "attention_prep.cl"}, 0}, NULL, 0, NULL, NULL, NULL, NULL, 0},
    /* matmuls: GEMV for the few rows of decode, the tiled GEMM otherwise (matrix units first) */
    {"gemv.simt", TDACL_OP_MATMUL, {"layers", {"common.cl", "epilogue.cl", "layers.cl"}, 0}, NULL, 0, tdacl__gemv_supports, NULL,
     tdacl__gemv_call_options, tdacl__gemv_launch, 0},
    {"gemm.wgmma", TDACL_OP_MATMUL,
     {"gemm_wgmma", {"common.cl", "mma.cl", "mma_units.cl", "wgmma.cl", "epilogue.cl", "gemm_mma.cl"}, 1},
     &tdacl__gemm_wgmma_space, 2, tdacl__gemm_wgmma_supports, tdacl__gemm_mma_problem, tdacl__gemm_wgmma_call_options,
     tdacl__gemm_wgmma_launch, 0},
    {"gemm.mma", TDACL_OP_MATMUL, {"gemm_mma", {"common.cl", "mma.cl", "mma_units.cl", "epilogue.cl", "gemm_mma.cl"}, 0},
     &tdacl__gemm_mma_space, 1, tdacl__gemm_mma_supports, tdacl__gemm_mma_problem, tdacl__gemm_mma_call_options,
     tdacl__gemm_mma_launch, 0},
    {"gemm.simt", TDACL_OP_MATMUL, {"layers", {"common.cl", "epilogue.cl", "layers.cl"}, 0}, &tdacl__gemm_space, 0, tdacl__gemm_simt_supports, tdacl__gemm_problem,
     tdacl__gemm_call_options, tdacl__gemm_launch, 0},
    {"layers", TDACL_OP_LAYERS, {"layers", {"common.cl", "epilogue.cl", "layers.cl"}, 0}, NULL, 0, NULL, NULL, NULL, NULL, 0},
    /* a decode layer in one launch, where its work-groups can wait for each other */
    {"decode_layer.persistent", TDACL_OP_DECODE_LAYER, {"decode_layer", {"common.cl", "epilogue.cl", "decode_layer.cl"}, 0},
     NULL, 0, tdacl__decode_layer_supports, NULL, tdacl__decode_layer_call_options, tdacl__decode_layer_launch, 0},
    /* ... and its steps in a launch each, on request: the portable body tests run */
    {"decode_layer.phased", TDACL_OP_DECODE_LAYER, {"decode_layer", {"common.cl", "epilogue.cl", "decode_layer.cl"}, 0},
     NULL, 0, tdacl__decode_layer_phased_supports, NULL, tdacl__decode_layer_call_options,
     tdacl__decode_layer_phased_launch, 0},
    /* device probes: the matrix-unit rate first, where there are matrix units */
    {"peak.mma", TDACL_OP_PEAK, {"peak_mma", {"common.cl", "mma.cl", "peak_mma.cl"}, 0}, NULL, 1, tdacl__peak_mma_supports, NULL,
     NULL, NULL, 0},
    {"peak", TDACL_OP_PEAK, {"peak", {"peak.cl"}, 0}, NULL, 0, NULL, NULL, NULL, NULL, 0},
};

static const char *const op_names[TDACL_OP_COUNT] = {"attention prefill", "attention decode", "attention row norms",
                                                      "matmul", "layer kernels", "decode layer",
                                                      "device probes"};

const char *tdacl__op_name(tdacl_op op) { return (unsigned)op < TDACL_OP_COUNT ? op_names[op] : "?"; }

const tdacl_variant_def *tdacl__variant_at(int i)
{
    return i >= 0 && i < (int)TDACL_ARRAY_LEN(rows) ? &rows[i] : NULL;
}

const tdacl_variant_def *tdacl__variant(const char *name)
{
    for (size_t i = 0; i < TDACL_ARRAY_LEN(rows); i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    return NULL;
}

const tdacl_variant_def *tdacl__variant_of_space(const char *kernel)
{
    for (size_t i = 0; i < TDACL_ARRAY_LEN(rows); i++)
        if (rows[i].space && !rows[i].borrows_space && !strcmp(rows[i].space->kernel, kernel)) return &rows[i];
    return NULL;
}

const tdacl_variant_def *tdacl__variant_of_op(tdacl_op op)
{
    for (size_t i = 0; i < TDACL_ARRAY_LEN(rows); i++)
        if (rows[i].op == op) return &rows[i];
    return NULL;
}

/* 1 when $TDACL_VARIANT names `row`; *names_op: whether it names any row of row's operation */
static int env_names(const tdacl_variant_def *row, int *names_op)
{
    const char *env = getenv("TDACL_VARIANT");
    *names_op = 0;
    if (!env || !*env) return 0;
    for (size_t i = 0; i < TDACL_ARRAY_LEN(rows); i++) {
        size_t len = strlen(rows[i].name);
        for (const char *p = env; (p = strstr(p, rows[i].name)) != NULL; p += len)
            if ((p == env || p[-1] == ',') && (p[len] == 0 || p[len] == ',')) {
                if (&rows[i] == row) return *names_op = 1;
                if (rows[i].op == row->op) *names_op = 1;
                break;
            }
    }
    return 0;
}

/* 1 when $TDACL_VARIANT names no row of the row's operation, or names this row. */
static int allowed(const tdacl_variant_def *row)
{
    int names_op;
    return env_names(row, &names_op) || !names_op;
}

int tdacl__variant_pinned(const char *name)
{
    const tdacl_variant_def *row = tdacl__variant(name);
    int names_op;
    return row && env_names(row, &names_op);
}

tdacl_status tdacl__precision_env(tdacl_context *ctx, const char *call, tdacl_precision *p)
{
    const char *pe = getenv("TDACL_PRECISION");
    if (!pe || !*pe) return TDACL_SUCCESS;
    static const char *const names[] = {"exact", "tf32", "bf16"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(pe, names[i])) {
            *p = (tdacl_precision)i;
            return TDACL_SUCCESS;
        }
    return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: TDACL_PRECISION='%.32s' is not exact, tf32 or bf16", call, pe);
}

tdacl_status tdacl__variant_choose(tdacl_context *ctx, tdacl_op op, const void *call, const tdacl_variant_def **out,
                                   char *why, size_t n)
{
    size_t off = 0;
    why[0] = 0;
    int excluded = 0;
    for (size_t i = 0; i < TDACL_ARRAY_LEN(rows); i++) {
        const tdacl_variant_def *r = &rows[i];
        if (r->op != op) continue;
        char reason[256] = "";
        int refused = r->supports && r->supports(ctx, call, reason, sizeof reason);
        if (!refused && !allowed(r)) refused = excluded = 1, snprintf(reason, sizeof reason, "excluded by TDACL_VARIANT");
        if (refused) {
            if (off < n) off += (size_t)snprintf(why + off, n - off, "%s: %s; ", r->name, reason);
            continue;
        }
        if (off < n) snprintf(why + off, n - off, "took %s", r->name);
        *out = r;
        return TDACL_SUCCESS;
    }
    size_t len = strlen(why);
    if (len >= 2 && !strcmp(why + len - 2, "; ")) why[len - 2] = 0;
    return tdacl__fail(ctx, excluded ? TDACL_ERR_INVALID_ARGUMENT : TDACL_ERR_UNSUPPORTED, "%s: no variant runs this call (%s)",
                       tdacl__op_name(op), why);
}

void tdacl__variant_options(const tdacl_variant_def *row, const void *call, const tdacl_param_values *v, tdacl_strbuf *sb)
{
    if (row->call_options) row->call_options(call, sb);
    if (row->space && v) tdacl__params_options(row->space, v, sb);
}

tdacl_status tdacl__variant_params(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                   const tdacl_param_values *force, tdacl_tuned *used)
{
    tdacl_tuned tuned;
    memset(&tuned, 0, sizeof tuned);
    if (!row->space) {
        if (used) *used = tuned;
        return TDACL_SUCCESS;
    }
    tdacl_problem p;
    memset(&p, 0, sizeof p);
    row->problem(ctx, call, &p);
    if (force) {
        char why[200];
        if (tdacl__params_check(row->space, &ctx->info, &p, force, why, sizeof why))
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s parameters rejected: %s", row->name, why);
        tuned.values = *force;
        tuned.source = TDACL_TUNED_USER;
        snprintf(tuned.origin, sizeof tuned.origin, "forced");
    } else {
        tdacl_status st = tdacl__tuned(ctx, row->space, &p, &tuned);
        if (st) return st;
    }
    if (used) *used = tuned;
    return TDACL_SUCCESS;
}

tdacl_status tdacl__variant_kernel(tdacl_context *ctx, const tdacl_variant_def *row, const char *options,
                                   const char *kernel, cl_kernel *k)
{
    return tdacl__kernel_get(ctx, &row->program, options, kernel, k);
}
