/* The tunable parameters of every kernel, in one place: search space, constraints (a
 * predicate mirroring the kernel's local-memory layout), device-class defaults and the
 * generic ladder that is correct everywhere. */
#include <stdio.h>
#include <string.h>

#include "tuning.h"

/* ---- attention (prefill), cl/attention.cl ---- */

static const tdacl_tunable attention_params[] = {
    {"BM", 1, {8, 16, 32, 64, 128, 0}, "query rows per work-group"},
    {"BN", 1, {8, 16, 32, 64, 0}, "keys per tile"},
    {"TM", 1, {1, 2, 4, 8, 0}, "query rows per work-item"},
    {"TN", 1, {1, 2, 4, 8, 0}, "keys per work-item in the score tile"},
};

/* Local memory of attention_fwd in bytes, mirroring the declarations in cl/attention.cl. */
size_t tdacl__attention_local_bytes(int kind, int d, int dv, int bm, int bn, int tm, int tn)
{
    int two = kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX;
    int softmax = kind == TDACL_ATTN_SOFTMAX || kind == TDACL_ATTN_DIFF_SOFTMAX;
    int sparse = !softmax;
    size_t nv = two ? 2 : 1, qs4 = (size_t)d / 4 + 1, vs4 = (size_t)dv / 4 + 1;
    size_t kv = (size_t)bn * qs4 * nv > (size_t)bn * vs4 ? (size_t)bn * qs4 * nv : (size_t)bn * vs4;
    size_t bytes = (size_t)bm * qs4 * nv * 16 + kv * 16;
    bytes += (size_t)bm * (size_t)(bn + 8) * (kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1) * 4;
    if (sparse) bytes += 4 * (size_t)((bn + 31) / 32);
    if (softmax) bytes += (size_t)(kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1) * (size_t)bm * 4;
    bytes += (size_t)(bn / (tn ? tn : 1)) * (size_t)bm * 4 + 16;
    (void)tm;
    return bytes;
}

static int attention_check(const tdacl_device_info *dev, const tdacl_problem *p, const int *v,
                           char *why, size_t n)
{
    int bm = v[0], bn = v[1], tm = v[2], tn = v[3];
    if (bm <= 0 || bn <= 0 || tm <= 0 || tn <= 0) return snprintf(why, n, "tile sizes must be positive"), 1;
    if (bm % tm) return snprintf(why, n, "BM=%d is not a multiple of TM=%d", bm, tm), 1;
    if (bn % tn) return snprintf(why, n, "BN=%d is not a multiple of TN=%d", bn, tn), 1;
    if (bn % 4) return snprintf(why, n, "BN=%d is not a multiple of 4", bn), 1;
    if (bn > 128 || bm > 256) return snprintf(why, n, "BM=%d/BN=%d too large", bm, bn), 1;
    if (tm * tn > 128) return snprintf(why, n, "TM*TN=%d registers per work-item is too many", tm * tn), 1;
    int ncg = bn / tn, nt = (bm / tm) * ncg;
    if ((p->dv / 4) % ncg) return snprintf(why, n, "dv/4=%d is not a multiple of BN/TN=%d", p->dv / 4, ncg), 1;
    if ((size_t)nt > dev->max_work_group_size || (size_t)nt > dev->max_work_item_sizes[0])
        return snprintf(why, n, "%d work-items exceed the device's work-group limit %zu", nt, dev->max_work_group_size), 1;
    size_t lb = tdacl__attention_local_bytes(p->kind, p->d, p->dv, bm, bn, tm, tn);
    if (lb > dev->local_mem_bytes)
        return snprintf(why, n, "needs %zu bytes of local memory, the device has %llu", lb,
                        (unsigned long long)dev->local_mem_bytes), 1;
    return 0;
}

static const tdacl_class_default attention_classes[] = {
    {"nvidia-", TDACL_ATTN_TDA, {{32, 32, 4, 4}}},
    {"nvidia-", TDACL_ATTN_DIFF_SOFTMAX, {{32, 16, 4, 4}}},
    {"nvidia-", -1, {{64, 32, 8, 4}}},
    {"amd-", -1, {{64, 32, 8, 4}}},
    {"pocl-cpu", -1, {{32, 32, 4, 4}}},
    {NULL, -1, {{0}}},
};

static const tdacl_param_values attention_ladder[] = {
    {{64, 32, 8, 4}}, {{32, 32, 4, 4}}, {{32, 16, 4, 4}}, {{16, 16, 4, 4}}, {{16, 16, 2, 4}},
    {{8, 8, 2, 2}}, {{8, 4, 2, 1}}, {{4, 4, 1, 1}},
};

/* ---- attention (decode), cl/attention_decode.cl ---- */

static const tdacl_tunable decode_params[] = {
    {"NTD", 1, {32, 64, 128, 256, 0}, "work-items per work-group = keys per chunk"},
    {"WAVES", 0, {1, 2, 4, 8, 16, 32, 0}, "target work-groups per compute unit (sets the split count)"},
};

size_t tdacl__decode_local_bytes(int kind, int d, int dv, int tqp, int ntd)
{
    int two = kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX;
    size_t nv = two ? 2 : 1, nw = kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1;
    size_t d4 = (size_t)d / 4, ks = nv * (size_t)ntd * (d4 + 1);
    if ((size_t)ntd * (size_t)tqp > ks) ks = (size_t)ntd * (size_t)tqp;
    (void)dv;
    return nv * (size_t)tqp * d4 * 16 + ks * 16 + (size_t)ntd * (size_t)tqp * nw * 4 +
           (size_t)ntd * 4 + 4 + nv * (size_t)tqp * 4 + 16;
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

static const tdacl_kernel_space spaces[] = {
    {"attention", attention_params, 4, attention_check, attention_classes, attention_ladder,
     (int)TDACL_ARRAY_LEN(attention_ladder)},
    {"attention_decode", decode_params, 2, decode_check, decode_classes, decode_ladder,
     (int)TDACL_ARRAY_LEN(decode_ladder)},
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
