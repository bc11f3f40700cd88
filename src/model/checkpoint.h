/* Checkpoints: config.json + safetensors (single file or shards with an index), parsed with
 * cJSON, memory-mapped, and checked tensor by tensor against the config before anything is
 * allocated on the device.  Also writes checkpoints with seeded random weights. */
#ifndef TDACL_CHECKPOINT_H
#define TDACL_CHECKPOINT_H

#include "runtime/runtime.h"

/* config.json, GPT-2 keys plus the threshold-attention extensions of docs/spec.md section 4. */
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
    int tie_word_embeddings;    /* resolved from the file: 1 when lm_head.weight is absent.
                                   tdacl__config_parse leaves -1 unless config.json sets
                                   "tie_word_embeddings" (true: lm_head.weight is ignored;
                                   false: it is required) */
    int head_dim;               /* n_embd / n_head */
    int has_attention;          /* 1 when config.json has an "attention" object */
    /* topk_theta: the threshold file (a path relative to the model directory; "" when the
     * config names none), the SDC mode (a tdacl_sdc), its gamma and VMC */
    char thresholds[256];
    int sdc, vmc;
    float sdc_gamma;
    /* entmax: alpha and the inverse temperature's delta, beta, gamma (per-layer and per-head
     * tensors replace them) */
    float alpha, temp_delta, temp_beta, temp_gamma;
} tdacl_model_config;

/* Column blocks of c_attn: 5 ([q1|k1|q2|k2|v]) for tda and diff_softmax, else 3. */
int tdacl__config_qkv_blocks(const tdacl_model_config *cfg);

/* One tensor of the checkpoint, as stored in its file. */
typedef struct tdacl_ckpt_tensor {
    char name[128];             /* canonical name, without any "transformer." prefix */
    tdacl_dtype dtype;          /* F32, BF16 or F16 */
    int ndim;
    int64_t shape[4];
    const void *data;           /* inside the memory map; NOT aligned to the element size
                                   (the JSON header has any length): read with memcpy */
    size_t nbytes;
    const char *file;           /* the shard it lives in */
    char dtype_name[12];        /* dtype as the file names it ("F32", "I64", "BOOL", ...) */
    int dtype_ok;               /* dtype_name is F32, BF16 or F16 and `dtype` holds it.  Only
                                   tensors tdacl ignores (GPT-2's attn.bias buffers) can be
                                   0 in an opened checkpoint. */
} tdacl_ckpt_tensor;

/* One tensor docs/spec.md section 4 requires of a config: the checkpoint reader checks against the
 * list, the random writer writes it. */
typedef enum tdacl_ckpt_init {
    TDACL_INIT_NORMAL, /* N(0, 0.02): embeddings and linear weights */
    TDACL_INIT_ONES,   /* norm gains, head_norm.weight */
    TDACL_INIT_ZEROS,  /* biases */
    TDACL_INIT_BETA,   /* the config's attention beta */
    TDACL_INIT_LAMBDA, /* 0.5 */
    TDACL_INIT_ALPHA,  /* the config's entmax alpha */
    TDACL_INIT_TEMP_DELTA, TDACL_INIT_TEMP_BETA, TDACL_INIT_TEMP_GAMMA /* the config's temperature terms */
} tdacl_ckpt_init;

typedef struct tdacl_ckpt_spec {
    char name[64];
    int ndim;
    int64_t shape[2];
    int scalar;         /* 0: exactly `shape`; 1: [] or [1]; 2: [], [1] or [n_head] */
    int optional;       /* 1: may be absent, not written (lm_head.weight when tied); 2: may be
                           absent, written with its init (entmax's alpha and temperature) */
    tdacl_ckpt_init init;
    char why[48];       /* what requires it, for messages ("attention kind tda"); "" when nothing */
} tdacl_ckpt_spec;

/* The tensors a (parsed, valid) config requires, in file order: wte, wpe, h.0 ... h.L-1,
 * ln_f, then lm_head.weight (optional) when the config does not force tying.
 * Malloc'ed array; free with free(). */
tdacl_status tdacl__config_tensors(const tdacl_model_config *cfg, tdacl_ckpt_spec **specs, int *count);

typedef struct tdacl_checkpoint tdacl_checkpoint;

/* Parses config.json and every safetensors file of dir, validates each header (lengths,
 * offsets, dtypes, shape products, overlaps, gaps, trailing bytes) and then the full tensor
 * list against the config (docs/spec.md section 4 names, GPT-2 Conv1D [in, out] layout).  Never
 * allocates more than a file's size on a bad header.  Errors, each with a message naming the
 * file and, where there is one, the tensor or key: TDACL_ERR_IO (a file is missing or
 * unreadable), TDACL_ERR_FORMAT (malformed file, missing tensor, bad config value),
 * TDACL_ERR_SHAPE (a tensor's shape differs from the config's), TDACL_ERR_DTYPE (a tensor
 * the model uses is not F32/BF16/F16), TDACL_ERR_UNSUPPORTED (a config feature the forward
 * pass lacks: activation, n_inner, rope_scaling type). */
tdacl_status tdacl__checkpoint_open(const char *dir, tdacl_checkpoint **out);
const tdacl_model_config *tdacl__checkpoint_config(const tdacl_checkpoint *c);
/* Tensor by canonical name ("h.0.attn.c_attn.weight", "wte.weight"); NULL if absent. */
const tdacl_ckpt_tensor *tdacl__checkpoint_get(const tdacl_checkpoint *c, const char *name);
/* Elements of the tensors the model uses (every tensor of tdacl__config_tensors present in
 * the files; not wpe under rope, not lm_head.weight when tied, not ignored buffers). */
uint64_t tdacl__checkpoint_parameters(const tdacl_checkpoint *c);
/* The checkpoint's directory as given to tdacl__checkpoint_open. */
const char *tdacl__checkpoint_dir(const tdacl_checkpoint *c);
void tdacl__checkpoint_close(tdacl_checkpoint *c);

/* Parsers of single inputs, exposed for tests and fuzzing: a config.json text and a
 * safetensors file image (header validation only needs the bytes). */
tdacl_status tdacl__config_parse(const char *text, size_t len, const char *name, tdacl_model_config *cfg);
/* Validates a safetensors image and lists its tensors in offset order (malloc'ed array;
 * free with free(); `file` of each points at `name`).  Every dtype of the safetensors
 * format is accepted structurally (sizes are checked); those other than F32/BF16/F16 get
 * dtype_ok = 0 so that checkpoint_open can ignore buffers such as a U8 attn.bias and refuse
 * them only where the model needs the tensor.  A dtype the format does not define is
 * TDACL_ERR_FORMAT. */
tdacl_status tdacl__safetensors_parse(const unsigned char *buf, size_t len, const char *name,
                                      tdacl_ckpt_tensor **tensors, int *count);

/* Writes dir/config.json and dir/model.safetensors with N(0, 0.02) weights (ones for norm
 * gains, zeros for biases, beta=1 and lambda=0.5 scalars), deterministic in seed; weights
 * stored in `dtype`.  `config_json` is the text of a config.json. */
tdacl_status tdacl__checkpoint_write_random(const char *dir, const char *config_json, uint64_t seed,
                                            tdacl_dtype dtype);

#endif
