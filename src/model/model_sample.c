/* Sampling: on the device from the last logits (tdacl_model_sample, the ids feeding the next
 * decode step), and on the host (tdacl_sample); one rule, docs/spec.md section 4.2. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/model_impl.h"

/* ---- sampling on the device ---- */

const char *tdacl__sample_kernel(float temperature, int top_k, int vocab)
{
    return temperature == 0.0f || top_k == 1 ? "sample_greedy" : top_k >= vocab ? "sample_all" : "sample_topk";
}

tdacl_status tdacl__model_tokens_guard(tdacl_model *m)
{
    cl_int err = m->drawn_ev ? clEnqueueBarrierWithWaitList(m->ctx->queue, 1, &m->drawn_ev, NULL) : CL_SUCCESS;
    return err ? tdacl__fail_cl(m->ctx, err, "model: ordering a write of the ids after their last read") : TDACL_SUCCESS;
}

/* The ids back to `drawn` once the queue's work so far is done, on a queue of their own: a read
 * between two kernels of the in-order queue stalled the next step's kernels (H200,
 * bench/results/decode-stack-h200/side-read).  Writers of `tokens` wait for it
 * (tdacl__model_tokens_guard). */
static cl_int read_ids(tdacl_model *m)
{
    cl_int err = CL_SUCCESS;
    if (!m->read_queue) m->read_queue = clCreateCommandQueue(m->ctx->cl, m->ctx->device, 0, &err);
    if (!m->read_queue) return err;
    cl_event done;
    if ((err = clEnqueueMarkerWithWaitList(m->ctx->queue, 0, NULL, &done))) return err;
    err = clEnqueueReadBuffer(m->read_queue, m->tokens, CL_FALSE, 0, (size_t)m->batch * 4, m->drawn, 1, &done,
                              &m->drawn_ev);
    clReleaseEvent(done);
    /* start now: the caller may enqueue the next step before waiting */
    if (!err) err = clFlush(m->ctx->queue);
    if (!err) err = clFlush(m->read_queue);
    return err;
}

tdacl_status tdacl_model_sample(tdacl_model *m, float temperature, int top_k, uint64_t *seed)
{
    const char *call = "tdacl_model_sample";
    if (!m) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: model is NULL", call);
    if (m->batch == 0) return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: nothing has run yet", call);
    if (!(temperature >= 0) || !isfinite(temperature))
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: temperature %g must be finite and >= 0", call,
                           temperature);
    const int V = m->info.vocab_size, greedy = temperature == 0.0f || top_k == 1;
    if (top_k < 0 || (!greedy && top_k > 256 && top_k < V))
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: top_k %d: the device draws from 1..256 tokens or the "
                           "whole vocabulary (0 or >= %d); tdacl_sample on the logits takes any", call, top_k, V);
    if (!greedy && !seed) return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: seed is NULL (needed when temperature > 0)", call);
    if (!m->drawn && !(m->drawn = malloc((size_t)m->info.max_batch * sizeof *m->drawn)))
        return tdacl__fail(m->ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", call);
    if (m->drawn_ev) { /* the previous copy lands in `drawn` first */
        clWaitForEvents(1, &m->drawn_ev);
        clReleaseEvent(m->drawn_ev);
        m->drawn_ev = NULL;
    }
    cl_int cV = V, ck = top_k == 0 || top_k > V ? V : top_k;
    if (!greedy || !m->greedy_ready) { /* else the LM head's GEMV left the picks in `tokens` (model.c head) */
        cl_kernel k;
        const char *kernel = tdacl__sample_kernel(temperature, ck, V);
        tdacl_status st = tdacl__model_layers_kernel(m, kernel, NULL, &k);
        if (st) return st;
        cl_long row0 = (cl_long)(m->logit_rows - 1) * V, row_stride = (cl_long)m->logit_rows * V;
        cl_float temp = temperature;
        cl_ulong s0 = greedy ? 0 : *seed;
        cl_mem lg = m->logits->storage->mem;
        st = tdacl__set_args(m->ctx, k, kernel, sizeof m->tokens, &m->tokens, sizeof lg, &lg, sizeof row0, &row0,
                             sizeof row_stride, &row_stride, sizeof cV, &cV, sizeof temp, &temp, sizeof ck, &ck,
                             sizeof s0, &s0, (size_t)0);
        size_t g[2] = {256, (size_t)m->batch}, l[2] = {256, 1};
        if (!st) st = tdacl__launch(m->ctx, k, 2, g, l, NULL, kernel);
        if (st) return st;
    }
    m->greedy_ready = greedy; /* `tokens` holds greedy picks still, or another draw now */
    cl_int err = read_ids(m);
    if (err) return tdacl__fail_cl(m->ctx, err, "%s: reading the ids back", call);
    if (!greedy) *seed += (uint64_t)m->batch * 0x9e3779b97f4a7c15ULL;
    m->drawn_on_device = 1;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_model_sampled(tdacl_model *m, int32_t *tokens, int64_t count)
{
    const char *call = "tdacl_model_sampled";
    if (!m || !tokens) return tdacl__fail(m ? m->ctx : NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, m ? "tokens" : "model");
    if (!m->drawn_ev && !m->drawn_on_device)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: no tdacl_model_sample to wait for", call);
    if (count != m->batch)
        return tdacl__fail(m->ctx, TDACL_ERR_SHAPE, "%s: count %lld differs from the batch %d", call, (long long)count, m->batch);
    if (m->drawn_ev) {
        cl_int err = clWaitForEvents(1, &m->drawn_ev);
        clReleaseEvent(m->drawn_ev);
        m->drawn_ev = NULL;
        if (err) return tdacl__fail_cl(m->ctx, err, "%s: waiting for the draw", call);
    }
    memcpy(tokens, m->drawn, (size_t)count * sizeof *tokens);
    return TDACL_SUCCESS;
}

/* ---- sampling on the host ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* a ranks before b: larger logit, then smaller index */
static int better(const float *l, int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

/* min-heap on rank: idx[0] is the worst of those kept */
static void heap_up(const float *l, int *h, int i)
{
    while (i > 0 && better(l, h[(i - 1) / 2], h[i])) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i], h[i] = t, i = p;
    }
}

static void heap_down(const float *l, int *h, int n, int i)
{
    for (;;) {
        int c = 2 * i + 1, w = i;
        if (c < n && better(l, h[w], h[c])) w = c;
        if (c + 1 < n && better(l, h[w], h[c + 1])) w = c + 1;
        if (w == i) return;
        int t = h[w];
        h[w] = h[i], h[i] = t, i = w;
    }
}

tdacl_status tdacl_sample(const float *logits, int vocab, float temperature, int top_k, uint64_t *seed, int32_t *token)
{
    const char *call = "tdacl_sample";
    if (!logits || !token) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, logits ? "token" : "logits");
    if (vocab < 1) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: vocab %d < 1", call, vocab);
    if (!(temperature >= 0) || !isfinite(temperature))
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: temperature %g must be finite and >= 0", call, temperature);
    if (top_k < 0) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: top_k %d < 0", call, top_k);
    int best = 0;
    for (int i = 1; i < vocab; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature == 0.0f || top_k == 1) {
        *token = best;
        return TDACL_SUCCESS;
    }
    if (!seed) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: seed is NULL (needed when temperature > 0)", call);
    /* the k largest logits (ties broken by index), then softmax(logit / T) over them */
    int k = top_k == 0 || top_k > vocab ? vocab : top_k;
    int *idx = malloc((size_t)vocab * sizeof *idx);
    double *p = malloc((size_t)k * sizeof *p);
    if (!idx || !p) {
        free(idx), free(p);
        return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", call);
    }
    if (k < vocab) {
        /* the k best by (logit desc, index asc): a min-heap of the k best so far, O(V log k),
         * then sorted best first, so the draw below is the same as over a full sort */
        for (int i = 0; i < vocab; i++) {
            if (i < k) {
                idx[i] = i;
                heap_up(logits, idx, i);
            } else if (better(logits, i, idx[0])) {
                idx[0] = i;
                heap_down(logits, idx, k, 0);
            }
        }
        for (int end = k - 1; end > 0; end--) { /* heap sort: the worst goes last */
            int t = idx[0];
            idx[0] = idx[end], idx[end] = t;
            heap_down(logits, idx, end, 0);
        }
    } else {
        for (int i = 0; i < vocab; i++) idx[i] = i;
    }
    double mx = logits[best], sum = 0;
    for (int i = 0; i < k; i++) sum += (p[i] = exp(((double)logits[idx[i]] - mx) / temperature));
    double u = (double)(splitmix(seed) >> 11) / 9007199254740992.0 * sum, acc = 0;
    int pick = idx[k - 1];
    for (int i = 0; i < k; i++) {
        acc += p[i];
        if (u < acc) {
            pick = idx[i];
            break;
        }
    }
    free(idx), free(p);
    *token = pick;
    return TDACL_SUCCESS;
}
