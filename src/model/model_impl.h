/* The model handle's state, shared by the files of src/model/: model.c (loading, the forward
 * pass), model_steps.c (prefill, decode steps, sequences in slots, logits) and
 * model_sample.c (sampling on the device and on the host). */
#ifndef TDACL_MODEL_IMPL_H
#define TDACL_MODEL_IMPL_H

#include "model/checkpoint.h"
#include "ops/attention.h"

enum { ROWMAP_RING = 4 };

typedef struct layer {
    tdacl_tensor *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    tdacl_tensor *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
    tdacl_tensor *head_norm; /* [d] or NULL */
    tdacl_tensor *lambdas;   /* [H] (two-view kinds) or NULL */
    float beta;
    float alpha;             /* entmax */
    tdacl_tensor *temps;     /* entmax: [H, 3] (delta, beta, gamma) per head */
    tdacl_tensor *thresholds, *log_mass; /* topk_theta: [H, R] (log_mass: offline SDC, or NULL) */
    tdacl_tensor *v_sum;     /* topk_theta with VMC: [B, C] fp32 running sum of each slot's V rows */
    tdacl_tensor *kcache, *k2cache, *vcache; /* [B, ctx, C] in the activation dtype */
} layer;

/* Called before each layer's attention of a prefill (tdacl_model_calibrate): qkv holds the
 * layer's projections, RoPE applied, for B sequences of T tokens. */
/* A layer's checkpoint tensors h.<l>.<suffix> (model_pack.c): matrices in the weight dtype,
 * vectors in f32; the first TDACL_PACKED_PARTS are packed for the one-launch token, then the
 * head norm; the caches are the parts after the table. */
enum { TDACL_PART_ALWAYS, TDACL_PART_LAYERNORM, TDACL_PART_HEAD_NORM };
enum { TDACL_PACKED_PARTS = 12, TDACL_LAYER_PARTS = 13, TDACL_PART_KCACHE = 13, TDACL_PART_VCACHE = 14 };
typedef struct tdacl_layer_part {
    size_t at; /* offsetof(layer, ...) */
    const char *suffix;
    int matrix, when; /* when: ALWAYS, only with LayerNorm, only with an RMS head norm */
} tdacl_layer_part;
extern const tdacl_layer_part tdacl__layer_parts[TDACL_LAYER_PARTS];

typedef tdacl_status (*tdacl_attention_hook)(tdacl_model *m, int layer, int B, int T, void *user);

struct tdacl_model {
    tdacl_context *ctx;
    int warned_nonfinite;
    tdacl_model_config cfg;
    tdacl_model_info info;
    tdacl_attention_kind kind; /* what the layers run: the config's, or topk_theta with desc.thresholds */
    int theta_post, vmc;       /* topk_theta, from the threshold file and the config / desc */
    tdacl_sdc sdc;
    float sdc_gamma;
    tdacl_attention_hook hook;
    void *hook_user;
    int warned_rows;           /* the per-sequence decode fallback was logged */
    tdacl_dtype wdt, adt; /* weights; activations between kernels and the KV cache */
    int C, H, d, kqkv; /* kqkv: width of the fused projection in units of C */
    tdacl_tensor *wte, *wpe, *lnf_w, *lnf_b, *lm_head;
    layer *layers;
    cl_mem rope_cos, rope_sin; /* [ctx, d/2] */
    /* activations, grown on demand to `rows` rows */
    int64_t rows_cap;
    tdacl_tensor *x, *xn, *qkv, *att, *hid, *last, *logits;
    tdacl_tensor *inv_norm[4]; /* a prefill's inverse norms of q, k (q2, k2) rows from RoPE, [rows * H] each */
    int64_t logits_cap;
    cl_mem tokens;
    int64_t tokens_cap;
    /* state: the sequence of each KV cache slot (slot_len[s] tokens, 0: empty); the last
     * call's logits are [batch, logit_rows, vocab] */
    int *slot_len;
    int batch, logit_rows;
    /* a decode step's (slot, position) per row when they are not 0..B-1 at one position:
     * written to `rowmap` from a ring of host copies, each left alone until its write is done */
    cl_mem rowmap;
    int32_t *rowmap_host; /* ROWMAP_RING copies of 2 * max_batch */
    cl_event rowmap_ev[ROWMAP_RING];
    int rowmap_next;
    /* device sampling: `tokens` holds the last draw (drawn_on_device), copied without waiting
     * into `drawn` (drawn_ev marks the copy's end) */
    int drawn_on_device;
    int32_t *drawn;
    cl_event drawn_ev;
    cl_command_queue read_queue; /* the copies into `drawn` (model_sample.c) */
    int greedy_ready; /* the last head's GEMV left each sequence's greedy pick in `tokens` */
    int head_logged;  /* the head's path was logged */
    /* the decode layer in one launch (model_decode.c): its grid barrier's counter and error
     * word (dl_sync), the residual between its halves, the attention's split partials; the
     * counter's value on the host; the error word's last read (dl_flag_ev: not yet seen) */
    cl_mem dl_sync, dl_xmid, dl_scratch;
    size_t dl_scratch_floats;
    uint32_t dl_bar;
    cl_uint dl_flag;
    cl_event dl_flag_ev;
    int dl_unread; /* steps since the error word's last read was issued */
    int dl_logged; /* the choice of decode path was logged */
    /* the layers packed (model_pack.c; NULL arenas: not): part i of layer l at byte
     * l * wstride + wlay[i] of warena (-1: absent), its K and V caches at (2l + 0 or 1) *
     * cache_bytes of carena */
    cl_mem warena, carena;
    int64_t wlay[TDACL_PACKED_PARTS], wstride, cache_bytes;
    unsigned char *wimage; /* while loading: warena's contents on the host */
};

/* The whole stack for B sequences of T new tokens at positions pos0 ... pos0 + T - 1 in cache
 * slots slot0 ..; or (kv, T = 1) a decode step whose row b extends slot kv->host[2b] at
 * position kv->host[2b + 1], pos0 the largest of those.  tokens NULL: the ids in m->tokens
 * (the last device draw).  The final norm and LM head run on every row, or on the last row
 * of each sequence. */
tdacl_status tdacl__model_forward(tdacl_model *m, int B, int T, int pos0, int slot0, const tdacl_kv_rows *kv,
                                  const int32_t *tokens, int last_only);
/* x = the embeddings of the `tokens` buffer's rows (B sequences of T tokens from pos0, or at
 * kv's positions). */
tdacl_status tdacl__model_embed(tdacl_model *m, int rows, int T, int pos0, const tdacl_kv_rows *kv);
/* The embedding and the layers of a decode step of B <= 8 rows at position pos (or kv's) in
 * one launch a layer (src/ops/decode_layer.h; the first embeds the rows), when the model and
 * device allow it; *taken = 0 otherwise, and nothing ran (the debug log says why, once). */
tdacl_status tdacl__model_decode_layers(tdacl_model *m, int B, int pos, const tdacl_kv_rows *kv, int *taken);
/* The decode layer's error word, read back (wait: block until the last read lands): an error
 * when a grid barrier gave up.  Releases the decode layer's buffers with release. */
tdacl_status tdacl__model_decode_check(tdacl_model *m, int wait);
void tdacl__model_decode_release(tdacl_model *m);
/* Part `part` of the layers' table is present in this model (LayerNorm biases, head norm). */
int tdacl__layer_part_present(const tdacl_model *m, int part);
/* Lays out the arenas of the packed layers from the checkpoint's shapes and allocates them,
 * when every layer's tensors have the same sizes and the arenas fit one allocation (else the
 * debug log says why and the tensors get buffers of their own). */
tdacl_status tdacl__model_pack_plan(tdacl_model *m, const tdacl_checkpoint *ck);
/* Part `part` (or TDACL_PART_KCACHE / _VCACHE) of layer l: in its arena when packed. */
tdacl_status tdacl__model_part_create(tdacl_model *m, int l, int part, tdacl_dtype dt, int nd, const int64_t *shape,
                                      tdacl_tensor **out);
/* While loading packed layers: n elements of data (dtype data_dt) into the host image of
 * warena as part `part` of layer l in dtype dt; 0 (nothing done) when that part is not packed. */
int tdacl__model_part_staged(tdacl_model *m, int l, int part, tdacl_dtype dt, const void *data, tdacl_dtype data_dt,
                             int64_t n);
/* The packed layers' host image into warena, in one write (then freed). */
tdacl_status tdacl__model_pack_upload(tdacl_model *m);
/* The packed layers' byte offsets as cl/decode_layer.cl's DL_LAYERS takes them
 * (tdacl_decode_layer_call.lay): the weight parts, their layer stride, K, V, the caches' stride. */
void tdacl__model_pack_layout(const tdacl_model *m, int64_t lay[16]);
/* Releases the arenas (after the tensors in them). */
void tdacl__model_pack_release(tdacl_model *m);
/* Before a write to `tokens` on the context's queue: that queue waits for the copy of the last
 * draw (on the model's read queue) to finish reading it. */
tdacl_status tdacl__model_tokens_guard(tdacl_model *m);
/* A kernel of cl/layers.cl built for the model's weight dtype (and extra options). */
tdacl_status tdacl__model_layers_kernel(tdacl_model *m, const char *name, const char *extra, cl_kernel *k);

#endif
