/* Checkpoints: config.json + safetensors (single file or shards with an index), parsed with
 * cJSON, memory-mapped, and checked tensor by tensor against the config before anything is
 * allocated on the device.  Also writes checkpoints with seeded random weights. */
#ifndef TDACL_CHECKPOINT_H
#define TDACL_CHECKPOINT_H

#include "internal.h"

/* config.json, GPT-2 keys plus the threshold-attention extensions of SPEC section 3. */
typedef struct tdacl_model_config {
    int n_layer, n_head, n_embd, vocab_size, n_positions;
    float layer_norm_epsilon;
    int norm_type;              /* 0 LayerNorm (weight, bias), 1 RMSNorm (weight only): "norm_type" */
    tdacl_attention_kind attn_kind;
    float beta, kappa, power;   /* attention object defaults (beta also per layer) */
    tdacl_head_norm head_norm;
    tdacl_position_kind position;
    float rope_theta;
    float rope_ntk_factor;      /* NTK-aware scaling factor (1 = none): "rope_scaling" */
    int tie_word_embeddings;    /* resolved from the file: 1 when lm_head.weight is absent */
} tdacl_model_config;

/* One tensor of the checkpoint, as stored in its file. */
typedef struct tdacl_ckpt_tensor {
    char name[128];             /* canonical name, without any "transformer." prefix */
    tdacl_dtype dtype;          /* F32, BF16 or F16 */
    int ndim;
    int64_t shape[4];
    const void *data;           /* inside the memory map */
    size_t nbytes;
    const char *file;           /* the shard it lives in */
} tdacl_ckpt_tensor;

typedef struct tdacl_checkpoint tdacl_checkpoint;

/* Parses config.json and every safetensors file of dir, validates each header (lengths,
 * offsets, dtypes, shape products, overlaps, gaps, trailing bytes) and then the full tensor
 * list against the config (SPEC section 3 names, GPT-2 Conv1D [in, out] layout).  Never
 * allocates more than a file's size on a bad header.  Errors: TDACL_ERR_FORMAT / IO with a
 * message naming the file and, where there is one, the tensor. */
tdacl_status tdacl__checkpoint_open(const char *dir, tdacl_checkpoint **out);
const tdacl_model_config *tdacl__checkpoint_config(const tdacl_checkpoint *c);
/* Tensor by canonical name ("h.0.attn.c_attn.weight", "wte.weight"); NULL if absent. */
const tdacl_ckpt_tensor *tdacl__checkpoint_get(const tdacl_checkpoint *c, const char *name);
void tdacl__checkpoint_close(tdacl_checkpoint *c);

/* Parsers of single inputs, exposed for tests and fuzzing: a config.json text and a
 * safetensors file image (header validation only needs the bytes). */
tdacl_status tdacl__config_parse(const char *text, size_t len, const char *name, tdacl_model_config *cfg);
/* Validates a safetensors image and lists its tensors (malloc'ed array; free with free()). */
tdacl_status tdacl__safetensors_parse(const unsigned char *buf, size_t len, const char *name,
                                      tdacl_ckpt_tensor **tensors, int *count);

/* Writes dir/config.json and dir/model.safetensors with N(0, 0.02) weights (ones for norm
 * gains, zeros for biases, beta=1 and lambda=0.5 scalars), deterministic in seed; weights
 * stored in `dtype`.  `config_json` is the text of a config.json. */
tdacl_status tdacl__checkpoint_write_random(const char *dir, const char *config_json, uint64_t seed,
                                            tdacl_dtype dtype);

#endif
