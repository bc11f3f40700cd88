/* A whole decode layer in one launch (cl/decode_layer.cl): the persistent kernel whose
 * work-groups meet at grid barriers (decode_layer.persistent), and its steps in a launch
 * each (decode_layer.phased: the portable body tests run), the rows of TDACL_OP_DECODE_LAYER. */
#ifndef TDACL_DECODE_LAYER_H
#define TDACL_DECODE_LAYER_H

#include "ops/variants.h"

#define TDACL_DECODE_LAYER_WG 256       /* cl/decode_layer.cl DL_WG, unless $TDACL_DECODE_WG says otherwise */
#define TDACL_DECODE_LAYER_MAX_SPLIT 1024 /* keys of an attention unit at most */

/* One layer of a decode step.  The model fills every field; the row checks the shape. */
typedef struct tdacl_decode_layer_call {
    /* what the model is: the kernel runs LayerNorm/RMSNorm, learned positions, softmax
     * attention with one q/k view and no head norm, GELU */
    tdacl_attention_kind kind;
    int rope, views, head_norm, rms;
    tdacl_dtype wdt, adt;
    int M, C, H, d;        /* rows (<= 8), width, heads, head size */
    int pos;               /* the rows' position (rowmap NULL) */
    int64_t cache_ld;      /* elements from one sequence's cache rows to the next */
    float eps, scale;
    int nsplit, split_len; /* attention key splits (tdacl__decode_layer_splits) */
    int groups;            /* work-groups (tdacl__decode_layer_groups) */
    int wg;                /* work-items a work-group (tdacl__decode_layer_wg) */
    int astage;            /* fp32 elements of the activation rows' local copy (tdacl__decode_layer_astage) */
    uint32_t bar_base;     /* the barrier counter's value at the launch */
    cl_mem x, xmid, qkv, att, hid, scratch, sync, rowmap;
    cl_mem ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b, kc, vc;
    /* the first layer may embed the rows itself, x = wte[tokens[m]] + wpe[position] (-DDL_EMBED;
     * only where M * C <= astage); tokens NULL: x holds the rows */
    cl_mem tokens, wte, wpe;
    /* n_layer > 1 (the persistent row only): the whole stack in the launch (-DDL_LAYERS) from
     * the packed layers (src/model/model_pack.c), the per-layer tensors above unused: layer l's
     * weight tensor i at byte l * lay[12] + lay[i] of warena (lay[i] < 0: absent), its K and V
     * caches at l * lay[15] + lay[13] and + lay[14] of carena */
    int n_layer;
    cl_mem warena, carena;
    int64_t lay[16];
} tdacl_decode_layer_call;

/* Work-groups of a launch of `row`: the persistent kernel's, one per compute unit on NVIDIA
 * GPUs (all resident at once) and one elsewhere (where nothing promises that two run at
 * once); the phased steps', one per compute unit; $TDACL_DECODE_GROUPS (1..65536) instead. */
tdacl_status tdacl__decode_layer_groups(tdacl_context *ctx, const tdacl_variant_def *row, int *groups);
/* Work-items a work-group: TDACL_DECODE_LAYER_WG, or $TDACL_DECODE_WG (a power of two 64..1024:
 * trying a device; the Oclgrind tests take 64, which the simulator runs four times faster).
 * Returns 0, or -1 when the variable is set to anything else (*wg then holds the default). */
int tdacl__decode_layer_wg(int *wg);
/* Key splits of M rows of H heads over `keys` keys: about one unit per work-group, at most
 * TDACL_DECODE_LAYER_MAX_SPLIT keys a split. */
void tdacl__decode_layer_splits(int groups, int M, int H, int keys, int *nsplit, int *split_len);
/* fp32 elements of the kernel's local copy of the GEMVs' activation rows (-DDL_AST) for M rows
 * and wg work-items on the context's device: what its local memory holds beside the kernel's
 * other arrays, at most 4096 at M = 1 and 8192 above (a step whose rows exceed it reads them
 * from global memory) */
int tdacl__decode_layer_astage(const tdacl_context *ctx, int M, int wg);

/* Grid barriers a launch of `row` over n_layer layers passes (the host advances bar_base by
 * this times groups): five a layer less one, or none (the phased row) */
int tdacl__decode_layer_barriers(const tdacl_variant_def *row, int n_layer);
/* Floats of the attention scratch for nsplit splits of M rows and H heads of size d. */
size_t tdacl__decode_layer_scratch(int M, int H, int d, int nsplit);

int tdacl__decode_layer_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
void tdacl__decode_layer_call_options(const void *call, tdacl_strbuf *sb);
tdacl_status tdacl__decode_layer_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                        const tdacl_param_values *v);
int tdacl__decode_layer_phased_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
tdacl_status tdacl__decode_layer_phased_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                               const tdacl_param_values *v);

#endif
