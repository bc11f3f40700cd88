/* Plain double-precision reference forward pass of the GPT-family decoder of SPEC.md
 * section 3 (with the attention kinds of section 1), in the spirit of karpathy's llm.c:
 * one function per layer, shapes in comments, no tiling, no KV cache, no cleverness.  It
 * is the oracle of tests/test_model.c, so it is slow on purpose and shares no code with
 * src/model/ or cl/.
 *
 * Usage: gpt_ref_load() copies every weight of an open checkpoint into doubles (so a test
 * may also perturb them), gpt_ref_forward() runs one token sequence from position 0 and
 * returns the logits of every position.
 *
 * Choices where SPEC.md is silent (also noted in gpt_ref.c where they are used):
 *  - the per-head rms Norm uses eps = 1e-5 (docs/spec.md section 1's default), not
 *    layer_norm_epsilon; LayerNorm / RMSNorm of ln_1, ln_2, ln_f use layer_norm_epsilon;
 *  - the same norm_type is used for ln_1, ln_2 and ln_f; RMSNorm has no bias;
 *  - h.N.attn.beta, when present, replaces the config's attention.beta for layer N; when
 *    absent the config's beta applies;
 *  - h.N.attn.lambda is required for two-view kinds; a scalar applies to every head;
 *  - a missing linear bias (c_attn, c_proj, c_fc, mlp.c_proj) counts as zeros;
 *  - in a model tra / tda always L2-normalise q and k (there is no switch) and use scale 1;
 *    softmax, rela and diff_softmax use 1/sqrt(d); rela ignores power (max(s, 0));
 *  - no output factor (the Diff Transformer's 1 - lambda_init) is applied;
 *  - RoPE positions are the absolute token positions from 0; the NTK factor raises the
 *    base once (static, not "dynamic" NTK); rope models have no position limit.
 */
#ifndef TDACL_TESTS_GPT_REF_H
#define TDACL_TESTS_GPT_REF_H

#include <stdint.h>

#include "model/checkpoint.h" /* tdacl_checkpoint, tdacl_model_config */
#include "tdacl.h"

/* The weights of one transformer block, C = n_embd, d = head_dim, NQ = 3 or 5 column
 * groups of c_attn (5 for tda / diff_softmax). */
typedef struct gpt_ref_layer {
    double *ln_1_w;      /* [C] */
    double *ln_1_b;      /* [C] or NULL (RMSNorm) */
    double *c_attn_w;    /* [C, NQ*C] Conv1D [in, out]: y = x @ W + b */
    double *c_attn_b;    /* [NQ*C] or NULL (zeros) */
    double *attn_proj_w; /* [C, C] */
    double *attn_proj_b; /* [C] or NULL */
    double *ln_2_w;      /* [C] */
    double *ln_2_b;      /* [C] or NULL */
    double *fc_w;        /* [C, 4C] */
    double *fc_b;        /* [4C] or NULL */
    double *mlp_proj_w;  /* [4C, C] */
    double *mlp_proj_b;  /* [C] or NULL */
    double beta;         /* threshold scale of this layer (tra / tda) */
    double *lambda;      /* [n_head] differential weight (as stored; tda clamps it) */
    double *head_norm_w; /* [d] gain of the per-head rms Norm, or NULL */
    /* entmax: alpha (h.N.attn.entmax_alpha, else the config's) and temps [n_head][3]
     * (delta, beta, gamma: h.N.attn.entmax_delta/_beta/_gamma, else the config's) */
    double alpha;
    double *temps;
    /* topk_theta: thresholds [n_head][nthr] and the offline SDC table (or NULL), set by the
     * test (they live in a threshold file, not the checkpoint) */
    double *thresholds, *log_mass;
    int nthr;
} gpt_ref_layer;

typedef struct gpt_ref_model {
    /* configuration (from config.json, through tdacl__checkpoint_config) */
    int n_layer, n_head, n_embd, vocab_size, n_positions, head_dim;
    int rmsnorm;               /* 0 LayerNorm (weight, bias), 1 RMSNorm (weight only) */
    double ln_eps;             /* layer_norm_epsilon */
    tdacl_attention_kind kind;
    double kappa, power;       /* threshold length scale and rectifier exponent */
    tdacl_head_norm head_norm;
    double head_norm_eps;      /* 1e-5 (docs/spec.md section 1 default) */
    tdacl_position_kind position;
    double rope_theta;         /* base theta as configured */
    double rope_ntk_factor;    /* 1 = no scaling */
    int tied;                  /* lm_head is wte */
    /* topk_theta (docs/spec.md section 1c), set by the test */
    int theta_post, vmc;
    tdacl_sdc sdc;
    double sdc_gamma;
    /* topk_theta: when set, called for each (layer, head) with its q and k ([T][d] each, RoPE
     * applied) to fill thresholds[0..T) of every row, replacing the layer's table (a
     * calibration's top-k); returns 0 */
    int (*topk_hook)(void *user, int layer, int head, int T, int d, const double *q, const double *k,
                     double *thresholds);
    void *topk_user;
    int round_activations;     /* 1: the norm outputs, c_attn output, attention output and MLP
                                  hidden are rounded to bf16 as they are made (a model of the
                                  noise of bf16 activations); 0 (gpt_ref_load): exact */
    /* weights */
    double *wte;               /* [V, C] */
    double *wpe;               /* [P, C], NULL for rope */
    double *ln_f_w;            /* [C] */
    double *ln_f_b;            /* [C] or NULL */
    double *lm_head;           /* [V, C]; == wte when tied */
    gpt_ref_layer *layers;     /* [n_layer] */
} gpt_ref_model;

/* Counts over every layer and head of one forward pass, so a test can check that a
 * threshold model really thresholds (neither all zero nor all kept). */
typedef struct gpt_ref_stats {
    uint64_t visible_pairs;  /* causally visible (query, key) pairs, all layers and heads */
    uint64_t survivors[2];   /* pairs with a non-zero rectified weight in view 1 / view 2
                                (tra, tda, rela; softmax kinds: every pair) */
    uint64_t zero_weights;   /* exact zeros of the final weight */
    double min_margin;       /* min |s - tau| over visible pairs (tra / tda; rela: tau = 0) */
} gpt_ref_stats;

/* Copies the weights of `ck` into doubles.  round_bf16 = 1 rounds every value to bf16
 * (round to nearest even) as it is read, i.e. what a device holding bf16 weights sees.
 * Returns 0, or -1 with a message on stderr (missing tensor, wrong shape, bad config). */
int gpt_ref_load(const tdacl_checkpoint *ck, int round_bf16, gpt_ref_model *m);
void gpt_ref_free(gpt_ref_model *m);

/* logits [T, V] of tokens[0..T-1] from position 0 (T <= n_positions for learned
 * positions).  stats may be NULL.  Returns 0, or -1 on a bad argument / out of memory. */
int gpt_ref_forward(const gpt_ref_model *m, int T, const int32_t *tokens, double *logits,
                    gpt_ref_stats *stats);

/* The attention sublayer of layer L alone: qkv [T, NQ*C] (c_attn output) -> out [T, C]
 * (heads concatenated, before c_proj).  stats (may be NULL) accumulate: zero them and set
 * min_margin = INFINITY first.  Returns 0, or -1 out of memory. */
int gpt_ref_attention(const gpt_ref_model *m, const gpt_ref_layer *L, int T, const double *qkv, double *out,
                      gpt_ref_stats *stats);

/* The layers, exposed so the tests can check them by hand. */
void gpt_ref_layernorm(double *out, const double *inp, const double *w, const double *b, int T, int C,
                       double eps);
void gpt_ref_rmsnorm(double *out, const double *inp, const double *w, int T, int C, double eps);
void gpt_ref_matmul(double *out, const double *inp, const double *w, const double *b, int T, int IN, int OUT);
double gpt_ref_gelu(double x);
void gpt_ref_rope(double *x, int d, int64_t pos, double theta);
double gpt_ref_rope_theta(double theta, double ntk_factor, int d);
double gpt_ref_tau(int64_t pos, double beta, double kappa, int d);

#endif
