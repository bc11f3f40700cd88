/* Models with the seeds' sparse attentions (docs/spec.md sections 1b, 1c, 4.7): entmax layers
 * with per-layer alpha and per-head temperatures, Top-theta layers from threshold files, the
 * threshold file reader, and tdacl_model_calibrate against the double-precision reference
 * forward pass (tests/ref/gpt_ref.c) computing the Top-theta paper's Algorithm 1 itself. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "common/testutil.h"
#include "common/ckpt_util.h"
#include "model/checkpoint.h"
#include "model/thresholds.h"
#include "ref/gpt_ref.h"

static tdacl_context *g_ctx;
static char *g_root;

enum { L_LAYERS = 2, HEADS = 2, EMBD = 32, VOCAB = 64, NPOS = 32, HD = EMBD / HEADS };
#define QK_GAIN 6.0 /* scores of std ~1 (the writer's N(0, 0.02) weights give ~0.03) */

/* ---- models ----------------------------------------------------------------------------- */

static double rd(const cu_tensor *t, int64_t i)
{
    float f;
    memcpy(&f, t->data + 4 * i, 4);
    return f;
}

static void wr(cu_tensor *t, int64_t i, double v)
{
    float f = (float)v;
    memcpy(t->data + 4 * i, &f, 4);
}

/* A random model of config `attention` (a JSON object) in g_root/tag, q and k columns of
 * c_attn scaled by QK_GAIN; returns the directory (free it). */
static char *make_model(const char *tag, const char *attention, uint64_t seed)
{
    char *dir = malloc(strlen(g_root) + strlen(tag) + 2);
    assert_non_null(dir);
    sprintf(dir, "%s/%s", g_root, tag);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"n_layer\":%d,\"n_head\":%d,\"n_embd\":%d,\"vocab_size\":%d,\"n_positions\":%d,\"attention\":%s}",
             L_LAYERS, HEADS, EMBD, VOCAB, NPOS, attention);
    assert_ok(NULL, tdacl__checkpoint_write_random(dir, cfg, seed, TDACL_F32));
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    cu_file f = cu_load(path);
    for (int l = 0; l < L_LAYERS; l++) {
        char name[64];
        snprintf(name, sizeof name, "h.%d.attn.c_attn.weight", l);
        cu_tensor *t = cu_find(&f, name);
        assert_non_null(t);
        for (int64_t e = 0; e < t->shape[0] * t->shape[1]; e++)
            if (e % t->shape[1] < 2 * EMBD) wr(t, e, QK_GAIN * rd(t, e));
    }
    cu_save(path, &f);
    cu_free(&f);
    return dir;
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tu_write_file(path, text, strlen(text));
}

static tdacl_model *load(const char *dir, const char *thresholds, int sdc, int vmc, int max_batch)
{
    tdacl_model_desc d;
    tdacl_model_desc_init(&d);
    d.path = dir, d.thresholds = thresholds, d.topk_sdc = sdc, d.topk_vmc = vmc, d.max_batch = max_batch;
    tdacl_model *m = NULL;
    assert_ok(g_ctx, tdacl_model_load(g_ctx, &d, &m));
    return m;
}

static void ref_load(const char *dir, gpt_ref_model *ref)
{
    tdacl_checkpoint *ck = NULL;
    assert_ok(NULL, tdacl__checkpoint_open(dir, &ck));
    assert_int_equal(gpt_ref_load(ck, 0, ref), 0);
    tdacl__checkpoint_close(ck);
}

static void tokens_of(uint64_t seed, int n, int32_t *tok)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((seed >> 33) % VOCAB);
    }
}

/* max |got - want| / max |want| over n logits, asserted below bound. */
static void check_logits(const float *got, const double *want, size_t n, double bound, const char *what)
{
    double err = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs(got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    if (!(err <= bound * scale)) fail_msg("%s: max error %.3g against logits of size %.3g (bound %.1g)", what, err, scale, bound);
}

#define LOGIT_BOUND 2e-5 /* fp32 accumulation over a 2-layer, 32-wide model: observed ~1e-6 */

/* Prefill of `tok` (T tokens) against the reference, then decode from position `prompt`
 * one token at a time, then two slots at different positions in one step. */
static void check_model(tdacl_model *m, const gpt_ref_model *ref, const int32_t *tok, int T, int prompt, const char *what)
{
    double *want = malloc(sizeof(double) * (size_t)T * VOCAB);
    float *got = malloc(sizeof(float) * (size_t)T * VOCAB);
    assert_true(want && got);
    assert_int_equal(gpt_ref_forward(ref, T, tok, want, NULL), 0);
    assert_ok(g_ctx, tdacl_model_prefill(m, 1, T, tok));
    assert_ok(g_ctx, tdacl_model_logits(m, got, (int64_t)T * VOCAB, NULL));
    char msg[160];
    snprintf(msg, sizeof msg, "%s: prefill", what);
    check_logits(got, want, (size_t)T * VOCAB, LOGIT_BOUND, msg);
    /* decode steps (fused decode, key splits) */
    assert_ok(g_ctx, tdacl_model_prefill(m, 1, prompt, tok));
    for (int t = prompt; t < T; t++) {
        assert_ok(g_ctx, tdacl_model_decode(m, 1, &tok[t]));
        assert_ok(g_ctx, tdacl_model_logits(m, got, VOCAB, NULL));
        snprintf(msg, sizeof msg, "%s: decode at position %d", what, t);
        check_logits(got, want + (size_t)t * VOCAB, VOCAB, LOGIT_BOUND, msg);
    }
    /* two sequences at positions prompt and prompt - 3 in one step: one call per sequence */
    assert_ok(g_ctx, tdacl_model_prefill_slot(m, 0, prompt, tok));
    assert_ok(g_ctx, tdacl_model_prefill_slot(m, 1, prompt - 3, tok));
    int32_t slots[2] = {0, 1}, next[2] = {tok[prompt], tok[prompt - 3]};
    assert_ok(g_ctx, tdacl_model_decode_slots(m, 2, slots, next));
    assert_ok(g_ctx, tdacl_model_logits(m, got, 2 * VOCAB, NULL));
    snprintf(msg, sizeof msg, "%s: slots at two positions", what);
    check_logits(got, want + (size_t)prompt * VOCAB, VOCAB, LOGIT_BOUND, msg);
    check_logits(got + VOCAB, want + (size_t)(prompt - 3) * VOCAB, VOCAB, LOGIT_BOUND, msg);
    free(want), free(got);
}

/* ---- Algorithm 1 on the reference ------------------------------------------------------- */

#define MAXT NPOS
typedef struct ref_calib {
    int k[L_LAYERS], post;
    double sum[L_LAYERS][HEADS][MAXT], sq[L_LAYERS][HEADS][MAXT], eta[L_LAYERS][HEADS][MAXT];
    int cnt[L_LAYERS][HEADS][MAXT];
    double last[L_LAYERS][HEADS][MAXT]; /* the last sequence's thresholds (-inf: keep all) */
    double min_gap;                      /* smallest half-gap between a row's k-th and (k+1)-th */
} ref_calib;

static int desc_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Row thresholds of one head of one sequence: the midpoint of each row's k-th and (k+1)-th
 * largest scores (or weights), by sorting. */
static int ref_hook(void *user, int layer, int head, int T, int d, const double *q, const double *k, double *thr)
{
    ref_calib *c = user;
    const int kk = c->k[layer];
    double s[MAXT], sorted[MAXT];
    for (int i = 0; i < T; i++) {
        const int n = i + 1;
        double mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int e = 0; e < d; e++) acc += q[i * d + e] * k[j * d + e];
            s[j] = acc / sqrt((double)d);
            mx = fmax(mx, s[j]);
        }
        if (n <= kk) {
            thr[i] = c->last[layer][head][i] = -INFINITY;
            continue;
        }
        double z = 0;
        for (int j = 0; j < n; j++) z += exp(s[j] - mx);
        for (int j = 0; j < n; j++) sorted[j] = c->post ? exp(s[j] - mx) / z : s[j];
        qsort(sorted, (size_t)n, sizeof *sorted, desc_cmp);
        const double t = 0.5 * (sorted[kk - 1] + sorted[kk]);
        c->min_gap = fmin(c->min_gap, 0.5 * (sorted[kk - 1] - sorted[kk]));
        thr[i] = c->last[layer][head][i] = t;
        c->sum[layer][head][i] += t, c->sq[layer][head][i] += t * t, c->cnt[layer][head][i]++;
        double dropped = 0;
        for (int j = 0; j < n; j++) dropped += s[j] < t ? exp(s[j]) : 0.0;
        c->eta[layer][head][i] += log(dropped);
    }
    return 0;
}

/* The reference's Algorithm 1 over `count` tokens cut into sequences of seq_len. */
static void ref_calibrate(gpt_ref_model *ref, ref_calib *c, const int32_t *tok, int count, int seq_len)
{
    ref->kind = TDACL_ATTN_TOPK_THETA;
    ref->theta_post = c->post;
    ref->topk_hook = ref_hook, ref->topk_user = c;
    c->min_gap = INFINITY;
    double *logits = malloc(sizeof(double) * (size_t)seq_len * VOCAB);
    assert_non_null(logits);
    for (int at = 0; at < count; at += seq_len) {
        int len = count - at < seq_len ? count - at : seq_len;
        assert_int_equal(gpt_ref_forward(ref, len, tok + at, logits, NULL), 0);
    }
    free(logits);
    ref->topk_hook = NULL;
    /* the test is only as good as the device's top-k matching the reference's */
    assert_true(c->min_gap > (c->post ? 1e-6 : 1e-4));
}

/* ---- tests ------------------------------------------------------------------------------- */

/* tdacl_model_calibrate against the reference's Algorithm 1: four sequences (the last one
 * short), k per layer, an offset of half a standard deviation; pre-softmax with the offline
 * SDC table, then post-softmax as a fitted line. */
static void test_calibrate(void **state)
{
    (void)state;
    char *dir = make_model("calib", "{\"kind\":\"softmax\"}", 11);
    enum { SEQ = 20, COUNT = 67 };
    int32_t tok[COUNT];
    tokens_of(5, COUNT, tok);
    tdacl_model *m = load(dir, NULL, -1, -1, 1);
    int kl[L_LAYERS] = {3, 4};
    for (int post = 0; post < 2; post++) {
        char path[600];
        snprintf(path, sizeof path, "%s/th%d.json", dir, post);
        tdacl_calibrate_desc cd;
        tdacl_calibrate_desc_init(&cd);
        cd.k_per_layer = kl, cd.offset_std = post ? 0.0f : 0.5f, cd.seq_len = SEQ, cd.theta_post = post;
        cd.fit_degree = post ? 1 : -1;
        assert_ok(g_ctx, tdacl_model_calibrate(m, &cd, tok, COUNT, path));

        gpt_ref_model ref;
        ref_load(dir, &ref);
        static ref_calib rc;
        memset(&rc, 0, sizeof rc);
        rc.k[0] = kl[0], rc.k[1] = kl[1], rc.post = post;
        ref_calibrate(&ref, &rc, tok, COUNT, SEQ);
        gpt_ref_free(&ref);

        tdacl_thresholds th;
        assert_ok(NULL, tdacl__thresholds_read(path, L_LAYERS, HEADS, NPOS, &th));
        assert_int_equal(th.post, post);
        const double tol = post ? 2e-6 : 2e-5;
        for (int l = 0; l < L_LAYERS; l++) {
            const tdacl_threshold_layer *tl = &th.layers[l];
            assert_int_equal(tl->k, kl[l]);
            assert_int_equal(tl->first_row, kl[l]);
            assert_int_equal(tl->rows, post ? NPOS : SEQ);
            assert_true(post ? tl->log_mass == NULL : tl->log_mass != NULL);
            for (int h = 0; h < HEADS; h++) {
                /* the reference's table: mean + offset * std of each row's samples */
                double want[MAXT], eta[MAXT];
                for (int r = kl[l]; r < SEQ; r++) {
                    const double n = rc.cnt[l][h][r], mean = rc.sum[l][h][r] / n;
                    assert_int_equal(rc.cnt[l][h][r], r < 7 ? 4 : 3);
                    want[r] = mean + cd.offset_std * sqrt(fmax(rc.sq[l][h][r] / n - mean * mean, 0.0));
                    eta[r] = rc.eta[l][h][r] / n;
                }
                if (post) { /* least squares of want on x = ln(r + 1) */
                    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = SEQ - kl[l];
                    for (int r = kl[l]; r < SEQ; r++) {
                        double x = log(r + 1.0);
                        sx += x, sy += want[r], sxx += x * x, sxy += x * want[r];
                    }
                    const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
                    for (int r = kl[l]; r < NPOS; r++) want[r] = a + b * log(r + 1.0);
                }
                for (int r = 0; r < tl->rows; r++) {
                    const double got = tl->theta[h * tl->rows + r];
                    if (r < kl[l]) {
                        assert_true(isinf(got) && got < 0);
                        if (!post) assert_true(isinf(tl->log_mass[h * tl->rows + r]));
                        continue;
                    }
                    if (fabs(got - want[r]) > tol * fmax(1.0, fabs(want[r])))
                        fail_msg("%s layer %d head %d row %d: threshold %.9g, reference %.9g", post ? "post" : "pre", l, h,
                                 r, got, want[r]);
                    if (!post && fabs(tl->log_mass[h * tl->rows + r] - eta[r]) > 1e-4 * fmax(1.0, fabs(eta[r])))
                        fail_msg("layer %d head %d row %d: sdc_log_mass %.9g, reference %.9g", l, h, r,
                                 tl->log_mass[h * tl->rows + r], eta[r]);
                }
            }
        }
        tdacl__thresholds_free(&th);
    }
    /* errors, each named */
    tdacl_calibrate_desc cd;
    tdacl_calibrate_desc_init(&cd);
    cd.k = SEQ, cd.seq_len = SEQ;
    char path[600];
    snprintf(path, sizeof path, "%s/none.json", dir);
    assert_status(g_ctx, tdacl_model_calibrate(m, &cd, tok, COUNT, path), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "no calibration sequence is longer than k = 20");
    assert_false(tu_exists(path));
    cd.k = 3, cd.seq_len = NPOS + 1;
    assert_status(g_ctx, tdacl_model_calibrate(m, &cd, tok, COUNT, path), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "desc.seq_len");
    cd.seq_len = 0, cd.fit_degree = 4;
    assert_status(g_ctx, tdacl_model_calibrate(m, &cd, tok, COUNT, path), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "desc.fit_degree");
    cd.fit_degree = -1, cd.k = 0;
    assert_status(g_ctx, tdacl_model_calibrate(m, &cd, tok, COUNT, path), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "k = 0 for layer 0");
    cd.k = 3;
    int32_t bad[3] = {1, VOCAB, 2};
    assert_status(g_ctx, tdacl_model_calibrate(m, &cd, bad, 3, path), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "outside the vocabulary");
    assert_ok(g_ctx, tdacl_model_destroy(m));
    free(dir);
}

/* A threshold file with the tables of rc.last (this sequence's exact top-k thresholds). */
static void write_thresholds(const char *path, const ref_calib *rc, int T, int with_mass, double mass[L_LAYERS][HEADS][MAXT])
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"%s\",\"n_layer\":%d,\"n_head\":%d,\"layers\":[",
            rc->post ? "post" : "pre", L_LAYERS, HEADS);
    for (int l = 0; l < L_LAYERS; l++) {
        fprintf(f, "%s{\"k\":%d,\"thresholds\":[", l ? "," : "", rc->k[l]);
        for (int h = 0; h < HEADS; h++) {
            fprintf(f, "%s[", h ? "," : "");
            for (int r = rc->k[l]; r < T; r++) fprintf(f, "%s%.17g", r > rc->k[l] ? "," : "", rc->last[l][h][r]);
            fprintf(f, "]");
        }
        fprintf(f, "]");
        if (with_mass) {
            fprintf(f, ",\"sdc_log_mass\":[");
            for (int h = 0; h < HEADS; h++) {
                fprintf(f, "%s[", h ? "," : "");
                for (int r = rc->k[l]; r < T; r++) fprintf(f, "%s%.17g", r > rc->k[l] ? "," : "", mass[l][h][r]);
                fprintf(f, "]");
            }
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
    fclose(f);
}

/* The reference's tables from rc.last (and mass), for every row up to T. */
static void ref_tables(gpt_ref_model *ref, const ref_calib *rc, int T, double mass[L_LAYERS][HEADS][MAXT])
{
    for (int l = 0; l < L_LAYERS; l++) {
        gpt_ref_layer *L = &ref->layers[l];
        free(L->thresholds), free(L->log_mass);
        L->nthr = T;
        L->thresholds = malloc(sizeof(double) * HEADS * T);
        L->log_mass = mass ? malloc(sizeof(double) * HEADS * T) : NULL;
        for (int h = 0; h < HEADS; h++)
            for (int r = 0; r < T; r++) {
                L->thresholds[h * T + r] = r < rc->k[l] ? -INFINITY : rc->last[l][h][r];
                if (mass) L->log_mass[h * T + r] = r < rc->k[l] ? -INFINITY : mass[l][h][r];
            }
    }
}

/* Top-theta models against the reference: thresholds exact for one sequence (so no key sits
 * near its threshold), in every mode, through desc.thresholds and through config.json. */
static void test_topk_model(void **state)
{
    (void)state;
    enum { T = 24, PROMPT = 12 };
    int32_t tok[T];
    tokens_of(9, T, tok);
    char *dir = make_model("topk", "{\"kind\":\"softmax\"}", 21);
    static const struct { int post, sdc, vmc, mass; const char *what; } modes[] = {
        {0, TDACL_SDC_NONE, 0, 0, "pre"},
        {0, TDACL_SDC_EXACT, 1, 0, "pre + exact SDC + VMC"},
        {0, TDACL_SDC_EXP_THRESHOLD, 0, 0, "pre + exp-threshold SDC"},
        {0, TDACL_SDC_OFFLINE, 1, 1, "pre + offline SDC + VMC"},
        {1, TDACL_SDC_NONE, 1, 0, "post + VMC"},
        {1, TDACL_SDC_NONE, 0, 0, "post"},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        gpt_ref_model ref;
        ref_load(dir, &ref);
        static ref_calib rc;
        memset(&rc, 0, sizeof rc);
        rc.k[0] = 3, rc.k[1] = 5, rc.post = modes[i].post;
        ref_calibrate(&ref, &rc, tok, T, T);
        static double mass[L_LAYERS][HEADS][MAXT];
        for (int l = 0; l < L_LAYERS; l++)
            for (int h = 0; h < HEADS; h++)
                for (int r = 0; r < T; r++) mass[l][h][r] = 0.3 * sin(r + 3.0 * l + h) - 1.0;
        char path[600];
        snprintf(path, sizeof path, "%s/exact%zu.json", dir, i);
        write_thresholds(path, &rc, T, modes[i].mass, mass);
        ref_tables(&ref, &rc, T, modes[i].mass ? mass : NULL);
        ref.sdc = (tdacl_sdc)modes[i].sdc, ref.vmc = modes[i].vmc;
        tdacl_model *m = load(dir, path, modes[i].sdc, modes[i].vmc, 2);
        tdacl_model_info info;
        assert_ok(g_ctx, tdacl_model_get_info(m, &info));
        assert_int_equal(info.attention, TDACL_ATTN_TOPK_THETA);
        check_model(m, &ref, tok, T, PROMPT, modes[i].what);
        assert_ok(g_ctx, tdacl_model_destroy(m));
        /* the same through config.json (a copy of the model naming the file) */
        if (i == 1) {
            char cfg[700];
            snprintf(cfg, sizeof cfg, "%s/config.json", dir);
            size_t len = 0;
            char *text = (char *)tu_read_file(cfg, &len);
            char *at = strstr(text, "\"attention\":");
            assert_non_null(at);
            char edited[2048];
            snprintf(edited, sizeof edited, "%.*s\"attention\":{\"kind\":\"topk_theta\",\"thresholds\":\"exact1.json\","
                     "\"sdc\":\"exact\",\"vmc\":true}}", (int)(at - text), text);
            write_text(dir, "config.json", edited);
            m = load(dir, NULL, -1, -1, 2);
            check_model(m, &ref, tok, T, PROMPT, "config.json topk_theta");
            assert_ok(g_ctx, tdacl_model_destroy(m));
            /* errors: no file, a missing table for offline SDC */
            snprintf(edited, sizeof edited, "%.*s\"attention\":{\"kind\":\"topk_theta\",\"thresholds\":\"absent.json\"}}",
                     (int)(at - text), text);
            write_text(dir, "config.json", edited);
            tdacl_model_desc d;
            tdacl_model_desc_init(&d);
            d.path = dir;
            assert_status(g_ctx, tdacl_model_load(g_ctx, &d, &m), TDACL_ERR_IO);
            assert_contains(tdacl_last_error(g_ctx), "absent.json");
            snprintf(edited, sizeof edited, "%.*s\"attention\":{\"kind\":\"topk_theta\"}}", (int)(at - text), text);
            write_text(dir, "config.json", edited);
            assert_status(g_ctx, tdacl_model_load(g_ctx, &d, &m), TDACL_ERR_INVALID_ARGUMENT);
            assert_contains(tdacl_last_error(g_ctx), "needs a threshold file");
            d.thresholds = path, d.topk_sdc = TDACL_SDC_OFFLINE;
            assert_status(g_ctx, tdacl_model_load(g_ctx, &d, &m), TDACL_ERR_FORMAT);
            assert_contains(tdacl_last_error(g_ctx), "layers[0].sdc_log_mass");
            d.topk_sdc = 7;
            assert_status(g_ctx, tdacl_model_load(g_ctx, &d, &m), TDACL_ERR_INVALID_ARGUMENT);
            assert_contains(tdacl_last_error(g_ctx), "desc.topk_sdc");
            write_text(dir, "config.json", text);
            free(text);
        }
        if (i == 4) { /* post-softmax thresholds take no SDC */
            tdacl_model_desc d;
            tdacl_model_desc_init(&d);
            d.path = dir, d.thresholds = path, d.topk_sdc = TDACL_SDC_EXACT;
            assert_status(g_ctx, tdacl_model_load(g_ctx, &d, &m), TDACL_ERR_INVALID_ARGUMENT);
            assert_contains(tdacl_last_error(g_ctx), "post-softmax");
        }
        gpt_ref_free(&ref);
    }
    /* desc.thresholds on a model of another kind */
    char *tra = make_model("topk_tra", "{\"kind\":\"tra\"}", 22);
    tdacl_model_desc d;
    tdacl_model_desc_init(&d);
    char path[600];
    snprintf(path, sizeof path, "%s/exact0.json", dir);
    d.path = tra, d.thresholds = path;
    tdacl_model *m = NULL;
    assert_status(g_ctx, tdacl_model_load(g_ctx, &d, &m), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "not tra");
    free(tra);
    free(dir);
}

/* entmax layers: alpha 1.5 from the config in layer 0 with per-head delta, sparsemax from
 * h.1.attn.entmax_alpha, a length-adaptive temperature (beta, gamma) from the config. */
static void test_entmax_model(void **state)
{
    (void)state;
    enum { T = 24, PROMPT = 10 };
    char *dir = make_model("entmax", "{\"kind\":\"entmax\",\"alpha\":1.5,\"temp_beta\":0.25,\"temp_gamma\":0.5}", 31);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    cu_file f = cu_load(path);
    /* make-model's writer wrote the optional entmax tensors with the config's values */
    cu_tensor *a1 = cu_find(&f, "h.1.attn.entmax_alpha"), *b0 = cu_find(&f, "h.0.attn.entmax_beta");
    assert_true(a1 && b0);
    assert_true(rd(a1, 0) == 1.5 && rd(b0, 0) == 0.25);
    wr(a1, 0, 2.0);
    cu_remove(&f, "h.0.attn.entmax_delta");
    const float delta[HEADS] = {1.25f, 0.75f};
    int64_t shape[1] = {HEADS};
    cu_add(&f, "h.0.attn.entmax_delta", "F32", 1, shape, delta, sizeof delta);
    cu_save(path, &f);
    cu_free(&f);

    gpt_ref_model ref;
    ref_load(dir, &ref);
    assert_true(ref.layers[1].alpha == 2.0 && ref.layers[0].temps[3] == 0.75 && ref.layers[0].temps[0] == 1.25);
    int32_t tok[T];
    tokens_of(17, T, tok);
    /* sparse but not trivially: some weights zero, not all */
    double *logits = malloc(sizeof(double) * T * VOCAB);
    gpt_ref_stats st;
    assert_int_equal(gpt_ref_forward(&ref, T, tok, logits, &st), 0);
    free(logits);
    const double zero = (double)st.zero_weights / (double)st.visible_pairs;
    assert_true(zero > 0.1 && zero < 0.9);
    tdacl_model *m = load(dir, NULL, -1, -1, 2);
    check_model(m, &ref, tok, T, PROMPT, "entmax");
    assert_ok(g_ctx, tdacl_model_destroy(m));
    /* a bad alpha is refused, named */
    f = cu_load(path);
    wr(cu_find(&f, "h.1.attn.entmax_alpha"), 0, 1.0);
    cu_save(path, &f);
    cu_free(&f);
    tdacl_model_desc d;
    tdacl_model_desc_init(&d);
    d.path = dir;
    assert_status(g_ctx, tdacl_model_load(g_ctx, &d, &m), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(g_ctx), "h.1.attn.entmax_alpha");
    gpt_ref_free(&ref);
    free(dir);
}

/* The threshold file reader: tables and functions expanded, every bad file named. */
static void test_threshold_files(void **state)
{
    (void)state;
    const char *good =
        "{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
        "{\"k\":2,\"thresholds\":[[0.5,0.25,0.125],[1,2,3]],\"sdc_log_mass\":[[-1,-2,-3],[4,5,6]]},"
        "{\"k\":1,\"first_row\":3,\"fit\":[[1,-0.5,0],[0.25,0,2]]}],\"calibration\":{\"sequences\":3}}";
    tdacl_thresholds th;
    assert_ok(NULL, tdacl__thresholds_parse(good, strlen(good), "good.json", 2, 2, 8, &th));
    assert_int_equal(th.post, 0);
    const tdacl_threshold_layer *a = &th.layers[0], *b = &th.layers[1];
    assert_int_equal(a->k, 2);
    assert_int_equal(a->first_row, 2);
    assert_int_equal(a->rows, 5);
    const float want_a[2][5] = {{-INFINITY, -INFINITY, 0.5f, 0.25f, 0.125f}, {-INFINITY, -INFINITY, 1, 2, 3}};
    const float mass_a[2][5] = {{-INFINITY, -INFINITY, -1, -2, -3}, {-INFINITY, -INFINITY, 4, 5, 6}};
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 5; r++) {
            assert_true(a->theta[h * 5 + r] == want_a[h][r]);
            assert_true(a->log_mass[h * 5 + r] == mass_a[h][r]);
        }
    assert_int_equal(b->first_row, 3);
    assert_int_equal(b->rows, 8); /* a function covers every row the model holds */
    assert_null(b->log_mass);
    for (int r = 0; r < 8; r++) {
        const double x = log(r + 1.0);
        const float w0 = r < 3 ? -INFINITY : (float)(1 - 0.5 * x), w1 = r < 3 ? -INFINITY : (float)(0.25 + 2 * x * x);
        assert_true(fabsf(b->theta[r] - w0) <= 1e-6f || b->theta[r] == w0);
        assert_true(fabsf(b->theta[8 + r] - w1) <= 1e-6f || b->theta[8 + r] == w1);
    }
    tdacl__thresholds_free(&th);
    /* a table longer than the context is cut */
    assert_ok(NULL, tdacl__thresholds_parse(good, strlen(good), "good.json", 2, 2, 3, &th));
    assert_int_equal(th.layers[0].rows, 3);
    assert_int_equal(th.layers[1].rows, 3);
    tdacl__thresholds_free(&th);

    static const struct { const char *text, *want; } bad[] = {
        {"[1]", "top level"},
        {"{\"format\":\"x\"}", "'format'"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":2}", "'version'"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"mid\"}", "'mode'"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":3,\"layers\":[]}",
         "does not match the model (2 layers, 2 heads)"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":[{}]}",
         "'layers'"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":[{},{}]}",
         "missing key 'layers[0].k'"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":0,\"thresholds\":[[1],[1]]},{}]}", "layers[0].k"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1},{}]}", "exactly one of 'thresholds'"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1,\"thresholds\":[[1],[1]],\"fit\":[[1],[1]]},{}]}", "exactly one of 'thresholds'"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1,\"thresholds\":[[1,2],[1]]},{}]}", "'layers[0].thresholds[1]' has 1 values, head 0 has 2"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1,\"thresholds\":[[1]]},{}]}", "has 1 arrays, the model 2 heads"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1,\"thresholds\":[[1],[\"x\"]]},{}]}", "'layers[0].thresholds[1][0]' must be a finite number"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1,\"thresholds\":[[1],[1e39]]},{}]}", "fp32 range"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1,\"fit\":[[1,1,1,1,1,1,1,1,1],[1]]},{}]}", "at most 8"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"mode\":\"pre\",\"n_layer\":2,\"n_head\":2,\"layers\":["
         "{\"k\":1,\"thresholds\":[[1],[1]],\"sdc_log_mass\":[[],[]]},{}]}", "sdc_log_mass[0]' must be a non-empty"},
        {"{\"format\":\"tdacl-thresholds\",\"version\":1,\"version\":1}", "appears twice"},
        {"{\"format\":\"tdacl-thresholds\"", "thresholds.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tdacl_status st = tdacl__thresholds_parse(bad[i].text, strlen(bad[i].text), "thresholds.json", 2, 2, 8, &th);
        if (st != TDACL_ERR_FORMAT) fail_msg("case %zu: status %d (%s)", i, (int)st, tdacl_last_error(NULL));
        assert_contains(tdacl_last_error(NULL), bad[i].want);
        assert_contains(tdacl_last_error(NULL), "thresholds.json");
    }
    assert_status(NULL, tdacl__thresholds_read("/nonexistent/th.json", 2, 2, 8, &th), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(NULL), "/nonexistent/th.json");
}

static int setup(void **state)
{
    (void)state;
    tdacl_context_desc cd;
    tdacl_context_desc_init(&cd);
    if (tdacl_context_create(&cd, &g_ctx)) return -1;
    g_root = tu_mkdtemp("sparse-models");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tdacl_context_destroy(g_ctx);
    tu_rm_rf(g_root);
    free(g_root);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) cmocka_set_test_filter(argv[++i]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threshold_files),
        cmocka_unit_test(test_calibrate),
        cmocka_unit_test(test_topk_model),
        cmocka_unit_test(test_entmax_model),
    };
    return cmocka_run_group_tests_name("sparse_models", tests, setup, teardown);
}
