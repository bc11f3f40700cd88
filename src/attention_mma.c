/* The tensor-core prefill variant (cl/attention_mma.cl): when it applies, its tile size and
 * build options.  Native on NVIDIA compute capability >= 8.0 (mma.sync through inline PTX);
 * with TDACL_MMA_EMULATE=1 the same kernel source runs on any device through the portable
 * body of cl/mma.cl (how CI tests it on PoCL).  TDACL_ATTENTION_VARIANT=simt|mma overrides
 * the choice; every decision is logged at debug level with its reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"

/* warps per work-group (16 query rows each).  8 warps measured slower on the H200 (softmax
 * bf16 T=8192 2.22 vs 1.88 ms, tra 4.53 vs 2.99 ms), so 4 is the one shipped. */
static int mma_nwarps(void) { return 4; }

static int env_is(const char *name, const char *value)
{
    const char *e = getenv(name);
    return e && !strcmp(e, value);
}

static int aligned16(const tdacl_tensor *t)
{
    if (!t) return 1;
    return t->strides[3] == 1 && t->strides[2] % 8 == 0 && t->strides[1] % 8 == 0 && t->strides[0] % 8 == 0 &&
           t->offset % 8 == 0;
}

size_t tdacl__attention_mma_local_bytes(int kind, int d, int dv, int bn, int nwarps, int mt, int native)
{
    const int bm = 16 * mt * nwarps;
    int nv = kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1;
    int nw = kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1;
    int softmax = kind == TDACL_ATTN_SOFTMAX || kind == TDACL_ATTN_DIFF_SOFTMAX;
    int knorm = kind == TDACL_ATTN_TRA || kind == TDACL_ATTN_TDA;
    int kstages = 2; /* as cl/attention_mma.cl: KSTAGES */
    size_t ldk = (size_t)d + 8, ldv = (size_t)dv + 8, k_rows = (size_t)(kstages * nv * bn);
    size_t bytes = (size_t)(softmax ? 2 : 1) * (size_t)bn * ldv * 2 + 2 * sizeof(int) + 4 * sizeof(unsigned) +
                   (knorm ? (size_t)(kstages * nv * bn) * sizeof(float) : 0);
    if (native) {
        if (k_rows < (size_t)(nv * bm)) k_rows = (size_t)(nv * bm); /* Q staged through it */
        bytes += k_rows * ldk * 2;
    } else {
        bytes += k_rows * ldk * 2 + (size_t)(nv * bm) * ldk * 2 + (size_t)(nwarps * nw * mt * 16) * (size_t)(bn + 8) * 2 +
                 (size_t)(32 * nwarps) * sizeof(float);
    }
    return bytes;
}

static void choose(tdacl_context *ctx, tdacl_attention_plan *p, const tdacl_attention_tensors *t, char *why, size_t n)
{
    const int native = ctx->info.nv_cc_major >= 8;
    const int emulate = env_is("TDACL_MMA_EMULATE", "1");
    if (env_is("TDACL_ATTENTION_VARIANT", "simt")) {
        snprintf(why, n, "TDACL_ATTENTION_VARIANT=simt");
        return;
    }
    if (p->path != TDACL_PATH_PREFILL) {
        snprintf(why, n, "the decode path has no mma variant yet");
        return;
    }
    if (!native && !emulate) {
        snprintf(why, n, "%s has no mma.sync (NVIDIA compute capability >= 8.0 needed; TDACL_MMA_EMULATE=1 "
                 "runs the portable body)", ctx->info.name);
        return;
    }
    if (p->dtype != TDACL_BF16 && p->dtype != TDACL_F16) {
        snprintf(why, n, "%s storage runs exact on the SIMT variant", tdacl_dtype_name(p->dtype));
        return;
    }
    if (p->dpad > 128 || p->dvpad > 128) {
        snprintf(why, n, "head dims d=%d dv=%d: the mma variant takes up to 128", p->d, p->dv);
        return;
    }
    const int nwarps = mma_nwarps();
    /* m-tiles per warp: two share every K and V fragment between 32 rows.  Measured on the
     * H200 (bf16, d=64, T=8192): rela 1.46 ms with two against 1.74 with one, softmax 1.88
     * against 2.30; tra 2.44 against 2.04 (245 registers with two), tda 4.69 against 3.79,
     * diff_softmax 6.05 against 5.25.  $TDACL_MMA_MT (1 or 2) overrides, for measurements. */
    int mt = p->desc.kind == TDACL_ATTN_SOFTMAX || p->desc.kind == TDACL_ATTN_RELA ? 2 : 1;
    const char *mte = getenv("TDACL_MMA_MT");
    if (mte && (!strcmp(mte, "1") || !strcmp(mte, "2"))) mt = mte[0] - '0';
    const int nv = p->desc.kind == TDACL_ATTN_TDA || p->desc.kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1;
    /* the largest key tile that fits local memory; one view at d <= 64 takes 64 keys */
    static const int tiles[] = {64, 32, 16};
    int bn = 0;
    for (size_t i = 0; i < TDACL_ARRAY_LEN(tiles) && !bn; i++) {
        if (tiles[i] == 64 && (nv == 2 || p->dpad > 64)) continue;
        if (tdacl__attention_mma_local_bytes(p->desc.kind, p->dpad, p->dvpad, tiles[i], nwarps, mt, native && !emulate) <=
            ctx->info.local_mem_bytes)
            bn = tiles[i];
    }
    if (!bn) {
        snprintf(why, n, "no key tile fits %llu bytes of local memory", (unsigned long long)ctx->info.local_mem_bytes);
        return;
    }
    p->variant = TDACL_VARIANT_MMA;
    p->mma_native = native && !emulate;
    p->mma_bn = bn;
    p->mma_nwarps = nwarps;
    p->mma_mt = mt;
    p->aligned16 = aligned16(t->q) && aligned16(t->k) && aligned16(t->v) && aligned16(t->q2) && aligned16(t->k2);
    snprintf(why, n, "%s, %d warps of %d rows, %d keys per tile, %s loads", p->mma_native ? "native mma.sync" : "portable fragment body",
             nwarps, 16 * mt, bn, p->aligned16 ? "16-byte" : "element");
}

void tdacl__attention_choose_variant(tdacl_context *ctx, tdacl_attention_plan *p, const tdacl_attention_tensors *t)
{
    p->variant = TDACL_VARIANT_SIMT;
    p->mma_native = p->mma_bn = p->aligned16 = 0;
    choose(ctx, p, t, p->variant_why, sizeof p->variant_why);
    if (p->variant == TDACL_VARIANT_SIMT && env_is("TDACL_ATTENTION_VARIANT", "mma"))
        tdacl__log(ctx, TDACL_LOG_WARN, "attention: TDACL_ATTENTION_VARIANT=mma not taken: %s", p->variant_why);
    tdacl__log(ctx, TDACL_LOG_DEBUG, "attention %s %s: %s variant (%s)", tdacl__kind_name(p->desc.kind),
               p->path == TDACL_PATH_DECODE ? "decode" : "prefill", p->variant == TDACL_VARIANT_MMA ? "mma" : "simt",
               p->variant_why);
}

void tdacl__attention_mma_options(const tdacl_attention_plan *p, tdacl_strbuf *sb)
{
    tdacl__sb_printf(sb, "-DKIND=%d -DDT=%d -DODT=%d -DGDT=%d -DD=%d -DDV=%d -DBN=%d -DNWARPS=%d -DMT=%d -DMMA_NATIVE=%d "
                     "-DMMA_IN=%d -DPMODE=%d%s",
                     (int)p->desc.kind, (int)p->dtype, (int)p->odtype, (int)p->gdtype, p->dpad, p->dvpad, p->mma_bn,
                     p->mma_nwarps, p->mma_mt, p->mma_native, (int)p->dtype,
                     (p->desc.kind == TDACL_ATTN_TRA || p->desc.kind == TDACL_ATTN_TDA) ? p->pmode : 2, p->aligned16 ? " -DALIGNED16" : "");
}

int tdacl__attention_mma_rows(const tdacl_attention_plan *p) { return 16 * p->mma_mt * p->mma_nwarps; }
int tdacl__attention_mma_threads(const tdacl_attention_plan *p) { return 32 * p->mma_nwarps; }
