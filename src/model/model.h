/* Internal model entry points for the CLI and the benchmark. */
#ifndef TDACL_MODEL_H
#define TDACL_MODEL_H

#include "runtime/runtime.h"

/* tdacl_model_prefill, optionally computing the logits of each sequence's last position
 * only (a long prompt's full [T, vocab] logits are large and rarely needed). */
tdacl_status tdacl__model_prefill(tdacl_model *m, int batch, int len, const int32_t *tokens, int last_only);
/* The kernel of cl/layers.cl that draws by the rule of (temperature, top_k) over V logits
 * (top_k already mapped: 0 -> V): sample_greedy, sample_all or sample_topk. */
const char *tdacl__sample_kernel(float temperature, int top_k, int vocab);
/* 1 when a decode step of `batch` sequences runs fused (five kernels a layer); 0 with why. */
int tdacl__model_decode_fused(const tdacl_model *m, int batch, char *why, size_t n);
/* The decode-layer row (e.g. "decode_layer.persistent") a fused step of `batch` rows takes, or
 * NULL for the five fused kernels, with why; *launches: the launches of a step's layers (1: the
 * whole stack in one, packed layers; n_layer: one a layer; 5 n_layer). */
const char *tdacl__model_decode_layer_choice(tdacl_model *m, int batch, int *launches, char *why, size_t n);
/* How the head of `rows` rows (one a sequence, or not) runs: 1 when the final norm (and with one
 * row a sequence the greedy pick) is fused into the LM head's GEMV; what, in words, in what. */
int tdacl__model_head_fused(int rows, int one_row, char *what, size_t n);

#endif
