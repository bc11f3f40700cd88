/* Checkpoints (src/model/model_config.c, src/model/safetensors.c, src/model/checkpoint.c,
 * src/model/checkpoint_write.c): config.json parsing, safetensors validation with one malformed
 * image per check, random checkpoints written and read back for every attention kind,
 * position scheme and dtype, shards, and checkpoint-level errors (missing, misshapen,
 * mistyped, unknown tensors).  Every failure asserts the exact status and that the message
 * names the file and the tensor or key.  Images sit in exactly-sized heap buffers so that
 * the sanitizer build catches any read past the end, and the malloc hook below checks
 * that no header value sizes an allocation. */
#include <math.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/testutil.h"
#include "common/ckpt_util.h"

/* ---- largest single allocation, to show that header values never size one ---- */

static size_t max_alloc;
static int tracking;
static void note_alloc(size_t n)
{
    if (tracking && n > max_alloc) max_alloc = n;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TU_ASAN)
#define TU_ASAN 1
#endif

#if defined(TU_ASAN)
/* from <sanitizer/allocator_interface.h>, which GCC does not install */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
static void hook_malloc(const volatile void *p, size_t n) { (void)p; note_alloc(n); }
static void hook_free(const volatile void *p) { (void)p; }
static void track_install(void)
{
    if (!__sanitizer_install_malloc_and_free_hooks(hook_malloc, hook_free)) fail_msg("cannot install the malloc hook");
}
#elif defined(__GLIBC__)
/* glibc lets the executable interpose the allocator; forward to its internal entry points */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t a, size_t b);
extern void *__libc_realloc(void *p, size_t n);
void *malloc(size_t n)
{
    note_alloc(n);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    note_alloc(b && a > SIZE_MAX / b ? SIZE_MAX : a * b);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    note_alloc(n);
    return __libc_realloc(p, n);
}
static void track_install(void) {}
#else
#define TDACL_NO_ALLOC_TRACKING 1
static void track_install(void) {}
#endif

static char *root_dir;
static tu_log logbuf;

static int group_setup(void **state)
{
    (void)state;
    root_dir = tu_mkdtemp("ckpt");
    track_install();
    /* keep the expected warnings off stderr and let tests look for them */
    tdacl_log_set_callback(tu_log_fn, &logbuf, TDACL_LOG_DEBUG);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tdacl_log_set_callback(NULL, NULL, -1);
    tu_log_clear(&logbuf);
    tu_rm_rf(root_dir);
    free(root_dir);
    return 0;
}

/* A fresh directory path under root_dir (not created). */
static const char *subdir(const char *tag)
{
    static char path[8][1024];
    static int next;
    static int serial;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s-%d", root_dir, tag, serial++);
    return p;
}

#define assert_error(st_expr, want, ...)                                                          \
    do {                                                                                          \
        tdacl_status st__ = (st_expr);                                                            \
        if (st__ != (want))                                                                       \
            fail_msg("%s: status %d (%s), wanted %d; message: %s", #st_expr, (int)st__,           \
                     tdacl_status_str(st__), (int)(want), tdacl_last_error(NULL));               \
        const char *needles__[] = {__VA_ARGS__, NULL};                                            \
        for (int i__ = 0; needles__[i__]; i__++) assert_contains(tdacl_last_error(NULL), needles__[i__]); \
    } while (0)

/* ======================================================================================
 * config.json
 * ====================================================================================== */

static tdacl_status parse_cfg(const char *text, tdacl_model_config *cfg)
{
    /* an exactly-sized copy without a terminating NUL: the parser must not need one */
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, text, n);
    tdacl_status st = tdacl__config_parse(copy, n, "probe/config.json", cfg);
    free(copy);
    return st;
}

#define GPT2_KEYS "\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128"

static void test_config_gpt2_defaults(void **state)
{
    (void)state;
    /* Hugging Face's gpt2 config.json, verbatim */
    static const char *hf =
        "{\n  \"activation_function\": \"gelu_new\",\n  \"architectures\": [\n    \"GPT2LMHeadModel\"\n  ],\n"
        "  \"attn_pdrop\": 0.1,\n  \"bos_token_id\": 50256,\n  \"embd_pdrop\": 0.1,\n  \"eos_token_id\": 50256,\n"
        "  \"initializer_range\": 0.02,\n  \"layer_norm_epsilon\": 1e-05,\n  \"model_type\": \"gpt2\",\n"
        "  \"n_ctx\": 1024,\n  \"n_embd\": 768,\n  \"n_head\": 12,\n  \"n_inner\": null,\n  \"n_layer\": 12,\n"
        "  \"n_positions\": 1024,\n  \"reorder_and_upcast_attn\": false,\n  \"resid_pdrop\": 0.1,\n"
        "  \"scale_attn_by_inverse_layer_idx\": false,\n  \"scale_attn_weights\": true,\n"
        "  \"summary_activation\": null,\n  \"summary_first_dropout\": 0.1,\n  \"summary_proj_to_labels\": true,\n"
        "  \"summary_type\": \"cls_index\",\n  \"summary_use_proj\": true,\n  \"task_specific_params\": {\n"
        "    \"text-generation\": {\n      \"do_sample\": true,\n      \"max_length\": 50\n    }\n  },\n"
        "  \"use_cache\": true,\n  \"vocab_size\": 50257\n}\n";
    tdacl_model_config c;
    assert_ok(NULL, parse_cfg(hf, &c));
    assert_int_equal(c.n_layer, 12);
    assert_int_equal(c.n_head, 12);
    assert_int_equal(c.n_embd, 768);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.vocab_size, 50257);
    assert_int_equal(c.n_positions, 1024);
    assert_true(c.layer_norm_epsilon == 1e-5f);
    assert_int_equal(c.norm_type, 0);
    assert_int_equal(c.attn_kind, TDACL_ATTN_SOFTMAX);
    assert_int_equal(c.has_attention, 0);
    assert_int_equal(c.head_norm, TDACL_NORM_NONE);
    assert_int_equal(c.position, TDACL_POSITION_LEARNED);
    assert_true(c.rope_theta == 10000.0f && c.rope_ntk_factor == 1.0f);
    assert_int_equal(c.tie_word_embeddings, -1); /* resolved from the files */
    assert_int_equal(tdacl__config_qkv_blocks(&c), 3);

    /* the minimal form gets the documented defaults too */
    assert_ok(NULL, parse_cfg("{" GPT2_KEYS "}", &c));
    assert_true(c.layer_norm_epsilon == 1e-5f && c.beta == 1.0f && c.kappa == 1.0f && c.power == 2.0f);
}

static void test_config_extensions(void **state)
{
    (void)state;
    tdacl_model_config c;
    assert_ok(NULL, parse_cfg("{" GPT2_KEYS ", \"layer_norm_epsilon\": 1e-6, \"attention\": {\"kind\": \"tda\", "
                              "\"beta\": 0.5, \"kappa\": 2, \"power\": 1, \"head_norm\": \"rms\"}, \"position\": \"rope\", "
                              "\"rope_theta\": 500000, \"rope_scaling\": {\"type\": \"ntk\", \"factor\": 4}, "
                              "\"norm_type\": \"rmsnorm\", \"tie_word_embeddings\": false}",
                              &c));
    assert_int_equal(c.attn_kind, TDACL_ATTN_TDA);
    assert_int_equal(c.has_attention, 1);
    assert_true(c.beta == 0.5f && c.kappa == 2.0f && c.power == 1.0f);
    assert_int_equal(c.head_norm, TDACL_NORM_RMS);
    assert_int_equal(c.position, TDACL_POSITION_ROPE);
    assert_true(c.rope_theta == 500000.0f && c.rope_ntk_factor == 4.0f);
    assert_int_equal(c.norm_type, 1);
    assert_true(c.layer_norm_epsilon == 1e-6f);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_int_equal(tdacl__config_qkv_blocks(&c), 5);

    static const struct { const char *name; tdacl_attention_kind kind; int blocks; } kinds[] = {
        {"softmax", TDACL_ATTN_SOFTMAX, 3}, {"rela", TDACL_ATTN_RELA, 3}, {"tra", TDACL_ATTN_TRA, 3},
        {"tda", TDACL_ATTN_TDA, 5}, {"diff_softmax", TDACL_ATTN_DIFF_SOFTMAX, 5}};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(kinds); i++) {
        char text[512];
        snprintf(text, sizeof text, "{" GPT2_KEYS ", \"attention\": {\"kind\": \"%s\"}}", kinds[i].name);
        assert_ok(NULL, parse_cfg(text, &c));
        assert_int_equal(c.attn_kind, kinds[i].kind);
        assert_int_equal(tdacl__config_qkv_blocks(&c), kinds[i].blocks);
        assert_int_equal(c.head_norm, TDACL_NORM_NONE); /* default of the attention object */
    }

    /* Hugging Face aliases, alone or agreeing with the GPT-2 key; null means unset */
    assert_ok(NULL, parse_cfg("{\"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"hidden_size\": 128, "
                              "\"vocab_size\": 10, \"max_position_embeddings\": 77, \"n_layer\": 3, "
                              "\"rope_scaling\": null, \"n_inner\": null, \"attention\": null}",
                              &c));
    assert_int_equal(c.n_layer, 3);
    assert_int_equal(c.n_head, 4);
    assert_int_equal(c.n_embd, 128);
    assert_int_equal(c.n_positions, 77);
    assert_int_equal(c.head_dim, 32);
    assert_int_equal(c.has_attention, 0);
    assert_ok(NULL, parse_cfg("{" GPT2_KEYS ", \"n_inner\": 256, \"activation_function\": \"gelu_pytorch_tanh\", "
                              "\"rope_scaling\": null, \"position\": \"rope\"}", &c));
    assert_ok(NULL, parse_cfg("{" GPT2_KEYS ", \"position\": \"rope\", \"rope_scaling\": {\"rope_type\": \"ntk\", "
                              "\"factor\": 2.5}}", &c));
    assert_true(c.rope_ntk_factor == 2.5f);

    /* the sparse kinds' keys and their defaults */
    assert_ok(NULL, parse_cfg("{" GPT2_KEYS ", \"attention\": {\"kind\": \"entmax\", \"alpha\": 2, \"temp_delta\": 0.5, "
                              "\"temp_beta\": 0.25, \"temp_gamma\": 2}}", &c));
    assert_int_equal(c.attn_kind, TDACL_ATTN_ENTMAX);
    assert_true(c.alpha == 2.0f && c.temp_delta == 0.5f && c.temp_beta == 0.25f && c.temp_gamma == 2.0f);
    assert_int_equal(tdacl__config_qkv_blocks(&c), 3);
    assert_ok(NULL, parse_cfg("{" GPT2_KEYS ", \"attention\": {\"kind\": \"topk_theta\", \"thresholds\": \"th.json\", "
                              "\"sdc\": \"offline\", \"sdc_gamma\": 0.1, \"vmc\": true}}", &c));
    assert_int_equal(c.attn_kind, TDACL_ATTN_TOPK_THETA);
    assert_string_equal(c.thresholds, "th.json");
    assert_true(c.sdc == TDACL_SDC_OFFLINE && c.sdc_gamma == 0.1f && c.vmc == 1);
    assert_ok(NULL, parse_cfg("{" GPT2_KEYS ", \"attention\": {\"kind\": \"topk_theta\"}}", &c));
    assert_true(c.sdc == TDACL_SDC_NONE && c.sdc_gamma == 0.05f && c.vmc == 0 && !c.thresholds[0]);
    assert_true(c.alpha == 1.5f && c.temp_delta == 1.0f && c.temp_beta == 0.0f && c.temp_gamma == 1.0f);
}

typedef struct cfg_case {
    const char *text;
    tdacl_status want;
    const char *needle, *needle2;
} cfg_case;

static void test_config_errors(void **state)
{
    (void)state;
    static const cfg_case cases[] = {
        {"", TDACL_ERR_FORMAT, "invalid JSON", NULL},
        {"{", TDACL_ERR_FORMAT, "invalid JSON", NULL},
        {"{\"n_layer\": 2,}", TDACL_ERR_FORMAT, "invalid JSON", NULL},
        {"{" GPT2_KEYS "} x", TDACL_ERR_FORMAT, "after the JSON value", NULL},
        {"{" GPT2_KEYS ", \"model_type\": \"gpt\xff\"}", TDACL_ERR_FORMAT, "UTF-8", NULL},
        {"{" GPT2_KEYS ", \"model_type\": \"\xc0\xaf\"}", TDACL_ERR_FORMAT, "UTF-8", NULL}, /* overlong '/' */
        {"{" GPT2_KEYS ", \"model_type\": \"\xed\xa0\x80\"}", TDACL_ERR_FORMAT, "UTF-8", NULL}, /* surrogate */
        {"[" GPT2_KEYS "]", TDACL_ERR_FORMAT, "invalid JSON", NULL},
        {"[1, 2]", TDACL_ERR_FORMAT, "must be a JSON object", "array"},
        {"\"n_layer\"", TDACL_ERR_FORMAT, "must be a JSON object", "string"},
        {"{\"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}", TDACL_ERR_FORMAT,
         "missing key 'n_layer'", "num_hidden_layers"},
        {"{\"n_layer\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}", TDACL_ERR_FORMAT,
         "missing key 'n_head'", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"vocab_size\": 256, \"n_positions\": 128}", TDACL_ERR_FORMAT,
         "missing key 'n_embd'", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 64, \"n_positions\": 128}", TDACL_ERR_FORMAT,
         "missing key 'vocab_size'", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256}", TDACL_ERR_FORMAT,
         "missing key 'n_positions'", NULL},
        {"{\"n_layer\": \"2\", \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_layer' must be an integer", "string"},
        {"{\"n_layer\": null, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_layer' must be an integer", "null"},
        {"{\"n_layer\": 1.5, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_layer' = 1.5", NULL},
        {"{\"n_layer\": 0, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_layer' = 0", NULL},
        {"{\"n_layer\": 1025, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_layer' = 1025", NULL},
        {"{\"n_layer\": 2, \"n_head\": -2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_head' = -2", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 1e300, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_embd' = 1e+300", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 10000001, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'vocab_size' = 1e+07", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 16777217}",
         TDACL_ERR_FORMAT, "'n_positions' = 1.67772e+07", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 131072, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "'n_embd' = 131072", NULL},
        {"{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "n_embd = 64 is not a multiple of n_head = 3", NULL},
        {"{\"n_layer\": 2, \"n_head\": 1, \"n_embd\": 512, \"vocab_size\": 256, \"n_positions\": 128}",
         TDACL_ERR_FORMAT, "head dim", "512"},
        {"{\"n_layer\": 2, \"num_hidden_layers\": 3, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, "
         "\"n_positions\": 128}", TDACL_ERR_FORMAT, "'n_layer' = 2", "'num_hidden_layers' = 3"},
        {"{" GPT2_KEYS ", \"n_layer\": 2}", TDACL_ERR_FORMAT, "key 'n_layer' appears twice", NULL},
        {"{" GPT2_KEYS ", \"layer_norm_epsilon\": 0}", TDACL_ERR_FORMAT, "'layer_norm_epsilon' = 0", NULL},
        /* positive as a double, 0 as the float the model keeps (found by fuzz_config) */
        {"{" GPT2_KEYS ", \"layer_norm_epsilon\": 1e-128}", TDACL_ERR_FORMAT, "'layer_norm_epsilon' = 1e-128", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"tra\", \"kappa\": 1e-60}}", TDACL_ERR_FORMAT,
         "'attention.kappa' = 1e-60", NULL},
        {"{" GPT2_KEYS ", \"layer_norm_epsilon\": 1e999}", TDACL_ERR_FORMAT, "'layer_norm_epsilon' = inf", NULL},
        {"{" GPT2_KEYS ", \"layer_norm_epsilon\": \"1e-5\"}", TDACL_ERR_FORMAT, "'layer_norm_epsilon' must be a number",
         NULL},
        {"{" GPT2_KEYS ", \"attention\": \"tda\"}", TDACL_ERR_FORMAT, "'attention' must be an object", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"beta\": 1}}", TDACL_ERR_FORMAT, "missing key 'attention.kind'", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"sparsemax\"}}", TDACL_ERR_FORMAT, "'sparsemax'", "attention.kind"},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": 3}}", TDACL_ERR_FORMAT, "'attention.kind' must be a string", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"tda\", \"kind\": \"tra\"}}", TDACL_ERR_FORMAT,
         "'attention.kind' appears twice", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"tda\", \"beta\": \"1\"}}", TDACL_ERR_FORMAT,
         "'attention.beta' must be a number", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"tda\", \"beta\": -0.5}}", TDACL_ERR_FORMAT,
         "'attention.beta' = -0.5", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"tda\", \"kappa\": 0}}", TDACL_ERR_FORMAT,
         "'attention.kappa' = 0", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"tra\", \"power\": 0.5}}", TDACL_ERR_FORMAT,
         "'attention.power' = 0.5", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"tra\", \"head_norm\": \"layer\"}}", TDACL_ERR_FORMAT,
         "'layer'", "attention.head_norm"},
        {"{" GPT2_KEYS ", \"position\": \"alibi\"}", TDACL_ERR_FORMAT, "'alibi'", "position"},
        {"{" GPT2_KEYS ", \"position\": 1}", TDACL_ERR_FORMAT, "'position' must be a string", NULL},
        {"{" GPT2_KEYS ", \"position\": \"rope\", \"rope_theta\": -1}", TDACL_ERR_FORMAT, "'rope_theta' = -1", NULL},
        {"{" GPT2_KEYS ", \"position\": \"rope\", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}}",
         TDACL_ERR_UNSUPPORTED, "rope_scaling type 'linear'", NULL},
        {"{" GPT2_KEYS ", \"position\": \"rope\", \"rope_scaling\": {\"type\": \"ntk\", \"factor\": 0.5}}",
         TDACL_ERR_FORMAT, "'rope_scaling.factor' = 0.5", NULL},
        {"{" GPT2_KEYS ", \"position\": \"rope\", \"rope_scaling\": {\"type\": \"ntk\"}}", TDACL_ERR_FORMAT,
         "missing key 'rope_scaling.factor'", NULL},
        {"{" GPT2_KEYS ", \"position\": \"rope\", \"rope_scaling\": {\"factor\": 2}}", TDACL_ERR_FORMAT,
         "missing key 'rope_scaling.type'", NULL},
        {"{" GPT2_KEYS ", \"position\": \"rope\", \"rope_scaling\": 2}", TDACL_ERR_FORMAT,
         "'rope_scaling' must be an object", NULL},
        {"{" GPT2_KEYS ", \"rope_scaling\": {\"type\": \"ntk\", \"factor\": 2}}", TDACL_ERR_FORMAT,
         "'rope_scaling' needs \"position\": \"rope\"", NULL},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 6, \"vocab_size\": 256, \"n_positions\": 128, "
         "\"position\": \"rope\"}", TDACL_ERR_FORMAT, "rope needs an even head dim", "3"},
        {"{" GPT2_KEYS ", \"norm_type\": \"batchnorm\"}", TDACL_ERR_FORMAT, "'batchnorm'", "norm_type"},
        {"{" GPT2_KEYS ", \"activation_function\": \"relu\"}", TDACL_ERR_UNSUPPORTED, "activation_function 'relu'", NULL},
        {"{" GPT2_KEYS ", \"n_inner\": 100}", TDACL_ERR_UNSUPPORTED, "n_inner = 100", NULL},
        {"{" GPT2_KEYS ", \"n_inner\": \"x\"}", TDACL_ERR_FORMAT, "'n_inner'", NULL},
        {"{" GPT2_KEYS ", \"scale_attn_by_inverse_layer_idx\": true}", TDACL_ERR_UNSUPPORTED,
         "scale_attn_by_inverse_layer_idx = true", NULL},
        {"{" GPT2_KEYS ", \"tie_word_embeddings\": \"yes\"}", TDACL_ERR_FORMAT,
         "'tie_word_embeddings' must be true or false", NULL},
        /* the sparse kinds' keys (entmax, topk_theta) */
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"entmax\", \"alpha\": 1}}", TDACL_ERR_FORMAT,
         "'attention.alpha' = 1 is out of range (1, 8]", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"entmax\", \"temp_gamma\": \"x\"}}", TDACL_ERR_FORMAT,
         "'attention.temp_gamma' must be a number", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"topk_theta\", \"sdc\": \"some\"}}", TDACL_ERR_FORMAT,
         "attention.sdc 'some'", "'exp_threshold'"},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"topk_theta\", \"vmc\": 1}}", TDACL_ERR_FORMAT,
         "'attention.vmc' must be true or false", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"topk_theta\", \"thresholds\": \"\"}}", TDACL_ERR_FORMAT,
         "'attention.thresholds' must be a file name", NULL},
        {"{" GPT2_KEYS ", \"attention\": {\"kind\": \"topk_theta\", \"sdc_gamma\": -1}}", TDACL_ERR_FORMAT,
         "'attention.sdc_gamma' = -1", NULL},
    };
    for (size_t i = 0; i < TDACL_ARRAY_LEN(cases); i++) {
        tdacl_model_config c;
        memset(&c, 0x5a, sizeof c);
        tdacl_status st = parse_cfg(cases[i].text, &c);
        const char *msg = tdacl_last_error(NULL);
        if (st != cases[i].want)
            fail_msg("case %zu (%s): status %d (%s), wanted %d; message: %s", i, cases[i].text, (int)st,
                     tdacl_status_str(st), (int)cases[i].want, msg);
        if (!strstr(msg, "probe/config.json") || !strstr(msg, cases[i].needle) ||
            (cases[i].needle2 && !strstr(msg, cases[i].needle2)))
            fail_msg("case %zu (%s): message \"%s\" lacks the file name, \"%s\" or \"%s\"", i, cases[i].text, msg,
                     cases[i].needle, cases[i].needle2 ? cases[i].needle2 : "");
        assert_int_equal(c.n_layer, 0); /* cleared on failure */
    }

    /* a NUL inside the text: cJSON alone would stop there and accept the prefix */
    tdacl_model_config c;
    static const char nul[] = "{" GPT2_KEYS "}\0 garbage";
    assert_error(tdacl__config_parse(nul, sizeof nul - 1, "probe/config.json", &c), TDACL_ERR_FORMAT, "probe/config.json",
                 "NUL byte");
    assert_error(tdacl__config_parse(NULL, 3, "x", &c), TDACL_ERR_INVALID_ARGUMENT, "NULL");
}

/* Every shipped example config parses, and the named ones say what their names say. */
static void test_example_configs(void **state)
{
    (void)state;
    glob_t g;
    assert_int_equal(glob(TDACL_EXAMPLE_MODELS "/*.json", 0, NULL, &g), 0);
    assert_true(g.gl_pathc >= 4);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        size_t len = 0;
        unsigned char *text = tu_read_file(g.gl_pathv[i], &len);
        assert_non_null(text);
        tdacl_model_config c;
        if (tdacl__config_parse((const char *)text, len, g.gl_pathv[i], &c))
            fail_msg("%s: %s", g.gl_pathv[i], tdacl_last_error(NULL));
        free(text);
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        if (!strncmp(base, "tiny-", 5)) {
            assert_int_equal(c.n_layer, 2);
            assert_int_equal(c.n_head, 2);
            assert_int_equal(c.n_embd, 64);
            assert_int_equal(c.vocab_size, 256);
            assert_int_equal(c.n_positions, 128);
        } else if (!strcmp(base, "gpt2-small-tda.json") || !strcmp(base, "gpt2-small-softmax.json")) {
            int tda = base[11] == 't';
            assert_int_equal(c.n_layer, 12);
            assert_int_equal(c.n_head, 12);
            assert_int_equal(c.n_embd, 768);
            assert_int_equal(c.vocab_size, 50257);
            assert_int_equal(c.n_positions, 1024);
            assert_int_equal(c.attn_kind, tda ? TDACL_ATTN_TDA : TDACL_ATTN_SOFTMAX);
            assert_int_equal(c.position, tda ? TDACL_POSITION_ROPE : TDACL_POSITION_LEARNED);
            assert_int_equal(c.head_norm, tda ? TDACL_NORM_RMS : TDACL_NORM_NONE);
            assert_int_equal(c.has_attention, tda);
        }
    }
    globfree(&g);
}

/* ======================================================================================
 * safetensors images
 * ====================================================================================== */

/* The fuzzers' seed corpora are valid inputs (a broken seed would only waste fuzzing time,
 * silently). */
static void test_fuzz_seeds_are_valid(void **state)
{
    (void)state;
    static const char *const dirs[] = {TDACL_FUZZ_CORPUS "/safetensors/*", TDACL_FUZZ_CORPUS "/config/*"};
    for (int k = 0; k < 2; k++) {
        glob_t g;
        assert_int_equal(glob(dirs[k], 0, NULL, &g), 0);
        assert_true(g.gl_pathc >= 3);
        for (size_t i = 0; i < g.gl_pathc; i++) {
            size_t len = 0;
            unsigned char *buf = tu_read_file(g.gl_pathv[i], &len);
            assert_non_null(buf);
            unsigned char *exact = malloc(len ? len : 1);
            assert_non_null(exact);
            memcpy(exact, buf, len);
            free(buf);
            tdacl_status st;
            if (k == 0) {
                tdacl_ckpt_tensor *t = NULL;
                int n = 0;
                st = tdacl__safetensors_parse(exact, len, g.gl_pathv[i], &t, &n);
                free(t);
            } else {
                tdacl_model_config c;
                st = tdacl__config_parse((const char *)exact, len, g.gl_pathv[i], &c);
            }
            free(exact);
            if (st) fail_msg("seed %s: %s", g.gl_pathv[i], tdacl_last_error(NULL));
        }
        globfree(&g);
    }
}

/* An exactly-sized image: length field *n_field (hlen when NULL), the hlen header bytes,
 * then data_len data bytes (i * 3 + 1). */
static unsigned char *st_image_n(const uint64_t *n_field, const char *header, size_t hlen, size_t data_len, size_t *len)
{
    size_t total = 8 + hlen + data_len;
    unsigned char *b = malloc(total);
    assert_non_null(b);
    uint64_t n = n_field ? *n_field : hlen;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    memcpy(b + 8, header, hlen);
    for (size_t i = 0; i < data_len; i++) b[8 + hlen + i] = (unsigned char)(i * 3 + 1);
    *len = total;
    return b;
}

static unsigned char *st_image(const char *header, size_t data_len, size_t *len)
{
    return st_image_n(NULL, header, strlen(header), data_len, len);
}

static tdacl_status parse_image(const unsigned char *b, size_t len, tdacl_ckpt_tensor **t, int *n)
{
    *t = (tdacl_ckpt_tensor *)(uintptr_t)1; /* must be reset on failure */
    *n = -1;
    tdacl_status st = tdacl__safetensors_parse(b, len, "probe.safetensors", t, n);
    if (st) {
        assert_null(*t);
        assert_int_equal(*n, 0);
    }
    return st;
}

static void test_safetensors_valid(void **state)
{
    (void)state;
    /* header order differs from data order; a prefix is stripped; a scalar, an empty
       tensor, a 4-D tensor and a dtype tdacl does not read are all legal */
    static const char *h =
        "{\"__metadata__\": {\"format\": \"pt\"}, "
        "\"w\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [8, 10]}, "
        "\"transformer.x\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
        "\"m\": {\"dtype\": \"U8\", \"shape\": [1, 1, 2, 2], \"data_offsets\": [10, 14]}, "
        "\"z\": {\"dtype\": \"F16\", \"shape\": [4503599627370496, 4503599627370496, 0], \"data_offsets\": [10, 10]}}";
    size_t len = 0;
    unsigned char *b = st_image(h, 14, &len);
    tdacl_ckpt_tensor *t;
    int n;
    assert_ok(NULL, parse_image(b, len, &t, &n));
    assert_int_equal(n, 4);
    const unsigned char *data = b + 8 + strlen(h);
    /* offset order: x [0,8), w [8,10), z [10,10), m [10,14) */
    assert_string_equal(t[0].name, "x");
    assert_int_equal(t[0].dtype, TDACL_F32);
    assert_true(t[0].dtype_ok);
    assert_string_equal(t[0].dtype_name, "F32");
    assert_int_equal(t[0].ndim, 1);
    assert_int_equal(t[0].shape[0], 2);
    assert_ptr_equal(t[0].data, data);
    assert_int_equal(t[0].nbytes, 8);
    assert_string_equal(t[0].file, "probe.safetensors");
    assert_memory_equal(t[0].data, data, 8);
    assert_string_equal(t[1].name, "w");
    assert_int_equal(t[1].dtype, TDACL_BF16);
    assert_int_equal(t[1].ndim, 0);
    assert_int_equal(t[1].nbytes, 2);
    assert_ptr_equal(t[1].data, data + 8);
    assert_string_equal(t[2].name, "z");
    assert_int_equal(t[2].dtype, TDACL_F16);
    assert_int_equal(t[2].ndim, 3);
    assert_int_equal(t[2].shape[0], 4503599627370496LL);
    assert_int_equal(t[2].nbytes, 0);
    assert_string_equal(t[3].name, "m");
    assert_false(t[3].dtype_ok);
    assert_string_equal(t[3].dtype_name, "U8");
    assert_int_equal(t[3].ndim, 4);
    assert_int_equal(t[3].nbytes, 4);
    assert_ptr_equal(t[3].data, data + 10);
    free(t);
    free(b);

    /* header lengths 2..7 holding "{}" and padding: a file without tensors */
    for (size_t hl = 2; hl <= 7; hl++) {
        char hdr[8] = "{}     ";
        b = st_image_n(NULL, hdr, hl, 0, &len);
        assert_ok(NULL, parse_image(b, len, &t, &n));
        assert_int_equal(n, 0);
        free(t);
        free(b);
    }
}

typedef struct st_case {
    const char *header;
    size_t data_len;
    tdacl_status want;
    const char *needle, *needle2;
} st_case;

#define T1(dtype, shape, b, e) "{\"a\": {\"dtype\": \"" dtype "\", \"shape\": " shape ", \"data_offsets\": [" #b ", " #e "]}}"

static void test_safetensors_malformed(void **state)
{
    (void)state;
    static const st_case cases[] = {
        /* the header itself */
        {"[]", 0, TDACL_ERR_FORMAT, "header must be a JSON object", NULL},
        {"\"a\"", 0, TDACL_ERR_FORMAT, "header must be a JSON object", NULL},
        {"{  ", 0, TDACL_ERR_FORMAT, "invalid JSON", NULL},
        {"{\"a\": }", 0, TDACL_ERR_FORMAT, "invalid JSON", NULL},
        {"{} x", 0, TDACL_ERR_FORMAT, "after the JSON value", NULL},
        {"{}{}", 0, TDACL_ERR_FORMAT, "after the JSON value", NULL},
        {"{\"a\xff\": {}}", 0, TDACL_ERR_FORMAT, "not valid UTF-8", "byte 3"},
        {"{\"\xe2\x82\": {}}", 0, TDACL_ERR_FORMAT, "not valid UTF-8", NULL}, /* truncated sequence */
        {"{\"__metadata__\": []}", 0, TDACL_ERR_FORMAT, "'__metadata__' must be an object", NULL},
        /* an escaped NUL would cut the name at it: "a\u0000evil" must not load as "a" */
        {"{\"a\\u0000evil\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, TDACL_ERR_FORMAT,
         "escaped NUL", NULL},
        {"{\"__metadata__\": {\"format\": \"pt\\u0000\"}}", 0, TDACL_ERR_FORMAT, "escaped NUL", NULL},
        {"{\"__metadata__\": {\"format\": 1}}", 0, TDACL_ERR_FORMAT, "'__metadata__' value of 'format'", NULL},
        {"{\"__metadata__\": {}, \"__metadata__\": {}}", 0, TDACL_ERR_FORMAT, "'__metadata__' appears twice", NULL},
        /* one entry's fields */
        {"{\"a\": 5}", 0, TDACL_ERR_FORMAT, "tensor 'a'", "must be an object"},
        {"{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, TDACL_ERR_FORMAT, "tensor 'a'", "missing 'dtype'"},
        {"{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, TDACL_ERR_FORMAT, "tensor 'a'", "missing 'shape'"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, TDACL_ERR_FORMAT, "tensor 'a'", "missing 'data_offsets'"},
        {"{\"a\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, TDACL_ERR_FORMAT, "tensor 'a'",
         "'dtype' must be a string"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}", 4, TDACL_ERR_FORMAT, "tensor 'a'",
         "'shape' must be an array"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": {}}}", 4, TDACL_ERR_FORMAT, "tensor 'a'",
         "'data_offsets' must be an array"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4]}}", 4, TDACL_ERR_FORMAT, "tensor 'a'",
         "'data_offsets' must be an array [begin, end]"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 4, TDACL_ERR_FORMAT, "tensor 'a'",
         "'data_offsets' must be an array [begin, end]"},
        {"{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F16\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
         TDACL_ERR_FORMAT, "tensor 'a'", "'dtype' appears twice"},
        {T1("F32", "[1]", 0, "4"), 4, TDACL_ERR_FORMAT, "tensor 'a'", "data_offsets[1]"},
        {T1("F32", "[1]", -4, 0), 4, TDACL_ERR_FORMAT, "tensor 'a'", "data_offsets[0]"},
        {T1("F32", "[1]", 0, 4.5), 4, TDACL_ERR_FORMAT, "tensor 'a'", "data_offsets[1]"},
        {T1("F32", "[1]", 0, 18446744073709551615), 4, TDACL_ERR_FORMAT, "tensor 'a'", "data_offsets[1]"},
        /* dtypes */
        {T1("Q7", "[1]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "unknown dtype 'Q7'"},
        {T1("f32", "[1]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "unknown dtype 'f32'"},
        /* shapes */
        {T1("F32", "[-1]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape entry 0"},
        {T1("F32", "[1.5]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape entry 0"},
        {T1("F32", "[1e300]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape entry 0"},
        {T1("F32", "[1, \"1\"]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape entry 1"},
        {T1("F32", "[1, null]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape entry 1"},
        {T1("F32", "[1, 1, 1, 1, 1]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "5 dimensions"},
        {T1("F32", "[4294967296, 4294967296]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape product overflows"},
        {T1("F32", "[4503599627370496, 1024]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape product overflows"},
        {T1("F32", "[65536, 65536, 65536, 65536]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "shape product overflows"},
        /* offsets and byte counts */
        {T1("F32", "[2]", 0, 4), 4, TDACL_ERR_FORMAT, "tensor 'a'", "4 bytes at data_offsets [0, 4], but shape and dtype F32 need 8"},
        {T1("BF16", "[3, 2]", 0, 24), 24, TDACL_ERR_FORMAT, "tensor 'a'", "need 12"},
        {T1("U8", "[]", 0, 0), 0, TDACL_ERR_FORMAT, "tensor 'a'", "need 1"},
        {T1("F32", "[1]", 8, 4), 8, TDACL_ERR_FORMAT, "tensor 'a'", "end before they begin"},
        {T1("F32", "[2]", 0, 8), 4, TDACL_ERR_FORMAT, "tensor 'a'", "run past the end of the data (4 bytes)"},
        {T1("F32", "[1]", 9007199254740988, 9007199254740992), 4, TDACL_ERR_FORMAT, "tensor 'a'", "run past the end"},
        {T1("F32", "[1]", 4, 8), 8, TDACL_ERR_FORMAT, "4 unused bytes before the first tensor 'a'", NULL},
        {T1("F32", "[1]", 0, 4), 8, TDACL_ERR_FORMAT, "4 trailing bytes after the last tensor 'a'", NULL},
        {"{}", 3, TDACL_ERR_FORMAT, "3 trailing bytes", NULL},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, TDACL_ERR_FORMAT,
         "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a'", NULL},
        {"{\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 12]}}", 12, TDACL_ERR_FORMAT,
         "tensor 'b'", "overlaps tensor 'a'"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 12, TDACL_ERR_FORMAT,
         "gap of 4 bytes between tensor 'a' and tensor 'b'", NULL},
        /* names */
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, TDACL_ERR_FORMAT,
         "tensor 'a' appears twice", NULL},
        {"{\"transformer.a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, TDACL_ERR_FORMAT,
         "tensor 'a' appears twice", "transformer."},
        {"{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
         TDACL_ERR_FORMAT, "tensor name 'aaaa", "longer than 127 bytes"},
    };
    for (size_t i = 0; i < TDACL_ARRAY_LEN(cases); i++) {
        size_t len;
        unsigned char *b = st_image(cases[i].header, cases[i].data_len, &len);
        tdacl_ckpt_tensor *t;
        int n;
        tdacl_status st = parse_image(b, len, &t, &n);
        free(b);
        const char *msg = tdacl_last_error(NULL);
        if (st != cases[i].want)
            fail_msg("case %zu (%s): status %d (%s), wanted %d; message: %s", i, cases[i].header, (int)st,
                     tdacl_status_str(st), (int)cases[i].want, msg);
        if (!strstr(msg, "probe.safetensors") || !strstr(msg, cases[i].needle) ||
            (cases[i].needle2 && !strstr(msg, cases[i].needle2)))
            fail_msg("case %zu (%s): message \"%s\" lacks the file name, \"%s\" or \"%s\"", i, cases[i].header, msg,
                     cases[i].needle, cases[i].needle2 ? cases[i].needle2 : "");
    }

    /* a NUL byte inside the header (a JSON parser reading C strings stops there) */
    static const char nul[] = "{}\0    ";
    size_t len = 0;
    unsigned char *b = st_image_n(NULL, nul, sizeof nul - 1, 0, &len);
    tdacl_ckpt_tensor *t;
    int n;
    assert_error(parse_image(b, len, &t, &n), TDACL_ERR_FORMAT, "probe.safetensors", "NUL byte at offset 2");
    free(b);
}

/* The 8-byte length field: too short a file, too small, too large and past-the-end
 * lengths, each refused before anything is allocated. */
static void test_safetensors_header_length(void **state)
{
    (void)state;
    tdacl_ckpt_tensor *t;
    int n;
    size_t len = 0;
    for (size_t l = 0; l < 8; l++) {
        unsigned char *b = malloc(l ? l : 1);
        assert_non_null(b);
        memset(b, 2, l); /* a length field that would otherwise be plausible */
        assert_error(parse_image(b, l, &t, &n), TDACL_ERR_FORMAT, "probe.safetensors", "too short");
        free(b);
    }
    for (uint64_t nf = 0; nf < 2; nf++) {
        unsigned char *b = st_image_n(&nf, "{}      ", 8, 0, &len);
        assert_error(parse_image(b, len, &t, &n), TDACL_ERR_FORMAT, "probe.safetensors", "too small");
        free(b);
    }
    static const struct { uint64_t n; const char *needle; } big[] = {
        {UINT64_MAX, "header length 18446744073709551615 exceeds the 100000000-byte limit"},
        {(uint64_t)1 << 63, "exceeds the 100000000-byte limit"},
        {100000001, "header length 100000001 exceeds"},
        {100000000, "header length 100000000 runs past the end of the file (16 bytes)"},
        {50000000, "runs past the end of the file"},
        {9, "header length 9 runs past the end of the file (16 bytes)"},
    };
#ifndef TDACL_NO_ALLOC_TRACKING
    /* The hook sees every allocation, cJSON's and tdacl__fail's included: none may follow
       the length field. */
    for (size_t i = 0; i < TDACL_ARRAY_LEN(big); i++) {
        unsigned char *b = st_image_n(&big[i].n, "{}      ", 8, 0, &len);
        max_alloc = 0;
        tracking = 1;
        tdacl_status st = tdacl__safetensors_parse(b, len, "probe.safetensors", &t, &n);
        tracking = 0;
        if (st != TDACL_ERR_FORMAT) fail_msg("N=%llu: status %d", (unsigned long long)big[i].n, (int)st);
        assert_contains(tdacl_last_error(NULL), big[i].needle);
        assert_contains(tdacl_last_error(NULL), "probe.safetensors");
        if (max_alloc > 1024) fail_msg("N=%llu: allocated %zu bytes for a %zu-byte file", (unsigned long long)big[i].n, max_alloc, len);
        free(b);
    }
    /* a valid 1 MB image with a small header: no allocation comes near the data size */
    static const char *h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [512, 512], \"data_offsets\": [0, 1048576]}}";
    unsigned char *b = st_image(h, 1048576, &len);
    max_alloc = 0;
    tracking = 1;
    tdacl_status st = tdacl__safetensors_parse(b, len, "probe.safetensors", &t, &n);
    tracking = 0;
    assert_int_equal(st, TDACL_SUCCESS);
    assert_int_equal(n, 1);
    free(t);
    free(b);
    assert_true(max_alloc > 0); /* the hook is live */
    if (max_alloc > 4096) fail_msg("valid image: largest allocation %zu bytes", max_alloc);
#else
    for (size_t i = 0; i < TDACL_ARRAY_LEN(big); i++) {
        unsigned char *b = st_image_n(&big[i].n, "{}      ", 8, 0, &len);
        assert_error(parse_image(b, len, &t, &n), TDACL_ERR_FORMAT, "probe.safetensors", big[i].needle);
        free(b);
    }
    print_message("allocation tracking unavailable on this platform: sizes not checked\n");
#endif
}

/* ======================================================================================
 * random checkpoints written and read back
 * ====================================================================================== */

typedef struct variant {
    const char *attention; /* JSON of the attention object, or NULL */
    const char *position;
    tdacl_attention_kind kind;
    tdacl_head_norm norm;
} variant;

static const variant variants[] = {
    {NULL, "learned", TDACL_ATTN_SOFTMAX, TDACL_NORM_NONE},
    {"{\"kind\": \"softmax\"}", "rope", TDACL_ATTN_SOFTMAX, TDACL_NORM_NONE},
    {"{\"kind\": \"rela\", \"head_norm\": \"rms\"}", "learned", TDACL_ATTN_RELA, TDACL_NORM_RMS},
    {"{\"kind\": \"tra\", \"beta\": 0.75, \"head_norm\": \"none\"}", "rope", TDACL_ATTN_TRA, TDACL_NORM_NONE},
    {"{\"kind\": \"tda\", \"beta\": 0.75, \"kappa\": 1, \"power\": 2, \"head_norm\": \"rms\"}", "rope", TDACL_ATTN_TDA,
     TDACL_NORM_RMS},
    {"{\"kind\": \"diff_softmax\", \"head_norm\": \"rms\"}", "learned", TDACL_ATTN_DIFF_SOFTMAX, TDACL_NORM_RMS},
};

static const char *config_text(const variant *v, const char *position, const char *extra)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "{" GPT2_KEYS ", \"position\": \"%s\"%s%s%s%s}", position, v->attention ? ", \"attention\": " : "",
             v->attention ? v->attention : "", extra ? ", " : "", extra ? extra : "");
    return buf;
}

static float *decode(const tdacl_ckpt_tensor *t, size_t *count)
{
    size_t es = tdacl_dtype_size(t->dtype), n = t->nbytes / es;
    float *v = malloc((n ? n : 1) * sizeof *v);
    assert_non_null(v);
    const unsigned char *p = t->data;
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == TDACL_F32) {
            memcpy(&v[i], p + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            v[i] = t->dtype == TDACL_BF16 ? tdacl_bf16_to_f32(h) : tdacl_f16_to_f32(h);
        }
    }
    *count = n;
    return v;
}

/* Opens dir and checks every tensor the config requires: dtype, shape and the documented
 * initial values (normal weights by their statistics). */
static void check_random_checkpoint(const char *dir, tdacl_dtype dtype, float beta)
{
    tdacl_checkpoint *c = NULL;
    assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
    const tdacl_model_config *cfg = tdacl__checkpoint_config(c);
    assert_string_equal(tdacl__checkpoint_dir(c), dir);
    assert_int_equal(cfg->tie_word_embeddings, 1);
    assert_null(tdacl__checkpoint_get(c, "lm_head.weight"));
    tdacl_ckpt_spec *specs;
    int ns;
    assert_ok(NULL, tdacl__config_tensors(cfg, &specs, &ns));
    uint64_t params = 0;
    for (int k = 0; k < ns; k++) {
        const tdacl_ckpt_spec *s = &specs[k];
        const tdacl_ckpt_tensor *t = tdacl__checkpoint_get(c, s->name);
        if (s->optional) {
            assert_null(t);
            continue;
        }
        if (!t) fail_msg("%s: no tensor %s", dir, s->name);
        assert_int_equal(t->dtype, dtype);
        assert_true(t->dtype_ok);
        assert_non_null(strstr(t->file, "model.safetensors"));
        if (s->scalar) {
            assert_int_equal(t->ndim, 0);
        } else {
            assert_int_equal(t->ndim, s->ndim);
            for (int d = 0; d < s->ndim; d++) assert_int_equal(t->shape[d], s->shape[d]);
        }
        size_t n;
        float *v = decode(t, &n);
        params += n;
        if (s->init == TDACL_INIT_NORMAL) {
            double sum = 0, sq = 0;
            for (size_t i = 0; i < n; i++) {
                if (!(fabsf(v[i]) < 0.02f * 7)) fail_msg("%s[%zu] = %g is not a plausible N(0, 0.02) draw", s->name, i, v[i]);
                sum += v[i];
                sq += (double)v[i] * v[i];
            }
            double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
            /* 6 standard errors of the mean, 5% on the deviation (> 4 standard errors) */
            if (fabs(mean) > 6 * 0.02 / sqrt((double)n) || fabs(sd - 0.02) > 0.001)
                fail_msg("%s: mean %g, sd %g over %zu values; wanted N(0, 0.02)", s->name, mean, sd, n);
        } else {
            float want = s->init == TDACL_INIT_ONES ? 1.0f : s->init == TDACL_INIT_ZEROS ? 0.0f
                       : s->init == TDACL_INIT_BETA ? beta : 0.5f;
            for (size_t i = 0; i < n; i++)
                if (v[i] != want) fail_msg("%s[%zu] = %g, wanted %g", s->name, i, v[i], want);
        }
        free(v);
    }
    assert_int_equal(tdacl__checkpoint_parameters(c), params);
    free(specs);
    tdacl__checkpoint_close(c);
}

static void test_roundtrip_every_variant(void **state)
{
    (void)state;
    static const tdacl_dtype dtypes[] = {TDACL_F32, TDACL_BF16, TDACL_F16};
    for (size_t v = 0; v < TDACL_ARRAY_LEN(variants); v++) {
        for (int p = 0; p < 2; p++) {
            const char *position = p ? "rope" : "learned";
            char f32_dir[1024] = "";
            for (size_t d = 0; d < TDACL_ARRAY_LEN(dtypes); d++) {
                const char *dir = subdir("rt");
                const char *text = config_text(&variants[v], position, NULL);
                assert_ok(NULL, tdacl__checkpoint_write_random(dir, text, 42, dtypes[d]));
                /* config.json is the given text, byte for byte */
                char path[1100];
                snprintf(path, sizeof path, "%s/config.json", dir);
                size_t len;
                unsigned char *saved = tu_read_file(path, &len);
                assert_non_null(saved);
                assert_int_equal(len, strlen(text));
                assert_memory_equal(saved, text, len);
                free(saved);
                float beta = variants[v].kind == TDACL_ATTN_TRA || variants[v].kind == TDACL_ATTN_TDA ? 0.75f : 1.0f;
                check_random_checkpoint(dir, dtypes[d], beta);

                tdacl_checkpoint *c;
                assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
                const tdacl_model_config *cfg = tdacl__checkpoint_config(c);
                assert_int_equal(cfg->attn_kind, variants[v].kind);
                assert_int_equal(cfg->head_norm, variants[v].norm);
                assert_int_equal(cfg->position, p ? TDACL_POSITION_ROPE : TDACL_POSITION_LEARNED);
                /* wpe exactly when positions are learned; c_attn 5C wide for two-view kinds */
                assert_true((tdacl__checkpoint_get(c, "wpe.weight") != NULL) == !p);
                assert_int_equal(tdacl__checkpoint_get(c, "h.1.attn.c_attn.weight")->shape[1],
                                 64 * tdacl__config_qkv_blocks(cfg));
                assert_true((tdacl__checkpoint_get(c, "h.0.attn.head_norm.weight") != NULL) ==
                            (variants[v].norm == TDACL_NORM_RMS));
                /* lookups accept the prefixed name too */
                assert_ptr_equal(tdacl__checkpoint_get(c, "transformer.ln_f.bias"), tdacl__checkpoint_get(c, "ln_f.bias"));

                /* 16-bit checkpoints hold the f32 checkpoint's values, rounded */
                if (d == 0) {
                    snprintf(f32_dir, sizeof f32_dir, "%s", dir);
                } else {
                    tdacl_checkpoint *ref;
                    assert_ok(NULL, tdacl__checkpoint_open(f32_dir, &ref));
                    const char *names[] = {"wte.weight", "h.1.mlp.c_proj.weight", "h.0.attn.c_attn.weight"};
                    for (size_t k = 0; k < TDACL_ARRAY_LEN(names); k++) {
                        const tdacl_ckpt_tensor *a = tdacl__checkpoint_get(ref, names[k]), *b = tdacl__checkpoint_get(c, names[k]);
                        size_t na, nb;
                        float *va = decode(a, &na), *vb = decode(b, &nb);
                        assert_int_equal(na, nb);
                        for (size_t i = 0; i < na; i++) {
                            uint16_t h = dtypes[d] == TDACL_BF16 ? tdacl_f32_to_bf16(va[i]) : tdacl_f32_to_f16(va[i]);
                            uint16_t got;
                            memcpy(&got, (const unsigned char *)b->data + 2 * i, 2);
                            if (got != h) fail_msg("%s[%zu]: stored 0x%04x, rounding %g gives 0x%04x", names[k], i, got, va[i], h);
                        }
                        free(va);
                        free(vb);
                    }
                    tdacl__checkpoint_close(ref);
                }
                tdacl__checkpoint_close(c);
            }
        }
    }
}

static void test_writer_deterministic(void **state)
{
    (void)state;
    const char *text = config_text(&variants[4], "rope", NULL);
    char a[1024], b[1024], c[1024], pa[1100], pb[1100], pc[1100];
    snprintf(a, sizeof a, "%s/nested/dirs/a", subdir("det")); /* mkdir -p */
    snprintf(b, sizeof b, "%s", subdir("det"));
    snprintf(c, sizeof c, "%s", subdir("det"));
    assert_ok(NULL, tdacl__checkpoint_write_random(a, text, 7, TDACL_F32));
    assert_ok(NULL, tdacl__checkpoint_write_random(b, text, 7, TDACL_F32));
    assert_ok(NULL, tdacl__checkpoint_write_random(c, text, 8, TDACL_F32));
    snprintf(pa, sizeof pa, "%s/model.safetensors", a);
    snprintf(pb, sizeof pb, "%s/model.safetensors", b);
    snprintf(pc, sizeof pc, "%s/model.safetensors", c);
    size_t la = 0, lb = 0, lc = 0;
    unsigned char *fa = tu_read_file(pa, &la), *fb = tu_read_file(pb, &lb), *fc = tu_read_file(pc, &lc);
    assert_non_null(fa);
    assert_non_null(fb);
    assert_non_null(fc);
    assert_int_equal(la, lb);
    assert_memory_equal(fa, fb, la);
    /* another seed: same layout (the seed is in the metadata, same width), other weights */
    assert_int_equal(la, lc);
    assert_memory_not_equal(fa, fc, la);
    /* the data starts 8-byte aligned, as Hugging Face pads it */
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)fa[i] << (8 * i);
    assert_int_equal(hl % 8, 0);
    free(fa);
    free(fb);
    free(fc);
    /* no temporary files are left next to the result */
    assert_int_equal(tu_count_files(a, ".tmp.", 1, NULL, 0), 0);
    struct stat sb;
    assert_int_equal(stat(pa, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);

    /* a bad config writes nothing */
    const char *bad = subdir("det-bad");
    assert_error(tdacl__checkpoint_write_random(bad, "{\"n_layer\": 1}", 1, TDACL_F32), TDACL_ERR_FORMAT, "n_head");
    assert_false(tu_exists(bad));
    assert_error(tdacl__checkpoint_write_random(bad, text, 1, (tdacl_dtype)7), TDACL_ERR_INVALID_ARGUMENT, "dtype");
    /* a file where the directory should go */
    char blocked[1100];
    snprintf(blocked, sizeof blocked, "%s/model.safetensors/sub", a);
    assert_error(tdacl__checkpoint_write_random(blocked, text, 1, TDACL_F32), TDACL_ERR_IO, blocked);
}

/* tie_word_embeddings from config.json: false writes and requires lm_head.weight; true
 * ignores one that is present. */
static void test_tied_and_untied(void **state)
{
    (void)state;
    const char *dir = subdir("untied");
    assert_ok(NULL, tdacl__checkpoint_write_random(dir, config_text(&variants[0], "learned", "\"tie_word_embeddings\": false"),
                                                   3, TDACL_F32));
    tdacl_checkpoint *c;
    assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
    assert_int_equal(tdacl__checkpoint_config(c)->tie_word_embeddings, 0);
    const tdacl_ckpt_tensor *lm = tdacl__checkpoint_get(c, "lm_head.weight");
    assert_non_null(lm);
    assert_int_equal(lm->shape[0], 256);
    assert_int_equal(lm->shape[1], 64);
    /* drawn from its own stream: not a copy of wte */
    assert_memory_not_equal(lm->data, tdacl__checkpoint_get(c, "wte.weight")->data, lm->nbytes);
    uint64_t untied_params = tdacl__checkpoint_parameters(c);
    tdacl__checkpoint_close(c);

    /* the same files with the flag removed: lm_head present, so untied */
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *plain = config_text(&variants[0], "learned", NULL);
    tu_write_file(path, plain, strlen(plain));
    assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
    assert_int_equal(tdacl__checkpoint_config(c)->tie_word_embeddings, 0);
    assert_int_equal(tdacl__checkpoint_parameters(c), untied_params);
    tdacl__checkpoint_close(c);

    /* tie_word_embeddings true: the file's lm_head is ignored (logged) */
    const char *tied = config_text(&variants[0], "learned", "\"tie_word_embeddings\": true");
    tu_write_file(path, tied, strlen(tied));
    tu_log_clear(&logbuf);
    assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
    assert_int_equal(tdacl__checkpoint_config(c)->tie_word_embeddings, 1);
    assert_int_equal(tdacl__checkpoint_parameters(c), untied_params - 256 * 64);
    assert_true(tu_log_find(&logbuf, TDACL_LOG_INFO, "lm_head.weight", "ignored", NULL) >= 0);
    tdacl__checkpoint_close(c);

    /* false without the tensor: missing */
    const char *dir2 = subdir("untied-missing");
    assert_ok(NULL, tdacl__checkpoint_write_random(dir2, plain, 3, TDACL_F32));
    snprintf(path, sizeof path, "%s/config.json", dir2);
    const char *untied = config_text(&variants[0], "learned", "\"tie_word_embeddings\": false");
    tu_write_file(path, untied, strlen(untied));
    assert_error(tdacl__checkpoint_open(dir2, &c), TDACL_ERR_FORMAT, "tensor 'lm_head.weight' is missing", dir2,
                 "tie_word_embeddings false");
    assert_null(c);
}

/* ======================================================================================
 * shards
 * ====================================================================================== */

static void compare_checkpoints(const char *a_dir, const char *b_dir)
{
    tdacl_checkpoint *a, *b;
    assert_ok(NULL, tdacl__checkpoint_open(a_dir, &a));
    assert_ok(NULL, tdacl__checkpoint_open(b_dir, &b));
    tdacl_ckpt_spec *specs;
    int ns;
    assert_ok(NULL, tdacl__config_tensors(tdacl__checkpoint_config(a), &specs, &ns));
    for (int k = 0; k < ns; k++) {
        const tdacl_ckpt_tensor *x = tdacl__checkpoint_get(a, specs[k].name), *y = tdacl__checkpoint_get(b, specs[k].name);
        if (!x) continue; /* optional */
        assert_non_null(y);
        assert_int_equal(x->nbytes, y->nbytes);
        assert_int_equal(x->ndim, y->ndim);
        assert_memory_equal(x->data, y->data, x->nbytes);
    }
    assert_int_equal(tdacl__checkpoint_parameters(a), tdacl__checkpoint_parameters(b));
    free(specs);
    tdacl__checkpoint_close(a);
    tdacl__checkpoint_close(b);
}

/* The checkpoint test_sharded writes as a single file, split into shards. */
static const char *sharded_copy(int shards, const char *prefix)
{
    const char *dir = subdir("shard");
    const char *text = config_text(&variants[4], "rope", NULL);
    assert_ok(NULL, tdacl__checkpoint_write_random(dir, text, 5, TDACL_BF16));
    cu_shard(dir, shards, prefix);
    return dir;
}

static void test_sharded(void **state)
{
    (void)state;
    const char *single = subdir("single");
    assert_ok(NULL, tdacl__checkpoint_write_random(single, config_text(&variants[4], "rope", NULL), 5, TDACL_BF16));
    char s1[1024], s2[1024];
    snprintf(s1, sizeof s1, "%s", sharded_copy(3, ""));
    snprintf(s2, sizeof s2, "%s", sharded_copy(2, "transformer."));
    compare_checkpoints(single, s1);
    compare_checkpoints(single, s2);
    tdacl_checkpoint *c;
    assert_ok(NULL, tdacl__checkpoint_open(s1, &c));
    /* tensors report the shard they live in */
    assert_non_null(strstr(tdacl__checkpoint_get(c, "wte.weight")->file, "model-00001-of-00003.safetensors"));
    assert_non_null(strstr(tdacl__checkpoint_get(c, "ln_f.weight")->file, "model-00003-of-00003.safetensors"));
    tdacl__checkpoint_close(c);
}

/* Rewrites dir's index.json with `edit` applied to its parsed form. */
static void edit_index(const char *dir, void (*edit)(cJSON *map))
{
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    size_t len = 0;
    unsigned char *text = tu_read_file(path, &len);
    assert_non_null(text);
    cJSON *root = cJSON_Parse((const char *)text);
    free(text);
    assert_non_null(root);
    edit(cJSON_GetObjectItemCaseSensitive(root, "weight_map"));
    char *out = cJSON_Print(root);
    tu_write_file(path, out, strlen(out));
    cJSON_free(out);
    cJSON_Delete(root);
}

static void remap_wte(cJSON *map)
{
    cJSON_ReplaceItemInObjectCaseSensitive(map, "wte.weight", cJSON_CreateString("model-00002-of-00003.safetensors"));
}
static void map_ghost(cJSON *map) { cJSON_AddStringToObject(map, "h.7.ln_1.weight", "model-00001-of-00003.safetensors"); }
static void map_escape(cJSON *map)
{
    cJSON_ReplaceItemInObjectCaseSensitive(map, "wte.weight", cJSON_CreateString("../model-00001-of-00003.safetensors"));
}
static void unmap_wte(cJSON *map) { cJSON_DeleteItemFromObjectCaseSensitive(map, "wte.weight"); }
static void map_twice(cJSON *map) { cJSON_AddStringToObject(map, "transformer.wte.weight", "model-00001-of-00003.safetensors"); }
static void map_number(cJSON *map) { cJSON_ReplaceItemInObjectCaseSensitive(map, "wte.weight", cJSON_CreateNumber(1)); }
static void map_missing_shard(cJSON *map)
{
    cJSON_ReplaceItemInObjectCaseSensitive(map, "ln_f.weight", cJSON_CreateString("model-00009-of-00009.safetensors"));
}

static void test_sharded_errors(void **state)
{
    (void)state;
    tdacl_checkpoint *c = (tdacl_checkpoint *)(uintptr_t)1;
    char dir[1024], path[1200];

    /* a shard the index names is gone */
    snprintf(dir, sizeof dir, "%s", sharded_copy(3, ""));
    snprintf(path, sizeof path, "%s/model-00002-of-00003.safetensors", dir);
    assert_int_equal(unlink(path), 0);
    assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_IO, "model-00002-of-00003.safetensors",
                 "model.safetensors.index.json");
    assert_null(c);

    struct { void (*edit)(cJSON *); tdacl_status want; const char *n1, *n2; } cases[] = {
        {remap_wte, TDACL_ERR_FORMAT, "maps tensor 'wte.weight' to", "but it is in"},
        {map_ghost, TDACL_ERR_FORMAT, "maps tensor 'h.7.ln_1.weight'", "which does not contain it"},
        {map_escape, TDACL_ERR_FORMAT, "'../model-00001-of-00003.safetensors'", "not a file in the directory"},
        {map_twice, TDACL_ERR_FORMAT, "tensor 'wte.weight' is mapped twice", NULL},
        {map_number, TDACL_ERR_FORMAT, "weight_map entry 'wte.weight' is not a file name", NULL},
        {map_missing_shard, TDACL_ERR_IO, "model-00009-of-00009.safetensors", "No such file"},
    };
    for (size_t i = 0; i < TDACL_ARRAY_LEN(cases); i++) {
        snprintf(dir, sizeof dir, "%s", sharded_copy(3, ""));
        edit_index(dir, cases[i].edit);
        tdacl_status st = tdacl__checkpoint_open(dir, &c);
        const char *msg = tdacl_last_error(NULL);
        if (st != cases[i].want) fail_msg("case %zu: status %d, message %s", i, (int)st, msg);
        if (!strstr(msg, cases[i].n1) || (cases[i].n2 && !strstr(msg, cases[i].n2)) ||
            !strstr(msg, "model.safetensors.index.json"))
            fail_msg("case %zu: message \"%s\" lacks \"%s\"/\"%s\" or the index name", i, msg, cases[i].n1,
                     cases[i].n2 ? cases[i].n2 : "");
        assert_null(c);
    }

    /* a tensor the map leaves out is still used, with a warning */
    snprintf(dir, sizeof dir, "%s", sharded_copy(3, ""));
    edit_index(dir, unmap_wte);
    tu_log_clear(&logbuf);
    assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
    assert_non_null(tdacl__checkpoint_get(c, "wte.weight"));
    assert_true(tu_log_find(&logbuf, TDACL_LOG_WARN, "'wte.weight'", "missing from the weight_map", NULL) >= 0);
    tdacl__checkpoint_close(c);

    /* one tensor in two shards */
    snprintf(dir, sizeof dir, "%s", sharded_copy(3, ""));
    snprintf(path, sizeof path, "%s/model-00003-of-00003.safetensors", dir);
    cu_file f = cu_load(path);
    int64_t shape[1] = {64};
    cu_add(&f, "wte.weight", "F32", 1, shape, NULL, 256);
    cu_save(path, &f);
    cu_free(&f);
    assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_FORMAT, "tensor 'wte.weight' is in both",
                 "model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors");

    /* a shard name with an escaped NUL would open the name before it */
    snprintf(dir, sizeof dir, "%s", sharded_copy(2, ""));
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    {
        size_t ilen = 0;
        char *idx = (char *)tu_read_file(path, &ilen);
        assert_non_null(idx);
        const char *shard = "model-00001-of-00002.safetensors\"";
        char *at = strstr(idx, shard);
        assert_non_null(at);
        char *edited = malloc(ilen + 16);
        assert_non_null(edited);
        size_t head = (size_t)(at - idx) + strlen(shard) - 1;
        memcpy(edited, idx, head);
        memcpy(edited + head, "\\u0000x", 7);
        memcpy(edited + head + 7, idx + head, ilen - head);
        tu_write_file(path, edited, ilen + 7);
        free(edited);
        free(idx);
        assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_FORMAT, "model.safetensors.index.json", "escaped NUL");
        assert_null(c);
    }

    /* a shard that is a FIFO is refused at once (a plain open would wait for a writer),
     * while a shard that is a symbolic link (the Hugging Face hub's snapshots/ -> blobs/
     * layout) keeps loading */
    snprintf(dir, sizeof dir, "%s", sharded_copy(2, ""));
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    {
        char blob[1300];
        snprintf(blob, sizeof blob, "%s/blob-2", dir);
        assert_int_equal(rename(path, blob), 0);
        assert_int_equal(symlink(blob, path), 0);
        assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
        tdacl__checkpoint_close(c);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mkfifo(path, 0600), 0);
        assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_IO, "model-00002-of-00002.safetensors",
                     "not a regular file");
        assert_null(c);
    }

    /* an index that is not one */
    snprintf(dir, sizeof dir, "%s", sharded_copy(2, ""));
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    tu_write_file(path, "{\"metadata\": {}}", 16);
    assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_FORMAT, "model.safetensors.index.json", "weight_map");
    tu_write_file(path, "{\"weight_map\": {}}", 18);
    assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_FORMAT, "model.safetensors.index.json", "empty");
    tu_write_file(path, "{\"weight_map\": ", 15);
    assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_FORMAT, "model.safetensors.index.json", "invalid JSON");
}

/* ======================================================================================
 * checkpoint-level errors
 * ====================================================================================== */

/* A tiny tda/rope checkpoint (beta and lambda scalars, head_norm) to break. */
static const char *fresh(const char *tag, cu_file *f, char *model_path, size_t n)
{
    const char *dir = subdir(tag);
    assert_ok(NULL, tdacl__checkpoint_write_random(dir, config_text(&variants[4], "rope", NULL), 11, TDACL_F32));
    snprintf(model_path, n, "%s/model.safetensors", dir);
    if (f) *f = cu_load(model_path);
    return dir;
}

static void test_missing_tensors(void **state)
{
    (void)state;
    /* remove each required tensor in turn */
    char model[1100];
    cu_file f;
    const char *dir = fresh("missing", &f, model, sizeof model);
    char dir_copy[1024];
    snprintf(dir_copy, sizeof dir_copy, "%s", dir);
    tdacl_model_config cfg;
    const char *text = config_text(&variants[4], "rope", NULL);
    assert_ok(NULL, tdacl__config_parse(text, strlen(text), "c", &cfg));
    tdacl_ckpt_spec *specs;
    int ns;
    assert_ok(NULL, tdacl__config_tensors(&cfg, &specs, &ns));
    int checked = 0;
    for (int k = 0; k < ns; k++) {
        if (specs[k].optional) continue;
        cu_file g = cu_load(model);
        cu_remove(&g, specs[k].name);
        cu_save(model, &g);
        cu_free(&g);
        tdacl_checkpoint *c = (tdacl_checkpoint *)(uintptr_t)1;
        char needle[160];
        snprintf(needle, sizeof needle, "tensor '%s' is missing", specs[k].name);
        assert_error(tdacl__checkpoint_open(dir_copy, &c), TDACL_ERR_FORMAT, needle, dir_copy);
        assert_null(c);
        if (strstr(specs[k].name, ".beta") || strstr(specs[k].name, ".lambda"))
            assert_contains(tdacl_last_error(NULL), "required by attention kind tda");
        if (strstr(specs[k].name, "head_norm")) assert_contains(tdacl_last_error(NULL), "required by head_norm rms");
        cu_save(model, &f); /* restore */
        checked++;
    }
    assert_true(checked > 30);
    free(specs);
    cu_free(&f);

    /* learned positions need wpe; layernorm needs biases */
    dir = subdir("missing-wpe");
    assert_ok(NULL, tdacl__checkpoint_write_random(dir, config_text(&variants[0], "learned", NULL), 1, TDACL_F32));
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    f = cu_load(model);
    cu_remove(&f, "wpe.weight");
    cu_save(model, &f);
    cu_free(&f);
    tdacl_checkpoint *c;
    assert_error(tdacl__checkpoint_open(dir, &c), TDACL_ERR_FORMAT, "tensor 'wpe.weight' is missing",
                 "required by position learned");
}

static void test_wrong_shapes_and_dtypes(void **state)
{
    (void)state;
    char model[1100];
    cu_file f;
    const char *dir = fresh("shape", &f, model, sizeof model);
    char d[1024];
    snprintf(d, sizeof d, "%s", dir);
    static const struct { const char *name; int ndim; int64_t shape[4]; const char *got, *want; } cases[] = {
        /* a tda checkpoint with softmax-width c_attn */
        {"h.0.attn.c_attn.weight", 2, {64, 192}, "shape [64, 192]", "expected [64, 320] (attention kind tda)"},
        {"h.1.attn.c_attn.bias", 1, {192}, "shape [192]", "expected [320]"},
        {"wte.weight", 2, {64, 256}, "shape [64, 256]", "expected [256, 64]"},
        {"h.0.mlp.c_fc.weight", 2, {256, 64}, "shape [256, 64]", "expected [64, 256]"},
        {"ln_f.weight", 2, {1, 64}, "shape [1, 64]", "expected [64]"},
        {"h.0.attn.beta", 1, {2}, "shape [2]", "expected [] or [1]"},
        {"h.1.attn.lambda", 1, {3}, "shape [3]", "expected [], [1] or [2] (n_head)"},
        {"h.0.attn.head_norm.weight", 1, {64}, "shape [64]", "expected [32] (head_norm rms)"},
    };
    for (size_t i = 0; i < TDACL_ARRAY_LEN(cases); i++) {
        cu_file g = cu_load(model);
        cu_tensor *t = cu_find(&g, cases[i].name);
        assert_non_null(t);
        size_t numel = 1;
        for (int k = 0; k < cases[i].ndim; k++) numel *= (size_t)cases[i].shape[k];
        char name[192];
        snprintf(name, sizeof name, "%s", t->name);
        cu_remove(&g, name);
        cu_add(&g, name, "F32", cases[i].ndim, cases[i].shape, NULL, numel * 4);
        cu_save(model, &g);
        cu_free(&g);
        tdacl_checkpoint *c;
        char tn[160];
        snprintf(tn, sizeof tn, "tensor '%s' has %s", cases[i].name, cases[i].got);
        assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_SHAPE, model, tn, cases[i].want);
        cu_save(model, &f);
    }
    /* accepted alternatives: beta as [1], lambda per head */
    {
        cu_file g = cu_load(model);
        float one = 1.0f, lam[2] = {0.25f, 0.5f};
        int64_t s1[1] = {1}, s2[1] = {2};
        cu_remove(&g, "h.0.attn.beta");
        cu_remove(&g, "h.0.attn.lambda");
        cu_add(&g, "h.0.attn.beta", "F32", 1, s1, &one, 4);
        cu_add(&g, "h.0.attn.lambda", "F32", 1, s2, lam, 8);
        cu_save(model, &g);
        cu_free(&g);
        tdacl_checkpoint *c;
        assert_ok(NULL, tdacl__checkpoint_open(d, &c));
        const tdacl_ckpt_tensor *t = tdacl__checkpoint_get(c, "h.0.attn.lambda");
        assert_int_equal(t->ndim, 1);
        assert_int_equal(t->shape[0], 2);
        assert_memory_equal(t->data, lam, 8);
        tdacl__checkpoint_close(c);
        cu_save(model, &f);
    }
    /* a tensor the model uses, stored in a dtype tdacl does not read */
    static const char *bad_dtypes[] = {"I32", "F64", "U8", "BOOL"};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(bad_dtypes); i++) {
        cu_file g = cu_load(model);
        cu_tensor *t = cu_find(&g, "h.1.ln_2.weight");
        size_t es = !strcmp(bad_dtypes[i], "F64") ? 8 : !strcmp(bad_dtypes[i], "I32") ? 4 : 1;
        int64_t shape[1] = {64};
        cu_remove(&g, t->name);
        cu_add(&g, "h.1.ln_2.weight", bad_dtypes[i], 1, shape, NULL, 64 * es);
        cu_save(model, &g);
        cu_free(&g);
        tdacl_checkpoint *c;
        char want[64];
        snprintf(want, sizeof want, "has dtype %s; expected F32, BF16 or F16", bad_dtypes[i]);
        assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_DTYPE, model, "tensor 'h.1.ln_2.weight'", want);
        cu_save(model, &f);
    }
    /* mixed dtypes are fine: conversion happens on load */
    {
        cu_file g = cu_load(model);
        cu_tensor *t = cu_find(&g, "ln_f.weight");
        uint16_t ones[64];
        for (int i = 0; i < 64; i++) ones[i] = tdacl_f32_to_bf16(1.0f);
        int64_t shape[1] = {64};
        cu_remove(&g, t->name);
        cu_add(&g, "ln_f.weight", "BF16", 1, shape, ones, sizeof ones);
        cu_save(model, &g);
        cu_free(&g);
        tdacl_checkpoint *c;
        assert_ok(NULL, tdacl__checkpoint_open(d, &c));
        assert_int_equal(tdacl__checkpoint_get(c, "ln_f.weight")->dtype, TDACL_BF16);
        assert_int_equal(tdacl__checkpoint_get(c, "ln_f.bias")->dtype, TDACL_F32);
        tdacl__checkpoint_close(c);
    }
    cu_free(&f);
}

static void test_unknown_and_ignored_tensors(void **state)
{
    (void)state;
    char model[1100];
    cu_file f;
    const char *dir = fresh("extra", &f, model, sizeof model);
    int64_t s[4] = {1, 1, 128, 128};
    /* GPT-2's mask buffers as transformers saved them (uint8 and float), an unknown tensor,
       wpe under rope, and a tensor of a layer the config does not have */
    cu_add(&f, "h.0.attn.bias", "U8", 4, s, NULL, 128 * 128);
    cu_add(&f, "h.1.attn.bias", "F32", 4, s, NULL, 128 * 128 * 4);
    cu_add(&f, "h.0.attn.masked_bias", "F32", 0, s, NULL, 4);
    int64_t e[1] = {5};
    cu_add(&f, "extra.weight", "I64", 1, e, NULL, 40);
    int64_t w[2] = {128, 64};
    cu_add(&f, "wpe.weight", "F32", 2, w, NULL, 128 * 64 * 4);
    int64_t g[1] = {64};
    cu_add(&f, "h.2.ln_1.weight", "F32", 1, g, NULL, 256);
    cu_save(model, &f);
    cu_free(&f);
    tu_log_clear(&logbuf);
    tdacl_checkpoint *c;
    assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
    assert_true(tu_log_find(&logbuf, TDACL_LOG_DEBUG, "'h.0.attn.bias'", "ignored", NULL) >= 0);
    assert_true(tu_log_find(&logbuf, TDACL_LOG_DEBUG, "'h.1.attn.bias'", "ignored", NULL) >= 0);
    assert_true(tu_log_find(&logbuf, TDACL_LOG_DEBUG, "'h.0.attn.masked_bias'", "ignored", NULL) >= 0);
    assert_true(tu_log_find(&logbuf, TDACL_LOG_WARN, "unknown tensor 'extra.weight'", model, NULL) >= 0);
    assert_true(tu_log_find(&logbuf, TDACL_LOG_WARN, "unknown tensor 'h.2.ln_1.weight'", NULL) >= 0);
    assert_true(tu_log_find(&logbuf, TDACL_LOG_INFO, "'wpe.weight' ignored", "rope", NULL) >= 0);
    /* the buffers are not warnings */
    assert_int_equal(tu_log_find(&logbuf, TDACL_LOG_WARN, "attn.bias", NULL), -1);
    assert_int_equal(tu_log_find(&logbuf, TDACL_LOG_WARN, "masked_bias", NULL), -1);
    /* the model's parameter count leaves them out */
    tdacl_checkpoint *ref;
    char ref_dir[1024];
    snprintf(ref_dir, sizeof ref_dir, "%s", fresh("extra-ref", NULL, model, sizeof model));
    assert_ok(NULL, tdacl__checkpoint_open(ref_dir, &ref));
    assert_int_equal(tdacl__checkpoint_parameters(c), tdacl__checkpoint_parameters(ref));
    tdacl__checkpoint_close(ref);
    tdacl__checkpoint_close(c);
}

/* The layout of Hugging Face's gpt2 model.safetensors (no prefix, F32, an F32 attn.bias
 * [1,1,P,P] per layer, no lm_head) with GPT-2's own config keys, at a tiny size. */
static void test_gpt2_layout(void **state)
{
    (void)state;
    const char *dir = subdir("gpt2");
    static const char *cfg = "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], "
                             "\"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 32, \"n_embd\": 48, "
                             "\"n_head\": 3, \"n_inner\": null, \"n_layer\": 2, \"n_positions\": 32, "
                             "\"scale_attn_weights\": true, \"summary_activation\": null, \"vocab_size\": 99}";
    assert_ok(NULL, tdacl__checkpoint_write_random(dir, cfg, 2, TDACL_F32));
    char model[1100];
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    cu_file f = cu_load(model);
    int64_t s[4] = {1, 1, 32, 32};
    cu_add(&f, "h.0.attn.bias", "F32", 4, s, NULL, 32 * 32 * 4);
    cu_add(&f, "h.1.attn.bias", "F32", 4, s, NULL, 32 * 32 * 4);
    cu_save(model, &f);
    cu_free(&f);
    tu_log_clear(&logbuf);
    tdacl_checkpoint *c;
    assert_ok(NULL, tdacl__checkpoint_open(dir, &c));
    const tdacl_model_config *m = tdacl__checkpoint_config(c);
    assert_int_equal(m->n_embd, 48);
    assert_int_equal(m->head_dim, 16);
    assert_int_equal(m->tie_word_embeddings, 1);
    assert_int_equal(tdacl__checkpoint_get(c, "h.1.attn.c_attn.weight")->shape[1], 144);
    /* 99*48 + 32*48 + 2 * (12*48*48 + 13*48) + 2*48 */
    assert_int_equal(tdacl__checkpoint_parameters(c), 99 * 48 + 32 * 48 + 2 * (12 * 48 * 48 + 13 * 48) + 2 * 48);
    assert_int_equal(tu_log_find(&logbuf, TDACL_LOG_WARN, NULL), -1);
    tdacl__checkpoint_close(c);
}

static void test_file_errors(void **state)
{
    (void)state;
    tdacl_checkpoint *c = (tdacl_checkpoint *)(uintptr_t)1;
    char model[1100], path[1200];
    const char *dir = fresh("files", NULL, model, sizeof model);
    char d[1024];
    snprintf(d, sizeof d, "%s", dir);
    size_t len = 0;
    unsigned char *orig = tu_read_file(model, &len);
    assert_non_null(orig);

    /* truncated: inside the data, inside the header, inside the length field, empty */
    tu_write_file(model, orig, len - 1);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, model, "run past the end of the data");
    assert_null(c);
    tu_write_file(model, orig, 100);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, model, "runs past the end of the file (100 bytes)");
    tu_write_file(model, orig, 5);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, model, "too short");
    tu_write_file(model, orig, 0);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, model, "too short");
    /* trailing bytes after the last tensor */
    unsigned char *longer = malloc(len + 3);
    assert_non_null(longer);
    memcpy(longer, orig, len);
    memset(longer + len, 0, 3);
    tu_write_file(model, longer, len + 3);
    free(longer);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, model, "3 trailing bytes after the last tensor 'ln_f.bias'");
    /* the file is a directory; neither the file nor an index */
    assert_int_equal(unlink(model), 0);
    assert_int_equal(mkdir(model, 0755), 0);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_IO, model, "not a regular file");
    assert_int_equal(rmdir(model), 0);
    /* a FIFO: refused without blocking */
    assert_int_equal(mkfifo(model, 0600), 0);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_IO, model, "not a regular file");
    assert_int_equal(unlink(model), 0);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_IO, d, "neither model.safetensors nor model.safetensors.index.json");
    tu_write_file(model, orig, len);
    free(orig);
    assert_ok(NULL, tdacl__checkpoint_open(d, &c));
    tdacl__checkpoint_close(c);

    /* config.json: missing, a missing key, an unknown attention kind, not JSON */
    snprintf(path, sizeof path, "%s/config.json", d);
    size_t clen = 0;
    unsigned char *cfg = tu_read_file(path, &clen);
    assert_non_null(cfg);
    assert_int_equal(unlink(path), 0);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_IO, path, "No such file");
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_IO, path, "not a regular file");
    assert_int_equal(unlink(path), 0);
    const char *no_vocab = "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 64, \"n_positions\": 128}";
    tu_write_file(path, no_vocab, strlen(no_vocab));
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, path, "missing key 'vocab_size'");
    const char *bad_kind = "{" GPT2_KEYS ", \"attention\": {\"kind\": \"tda2\"}, \"position\": \"rope\"}";
    tu_write_file(path, bad_kind, strlen(bad_kind));
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, path, "unknown attention.kind 'tda2'");
    tu_write_file(path, "\x89PNG", 4);
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, path, "UTF-8");
    /* a config that disagrees with the files: the first tensor that differs is named */
    const char *wider = "{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 128, \"vocab_size\": 256, \"n_positions\": 128, "
                        "\"attention\": {\"kind\": \"tda\", \"head_norm\": \"rms\"}, \"position\": \"rope\"}";
    tu_write_file(path, wider, strlen(wider));
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_SHAPE, model, "tensor 'wte.weight' has shape [256, 64]; expected [256, 128]");
    const char *deeper = "{\"n_layer\": 3, \"n_head\": 2, \"n_embd\": 64, \"vocab_size\": 256, \"n_positions\": 128, "
                         "\"attention\": {\"kind\": \"tda\", \"head_norm\": \"rms\"}, \"position\": \"rope\"}";
    tu_write_file(path, deeper, strlen(deeper));
    assert_error(tdacl__checkpoint_open(d, &c), TDACL_ERR_FORMAT, d, "tensor 'h.2.ln_1.weight' is missing");
    tu_write_file(path, cfg, clen);
    free(cfg);
    assert_ok(NULL, tdacl__checkpoint_open(d, &c));
    tdacl__checkpoint_close(c);

    /* no directory at all; bad arguments */
    snprintf(path, sizeof path, "%s/nope", d);
    assert_error(tdacl__checkpoint_open(path, &c), TDACL_ERR_IO, "nope/config.json");
    assert_error(tdacl__checkpoint_open(NULL, &c), TDACL_ERR_INVALID_ARGUMENT, "directory");
    assert_error(tdacl__checkpoint_open(d, NULL), TDACL_ERR_INVALID_ARGUMENT, "out");
    assert_null(tdacl__checkpoint_get(NULL, "wte.weight"));
    tdacl__checkpoint_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_gpt2_defaults),
        cmocka_unit_test(test_config_extensions),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_example_configs),
        cmocka_unit_test(test_fuzz_seeds_are_valid),
        cmocka_unit_test(test_safetensors_valid),
        cmocka_unit_test(test_safetensors_malformed),
        cmocka_unit_test(test_safetensors_header_length),
        cmocka_unit_test(test_roundtrip_every_variant),
        cmocka_unit_test(test_writer_deterministic),
        cmocka_unit_test(test_tied_and_untied),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_sharded_errors),
        cmocka_unit_test(test_missing_tensors),
        cmocka_unit_test(test_wrong_shapes_and_dtypes),
        cmocka_unit_test(test_unknown_and_ignored_tensors),
        cmocka_unit_test(test_gpt2_layout),
        cmocka_unit_test(test_file_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
