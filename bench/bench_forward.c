/* The forward suite: GPT-2-small-sized TDA and softmax decoders with random weights,
 * prefill (T x batch) and per-token decode at a given context, timed by wall clock around a
 * drained queue (a forward pass is hundreds of kernels), and generate: greedy tokens drawn on
 * the device in `tdacl generate`'s loop, ms a token.  Decode and generate rows carry the bound
 * weight bytes / measured bandwidth. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "model/checkpoint.h"
#include "model/model.h"

/* GPT-2 small dimensions with 8320 positions, so one model serves every context (8192 plus
 * room for the decode steps). */
static const char *config_of(const char *kind, int quick)
{
    if (quick) {
        if (!strcmp(kind, "tda"))
            return "{\"n_layer\": 4, \"n_head\": 4, \"n_embd\": 256, \"vocab_size\": 4096, \"n_positions\": 2048,"
                   " \"attention\": {\"kind\": \"tda\", \"beta\": 1, \"kappa\": 1, \"power\": 2, \"head_norm\": \"rms\"},"
                   " \"position\": \"rope\", \"rope_theta\": 10000}";
        return "{\"n_layer\": 4, \"n_head\": 4, \"n_embd\": 256, \"vocab_size\": 4096, \"n_positions\": 2048}";
    }
    if (!strcmp(kind, "tda"))
        return "{\"n_layer\": 12, \"n_head\": 12, \"n_embd\": 768, \"vocab_size\": 50257, \"n_positions\": 8320,"
               " \"attention\": {\"kind\": \"tda\", \"beta\": 1, \"kappa\": 1, \"power\": 2, \"head_norm\": \"rms\"},"
               " \"position\": \"rope\", \"rope_theta\": 10000}";
    return "{\"n_layer\": 12, \"n_head\": 12, \"n_embd\": 768, \"vocab_size\": 50257, \"n_positions\": 8320}";
}

/* Writes the checkpoint once into $TDACL_BENCH_MODELS (default /tmp/tdacl-bench-models). */
static int model_dir(const char *kind, int quick, char *dir, size_t n)
{
    const char *root = getenv("TDACL_BENCH_MODELS");
    if (!root || !*root) root = "/tmp/tdacl-bench-models";
    snprintf(dir, n, "%s/%s-%s", root, quick ? "quick" : "gpt2-small", kind);
    char probe[600];
    struct stat sb;
    snprintf(probe, sizeof probe, "%s/model.safetensors", dir);
    if (stat(probe, &sb) == 0) return 0;
    if (tdacl__checkpoint_write_random(dir, config_of(kind, quick), 1, TDACL_F32)) {
        fprintf(stderr, "\ntdacl-bench: cannot write the %s model to %s: %s\n", kind, dir, tdacl_last_error(NULL));
        return 1;
    }
    return 0;
}

typedef struct fwd_job {
    tdacl_context *ctx;
    tdacl_model *model;
    int batch, len, context;
    int32_t *tokens;
    int decode;
    uint64_t launches; /* kernels the last decode step (or prefill pass) enqueued */
    int32_t *slots;    /* serving rows: batch slots, slot i at its own length (slot_len) */
    int (*slot_len)(int i, int n, int context);
    double host_ms;    /* decode steps (prefill passes) after the first: the host's enqueue time (until the call returned), summed */
    int host_steps;
    int generate;      /* generate rows: GENERATE_TOKENS greedy tokens drawn on the device a sample */
} fwd_job;

#define GENERATE_TOKENS 16

/* A generate row's sample: from a prompt of context - 1 tokens and its first greedy token
 * (untimed), GENERATE_TOKENS more in `tdacl generate`'s loop (src/cli/cli_run.c): step i + 1
 * is enqueued from the id on the device before token i is read; ms a token. */
static tdacl_status generate_once(fwd_job *j, double *ms)
{
    int32_t id;
    tdacl_status st = tdacl__model_prefill(j->model, 1, j->context - 1, j->tokens, 1);
    if (!st) st = tdacl_model_sample(j->model, 0.0f, 0, NULL);
    if (!st) st = tdacl_model_sampled(j->model, &id, 1);
    if (!st) st = tdacl_finish(j->ctx);
    if (st) return st;
    const double t0 = tdacl__now();
    const uint64_t before = j->ctx->launches;
    for (int i = 0; !st && i < GENERATE_TOKENS; i++) {
        st = tdacl_model_decode(j->model, 1, NULL);
        if (!st && i > 0) st = tdacl_model_sampled(j->model, &id, 1);
        if (!st) st = tdacl_model_sample(j->model, 0.0f, 0, NULL);
    }
    if (!st) st = tdacl_model_sampled(j->model, &id, 1);
    if (!st) st = tdacl_finish(j->ctx);
    j->launches = (j->ctx->launches - before) / GENERATE_TOKENS;
    *ms = (tdacl__now() - t0) * 1e3 / GENERATE_TOKENS;
    return st;
}

/* Serving rows: slot i of n starts at context/2 + i * (context/2) / n tokens, so the step's
 * sequences sit at n positions spread over the second half of the nominal context. */
/* A fused decode step's launches a layer for the row's note; the decode-layer row that runs
 * it, if one does, in the row's variant column (TDACL_LOG=debug says why not). */
static const char *fused_decode(tdacl_model *m, int batch, bench_row *r)
{
    char why[600];
    int launches;
    const char *layer = tdacl__model_decode_layer_choice(m, batch, &launches, why, sizeof why);
    if (layer) snprintf(r->variant, sizeof r->variant, "%s", layer);
    tdacl_model_info info;
    tdacl_model_get_info(m, &info);
    return launches == 1 ? "fused decode, one launch for all layers"
           : launches == info.n_layer ? "fused decode, one launch a layer" : "fused decode, five launches a layer";
}

static int spread_len(int i, int n, int context) { return context / 2 + (int)((int64_t)i * (context / 2) / n); }

/* One decode step of every slot at its own position (tdacl_model_decode_slots); the slots
 * start over when the longest would outgrow the cache. */
static tdacl_status slots_once(fwd_job *j, double *ms)
{
    tdacl_status st;
    tdacl_model_info info;
    tdacl_model_get_info(j->model, &info);
    int longest = 0;
    tdacl_model_slot_position(j->model, j->batch - 1, &longest);
    if (longest == 0 || longest >= info.max_context)
        for (int i = 0; i < j->batch; i++)
            if ((st = tdacl_model_prefill_slot(j->model, i, j->slot_len(i, j->batch, j->context),
                                               j->tokens + (size_t)i * info.max_context)))
                return st;
    if ((st = tdacl_finish(j->ctx))) return st;
    double t0 = tdacl__now();
    uint64_t before = j->ctx->launches;
    st = tdacl_model_decode_slots(j->model, j->batch, j->slots, j->tokens);
    j->launches = j->ctx->launches - before;
    if (!st) st = tdacl_finish(j->ctx);
    *ms = (tdacl__now() - t0) * 1e3;
    return st;
}

static tdacl_status fwd_once(void *user, double *ms)
{
    fwd_job *j = user;
    tdacl_status st;
    double t0;
    if (j->slots) return slots_once(j, ms);
    if (j->generate) return generate_once(j, ms);
    if (j->decode) {
        /* one step at a context of `context` .. context + 15 keys */
        int pos;
        tdacl_model_position(j->model, &pos);
        tdacl_model_info info;
        tdacl_model_get_info(j->model, &info);
        /* keep the measured context within 16 tokens of the nominal one */
        if (pos >= info.max_context || pos < j->context - 1 || pos >= j->context + 15) {
            if ((st = tdacl__model_prefill(j->model, j->batch, j->context - 1, j->tokens, 1))) return st;
        }
        if ((st = tdacl_finish(j->ctx))) return st;
        t0 = tdacl__now();
        uint64_t before = j->ctx->launches;
        st = tdacl_model_decode(j->model, j->batch, j->tokens);
        j->launches = j->ctx->launches - before;
        if (j->host_steps++) j->host_ms += (tdacl__now() - t0) * 1e3; /* the first step builds programs */
    } else {
        if ((st = tdacl_finish(j->ctx))) return st;
        t0 = tdacl__now();
        uint64_t before = j->ctx->launches;
        st = tdacl__model_prefill(j->model, j->batch, j->len, j->tokens, 1);
        j->launches = j->ctx->launches - before;
        if (j->host_steps++) j->host_ms += (tdacl__now() - t0) * 1e3; /* the first pass builds programs */
    }
    if (!st) st = tdacl_finish(j->ctx);
    *ms = (tdacl__now() - t0) * 1e3;
    return st;
}

/* A forward row's storage: weights and activations (docs/spec.md section 4.6), and the
 * dtype label of its rows. */
typedef struct fwd_mode {
    tdacl_dtype weights, activations;
    const char *label, *note;
} fwd_mode;

/* The forward dtypes: f32 unless --dtype names others; bf16 means bf16 weights on the device
 * and TDACL_PRECISION=bf16 for the pass (the GEMMs and attention on the matrix units where the
 * device has them; activations stay fp32); bf16act: bf16 weights and bf16 activations and KV
 * cache (the matrix units without a precision setting).  f16 has no model path. */
static int forward_modes(const bench_options *o, fwd_mode out[3])
{
    static const fwd_mode modes[3] = {
        {TDACL_F32, TDACL_F32, "f32", ""},
        {TDACL_BF16, TDACL_F32, "bf16", "bf16 weights, TDACL_PRECISION=bf16, fp32 activations"},
        {TDACL_BF16, TDACL_BF16, "bf16act", "bf16 weights and activations"},
    };
    if (!o->ndtypes) return out[0] = modes[0], 1;
    int n = 0;
    for (int i = 0; i < o->ndtypes && n < 3; i++)
        for (int k = 0; k < 3; k++)
            if (!strcmp(o->dtypes[i], modes[k].label)) out[n++] = modes[k];
    return n;
}

static int slots_rows(bench_run *run, tdacl_context *ctx, int dev, const fwd_mode *fm, const char *kind, const char *dir,
                      int n, int context, const tdacl_measure_opts *mo);

/* Serving rows of a model: 32 and 64 sequences on GPUs; none with --no-decode; --quick, none
 * unless --serving, then the softmax model's only (on a 2-core CPU its slot programs took 95 s
 * of a cold --quick) */
static int serving_rows(const bench_options *o, int gpu, const char *kind)
{
    if (!o->decode) return 0;
    if (o->quick) return o->serving && !strcmp(kind, "softmax");
    return gpu ? 2 : 1;
}

static int forward_dtype(bench_run *run, tdacl_context *ctx, int dev, const fwd_mode *fm, const char *const kinds[2],
                         int gpu, int quick)
{
    const bench_options *o = &run->opt;
    const bench_device *bd = &run->devices[dev];
    int failures = 0;

    /* prefill (T, batch) and decode contexts: SPEC-sized on GPUs, one point on CPUs */
    int prefill[4][2] = {{1024, 1}, {1024, 8}, {4096, 1}, {4096, 8}}, nprefill = gpu ? 4 : 1;
    int contexts[2] = {1024, 8192}, ncontexts = gpu ? 2 : 1;
    if (quick) prefill[0][0] = 256, nprefill = 1, contexts[0] = 512, ncontexts = 1;
    /* --T: these prefill lengths at batch 1 (up to 4); --decode-Tk: this one decode context */
    if (o->nT) {
        nprefill = o->nT < 4 ? o->nT : 4;
        for (int i = 0; i < nprefill; i++) prefill[i][0] = (int)o->T[i], prefill[i][1] = 1;
    }
    if (o->decode_Tk) contexts[0] = (int)o->decode_Tk, ncontexts = 1;
    if (!o->decode) ncontexts = 0; /* --no-decode: no decode or serving rows */
    tdacl_measure_opts mo = o->measure;
    if (!gpu) mo.min_samples = mo.min_samples < 3 ? mo.min_samples : 3, mo.min_ms = 0;
    for (int ki = 0; ki < 2; ki++) {
        if (o->nkinds) {
            int keep = 0;
            for (int i = 0; i < o->nkinds; i++) keep |= !strcmp(o->kinds[i], kinds[ki]);
            if (!keep) continue;
        } else if (quick && strcmp(kinds[ki], "softmax")) {
            continue; /* --quick: the softmax model (its programs are the fewest to build on a CPU) */
        }
        int max_ctx = quick ? 1024 : gpu ? 8320 : 2048, max_batch = gpu && !quick ? 8 : 1;
        for (int i = 0; i < nprefill; i++) max_ctx = prefill[i][0] > max_ctx ? prefill[i][0] : max_ctx;
        for (int i = 0; i < ncontexts; i++)
            max_ctx = contexts[i] + GENERATE_TOKENS + 1 > max_ctx ? contexts[i] + GENERATE_TOKENS + 1 : max_ctx;
        /* the rows: prefill, decode at each context, then generate at the first context */
        const int nrows = nprefill + ncontexts + (ncontexts > 0);
        if (run->planning) {
            for (int pi = 0; pi < nrows; pi++)
                if (pi >= nprefill || (!o->no_prefill && prefill[pi][1] <= max_batch)) bench_count_only(run);
            for (int si = 0; si < serving_rows(o, gpu, kinds[ki]); si++) bench_count_only(run);
            continue;
        }
        if (bench_stop_requested()) break;
        char dir[512];
        bench_progress(run, "%s forward: writing the %s model", bd->info.name, kinds[ki]);
        if (model_dir(kinds[ki], quick, dir, sizeof dir)) {
            failures++;
            continue;
        }
        tdacl_model_desc desc;
        tdacl_model_desc_init(&desc);
        desc.path = dir;
        desc.weight_dtype = fm->weights;
        desc.activation_dtype = fm->activations;
        desc.max_batch = max_batch;
        desc.max_context = max_ctx;
        tdacl_model *m = NULL;
        if (tdacl_model_load(ctx, &desc, &m)) {
            fprintf(stderr, "\ntdacl-bench: %s\n", tdacl_last_error(ctx));
            failures++;
            continue;
        }
        tdacl_model_info info;
        tdacl_model_get_info(m, &info);
        int32_t *tokens = malloc((size_t)max_batch * max_ctx * sizeof *tokens);
        if (!tokens) {
            tdacl_model_destroy(m);
            return failures + 1;
        }
        uint64_t s = 7;
        for (int i = 0; i < max_batch * max_ctx; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            tokens[i] = (int32_t)((s >> 33) % (uint64_t)info.vocab_size);
        }
        /* bf16 weights, f32 activations: the pass on the matrix units through the documented
         * switch, restored after */
        const char *was = getenv("TDACL_PRECISION");
        char *saved = was ? strdup(was) : NULL;
        if (fm->weights == TDACL_BF16 && fm->activations == TDACL_F32) setenv("TDACL_PRECISION", "bf16", 1);
        for (int pi = 0; pi < nrows; pi++) {
            const int decode = pi >= nprefill, generate = pi == nprefill + ncontexts;
            fwd_job j = {ctx, m, decode ? 1 : prefill[pi][1], decode ? 1 : prefill[pi][0],
                         generate ? contexts[0] : decode ? contexts[pi - nprefill] : 0, tokens, decode, 0, NULL, NULL, 0, 0,
                         generate};
            if (!decode && o->no_prefill) continue;
            if (j.len > max_ctx || j.context > max_ctx || j.batch > max_batch || bench_stop_requested()) continue;
            bench_row *r = bench_add_row(run);
            if (!r) break;
            snprintf(r->suite, sizeof r->suite, "forward");
            snprintf(r->name, sizeof r->name, "%s-%s", kinds[ki], generate ? "generate" : decode ? "decode" : "prefill");
            snprintf(r->device, sizeof r->device, "%s", bd->info.name);
            r->device_index = dev;
            snprintf(r->dtype, sizeof r->dtype, "%s", fm->label);
            snprintf(r->note, sizeof r->note, "%s", fm->note);
            snprintf(r->path, sizeof r->path, "%s", decode ? "decode" : "prefill");
            r->B = j.batch, r->Tq = decode ? 1 : j.len, r->Tk = decode ? j.context : j.len, r->d = info.head_dim;
            r->H = info.n_head;
            bench_progress(run, "%s forward %s B=%d T=%d", bd->info.name, r->name, j.batch, decode ? j.context : j.len);
            if (tdacl__measure(fwd_once, &j, &mo, &r->s)) {
                snprintf(r->note, sizeof r->note, "failed: %s", tdacl_last_error(ctx));
                fprintf(stderr, "\ntdacl-bench: forward %s: %s\n", r->name, tdacl_last_error(ctx));
                failures++;
                bench_row_done(run, r);
                continue;
            }
            /* 2 FLOPs per weight per token, plus the attention products */
            double tokens_run = (double)j.batch * (decode ? 1 : j.len);
            r->flops = 2.0 * (double)info.parameters * tokens_run;
            r->bytes = (double)info.weight_bytes;
            bench_finish_row(run, r);
            r->value = tokens_run / (r->s.median * 1e-3);
            snprintf(r->unit, sizeof r->unit, "tokens/s");
            if (decode) { /* which decode ran: fused (one launch a layer, or five) or layer by layer, and why */
                char why[200], note[sizeof r->note];
                const int fused = tdacl__model_decode_fused(m, j.batch, why, sizeof why);
                const char *fusedw = fused_decode(m, j.batch, r);
                /* the host's share: a step whose enqueueing takes as long as the step waits on the host */
                /* and the floor of that many launches at the measured enqueue time (argument-free) */
                const double floor_ms = bd->have_peak ? (double)j.launches * bd->peak.enqueue_us * 1e-3 : 0.0;
                char head[160];
                tdacl__model_head_fused(j.batch, 1, head, sizeof head);
                if (generate)
                    snprintf(note, sizeof note, "%s%s%s; head: %s; greedy ids drawn on the device, %d tokens a "
                             "sample (tdacl generate's loop); %llu kernels a token (launch floor %.3f)", r->note,
                             r->note[0] ? "; " : "", fused ? fusedw : why, head, GENERATE_TOKENS,
                             (unsigned long long)j.launches, floor_ms);
                else
                    snprintf(note, sizeof note, "%s%s%s; head: %s; %llu kernels a step; host enqueue %.3f ms a step "
                             "(launch floor %.3f)", r->note, r->note[0] ? "; " : "", fused ? fusedw : why, head,
                             (unsigned long long)j.launches, j.host_steps > 1 ? j.host_ms / (j.host_steps - 1) : 0.0,
                             floor_ms);
                snprintf(r->note, sizeof r->note, "%s", note);
            }
            if (!decode) { /* the host's share of a pass: its launches and the time they took to enqueue */
                char note[sizeof r->note];
                snprintf(note, sizeof note, "%s%s%llu kernels a pass; host enqueue %.3f ms a pass", r->note,
                         r->note[0] ? "; " : "", (unsigned long long)j.launches,
                         j.host_steps > 1 ? j.host_ms / (j.host_steps - 1) : 0.0);
                snprintf(r->note, sizeof r->note, "%s", note);
            }
            if (decode && bd->have_peak && bd->peak.bandwidth_gbs > 0) {
                /* every weight once, plus the KV cache the new token attends to */
                double kv = (double)info.n_layer * (info.attention == TDACL_ATTN_TDA ? 3.0 : 2.0) * (double)j.context *
                            (double)info.n_embd * (double)tdacl_dtype_size(fm->activations);
                r->bound_ms = ((double)info.weight_bytes + kv) / (bd->peak.bandwidth_gbs * 1e9) * 1e3;
            }
            bench_row_done(run, r);
        }
        free(tokens);
        tdacl_model_destroy(m);
        /* serving: sequences at different positions in one step (GPUs: 32 and 64; --quick: the
         * softmax model's 4, one more decode program to build on a CPU) */
        const int nslots[2] = {quick || !gpu ? 4 : 32, 64};
        for (int si = 0; si < serving_rows(o, gpu, kinds[ki]); si++)
            failures += slots_rows(run, ctx, dev, fm, kinds[ki], dir, nslots[si], contexts[0], &mo);
        if (saved) setenv("TDACL_PRECISION", saved, 1);
        else unsetenv("TDACL_PRECISION");
        free(saved);
    }
    return failures;
}

/* Serving rows: `n` sequences at different positions decoded together in each step
 * (tdacl_model_decode_slots), tokens/s over the step's rows; a model of its own with n slots
 * and a cache of context + 256 tokens. */
static int slots_rows(bench_run *run, tdacl_context *ctx, int dev, const fwd_mode *fm, const char *kind, const char *dir,
                      int n, int context, const tdacl_measure_opts *mo)
{
    const bench_device *bd = &run->devices[dev];
    if (bench_stop_requested()) return 0;
    tdacl_model_desc desc;
    tdacl_model_desc_init(&desc);
    desc.path = dir;
    desc.weight_dtype = fm->weights;
    desc.activation_dtype = fm->activations;
    desc.max_batch = n;
    desc.max_context = context + 256;
    tdacl_model *m = NULL;
    int32_t *tokens = malloc((size_t)n * (size_t)desc.max_context * sizeof *tokens), *slots = malloc((size_t)n * sizeof *slots);
    bench_row *r = tokens && slots ? bench_add_row(run) : NULL;
    if (!r) {
        free(tokens), free(slots);
        return 1;
    }
    snprintf(r->suite, sizeof r->suite, "forward");
    snprintf(r->name, sizeof r->name, "%s-decode-slots", kind);
    snprintf(r->device, sizeof r->device, "%s", bd->info.name);
    r->device_index = dev;
    snprintf(r->dtype, sizeof r->dtype, "%s", fm->label);
    snprintf(r->path, sizeof r->path, "decode");
    int failed = tdacl_model_load(ctx, &desc, &m) != TDACL_SUCCESS;
    tdacl_model_info info = {0};
    if (!failed) {
        tdacl_model_get_info(m, &info);
        uint64_t s = 11;
        for (size_t i = 0; i < (size_t)n * (size_t)desc.max_context; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            tokens[i] = (int32_t)((s >> 33) % (uint64_t)info.vocab_size);
        }
        for (int i = 0; i < n; i++) slots[i] = n - 1 - i; /* any order: the longest row first */
        fwd_job j = {ctx, m, n, 1, context, tokens, 1, 0, slots, spread_len, 0, 0, 0};
        r->B = n, r->Tq = 1, r->Tk = context, r->d = info.head_dim, r->H = info.n_head;
        bench_progress(run, "%s forward %s B=%d T=%d..%d", bd->info.name, r->name, n, context / 2, context);
        failed = tdacl__measure(fwd_once, &j, mo, &r->s) != TDACL_SUCCESS;
        if (!failed) {
            r->flops = 2.0 * (double)info.parameters * n;
            r->bytes = (double)info.weight_bytes;
            bench_finish_row(run, r);
            r->value = n / (r->s.median * 1e-3);
            snprintf(r->unit, sizeof r->unit, "tokens/s");
            char why[200];
            const int fused = tdacl__model_decode_fused(m, n, why, sizeof why);
            const char *fusedw = fused ? fused_decode(m, n, r) : "";
            char head[160];
            tdacl__model_head_fused(n, 1, head, sizeof head);
            snprintf(r->note, sizeof r->note, "%s%s%d sequences at positions %d..%d; %s; head: %s; %llu kernels a step",
                     fm->note, fm->note[0] ? "; " : "", n, context / 2, spread_len(n - 1, n, context),
                     fused ? fusedw : why, head, (unsigned long long)j.launches);
        }
    }
    if (failed) {
        snprintf(r->note, sizeof r->note, "failed: %s", tdacl_last_error(ctx));
        fprintf(stderr, "\ntdacl-bench: forward %s: %s\n", r->name, tdacl_last_error(ctx));
    }
    bench_row_done(run, r);
    if (m) tdacl_model_destroy(m);
    free(tokens), free(slots);
    return failed;
}

int bench_suite_forward(bench_run *run, tdacl_context *ctx, int dev)
{
    const bench_options *o = &run->opt;
    const bench_device *bd = &run->devices[dev];
    int gpu = bd->info.type == TDACL_DEVICE_GPU, quick = o->quick;
    static const char *kinds[] = {"tda", "softmax"};
    int failures = 0;
    fwd_mode modes[3];
    const int nmodes = forward_modes(o, modes);
    for (int mi = 0; mi < nmodes; mi++)
        failures += forward_dtype(run, ctx, dev, &modes[mi], kinds, gpu, quick);
    return failures;
}
