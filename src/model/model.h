/* Internal model entry points for the CLI and the benchmark. */
#ifndef TDACL_MODEL_H
#define TDACL_MODEL_H

#include "runtime/runtime.h"

/* tdacl_model_prefill, optionally computing the logits of each sequence's last position
 * only (a long prompt's full [T, vocab] logits are large and rarely needed). */
tdacl_status tdacl__model_prefill(tdacl_model *m, int batch, int len, const int32_t *tokens, int last_only);

#endif
