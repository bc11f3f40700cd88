/* The tuning spaces of the kernel variants: named parameters (defaults equal to the kernel
 * sources' #ifndef defaults), constraint predicates, local-memory formulas mirroring each
 * kernel's __local declarations, device-class defaults and the generic ladder that is
 * correct everywhere.  Parameters are read by name; build options are generated from the
 * names (tdacl__params_options). */
#include <stdio.h>
#include <string.h>

#include "base/kinds.h"
#include "ops/spaces.h"

#define P(name) tdacl__param(ks, v, name)

static int work_group_fits(const tdacl_device_info *dev, int nt, char *why, size_t n)
{
    if ((size_t)nt <= dev->max_work_group_size && (size_t)nt <= dev->max_work_item_sizes[0]) return 1;
    snprintf(why, n, "%d work-items exceed the device's work-group limit %zu", nt, dev->max_work_group_size);
    return 0;
}

/* ---- attention prefill on the FP32 lanes, cl/attention.cl ---- */

static const tdacl_tunable attention_params[] = {
    {"BM", 1, 64, {16, 32, 64, 128, TDACL_END}, "query rows per work-group"},
    {"BN", 1, 32, {16, 32, 64, TDACL_END}, "keys per tile"},
    {"TM", 1, 8, {4, 8, TDACL_END}, "query rows per work-item (multiple of 4)"},
    {"TN", 1, 4, {4, 8, TDACL_END}, "keys per work-item in the score tile (multiple of 4)"},
    {"VC", 1, 32, {8, 16, 32, 64, TDACL_END}, "keys per weight x V chunk"},
    {"KUNROLL", 1, 2, {1, 2, 4, TDACL_END}, "unroll of the head-dim loop (in steps of 4)"},
    {"PREFETCH", 1, 1, {0, 1, TDACL_END}, "load the next K tile into registers while scoring"},
    {"SEQV", 1, 0, {0, 1, TDACL_END}, "two-view kinds: stage K1 and K2 through one buffer in turn"},
};

static size_t attention_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    const int bm = P("BM"), bn = P("BN"), vc = P("VC"), seqv = P("SEQV");
    const size_t nv = (size_t)tdacl__kind_views(p->kind), nw = (size_t)tdacl__kind_weight_sets(p->kind);
    size_t kfloats = (nv == 2 && !seqv ? 2 : 1) * (size_t)p->d * (size_t)bn;
    size_t wvfloats = nw * (size_t)vc * (size_t)bm + (size_t)vc * (size_t)(p->dv + 4);
    /* Qs4, R4 (the K tiles, or the W and V chunks), then the double-buffered mask_buf (sparse
     * kinds) or tmax (softmax kinds), then counters[4] */
    size_t bytes = 4 * (nv * (size_t)p->d * (size_t)bm + (kfloats > wvfloats ? kfloats : wvfloats));
    if (!tdacl__kind_softmax(p->kind)) bytes += 2 * 4 * (size_t)((bn + 31) / 32);
    else bytes += 2 * 4 * nv * (size_t)bm;
    return bytes + 16;
}

static int attention_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                           const tdacl_param_values *v, char *why, size_t n)
{
    const int bm = P("BM"), bn = P("BN"), tm = P("TM"), tn = P("TN"), vc = P("VC"), ku = P("KUNROLL"), seqv = P("SEQV");
    if (bm <= 0 || bn <= 0 || tm <= 0 || tn <= 0 || vc <= 0 || ku <= 0)
        return snprintf(why, n, "parameters must be positive"), 1;
    if (tm % 4 || tn % 4) return snprintf(why, n, "TM=%d and TN=%d must be multiples of 4", tm, tn), 1;
    if (bm % tm) return snprintf(why, n, "BM=%d is not a multiple of TM=%d", bm, tm), 1;
    if (bn % tn) return snprintf(why, n, "BN=%d is not a multiple of TN=%d", bn, tn), 1;
    if (bn % vc || vc % 4) return snprintf(why, n, "VC=%d must divide BN=%d and be a multiple of 4", vc, bn), 1;
    if (bn > 128 || bm > 256) return snprintf(why, n, "BM=%d/BN=%d too large", bm, bn), 1;
    if ((p->d / 4) % ku) return snprintf(why, n, "KUNROLL=%d does not divide d/4=%d", ku, p->d / 4), 1;
    if (tm * tn > 128) return snprintf(why, n, "TM*TN=%d registers per work-item is too many", tm * tn), 1;
    const int two = tdacl__kind_views(p->kind) == 2;
    if (seqv && !two) return snprintf(why, n, "SEQV applies to two-view kinds only"), 1;
    const int ncg = bn / tn, nt = (bm / tm) * ncg;
    if ((p->dv / 4) % ncg) return snprintf(why, n, "dv/4=%d is not a multiple of BN/TN=%d", p->dv / 4, ncg), 1;
    if (!work_group_fits(dev, nt, why, n)) return 1;
    /* the norm epilogue reduces NCG x BM partial sums through the K region */
    const int kviews = two && !seqv ? 2 : 1;
    if ((size_t)ncg * (size_t)bm > (size_t)kviews * (size_t)p->d * (size_t)bn)
        return snprintf(why, n, "BN/TN x BM partial sums do not fit the K region"), 1;
    return 0;
}

static const tdacl_class_default attention_classes[] = {
    {"nvidia-", TDACL_ATTN_TDA, 0, "BM=32 BN=32 TM=4 TN=4 VC=32 KUNROLL=2 PREFETCH=1 SEQV=0", 0},
    {"nvidia-", TDACL_ATTN_DIFF_SOFTMAX, 0, "BM=32 BN=32 TM=4 TN=4 VC=16 KUNROLL=2 PREFETCH=1 SEQV=0", 0},
    {"nvidia-", -1, 0, "BM=64 BN=32 TM=8 TN=4 VC=32 KUNROLL=2 PREFETCH=1 SEQV=0", 0},
    /* AMD and Intel: from the compilers' resource reports (tools/offline-sweep.sh; tables in
     * bench/results/offline/): no spills, and 4 x 4 micro-tiles so that a work-group of 128-256
     * work-items fits the registers; the two-view kinds hold twice the scores */
    {"amd-gfx9", TDACL_ATTN_TDA, 0, "BM=64 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 1},
    {"amd-gfx9", TDACL_ATTN_DIFF_SOFTMAX, 0, "BM=64 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 1},
    {"amd-gfx9", -1, 0, "BM=64 BN=64 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=0 SEQV=0", 1},
    {"amd-gfx11", TDACL_ATTN_TDA, 0, "BM=64 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 1},
    {"amd-gfx11", TDACL_ATTN_DIFF_SOFTMAX, 0, "BM=64 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 1},
    {"amd-gfx11", -1, 0, "BM=64 BN=64 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=0 SEQV=0", 1},
    {"amd-", -1, 0, "BM=64 BN=32 TM=8 TN=4 VC=32 KUNROLL=2 PREFETCH=1 SEQV=0", 1},
    {"intel-xe-hp", TDACL_ATTN_TDA, 0, "BM=32 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 1},
    {"intel-xe-hp", TDACL_ATTN_DIFF_SOFTMAX, 0, "BM=32 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 1},
    {"intel-xe-hp", -1, 0, "BM=64 BN=64 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=0 SEQV=0", 1},
    {"pocl-cpu", -1, 0, "BM=32 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 0},
    {NULL, -1, 0, NULL, 0},
};

static const char *const attention_ladder[] = {
    "BM=64 BN=32 TM=8 TN=4 VC=32 KUNROLL=1", "BM=32 BN=32 TM=4 TN=4 VC=32 KUNROLL=1",
    "BM=32 BN=32 TM=4 TN=4 VC=16 KUNROLL=1", "BM=32 BN=16 TM=4 TN=4 VC=16 KUNROLL=1",
    "BM=16 BN=16 TM=4 TN=4 VC=16 KUNROLL=1", "BM=16 BN=16 TM=4 TN=4 VC=8 KUNROLL=1",
    "BM=16 BN=8 TM=4 TN=4 VC=8 KUNROLL=1",   "BM=8 BN=8 TM=4 TN=4 VC=4 KUNROLL=1",
    "BM=4 BN=4 TM=4 TN=4 VC=4 KUNROLL=1",
};

const tdacl_kernel_space tdacl__attention_space = {
    "attention", attention_params, (int)TDACL_ARRAY_LEN(attention_params), attention_check, attention_local,
    attention_classes, attention_ladder, (int)TDACL_ARRAY_LEN(attention_ladder), 0};

/* ---- attention prefill on the matrix units, cl/attention_mma.cl ---- */

static const tdacl_tunable mma_params[] = {
    {"BN", 1, 64, {16, 32, 64, 128, TDACL_END}, "keys per tile"},
    {"NWARPS", 1, 4, {2, 4, 8, TDACL_END}, "warps per work-group (each owns MT x 16 query rows)"},
    {"MT", 1, 1, {1, 2, TDACL_END}, "16-row m-tiles per warp (two share every K and V fragment)"},
    {"KSTAGES", 1, 2, {1, 2, 3, TDACL_END},
     "K tiles in local memory (3: loads run two tiles ahead; 1, softmax kinds: one K and one V buffer, each loading "
     "while the other is used)"},
};

/* The kinds whose V tiles cl/attention_mma.cl loads with K (SOFTMAX there): KSTAGES V stages */
static int mma_v_with_k(int kind) { return tdacl__kind_softmax(kind) || kind == TDACL_ATTN_TOPK_THETA; }

/* As the __local declarations of attention_mma_fwd (and of its split form). */
static size_t mma_local_bytes(const tdacl_problem *p, int bn, int nwarps, int mt, int kstages)
{
    const int bm = 16 * mt * nwarps;
    const int softmax = mma_v_with_k(p->kind);
    const size_t nv = (size_t)tdacl__kind_views(p->kind), nw = (size_t)tdacl__kind_weight_sets(p->kind);
    /* tile elements of es bytes (4: tf32), rows padded by 16 bytes */
    const size_t es = p->tile_bytes == 4 ? 4 : 2, pad = 16 / es;
    const size_t ldk = (size_t)p->d + pad, ldv = (size_t)p->dv + pad;
    size_t k_rows = (size_t)kstages * nv * (size_t)bn;
    /* V: softmax kinds load it with K; the sparse kinds one tile (a tile late) */
    size_t bytes = (size_t)(softmax ? kstages : 1) * (size_t)bn * ldv * es + 4 * sizeof(int) +
                   4 * sizeof(unsigned) + (tdacl__kind_threshold(p->kind) ? k_rows * sizeof(float) : 0);
    if (p->mma_regs) {
        if (k_rows < nv * (size_t)bm) k_rows = nv * (size_t)bm; /* Q is staged through the K buffer */
        return bytes + k_rows * ldk * es;
    }
    /* the portable body also keeps Q, the weight fragments and a lane exchange in local memory */
    return bytes + k_rows * ldk * es + nv * (size_t)bm * ldk * es +
           (size_t)(softmax ? 1 : 2) * (size_t)nwarps * nw * (size_t)mt * 16 * (size_t)(bn + 8) * es +
           (size_t)(32 * nwarps) * sizeof(float);
}

void tdacl__entmax_pass_tile(const tdacl_kernel_space *ks, const tdacl_param_values *v, tdacl_param_values *tile)
{
    const int nwarps = tdacl__param(ks, v, "NWARPS");
    *tile = *v;
    tile->v[tdacl__param_index(ks, "BN")] = 32;
    tile->v[tdacl__param_index(ks, "MT")] = 1;
    tile->v[tdacl__param_index(ks, "NWARPS")] = nwarps < 4 ? nwarps : 4;
}

/* entmax's threshold pass on tile t (its own, tdacl__entmax_pass_tile): no V tile, and no
 * slots for the kept scores yet */
static size_t entmax_pass_bytes(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *t)
{
    const int bn = tdacl__param(ks, t, "BN");
    const size_t es = p->tile_bytes == 4 ? 4 : 2, vbytes = (size_t)bn * (size_t)(p->dv + 16 / (int)es) * es;
    return mma_local_bytes(p, bn, tdacl__param(ks, t, "NWARPS"), tdacl__param(ks, t, "MT"), tdacl__param(ks, t, "KSTAGES")) -
           vbytes + 8 * es;
}

int tdacl__entmax_pass_slots(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *t,
                             uint64_t local_mem)
{
    const size_t used = entmax_pass_bytes(ks, p, t) + TDACL_LOCAL_HEADROOM + 64; /* 64: the slots' own alignment */
    const size_t row_slot = 16 * 16 * (size_t)tdacl__param(ks, t, "NWARPS") * (size_t)tdacl__param(ks, t, "MT");
    const size_t el = local_mem > used ? (size_t)(local_mem - used) / row_slot : 0;
    return el > 32 ? 32 : (int)el;
}

static size_t mma_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    size_t bytes = mma_local_bytes(p, P("BN"), P("NWARPS"), P("MT"), P("KSTAGES"));
    if (p->kind == TDACL_ATTN_ENTMAX) { /* the threshold pass: its slots take what is left */
        tdacl_param_values t;
        tdacl__entmax_pass_tile(ks, v, &t);
        const size_t pass = entmax_pass_bytes(ks, p, &t);
        if (pass > bytes) bytes = pass;
    }
    return bytes;
}

static int mma_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                     const tdacl_param_values *v, char *why, size_t n)
{
    const int bn = P("BN"), nwarps = P("NWARPS"), mt = P("MT");
    if (bn != 16 && bn != 32 && bn != 64 && bn != 128) return snprintf(why, n, "BN=%d is not 16, 32, 64 or 128", bn), 1;
    if (nwarps < 1 || nwarps > 8) return snprintf(why, n, "NWARPS=%d is outside 1..8", nwarps), 1;
    if (mt != 1 && mt != 2) return snprintf(why, n, "MT=%d is not 1 or 2", mt), 1;
    const int kstages = P("KSTAGES");
    if (kstages < 1 || kstages > 3) return snprintf(why, n, "KSTAGES=%d is not 1, 2 or 3", kstages), 1;
    if (kstages == 1 && !mma_v_with_k(p->kind))
        return snprintf(why, n, "KSTAGES=1 is for the softmax kinds (%s loads K at least one tile ahead)", tdacl__kind_name(p->kind)), 1;
    if (p->d > 128 || p->dv > 128) return snprintf(why, n, "head dims d=%d dv=%d exceed 128", p->d, p->dv), 1;
    return work_group_fits(dev, 32 * nwarps, why, n) ? 0 : 1;
}

/* Measured on the H200 (bf16, d=64, T=8192, bench/results/pipeline-h200/mma-tune.log): two
 * m-tiles per warp help every one-view kind (softmax 1.24 ms against 1.74 for the generic
 * BN=32 MT=1, tra 1.06 with K three stages deep); 64-key tiles pay for one view at d <= 64,
 * two-view kinds fit only 32-key tiles with two m-tiles.  The rows apply to any device
 * (prefix ""): the variant runs only on NVIDIA matrix units or, for tests, their portable
 * body.  A row whose tile does not fit local memory gives way to the next. */
static const tdacl_class_default mma_classes[] = {
    /* AMD and Intel matrix-unit bodies (experimental, cl/mma_units.cl): the smallest tile, the
     * one their compilers fit without spilling (bench/results/offline/units.md) */
    {"amd-", -1, 0, "BN=16 NWARPS=4 MT=1 KSTAGES=2", 1},
    {"intel-", -1, 0, "BN=16 NWARPS=4 MT=1 KSTAGES=2", 1},
    {"", TDACL_ATTN_SOFTMAX, 64, "BN=64 NWARPS=4 MT=2", 0},
    {"", TDACL_ATTN_RELA, 64, "BN=64 NWARPS=4 MT=2", 0},
    {"", TDACL_ATTN_TRA, 64, "BN=64 NWARPS=4 MT=2 KSTAGES=3", 0},
    {"", TDACL_ATTN_TRA, 64, "BN=64 NWARPS=4 MT=1", 0},
    {"", TDACL_ATTN_TDA, 64, "BN=32 NWARPS=4 MT=2", 0},
    {"", TDACL_ATTN_SOFTMAX, 0, "BN=32 NWARPS=4 MT=2", 0},
    {"", TDACL_ATTN_RELA, 0, "BN=32 NWARPS=4 MT=2", 0},
    {"", TDACL_ATTN_SOFTMAX, 0, "BN=16 NWARPS=4 MT=2", 0},
    {"", TDACL_ATTN_RELA, 0, "BN=16 NWARPS=4 MT=2", 0},
    {"", -1, 0, "BN=32 NWARPS=4 MT=1", 0},
    {NULL, -1, 0, NULL, 0},
};

static const char *const mma_ladder[] = {"BN=32 NWARPS=4 MT=1", "BN=16 NWARPS=4 MT=1", "BN=16 NWARPS=2 MT=1"};

const tdacl_kernel_space tdacl__attention_mma_space = {
    "attention_mma", mma_params, (int)TDACL_ARRAY_LEN(mma_params), mma_check, mma_local,
    mma_classes, mma_ladder, (int)TDACL_ARRAY_LEN(mma_ladder), 0};

/* ---- attention decode on the matrix units: the split form of cl/attention_mma.cl ---- */

static const tdacl_tunable decode_mma_params[] = {
    {"BN", 1, 64, {16, 32, 64, TDACL_END}, "keys per tile (a split is a multiple)"},
    {"KSTAGES", 1, 2, {2, 3, TDACL_END}, "K tiles in local memory"},
    {"WAVES", 0, 8, {2, 4, 8, 16, 32, TDACL_END}, "target work-groups (one warp each) per compute unit: the split count"},
};

/* one warp of one m-tile per work-group (cl/attention_mma.cl SPLIT) */
static size_t decode_mma_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    return mma_local_bytes(p, P("BN"), 1, 1, P("KSTAGES"));
}

static int decode_mma_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                            const tdacl_param_values *v, char *why, size_t n)
{
    const int bn = P("BN");
    if (bn != 16 && bn != 32 && bn != 64) return snprintf(why, n, "BN=%d is not 16, 32 or 64", bn), 1;
    if (P("KSTAGES") != 2 && P("KSTAGES") != 3) return snprintf(why, n, "KSTAGES=%d is not 2 or 3", P("KSTAGES")), 1;
    if (P("WAVES") <= 0) return snprintf(why, n, "WAVES must be positive"), 1;
    if (p->d > 128 || p->dv > 128) return snprintf(why, n, "head dims d=%d dv=%d exceed 128", p->d, p->dv), 1;
    return work_group_fits(dev, 32, why, n) ? 0 : 1;
}

static const tdacl_class_default decode_mma_classes[] = {{NULL, -1, 0, NULL, 0}};

static const char *const decode_mma_ladder[] = {"BN=64 KSTAGES=2", "BN=32 KSTAGES=2", "BN=16 KSTAGES=2"};

const tdacl_kernel_space tdacl__decode_mma_space = {
    "attention_decode_mma", decode_mma_params, (int)TDACL_ARRAY_LEN(decode_mma_params), decode_mma_check,
    decode_mma_local, decode_mma_classes, decode_mma_ladder, (int)TDACL_ARRAY_LEN(decode_mma_ladder), 0};

/* ---- attention decode, cl/attention_decode.cl ---- */

static const tdacl_tunable decode_params[] = {
    {"NTD", 1, 128, {32, 64, 128, 256, TDACL_END}, "work-items per work-group = keys per staged chunk"},
    {"WAVES", 0, 4, {1, 2, 4, 8, 16, 32, TDACL_END}, "target work-groups per compute unit (sets the split count)"},
};

int tdacl__decode_tqp(int64_t tq)
{
    int tqp = 1;
    while (tqp < tq) tqp *= 2;
    return tqp;
}

int tdacl__decode_list(int ntd, int tqp) { return ntd * (tqp <= 2 ? 4 : tqp <= 8 ? 2 : 1); }

static size_t decode_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    const size_t ntd = (size_t)P("NTD"), tqp = (size_t)tdacl__decode_tqp(p->tq), d4 = (size_t)p->d / 4;
    const size_t nv = (size_t)tdacl__kind_views(p->kind), nw = (size_t)tdacl__kind_weight_sets(p->kind);
    const size_t list = (size_t)tdacl__decode_list((int)ntd, (int)tqp);
    /* the chunk: partial dots (PARTIAL in cl/attention_decode.cl) or staged keys (KS4 = d/4 + 1) */
    const size_t kloads = p->wide16 ? d4 / 2 : d4, pslots = tqp + (size_t)tdacl__kind_threshold(p->kind);
    const int partial = p->wide16 && ntd % kloads == 0 && pslots * kloads <= 4 * (d4 + 1);
    const size_t chunk = partial ? nv * pslots * ntd * kloads * 4 : nv * ntd * (d4 + 1) * 16;
    /* Qs, chunk, Wl, red, counters, the combine's cred (min(NTD, RED_NT) floats) and flag;
     * the survivor list (klist, cnt) or the row maxima (tmax): the compiler drops the arrays
     * a kind does not use */
    const size_t kind_only = tdacl__kind_softmax(p->kind) ? nv * tqp * 4 : list * 4 + 4;
    const size_t red_nt = p->dv >= 64 ? 64 : (size_t)p->dv, combine = (ntd < red_nt ? ntd : red_nt) * 4 + 4;
    return nv * tqp * d4 * 16 + chunk + list * tqp * nw * 4 + tqp * (size_t)(p->dv / 4) * 16 + 16 + kind_only +
           combine;
}

static int decode_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                        const tdacl_param_values *v, char *why, size_t n)
{
    const int ntd = P("NTD"), waves = P("WAVES");
    if (ntd <= 0 || waves <= 0) return snprintf(why, n, "NTD and WAVES must be positive"), 1;
    if (ntd < p->dv / 4) return snprintf(why, n, "NTD=%d is below dv/4=%d", ntd, p->dv / 4), 1;
    return work_group_fits(dev, ntd, why, n) ? 0 : 1;
}

static const tdacl_class_default decode_classes[] = {
    {"nvidia-", -1, 0, "NTD=128 WAVES=8", 0},
    {"pocl-cpu", -1, 0, "NTD=64 WAVES=4", 0},
    {NULL, -1, 0, NULL, 0},
};

static const char *const decode_ladder[] = {"NTD=128", "NTD=64", "NTD=256", "NTD=32", "NTD=16"};

const tdacl_kernel_space tdacl__decode_space = {
    "attention_decode", decode_params, (int)TDACL_ARRAY_LEN(decode_params), decode_check, decode_local,
    decode_classes, decode_ladder, (int)TDACL_ARRAY_LEN(decode_ladder), 0};

/* ---- GEMM, cl/layers.cl (the model's matmuls) ---- */

static const tdacl_tunable gemm_params[] = {
    {"GBM", 1, 64, {32, 64, 128, TDACL_END}, "rows per work-group"},
    {"GBN", 1, 64, {32, 64, 128, TDACL_END}, "columns per work-group"},
    {"GTM", 1, 4, {4, 8, TDACL_END}, "rows per work-item (multiple of 4)"},
    {"GTN", 1, 4, {4, 8, TDACL_END}, "columns per work-item (multiple of 4)"},
    {"GKC", 1, 16, {8, 16, 32, TDACL_END}, "k-chunk staged in local memory"},
};

static size_t gemm_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    return (size_t)P("GKC") * (size_t)(P("GBM") + P("GBN")) * 4;
}

static int gemm_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                      const tdacl_param_values *v, char *why, size_t n)
{
    const int bm = P("GBM"), bn = P("GBN"), tm = P("GTM"), tn = P("GTN"), kc = P("GKC");
    if (bm <= 0 || bn <= 0 || tm <= 0 || tn <= 0 || kc <= 0) return snprintf(why, n, "parameters must be positive"), 1;
    if (tm % 4 || tn % 4 || kc % 4) return snprintf(why, n, "GTM, GTN and GKC must be multiples of 4"), 1;
    if (bm % tm || bn % tn) return snprintf(why, n, "GBM/GBN must be multiples of GTM/GTN"), 1;
    return work_group_fits(dev, (bm / tm) * (bn / tn), why, n) ? 0 : 1;
}

static const tdacl_class_default gemm_classes[] = {
    {"nvidia-", -1, 0, "GBM=128 GBN=128 GTM=8 GTN=8 GKC=16", 0},
    {"amd-", -1, 0, "GBM=128 GBN=128 GTM=8 GTN=8 GKC=16", 1},
    {"pocl-cpu", -1, 0, "GBM=32 GBN=32 GTM=4 GTN=4 GKC=16", 0},
    {NULL, -1, 0, NULL, 0},
};

static const char *const gemm_ladder[] = {
    "GBM=64 GBN=64", "GBM=32 GBN=32", "GBM=16 GBN=16 GKC=8", "GBM=8 GBN=8 GKC=4", "GBM=4 GBN=4 GKC=4",
};

const tdacl_kernel_space tdacl__gemm_space = {
    "gemm", gemm_params, (int)TDACL_ARRAY_LEN(gemm_params), gemm_check, gemm_local,
    gemm_classes, gemm_ladder, (int)TDACL_ARRAY_LEN(gemm_ladder), 0};

/* ---- GEMM on the matrix units, cl/gemm_mma.cl ---- */

static const tdacl_tunable gemm_mma_params[] = {
    {"GMM_BM", 1, 128, {64, 128, 256, TDACL_END}, "rows of c per work-group"},
    {"GMM_BN", 1, 128, {64, 128, 256, TDACL_END}, "columns of c per work-group"},
    {"GMM_WM", 1, 2, {1, 2, 4, TDACL_END}, "warps along M (each owns GMM_BM / GMM_WM rows)"},
    {"GMM_WN", 1, 2, {1, 2, 4, TDACL_END}, "warps along N (each owns GMM_BN / GMM_WN columns)"},
    {"GMM_BK", 1, 32, {16, 32, 64, TDACL_END}, "K per step"},
    {"GMM_STAGES", 1, 2, {2, 3, 4, TDACL_END}, "local stages of the copy pipeline (a copied as it is; otherwise 2)"},
};

/* GMM_STAGES stages of A (GMM_BM rows of GMM_BK elements + 16 bytes) and of B, at the larger
 * of its layouts (transposed: GMM_BN rows of GMM_BK + 16 bytes; else GMM_BK rows of GMM_BN + 8
 * elements); elements of 2 bytes, 4 for tf32.  (An a rounded as it is staged keeps two: the
 * count is an upper bound there.) */
static size_t gemm_mma_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    const size_t bm = (size_t)P("GMM_BM"), bn = (size_t)P("GMM_BN"), bk = (size_t)P("GMM_BK"), st = (size_t)P("GMM_STAGES");
    const size_t es = p->tile_bytes == 4 ? 4 : 2, pad = 16 / es;
    const size_t bt = bn * (bk + pad), bkn = bk * (bn + 8);
    return st * (bm * (bk + pad) + (bt > bkn ? bt : bkn)) * es;
}

static int gemm_mma_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                          const tdacl_param_values *v, char *why, size_t n)
{
    const int bm = P("GMM_BM"), bn = P("GMM_BN"), wm = P("GMM_WM"), wn = P("GMM_WN"), bk = P("GMM_BK");
    if (bm <= 0 || bn <= 0 || wm <= 0 || wn <= 0 || bk <= 0) return snprintf(why, n, "parameters must be positive"), 1;
    if (bk % 16) return snprintf(why, n, "GMM_BK=%d is not a multiple of 16", bk), 1;
    if (P("GMM_STAGES") < 2) return snprintf(why, n, "GMM_STAGES=%d: the pipeline needs two stages", P("GMM_STAGES")), 1;
    if (bm % (16 * wm)) return snprintf(why, n, "GMM_BM=%d is not a multiple of 16 x GMM_WM=%d", bm, wm), 1;
    if (bn % (16 * wn)) return snprintf(why, n, "GMM_BN=%d is not a multiple of 16 x GMM_WN=%d", bn, wn), 1;
    const int nt = 32 * wm * wn;
    if (nt > 512) return snprintf(why, n, "%d warps are too many", wm * wn), 1;
    if ((bm * bk / 4) % nt) return snprintf(why, n, "GMM_BM x GMM_BK / 4 is not a multiple of %d work-items", nt), 1;
    /* accumulators per lane: (BM/WM/16) m-tiles x (BN/WN/8) n-blocks x 4 */
    if ((bm / wm / 16) * (bn / wn / 8) * 4 > 128)
        return snprintf(why, n, "a warp's %d x %d tile needs more than 128 accumulator registers per lane", bm / wm, bn / wn), 1;
    return work_group_fits(dev, nt, why, n) ? 0 : 1;
}

/* 128 x 128 is the usual tensor-core tile; the portable body (CPU devices, for tests) takes
 * the small one, a quarter of the code to compile */
static const tdacl_class_default gemm_mma_classes[] = {
    {"amd-gfx11", -1, 0, "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=16", 1}, /* BK=32 spills with WMMA */
    {"amd-", -1, 0, "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32", 1},
    {"intel-", -1, 0, "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32", 1},
    {"pocl", -1, 0, "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32", 0},
    {"", -1, 0, "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32", 0},
    {NULL, -1, 0, NULL, 0},
};

/* the 16-deep K step fits tf32's 4-byte tiles in 48 KB of local memory */
static const char *const gemm_mma_ladder[] = {"GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32",
                                               "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=16",
                                               "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32",
                                               "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=16"};

const tdacl_kernel_space tdacl__gemm_mma_space = {
    "gemm_mma", gemm_mma_params, (int)TDACL_ARRAY_LEN(gemm_mma_params), gemm_mma_check, gemm_mma_local,
    gemm_mma_classes, gemm_mma_ladder, (int)TDACL_ARRAY_LEN(gemm_mma_ladder), 0};

/* ---- GEMM on Hopper's warpgroup products, cl/gemm_mma.cl with GMM_WG (cl/wgmma.cl) ---- */

static const tdacl_tunable gemm_wgmma_params[] = {
    {"GWG_BM", 1, 128, {64, 128, TDACL_END}, "rows of c per work-group (a warpgroup of four warps a 64)"},
    {"GWG_BN", 1, 128, {64, 128, TDACL_END}, "columns of c per work-group (each warpgroup's product width)"},
    {"GWG_STAGES", 1, 3, {2, 3, 4, TDACL_END}, "local stages of the copy pipeline (32 k each)"},
};

/* one array: GWG_STAGES stages of A (GWG_BM rows) and B (GWG_BN rows or columns) of 32
 * bf16 k, 64 bytes a row, unpadded (the swizzle spreads the banks) */
static size_t gemm_wgmma_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    (void)p;
    return (size_t)P("GWG_STAGES") * (size_t)(P("GWG_BM") + P("GWG_BN")) * 64;
}

static int gemm_wgmma_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                            const tdacl_param_values *v, char *why, size_t n)
{
    (void)p;
    const int bm = P("GWG_BM"), bn = P("GWG_BN"), st = P("GWG_STAGES");
    if (bm != 64 && bm != 128) return snprintf(why, n, "GWG_BM=%d is not 64 or 128", bm), 1;
    if (bn != 64 && bn != 128) return snprintf(why, n, "GWG_BN=%d is not 64 or 128", bn), 1;
    if (st < 2) return snprintf(why, n, "GWG_STAGES=%d: the pipeline needs two stages", st), 1;
    return work_group_fits(dev, 2 * bm, why, n) ? 0 : 1;
}

/* the probe's best on the H200 (bench/results/experiments/wgmma-h200/), and a small tile for
 * the portable body, a quarter of the code to compile */
static const tdacl_class_default gemm_wgmma_classes[] = {
    {"pocl", -1, 0, "GWG_BM=64 GWG_BN=64 GWG_STAGES=2", 0},
    {"", -1, 0, "GWG_BM=128 GWG_BN=128 GWG_STAGES=3", 0},
    {NULL, -1, 0, NULL, 0},
};

static const char *const gemm_wgmma_ladder[] = {"GWG_BM=128 GWG_BN=128 GWG_STAGES=3", "GWG_BM=64 GWG_BN=128 GWG_STAGES=4",
                                                 "GWG_BM=64 GWG_BN=64 GWG_STAGES=2"};

const tdacl_kernel_space tdacl__gemm_wgmma_space = {
    "gemm_wgmma", gemm_wgmma_params, (int)TDACL_ARRAY_LEN(gemm_wgmma_params), gemm_wgmma_check, gemm_wgmma_local,
    gemm_wgmma_classes, gemm_wgmma_ladder, (int)TDACL_ARRAY_LEN(gemm_wgmma_ladder), 1};

/* ---- alpha-entmax attention on the FP32 lanes, cl/attention_entmax.cl ---- */

static const tdacl_tunable entmax_params[] = {
    {"BM", 1, 16, {1, 2, 4, 8, 16, 32, TDACL_END}, "query rows per work-group"},
    {"BN", 1, 32, {16, 32, 64, 128, TDACL_END}, "keys per tile"},
    {"LPR", 1, 8, {4, 8, 16, 32, 64, TDACL_END}, "work-items per query row"},
    {"CAP", 1, 128, {32, 64, 128, 256, TDACL_END}, "candidate scores a row keeps (more: the threshold passes re-score)"},
    {"PREFETCH", 1, 0, {0, 1, TDACL_END}, "the next K tile's loads in flight while the current one is scored"},
};

/* As the __local declarations of attention_entmax_fwd: Qs, R (K tile or V tile), Ws, red,
 * flag, counters, cand, ncand, tile_mark (MAXT = 1024 bits). */
static size_t entmax_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    const size_t bm = (size_t)P("BM"), bn = (size_t)P("BN"), nt = bm * (size_t)P("LPR"), cap = (size_t)P("CAP");
    const size_t qs = (size_t)p->d + 4, kt = bn * qs, vt = bn * (size_t)p->dv;
    return 4 * (bm * qs + (kt > vt ? kt : vt) + bm * (bn + 1) + 2 * nt + bm * cap + bm) + 4 + 16 + 128;
}

/* The row tiling's constraints (cl/attention_rows.cl), shared by entmax and Top-theta: BM rows
 * of LPR work-items, BN keys a tile split evenly over a row's work-items, as the output
 * columns are. */
static int row_tiles_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                           const tdacl_param_values *v, char *why, size_t n)
{
    const int bm = P("BM"), bn = P("BN"), lpr = P("LPR");
    if (bm <= 0 || bn <= 0 || lpr <= 0) return snprintf(why, n, "parameters must be positive"), 1;
    if (bn % lpr) return snprintf(why, n, "BN=%d is not a multiple of LPR=%d", bn, lpr), 1;
    if (p->dv % lpr) return snprintf(why, n, "dv=%d (padded) is not a multiple of LPR=%d", p->dv, lpr), 1;
    if (bn > 128 || bm > 64) return snprintf(why, n, "BM=%d/BN=%d too large", bm, bn), 1;
    return work_group_fits(dev, bm * lpr, why, n) ? 0 : 1;
}

static int entmax_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                        const tdacl_param_values *v, char *why, size_t n)
{
    if (P("CAP") < 1) return snprintf(why, n, "CAP must be positive"), 1;
    return row_tiles_check(ks, dev, p, v, why, n);
}

static const tdacl_class_default entmax_classes[] = {{NULL, -1, 0, NULL, 0}};
static const char *const entmax_ladder[] = {"BM=16 BN=32 LPR=8", "BM=8 BN=32 LPR=8", "BM=8 BN=16 LPR=8",
                                            "BM=4 BN=16 LPR=4", "BM=1 BN=4 LPR=4"};

const tdacl_kernel_space tdacl__entmax_space = {
    "attention_entmax", entmax_params, (int)TDACL_ARRAY_LEN(entmax_params), entmax_check, entmax_local,
    entmax_classes, entmax_ladder, (int)TDACL_ARRAY_LEN(entmax_ladder), 0};

/* Decode (at most 16 query rows, many keys): few rows per work-group, more work-items a row. */
static const char *const entmax_decode_ladder[] = {"BM=2 BN=64 LPR=32", "BM=1 BN=32 LPR=32", "BM=1 BN=16 LPR=16",
                                                   "BM=1 BN=4 LPR=4"};

const tdacl_kernel_space tdacl__entmax_decode_space = {
    "attention_entmax_decode", entmax_params, (int)TDACL_ARRAY_LEN(entmax_params), entmax_check, entmax_local,
    entmax_classes, entmax_decode_ladder, (int)TDACL_ARRAY_LEN(entmax_decode_ladder), 0};

/* ---- Top-theta attention on the FP32 lanes, cl/attention_topk.cl ---- */

static const tdacl_tunable topk_params[] = {
    {"BM", 1, 16, {1, 2, 4, 8, 16, 32, TDACL_END}, "query rows per work-group"},
    {"BN", 1, 32, {16, 32, 64, 128, TDACL_END}, "keys per tile"},
    {"LPR", 1, 8, {4, 8, 16, 32, 64, TDACL_END}, "work-items per query row"},
    {"PREFETCH", 1, 0, {0, 1, TDACL_END}, "the next K tile's loads in flight while the current one is scored"},
    {"WAVES", 0, 4, {1, 2, 4, 8, 16, 32, TDACL_END}, "decode: target work-groups per compute unit (sets the key split count)"},
};

/* As the __local declarations of attention_topk_fwd: Qs, R (K tile or V tile), Ws, red, flag,
 * counters. */
static size_t topk_local(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *v)
{
    const size_t bm = (size_t)P("BM"), bn = (size_t)P("BN"), nt = bm * (size_t)P("LPR");
    const size_t qs = (size_t)p->d + 4, kt = bn * qs, vt = bn * (size_t)p->dv;
    return 4 * (bm * qs + (kt > vt ? kt : vt) + bm * (bn + 1) + 2 * nt) + 4 + 16;
}

static int topk_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                      const tdacl_param_values *v, char *why, size_t n)
{
    if (P("WAVES") <= 0) return snprintf(why, n, "WAVES must be positive"), 1;
    return row_tiles_check(ks, dev, p, v, why, n);
}

const tdacl_kernel_space tdacl__topk_space = {
    "attention_topk", topk_params, (int)TDACL_ARRAY_LEN(topk_params), topk_check, topk_local,
    entmax_classes, entmax_ladder, (int)TDACL_ARRAY_LEN(entmax_ladder), 0};

const tdacl_kernel_space tdacl__topk_decode_space = {
    "attention_topk_decode", topk_params, (int)TDACL_ARRAY_LEN(topk_params), topk_check, topk_local,
    entmax_classes, entmax_decode_ladder, (int)TDACL_ARRAY_LEN(entmax_decode_ladder), 0};
