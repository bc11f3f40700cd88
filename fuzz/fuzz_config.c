/* libFuzzer entry for the config.json parser.  An accepted config must satisfy the
 * invariants the loader and the forward pass rely on (positive dims within the bounds that
 * keep shape products in 64 bits, n_embd = n_head * head_dim, head_dim <= 256), and its
 * tensor list must be consistent with it. */
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"

static void check(int ok)
{
    if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdacl_model_config cfg;
    tdacl_status st = tdacl__config_parse((const char *)data, size, "fuzz/config.json", &cfg);
    if (st) {
        check(tdacl_last_error(NULL)[0] != 0);
        return 0;
    }
    check(cfg.n_layer >= 1 && cfg.n_layer <= 1024);
    check(cfg.n_head >= 1 && cfg.n_embd >= 1 && cfg.n_embd <= 65536);
    check(cfg.head_dim * cfg.n_head == cfg.n_embd && cfg.head_dim <= 256);
    check(cfg.vocab_size >= 1 && cfg.vocab_size <= 10000000);
    check(cfg.n_positions >= 1 && cfg.n_positions <= 16 * 1024 * 1024);
    check(cfg.layer_norm_epsilon > 0 && cfg.kappa > 0 && cfg.power >= 1 && cfg.beta >= 0);
    check(cfg.rope_theta > 0 && cfg.rope_ntk_factor >= 1);
    check((int)cfg.attn_kind >= 0 && (int)cfg.attn_kind <= 4);
    check(cfg.position == TDACL_POSITION_ROPE ? cfg.head_dim % 2 == 0 : 1);
    /* the tensor list is only built for small configs: a 1024-layer one is legal but slow */
    if (cfg.n_layer <= 64) {
        tdacl_ckpt_spec *s = NULL;
        int n = 0;
        check(tdacl__config_tensors(&cfg, &s, &n) == TDACL_SUCCESS);
        int k = tdacl__config_qkv_blocks(&cfg);
        for (int i = 0; i < n; i++) {
            check(s[i].ndim >= 0 && s[i].ndim <= 2);
            for (int d = 0; d < s[i].ndim; d++) check(s[i].shape[d] >= 1);
            if (strstr(s[i].name, "c_attn.weight")) check(s[i].shape[1] == (int64_t)k * cfg.n_embd);
        }
        free(s);
    }
    return 0;
}
