/* One row per attention kind (docs/spec.md section 2 gives the math of each). */
#include <stdio.h>
#include <string.h>

#include "base/kinds.h"

static const tdacl_kind_info kinds[] = {
    /* kind                   name            views sets softmax thr  pow  lam  clamp cosine view_kind            fields */
    {TDACL_ATTN_SOFTMAX,      "softmax",      1,    1,   1,      0,   0,   0,   0,    0,     -1,                  ""},
    {TDACL_ATTN_RELA,         "rela",         1,    1,   0,      0,   0,   0,   0,    0,     -1,                  ""},
    {TDACL_ATTN_TRA,          "tra",          1,    1,   0,      1,   1,   0,   0,    1,     -1,                  "beta kappa power normalize"},
    {TDACL_ATTN_TDA,          "tda",          2,    1,   0,      1,   1,   1,   1,    1,     TDACL_ATTN_TRA,      "beta kappa power normalize lambda"},
    {TDACL_ATTN_DIFF_SOFTMAX, "diff_softmax", 2,    2,   1,      0,   0,   1,   0,    0,     TDACL_ATTN_SOFTMAX,  "lambda"},
    {TDACL_ATTN_ENTMAX,       "entmax",       1,    1,   0,      0,   0,   0,   0,    0,     -1,                  "alpha temp_delta temp_beta temp_gamma"},
    {TDACL_ATTN_TOPK_THETA,   "topk_theta",   1,    1,   0,      0,   0,   0,   0,    0,     -1,                  "theta_post sdc sdc_gamma vmc"},
};

const tdacl_kind_info *tdacl__kind(int kind)
{
    for (size_t i = 0; i < TDACL_ARRAY_LEN(kinds); i++)
        if ((int)kinds[i].kind == kind) return &kinds[i];
    return NULL;
}

const char *tdacl__kind_name(int kind)
{
    const tdacl_kind_info *k = tdacl__kind(kind);
    return k ? k->name : kind == -1 ? "any" : "?";
}

int tdacl__kind_from_name(const char *s)
{
    for (size_t i = 0; s && i < TDACL_ARRAY_LEN(kinds); i++)
        if (!strcmp(s, kinds[i].name)) return (int)kinds[i].kind;
    return -2;
}

void tdacl__kind_names(char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < TDACL_ARRAY_LEN(kinds) && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "", kinds[i].name);
}

const char *tdacl_attention_kind_name(tdacl_attention_kind kind)
{
    const tdacl_kind_info *k = tdacl__kind((int)kind);
    return k ? k->name : NULL;
}

tdacl_status tdacl_attention_kind_from_name(const char *name, tdacl_attention_kind *kind)
{
    const char *call = "tdacl_attention_kind_from_name";
    if (!name || !kind) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, !name ? "name" : "kind");
    int k = tdacl__kind_from_name(name);
    char names[128];
    tdacl__kind_names(names, sizeof names);
    if (k < 0)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: no attention kind is named '%.64s' (kinds: %s)", call, name, names);
    *kind = (tdacl_attention_kind)k;
    return TDACL_SUCCESS;
}
