/* The tunable parameters of every kernel, in one place: search space, constraints (a
 * predicate mirroring the kernel's local-memory layout), device-class defaults and the
 * generic ladder that is correct everywhere. */
#include <stdio.h>
#include <string.h>

#include "tuning.h"

/* ---- attention (prefill), cl/attention.cl ---- */

static const tdacl_tunable attention_params[] = {
    {"BM", 1, {16, 32, 64, 128, TDACL_END}, "query rows per work-group"},
    {"BN", 1, {16, 32, 64, TDACL_END}, "keys per tile"},
    {"TM", 1, {4, 8, TDACL_END}, "query rows per work-item (multiple of 4)"},
    {"TN", 1, {4, 8, TDACL_END}, "keys per work-item in the score tile (multiple of 4)"},
    {"VC", 1, {8, 16, 32, 64, TDACL_END}, "keys per weight x V chunk"},
    {"KUNROLL", 1, {1, 2, 4, TDACL_END}, "unroll of the head-dim loop (in steps of 4)"},
    {"PREFETCH", 1, {0, 1, TDACL_END}, "load the next K tile into registers while scoring"},
    {"SEQV", 1, {0, 1, TDACL_END}, "two-view kinds: stage K1 and K2 through one buffer in turn"},
};

/* Local memory of attention_fwd in bytes, mirroring the declarations in cl/attention.cl. */
size_t tdacl__attention_local_bytes(int kind, int d, int dv, int bm, int bn, int vc, int seqv)
{
    int two = kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX;
    int softmax = kind == TDACL_ATTN_SOFTMAX || kind == TDACL_ATTN_DIFF_SOFTMAX;
    size_t nv = two ? 2 : 1, nw = kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1;
    size_t kfloats = (two && !seqv ? 2 : 1) * (size_t)d * (size_t)bn;
    size_t wvfloats = nw * (size_t)vc * (size_t)bm + (size_t)vc * (size_t)(dv + 4);
    size_t bytes = 4 * (nv * (size_t)d * (size_t)bm + (kfloats > wvfloats ? kfloats : wvfloats));
    if (!softmax) bytes += 4 * (size_t)((bn + 31) / 32);
    else bytes += 4 * nv * (size_t)bm;
    return bytes + 16;
}

static int attention_check(const tdacl_device_info *dev, const tdacl_problem *p, const int *v,
                           char *why, size_t n)
{
    int bm = v[0], bn = v[1], tm = v[2], tn = v[3], vc = v[4], ku = v[5], seqv = v[7];
    if (bm <= 0 || bn <= 0 || tm <= 0 || tn <= 0 || vc <= 0 || ku <= 0)
        return snprintf(why, n, "parameters must be positive"), 1;
    if (tm % 4 || tn % 4) return snprintf(why, n, "TM=%d and TN=%d must be multiples of 4", tm, tn), 1;
    if (bm % tm) return snprintf(why, n, "BM=%d is not a multiple of TM=%d", bm, tm), 1;
    if (bn % tn) return snprintf(why, n, "BN=%d is not a multiple of TN=%d", bn, tn), 1;
    if (bn % vc || vc % 4) return snprintf(why, n, "VC=%d must divide BN=%d and be a multiple of 4", vc, bn), 1;
    if (bn > 128 || bm > 256) return snprintf(why, n, "BM=%d/BN=%d too large", bm, bn), 1;
    if ((p->d / 4) % ku) return snprintf(why, n, "KUNROLL=%d does not divide d/4=%d", ku, p->d / 4), 1;
    if (tm * tn > 128) return snprintf(why, n, "TM*TN=%d registers per work-item is too many", tm * tn), 1;
    int two = p->kind == TDACL_ATTN_TDA || p->kind == TDACL_ATTN_DIFF_SOFTMAX;
    if (seqv && !two) return snprintf(why, n, "SEQV applies to two-view kinds only"), 1;
    int ncg = bn / tn, nt = (bm / tm) * ncg;
    if ((p->dv / 4) % ncg) return snprintf(why, n, "dv/4=%d is not a multiple of BN/TN=%d", p->dv / 4, ncg), 1;
    if ((size_t)nt > dev->max_work_group_size || (size_t)nt > dev->max_work_item_sizes[0])
        return snprintf(why, n, "%d work-items exceed the device's work-group limit %zu", nt, dev->max_work_group_size), 1;
    /* the norm epilogue reduces NCG x BM partial sums through the K region */
    int kviews = two && !seqv ? 2 : 1;
    if ((size_t)ncg * (size_t)bm > (size_t)kviews * (size_t)p->d * (size_t)bn)
        return snprintf(why, n, "BN/TN x BM partial sums do not fit the K region"), 1;
    size_t lb = tdacl__attention_local_bytes(p->kind, p->d, p->dv, bm, bn, vc, seqv);
    if (lb > dev->local_mem_bytes)
        return snprintf(why, n, "needs %zu bytes of local memory, the device has %llu", lb,
                        (unsigned long long)dev->local_mem_bytes), 1;
    return 0;
}

static const tdacl_class_default attention_classes[] = {
    {"nvidia-", TDACL_ATTN_TDA, {{32, 32, 4, 4, 32, 2, 1, 0}}},
    {"nvidia-", TDACL_ATTN_DIFF_SOFTMAX, {{32, 32, 4, 4, 16, 2, 1, 0}}},
    {"nvidia-", -1, {{64, 32, 8, 4, 32, 2, 1, 0}}},
    {"amd-", -1, {{64, 32, 8, 4, 32, 2, 1, 0}}},
    {"pocl-cpu", -1, {{32, 32, 4, 4, 32, 1, 1, 0}}},
    {NULL, -1, {{0}}},
};

static const tdacl_param_values attention_ladder[] = {
    {{64, 32, 8, 4, 32, 1, 1, 0}}, {{32, 32, 4, 4, 32, 1, 1, 0}}, {{32, 32, 4, 4, 16, 1, 1, 0}}, {{32, 16, 4, 4, 16, 1, 1, 0}},
    {{16, 16, 4, 4, 16, 1, 1, 0}}, {{16, 16, 4, 4, 8, 1, 1, 0}}, {{16, 8, 4, 4, 8, 1, 1, 0}}, {{8, 8, 4, 4, 4, 1, 1, 0}},
    {{4, 4, 4, 4, 4, 1, 1, 0}},
};

/* ---- attention (decode), cl/attention_decode.cl ---- */

static const tdacl_tunable decode_params[] = {
    {"NTD", 1, {32, 64, 128, 256, TDACL_END}, "work-items per work-group = keys per staged chunk"},
    {"WAVES", 0, {1, 2, 4, 8, 16, 32, TDACL_END}, "target work-groups per compute unit (sets the split count)"},
};

size_t tdacl__decode_local_bytes(int kind, int d, int dv, int tqp, int ntd)
{
    int two = kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX;
    size_t nv = two ? 2 : 1, nw = kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1;
    /* LIST and KS4 as in cl/attention_decode.cl */
    size_t list = (size_t)ntd * (tqp <= 2 ? 4 : tqp <= 8 ? 2 : 1);
    return nv * (size_t)tqp * (size_t)(d / 4) * 16 + nv * (size_t)ntd * (size_t)(d / 4 + 1) * 16 +
           list * (size_t)tqp * nw * 4 + list * 4 + (size_t)tqp * (size_t)(dv / 4) * 16 + 4 +
           nv * (size_t)tqp * 4 + 16;
}

static int decode_check(const tdacl_device_info *dev, const tdacl_problem *p, const int *v,
                        char *why, size_t n)
{
    int ntd = v[0], waves = v[1];
    if (ntd <= 0 || waves <= 0) return snprintf(why, n, "NTD and WAVES must be positive"), 1;
    if (ntd < p->dv / 4) return snprintf(why, n, "NTD=%d is below dv/4=%d", ntd, p->dv / 4), 1;
    if ((size_t)ntd > dev->max_work_group_size || (size_t)ntd > dev->max_work_item_sizes[0])
        return snprintf(why, n, "NTD=%d exceeds the work-group limit %zu", ntd, dev->max_work_group_size), 1;
    int tqp = 1;
    while (tqp < p->tq) tqp *= 2;
    size_t lb = tdacl__decode_local_bytes(p->kind, p->d, p->dv, tqp, ntd);
    if (lb > dev->local_mem_bytes)
        return snprintf(why, n, "needs %zu bytes of local memory, the device has %llu", lb,
                        (unsigned long long)dev->local_mem_bytes), 1;
    return 0;
}

static const tdacl_class_default decode_classes[] = {
    {"nvidia-", -1, {{128, 8}}},
    {"pocl-cpu", -1, {{64, 4}}},
    {NULL, -1, {{0}}},
};

static const tdacl_param_values decode_ladder[] = {
    {{128, 4}}, {{64, 4}}, {{256, 4}}, {{32, 4}}, {{16, 4}},
};

/* ---- gemm, cl/layers.cl (the model's matmuls) ---- */

static const tdacl_tunable gemm_params[] = {
    {"GBM", 1, {32, 64, 128, TDACL_END}, "rows per work-group"},
    {"GBN", 1, {32, 64, 128, TDACL_END}, "columns per work-group"},
    {"GTM", 1, {4, 8, TDACL_END}, "rows per work-item (multiple of 4)"},
    {"GTN", 1, {4, 8, TDACL_END}, "columns per work-item (multiple of 4)"},
    {"GKC", 1, {8, 16, 32, TDACL_END}, "k-chunk staged in local memory"},
};

static int gemm_check(const tdacl_device_info *dev, const tdacl_problem *p, const int *v, char *why, size_t n)
{
    int bm = v[0], bn = v[1], tm = v[2], tn = v[3], kc = v[4];
    (void)p;
    if (bm <= 0 || bn <= 0 || tm <= 0 || tn <= 0 || kc <= 0) return snprintf(why, n, "parameters must be positive"), 1;
    if (tm % 4 || tn % 4 || kc % 4) return snprintf(why, n, "GTM, GTN and GKC must be multiples of 4"), 1;
    if (bm % tm || bn % tn) return snprintf(why, n, "GBM/GBN must be multiples of GTM/GTN"), 1;
    int nt = (bm / tm) * (bn / tn);
    if ((size_t)nt > dev->max_work_group_size || (size_t)nt > dev->max_work_item_sizes[0])
        return snprintf(why, n, "%d work-items exceed the work-group limit %zu", nt, dev->max_work_group_size), 1;
    size_t lb = (size_t)kc * (size_t)(bm + bn) * 4;
    if (lb > dev->local_mem_bytes) return snprintf(why, n, "needs %zu bytes of local memory", lb), 1;
    return 0;
}

static const tdacl_class_default gemm_classes[] = {
    {"nvidia-", -1, {{128, 128, 8, 8, 16}}},
    {"amd-", -1, {{128, 128, 8, 8, 16}}},
    {"pocl-cpu", -1, {{32, 32, 4, 4, 16}}},
    {NULL, -1, {{0}}},
};

static const tdacl_param_values gemm_ladder[] = {
    {{64, 64, 4, 4, 16}}, {{32, 32, 4, 4, 16}}, {{16, 16, 4, 4, 8}}, {{8, 8, 4, 4, 4}}, {{4, 4, 4, 4, 4}},
};

static const tdacl_kernel_space spaces[] = {
    {"attention", attention_params, 8, attention_check, attention_classes, attention_ladder,
     (int)TDACL_ARRAY_LEN(attention_ladder)},
    {"attention_decode", decode_params, 2, decode_check, decode_classes, decode_ladder,
     (int)TDACL_ARRAY_LEN(decode_ladder)},
    {"gemm", gemm_params, 5, gemm_check, gemm_classes, gemm_ladder, (int)TDACL_ARRAY_LEN(gemm_ladder)},
};

const tdacl_kernel_space *tdacl__kernel_space(const char *kernel)
{
    for (size_t i = 0; i < TDACL_ARRAY_LEN(spaces); i++)
        if (!strcmp(spaces[i].kernel, kernel)) return &spaces[i];
    return NULL;
}

const tdacl_kernel_space *tdacl__kernel_space_at(int i)
{
    return i >= 0 && i < (int)TDACL_ARRAY_LEN(spaces) ? &spaces[i] : NULL;
}
