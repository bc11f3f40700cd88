/* The tensor-core prefill variant (cl/attention_mma.cl) as a row of the registry: when it
 * applies and the options the call fixes.  Native on NVIDIA compute capability >= 8.0
 * (mma.sync through inline PTX), on Intel DPAS and AMD MFMA/WMMA with
 * TDACL_EXPERIMENTAL_MATRIX=1; with TDACL_MMA_EMULATE the same kernel source runs on any
 * device through the portable body of cl/mma.cl or an emulated vendor body (matrix_units.c;
 * how CI tests it on PoCL).  Its tile
 * (BN, NWARPS, MT) is the tuning space "attention_mma" (spaces.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/kinds.h"
#include "ops/attention.h"

int tdacl__attention_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    if (p->mma.body < 0) return snprintf(why, n, "%s", p->mma.why), 1;
    /* entmax: its threshold by Newton's method from below, whose steps are bounded for alpha < 2
     * (sparsemax's piecewise-linear sum can take as many steps as keys); above 1.5 the powers
     * and the steps cost more than the FP32-lane kernel at short lengths (H200, alpha 1.75
     * T=1024: 4.76 ms against 3.55; bench/results/entmax-mma-h200/) */
    if (p->desc.kind == TDACL_ATTN_ENTMAX) {
        if (p->desc.alpha > 1.5f)
            return snprintf(why, n, "entmax alpha %g > 1.5 (the tensor-core threshold search takes alpha <= 1.5) runs on "
                            "attention.entmax", p->desc.alpha), 1;
        if (p->mma.hardware && p->mma.body != TDACL_MMA_PTX)
            return snprintf(why, n, "%s: entmax runs on mma.sync and the portable body only", p->mma.name), 1;
    }
    /* Top-theta on the matrix units: softmax with its weights below the threshold zeroed */
    if (p->desc.kind == TDACL_ATTN_TOPK_THETA) {
        if (p->desc.vmc) return snprintf(why, n, "topk_theta with VMC (the mean V row) runs on attention.topk_theta"), 1;
        if (p->mma.hardware && p->mma.body != TDACL_MMA_PTX)
            return snprintf(why, n, "%s: topk_theta runs on mma.sync and the portable body only", p->mma.name), 1;
    }
    /* the compilers' reports (bench/results/offline/units.md): these bodies spill registers
     * on the two-view kinds at every tile */
    if (p->mma.hardware && tdacl__kind_views(p->desc.kind) == 2 &&
        (p->mma.body == TDACL_MMA_WMMA || (p->mma.body == TDACL_MMA_DPAS && p->mma.sg == 16)))
        return snprintf(why, n, "%s: two-view kinds spill registers in this body (the FP32 lanes run them)", p->mma.name), 1;
    if (p->dtype == TDACL_F32 && p->desc.precision == TDACL_PRECISION_EXACT)
        return snprintf(why, n, "f32 storage runs exact on the FP32 lanes (precision tf32 or bf16 takes the matrix "
                        "units)"), 1;
    if (tdacl__attention_mma_in(p) == 3 && p->mma.body != TDACL_MMA_PTX && p->mma.body != TDACL_MMA_PORTABLE)
        return snprintf(why, n, "%s: precision tf32 runs on mma.sync only (precision bf16 takes these units)", p->mma.name), 1;
    if (p->dpad > 128 || p->dvpad > 128)
        return snprintf(why, n, "head dims d=%d dv=%d: the mma variant takes up to 128", p->d, p->dv), 1;
    return 0;
}

/* The operand type on the matrix units (cl/mma.cl MMA_IN): 1 bf16, 2 f16, 3 tf32.  fp32
 * storage arrives as tf32 or bf16, as the call's precision says. */
int tdacl__attention_mma_in(const tdacl_attention_plan *p)
{
    if (p->dtype != TDACL_F32) return (int)p->dtype;
    return p->desc.precision == TDACL_PRECISION_TF32 ? 3 : (int)TDACL_BF16;
}

/* Whether tra and tda form their weights lazily (cl/attention_mma.cl LAZY_W): at beta >= 1,
 * where the thresholds leave so few weights that most warps' tiles have none; below it, and for
 * f16 weights (rescaled per row), they are formed at once. */
int tdacl__attention_mma_lazy(const tdacl_attention_plan *p)
{
    return (p->desc.kind == TDACL_ATTN_TRA || p->desc.kind == TDACL_ATTN_TDA) && p->desc.beta >= 1.0f &&
           tdacl__attention_mma_in(p) != 2;
}

/* The decode row (the split form of the same kernel): where the query rows make the matrix
 * units pay.  One query row is a matrix-vector product the FP32 lanes run at the bandwidth
 * bound; the threshold kinds' FP32-lane decode stays at it up to 3 rows (H100, B8 H16
 * Tk=32768 bf16, bench/results/decode-mma-h100/: tra 0.204 ms there against 0.226 on the
 * matrix units, at 4 rows 0.218 against 0.229, at 8 rows 0.431 against 0.227). */
#define DECODE_MMA_MIN_ROWS_THRESHOLD_KINDS 4
int tdacl__attention_decode_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    if (p->desc.kind == TDACL_ATTN_ENTMAX)
        return snprintf(why, n, "entmax decodes on attention_decode.entmax (no tensor-core decode)"), 1;
    if (p->desc.kind == TDACL_ATTN_TOPK_THETA)
        return snprintf(why, n, "topk_theta decodes on attention_decode.topk_theta (its key splits read only kept V "
                        "rows)"), 1;
    if (p->kv_rows) return snprintf(why, n, "per-sequence key ranges: the FP32-lane decode reads them"), 1;
    if (p->Tq < 2)
        return snprintf(why, n, "Tq=1: one query row is a matrix-vector product (the FP32 lanes read the keys at the "
                        "bandwidth bound)"), 1;
    if (tdacl__kind_threshold(p->desc.kind) && p->Tq < DECODE_MMA_MIN_ROWS_THRESHOLD_KINDS)
        return snprintf(why, n, "Tq=%lld: the threshold kinds' FP32-lane decode reads the keys at the bandwidth bound up "
                        "to %d rows", (long long)p->Tq, DECODE_MMA_MIN_ROWS_THRESHOLD_KINDS - 1), 1;
    if (p->Tq > TDACL_DECODE_MMA_ROWS)
        return snprintf(why, n, "Tq=%lld exceeds the %d rows of its warp", (long long)p->Tq, TDACL_DECODE_MMA_ROWS), 1;
    return tdacl__attention_mma_supports(ctx, call, why, n);
}

void tdacl__attention_decode_mma_call_options(const void *callp, tdacl_strbuf *sb)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)callp)->plan;
    tdacl__attention_mma_call_options(callp, sb);
    /* one warp of one m-tile holds every query row; the reduce kernel's rows follow */
    tdacl__sb_printf(sb, " -DSPLIT=1 -DNWARPS=1 -DMT=1 -DTQP=%d -DRED_NT=%d", TDACL_DECODE_MMA_ROWS, tdacl__reduce_nt(p));
}

void tdacl__attention_mma_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p)
{
    const tdacl_attention_plan *plan = ((const tdacl_attention_call *)call)->plan;
    *p = plan->problem;
    p->native = plan->mma.hardware;
    p->mma_regs = plan->mma.body == TDACL_MMA_PTX;
    p->tile_bytes = tdacl__attention_mma_in(plan) == 3 ? 4 : 2;
    p->lazy = tdacl__attention_mma_lazy(plan); /* lazy and eager loops want different tiles */
}

void tdacl__attention_mma_call_options(const void *callp, tdacl_strbuf *sb)
{
    const tdacl_attention_call *call = callp;
    const tdacl_attention_plan *p = call->plan;
    /* the survivor counters are compiled in only for calls that ask for statistics */
    int stats = call->stats != NULL && p->desc.want_stats;
    /* Debian 12's IGC (22.43) crashes compiling the sparse kinds' STATS=0 build for Xe-HPC (any
     * body, also the portable one); the counters stay compiled in there, unused (7 % of the
     * time of the sparse kinds on the H200) */
    if (p->mma.body == TDACL_MMA_DPAS && p->mma.sg == 16 && !tdacl__kind_softmax(p->desc.kind))
        stats = 1;
    /* the power is a compile-time constant for the threshold kinds; the others use 2.
     * MMA_IN: the type the matrix units take */
    int pmode = tdacl__kind_threshold(p->desc.kind) ? p->pmode : 2;
    /* entmax's weights are r^(1 / (alpha - 1)): 2 at alpha 1.5, the integer powers up to 8 by
     * products (alpha 1.25: 4), other powers at run time */
    if (p->desc.kind == TDACL_ATTN_ENTMAX) {
        const float power = 1.0f / (p->desc.alpha - 1.0f);
        pmode = p->desc.alpha == 1.5f ? 2 : power >= 3.0f && power <= 8.0f && power == floorf(power) ? (int)power : 0;
    }
    /* KINV: the scores are scaled by inverse norms (row_inv_norm runs first) */
    const int kinv = p->desc.normalize && tdacl__kind_threshold(p->desc.kind);
    tdacl__mma_options(&p->mma, sb);
    /* Top-theta post-softmax: two launches (the host adds TOPK_ROW_STATS for the first) */
    if (p->desc.kind == TDACL_ATTN_TOPK_THETA && p->desc.theta_post) tdacl__sb_printf(sb, " -DTOPK_POST=1");
    tdacl__sb_printf(sb, " -DKIND=%d -DDT=%d -DODT=%d -DGDT=%d -DD=%d -DDV=%d -DMMA_IN=%d -DPMODE=%d -DSTATS=%d -DKINV=%d -DLAZY=%d%s",
                     (int)p->desc.kind, (int)p->dtype, (int)p->odtype, (int)p->gdtype, p->dpad, p->dvpad, tdacl__attention_mma_in(p), pmode,
                     stats, kinv, tdacl__attention_mma_lazy(p), p->aligned16 ? " -DALIGNED16" : "");
}

/* ---- attention.mma_views: a two-view kind one view a launch ----
 * tda's weight is w1 - lambda w2 and diff_softmax's output O1 - lambda O2 (each view's softmax
 * normalised on its own): both are linear in the views, so each view can run as its one-view
 * kind (tra, softmax) on that kind's own tile, view 1 into an f32 buffer; view 2 then combines
 * its output with that one in its epilogue (tdacl__attention_views_tail) or writes a second
 * buffer that a third launch combines (cl/attention_views.cl).  The one-pass kernel (attention.mma)
 * reads each V tile once for both views but holds both views' scores and Q fragments in
 * registers, which leaves it one m-tile a warp. */
int tdacl__attention_views_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    const tdacl_kind_info *k = tdacl__kind(p->desc.kind);
    if (!k || k->view_kind < 0) return snprintf(why, n, "two-view kinds only"), 1;
    /* tda's survivor count is of w1 - lambda w2, which neither view sees */
    if (p->desc.want_stats)
        return snprintf(why, n, "statistics asked (the combined weights are counted by the one-pass kernel)"), 1;
    if (p->kv_rows) return snprintf(why, n, "per-sequence key ranges"), 1;
    /* its f32 buffers of B x H x Tq x dv, one or two (the context keeps them) */
    const uint64_t bytes = (uint64_t)(p->B * p->H * p->Tq) * (uint64_t)p->dv * 4u;
    const int nbuf = 2 - tdacl__attention_views_tail(p);
    if (bytes > ctx->info.max_alloc_bytes || 2 * nbuf * bytes > ctx->info.global_mem_bytes)
        return snprintf(why, n, "its %s of %.0f MB would take too much of the device's memory",
                        nbuf == 1 ? "f32 buffer" : "two f32 buffers", (double)bytes / 1e6), 1;
    /* where it pays (H200, bf16, B4 H8, bench/results/views-h200/): diff_softmax from 4096 rows
     * (0.88-0.91x the one-pass time at T >= 8192, 0.91x at d=128 T=4096, 1.01x at d=64
     * T=4096, 1.05-1.13x at 2048); tda at beta >= 1 and d <= 64 from 8192 rows (0.84-0.90x;
     * 1.07x at d=128, where tda's one-pass tile keeps two m-tiles, and 1.02x below beta 1,
     * where its W V products are dense and the one pass shares them), and from 4096 rows with
     * at least 32 (batch, head) pairs (B8 H12 0.975x, B4 H8 0.99x; B1 H12 about 1.05x, B8 H12
     * T=1024 1.24x: bench/results/rope-h200/) */
    if (!tdacl__variant_pinned("attention.mma_views")) {
        const int many_heads = p->B * p->H >= 32;
        const int64_t min_rows = p->desc.kind == TDACL_ATTN_TDA && !many_heads ? 8192 : 4096;
        if (p->Tq < min_rows)
            return snprintf(why, n, "Tq=%lld below %lld%s (the one-pass kernel is as fast there)", (long long)p->Tq,
                            (long long)min_rows, min_rows == 8192 ? " with fewer than 32 (batch, head) pairs" : ""), 1;
        if (p->desc.kind == TDACL_ATTN_TDA && (!tdacl__attention_mma_lazy(p) || p->dpad > 64))
            return snprintf(why, n, "tda at %s (the one-pass kernel is faster there)",
                            p->dpad > 64 ? "d > 64" : "beta < 1 or f16"), 1;
    }
    return tdacl__attention_mma_supports(ctx, call, why, n);
}

void tdacl__attention_one_view_plan(const tdacl_attention_plan *p, tdacl_attention_plan *one)
{
    *one = *p;
    one->desc.kind = (tdacl_attention_kind)tdacl__kind(p->desc.kind)->view_kind;
    one->desc.norm = TDACL_NORM_NONE, one->desc.out_scale = 1.0f, one->odtype = TDACL_F32;
    one->problem.kind = (int)one->desc.kind;
}

/* the call as its one-view kind, over *one */
static tdacl_attention_call one_view_call(const tdacl_attention_call *call, tdacl_attention_plan *one)
{
    tdacl__attention_one_view_plan(call->plan, one);
    return (tdacl_attention_call){one, call->t, call->stats, call->ms};
}

/* the one-view kind's tuning entries */
void tdacl__attention_views_problem(const tdacl_context *ctx, const void *callp, tdacl_problem *prob)
{
    tdacl_attention_plan one;
    const tdacl_attention_call c1 = one_view_call(callp, &one);
    tdacl__attention_mma_problem(ctx, &c1, prob);
}

/* The one-view kind writing f32 (ODT) and, for view 2's program (VIEWS_TAIL, added at the
 * launch), the combine's output dtype, lambda rule and column grouping */
void tdacl__attention_views_call_options(const void *callp, tdacl_strbuf *sb)
{
    const tdacl_attention_call *call = callp;
    tdacl_attention_plan one;
    const tdacl_attention_call c1 = one_view_call(call, &one);
    tdacl__attention_mma_call_options(&c1, sb);
    tdacl__sb_printf(sb, " -DVIEWS_ODT=%d -DVIEWS_CLAMP=%d -DVIEWS_VEC=%d", (int)call->plan->odtype,
                     tdacl__kind(call->plan->desc.kind)->lambda_clamped, tdacl__attention_views_vec(call->plan));
}

/* Whether view 2 combines in its own epilogue (VIEWS_TAIL, cl/attention_mma.cl) rather than a
 * third launch: where the view kind is softmax.  H200, bf16, B4 H8 (bench/results/views-tail-h200/):
 * diff_softmax 0.94-0.99x the time with the combine launch; tda 1.06-1.07x slower with it, its
 * views' (tra's) loop scheduled worse with the epilogue in the program. */
int tdacl__attention_views_tail(const tdacl_attention_plan *p)
{
    const tdacl_kind_info *k = tdacl__kind(p->desc.kind);
    return k && k->view_kind == TDACL_ATTN_SOFTMAX;
}

/* the columns the combine reads at once: 4 (a vload4 or a 16-byte copy) where the views' rows
 * hold whole groups of 4 */
int tdacl__attention_views_vec(const tdacl_attention_plan *p) { return p->dv % 4 == 0 ? 4 : 1; }
