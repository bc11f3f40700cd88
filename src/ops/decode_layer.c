/* The decode layer in one launch (cl/decode_layer.cl) as a registry row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kinds.h"
#include "ops/decode_layer.h"

/* $TDACL_DECODE names a row to take where it is not the default */
static int forced(const char *what)
{
    const char *env = getenv("TDACL_DECODE");
    return env && !strcmp(env, what);
}

static int is_phased(const tdacl_variant_def *row) { return row->launch == tdacl__decode_layer_phased_launch; }

tdacl_status tdacl__decode_layer_groups(tdacl_context *ctx, const tdacl_variant_def *row, int *groups)
{
    const tdacl_device_info *i = &ctx->info;
    const int cus = i->compute_units > 0 ? (int)i->compute_units : 1;
    const char *env = getenv("TDACL_DECODE_GROUPS");
    if (env && *env) { /* another count (trying a device; tests make a barrier give up) */
        char *end;
        const long v = strtol(env, &end, 10);
        if (*end || v < 1 || v > 65536)
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "TDACL_DECODE_GROUPS=%s is not a work-group count 1..65536",
                               env);
        *groups = (int)v;
    } else if (is_phased(row)) {
        *groups = cus; /* nothing waits for another work-group */
    } else {
        *groups = i->type == TDACL_DEVICE_GPU && i->nv_cc_major >= 7 ? cus : 1;
    }
    return TDACL_SUCCESS;
}

int tdacl__decode_layer_wg(int *wg)
{
    *wg = TDACL_DECODE_LAYER_WG;
    const char *env = getenv("TDACL_DECODE_WG");
    if (!env || !*env) return 0;
    char *end;
    const long v = strtol(env, &end, 10);
    if (*end || v < 64 || v > 1024 || (v & (v - 1))) return -1;
    *wg = (int)v;
    return 0;
}

int tdacl__decode_layer_astage(const tdacl_context *ctx, int M, int wg)
{
    /* lbuf (8 wg floats), lp and red (wg each), out, lq and stats (1024 at most): under 14 KB
     * at 256 work-items and M = 8 */
    const int64_t others = 4 * (10 * (int64_t)wg + 1024) + 512;
    const int64_t spare = (int64_t)ctx->info.local_mem_bytes - others;
    const int floats = spare > 0 ? (int)(spare / 4 / 1024) * 1024 : 0, most = M <= 1 ? 4096 : 8192;
    return floats < most ? floats : most;
}

int tdacl__decode_layer_barriers(const tdacl_variant_def *row, int n_layer)
{
    return is_phased(row) ? 0 : 5 * (n_layer > 1 ? n_layer : 1) - 1;
}

void tdacl__decode_layer_splits(int groups, int M, int H, int keys, int *nsplit, int *split_len)
{
    int n = (groups + M * H - 1) / (M * H);
    const int by_len = (keys + TDACL_DECODE_LAYER_MAX_SPLIT - 1) / TDACL_DECODE_LAYER_MAX_SPLIT;
    if (n < by_len) n = by_len;
    if (n > (keys + 31) / 32) n = (keys + 31) / 32; /* at least 32 keys a split */
    if (n < 1) n = 1;
    *split_len = (keys + n - 1) / n;
    *nsplit = (keys + *split_len - 1) / *split_len;
}

size_t tdacl__decode_layer_scratch(int M, int H, int d, int nsplit)
{
    return (size_t)M * (size_t)H * (size_t)nsplit * (size_t)(d + 2);
}

/* What the kernel's steps take, whichever way they are launched. */
static int shape_supports(const tdacl_decode_layer_call *c, int forced_row, char *why, size_t n)
{
    if (c->kind != TDACL_ATTN_SOFTMAX || c->views != 1 || c->head_norm)
        return snprintf(why, n, "it runs softmax attention with one q/k view and no head norm (the model's is %s%s)",
                        tdacl__kind_name(c->kind), c->head_norm ? " with a head norm" : ""), 1;
    if (c->rope) return snprintf(why, n, "it runs learned positions, not RoPE"), 1;
    if (c->M < 1 || c->M > 8) return snprintf(why, n, "%d rows: it takes 1 to 8", c->M), 1;
    const int vw = c->adt == TDACL_F32 ? 4 : 8, dg = c->d / vw;
    if (c->C % 8 || c->C > 8 * c->wg || c->d % 8 || c->d > 256 || c->d > c->wg || c->wg % dg || (dg & (dg - 1)))
        return snprintf(why, n, "width %d and head size %d: at %d work-items a work-group it takes multiples of 8, "
                        "width <= %d, head size <= %d with d / %d a power of two", c->C, c->d, c->wg, 8 * c->wg,
                        c->wg < 256 ? c->wg : 256, vw), 1;
    /* measured on the H200 (bench/results/decode-layer-h200): with fp32 activations five
     * launches a layer are faster (0.90 against 1.05 ms a GPT-2-small token at ctx 1024) */
    if (c->adt == TDACL_F32 && !forced_row)
        return snprintf(why, n, "fp32 activations decode faster in five launches a layer; TDACL_DECODE=persistent "
                        "takes it anyway"), 1;
    return 0;
}

int tdacl__decode_layer_supports(const tdacl_context *ctx, const void *callp, char *why, size_t n)
{
    const tdacl_device_info *info = &ctx->info;
    const int nvidia = info->type == TDACL_DEVICE_GPU && info->nv_cc_major >= 7;
    if (forced("phased")) return snprintf(why, n, "TDACL_DECODE=phased asks for decode_layer.phased"), 1;
    if (!nvidia && !forced("persistent"))
        return snprintf(why, n, "its grid barriers need every work-group resident at once, which only NVIDIA GPUs "
                        "(compute capability >= 7.0) promise here; TDACL_DECODE=persistent takes it anyway"), 1;
    return shape_supports(callp, forced("persistent"), why, n);
}

int tdacl__decode_layer_phased_supports(const tdacl_context *ctx, const void *callp, char *why, size_t n)
{
    (void)ctx;
    /* five launches of its own are no faster than the five fused kernels of model.c: it is
     * the persistent kernel's portable body, for tests (CI runs it on PoCL and Oclgrind) */
    if (!forced("phased"))
        return snprintf(why, n, "the persistent kernel's steps in five launches run only on request "
                        "(TDACL_DECODE=phased; tests)"), 1;
    return shape_supports(callp, 1, why, n);
}

static int pow2_at_least(int m)
{
    int p = 1;
    while (p < m) p *= 2;
    return p;
}

void tdacl__decode_layer_call_options(const void *callp, tdacl_strbuf *sb)
{
    const tdacl_decode_layer_call *c = callp;
    tdacl__sb_printf(sb, "-DWDT=%d -DADT=%d -DCDT=%d -DD=%d -DDL_M=%d -DDL_WG=%d -DDL_AST=%d", (int)c->wdt, (int)c->adt,
                     (int)c->adt, c->d, pow2_at_least(c->M), c->wg, c->astage);
}

/* The kernel built for step `phase` (0: every step) with the call's arguments set. */
static tdacl_status kernel_for(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_decode_layer_call *c,
                               const tdacl_param_values *v, int phase, cl_kernel *k)
{
    /* step 1 embeds only rows it stages (else the GEMV units would read x before it is written) */
    if (c->tokens && (int64_t)c->M * c->C > c->astage)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "decode_layer: %d rows of %d embedded in the launch exceed "
                           "its local copy of %d elements (embed them first)", c->M, c->C, c->astage);
    if (c->n_layer > 1 && (phase || !c->warena || !c->carena))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "decode_layer: %d layers in a launch need the persistent "
                           "kernel and the packed layers' buffers", c->n_layer);
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, c, v, &opts);
    const int embed = c->tokens && phase <= 1, layers = c->n_layer > 1; /* step 1 embeds */
    if (embed) tdacl__sb_printf(&opts, " -DDL_EMBED=1");
    if (phase) tdacl__sb_printf(&opts, " -DDL_PHASE=%d", phase);
    if (layers) tdacl__sb_printf(&opts, " -DDL_LAYERS=1");
    if (opts.oom) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "decode_layer: out of memory");
    tdacl_status st = tdacl__variant_kernel(ctx, row, opts.data, "decode_layer", k);
    tdacl__sb_free(&opts);
    if (st) return st;
    cl_int M = c->M, C = c->C, H = c->H, pos = c->pos, rms = c->rms, ns = c->nsplit, sl = c->split_len;
    cl_long cache_ld = c->cache_ld;
    cl_float eps = c->eps, scale = c->scale;
    cl_uint base = c->bar_base;
    const char *name = "decode_layer";
    st = tdacl__set_args(ctx, *k, name, sizeof c->x, &c->x, sizeof c->xmid, &c->xmid, sizeof c->qkv, &c->qkv, sizeof c->att,
                         &c->att, sizeof c->hid, &c->hid, sizeof c->scratch, &c->scratch, sizeof c->sync, &c->sync, (size_t)0);
    /* the layer's tensors (7-20), or the packed stack's (7-10) */
    cl_int nl = c->n_layer;
    cl_long16 lay;
    for (int i = 0; i < 16; i++) lay.s[i] = c->lay[i];
    if (!st)
        st = layers ? tdacl__set_args_from(ctx, *k, name, 7, sizeof c->warena, &c->warena, sizeof c->carena, &c->carena,
                                           sizeof lay, &lay, sizeof nl, &nl, (size_t)0)
                    : tdacl__set_args_from(ctx, *k, name, 7, sizeof c->ln1_w, &c->ln1_w, sizeof c->ln1_b, &c->ln1_b,
                                           sizeof c->attn_w, &c->attn_w, sizeof c->attn_b, &c->attn_b, sizeof c->proj_w,
                                           &c->proj_w, sizeof c->proj_b, &c->proj_b, sizeof c->ln2_w, &c->ln2_w,
                                           sizeof c->ln2_b, &c->ln2_b, sizeof c->fc_w, &c->fc_w, sizeof c->fc_b, &c->fc_b,
                                           sizeof c->fcproj_w, &c->fcproj_w, sizeof c->fcproj_b, &c->fcproj_b,
                                           sizeof c->kc, &c->kc, sizeof c->vc, &c->vc, (size_t)0);
    const cl_uint rest = layers ? 11 : 21;
    if (!st)
        st = tdacl__set_args_from(ctx, *k, name, rest, sizeof c->rowmap, &c->rowmap, sizeof M, &M, sizeof C, &C, sizeof H,
                                  &H, sizeof pos, &pos, sizeof cache_ld, &cache_ld, sizeof eps, &eps, sizeof rms, &rms,
                                  sizeof scale, &scale, sizeof ns, &ns, sizeof sl, &sl, sizeof base, &base, (size_t)0);
    /* the embedding's arguments (DL_EMBED) follow only where compiled in */
    if (!st && embed)
        st = tdacl__set_args_from(ctx, *k, name, rest + 12, sizeof c->tokens, &c->tokens, sizeof c->wte, &c->wte,
                                  sizeof c->wpe, &c->wpe, (size_t)0);
    return st;
}

static tdacl_status launch_steps(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_decode_layer_call *c,
                                 const tdacl_param_values *v, int first, int last)
{
    tdacl_status st = TDACL_SUCCESS;
    size_t g[1] = {(size_t)c->groups * (size_t)c->wg}, l[1] = {(size_t)c->wg};
    for (int phase = first; phase <= last && !st; phase++) {
        cl_kernel k;
        st = kernel_for(ctx, row, c, v, phase, &k);
        if (!st) st = tdacl__launch(ctx, k, 1, g, l, NULL, "decode_layer");
    }
    return st;
}

tdacl_status tdacl__decode_layer_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                        const tdacl_param_values *v)
{
    return launch_steps(ctx, row, callp, v, 0, 0);
}

tdacl_status tdacl__decode_layer_phased_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                               const tdacl_param_values *v)
{
    return launch_steps(ctx, row, callp, v, 1, 5);
}
