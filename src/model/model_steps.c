/* Prefill, decode steps and sequences in the KV cache's slots (docs/spec.md sections 4.2,
 * 4.3), and reading the logits: the public entry points that drive tdacl__model_forward. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/model_impl.h"

tdacl_status tdacl_model_position(const tdacl_model *m, int *position)
{
    const char *call = "tdacl_model_position";
    if (!m || !position)
        return tdacl__fail(m ? m->ctx : NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, m ? "position" : "model");
    int len = 0;
    for (int s = 0; s < m->info.max_batch; s++) {
        if (!m->slot_len[s]) continue;
        if (len && m->slot_len[s] != len)
            return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: the sequences have different lengths (slot %d: "
                               "%d, an earlier one %d); tdacl_model_slot_position gives each", call, s, m->slot_len[s], len);
        len = m->slot_len[s];
    }
    *position = len;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_model_slot_position(const tdacl_model *m, int slot, int *position)
{
    const char *call = "tdacl_model_slot_position";
    if (!m || !position)
        return tdacl__fail(m ? m->ctx : NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, m ? "position" : "model");
    if (slot < 0 || slot >= m->info.max_batch)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: slot %d is outside 0..%d (desc.max_batch)", call, slot,
                           m->info.max_batch - 1);
    *position = m->slot_len[slot];
    return TDACL_SUCCESS;
}

static tdacl_status check_tokens(tdacl_model *m, const char *call, const int32_t *tokens, int64_t n)
{
    if (!tokens) return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tokens is NULL", call);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->info.vocab_size)
            return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tokens[%lld] = %d is outside the vocabulary 0..%d",
                               call, (long long)i, tokens[i], m->info.vocab_size - 1);
    return TDACL_SUCCESS;
}

static tdacl_status check_len(tdacl_model *m, const char *call, int len)
{
    if (len < 1 || len > m->info.max_context)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: len %d is outside 1..%d (the context)", call, len,
                           m->info.max_context);
    return TDACL_SUCCESS;
}

tdacl_status tdacl__model_prefill(tdacl_model *m, int batch, int len, const int32_t *tokens, int last_only)
{
    const char *call = "tdacl_model_prefill";
    if (!m) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: model is NULL", call);
    if (batch < 1 || batch > m->info.max_batch)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: batch %d is outside 1..%d (desc.max_batch)", call,
                           batch, m->info.max_batch);
    tdacl_status st = check_len(m, call, len);
    if (!st) st = check_tokens(m, call, tokens, (int64_t)batch * len);
    if (st) return st;
    m->batch = 0, m->drawn_on_device = 0;
    memset(m->slot_len, 0, (size_t)m->info.max_batch * sizeof *m->slot_len);
    st = tdacl__model_forward(m, batch, len, 0, 0, NULL, tokens, last_only);
    if (st) return st;
    m->batch = batch;
    for (int b = 0; b < batch; b++) m->slot_len[b] = len;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_model_prefill(tdacl_model *m, int batch, int len, const int32_t *tokens)
{
    return tdacl__model_prefill(m, batch, len, tokens, 0);
}

tdacl_status tdacl_model_prefill_slot(tdacl_model *m, int slot, int len, const int32_t *tokens)
{
    const char *call = "tdacl_model_prefill_slot";
    if (!m) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: model is NULL", call);
    if (slot < 0 || slot >= m->info.max_batch)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: slot %d is outside 0..%d (desc.max_batch)", call, slot,
                           m->info.max_batch - 1);
    tdacl_status st = check_len(m, call, len);
    if (!st) st = check_tokens(m, call, tokens, len);
    if (st) return st;
    m->batch = 0, m->drawn_on_device = 0, m->slot_len[slot] = 0;
    if ((st = tdacl__model_forward(m, 1, len, 0, slot, NULL, tokens, 0))) return st;
    m->batch = 1, m->slot_len[slot] = len;
    return TDACL_SUCCESS;
}

/* Slot of row b: slots[b], or b when slots is NULL (tdacl_model_decode's 0..batch-1). */
static int slot_of(const int32_t *slots, int b) { return slots ? slots[b] : b; }

/* The (slot, position) pairs of a decode step into the next host copy of the ring and onto
 * the device without waiting; kv receives them. */
static tdacl_status upload_rowmap(tdacl_model *m, int count, const int32_t *slots, tdacl_kv_rows *kv)
{
    const int r = m->rowmap_next;
    m->rowmap_next = (r + 1) % ROWMAP_RING;
    int32_t *host = m->rowmap_host + (size_t)r * 2 * (size_t)m->info.max_batch;
    if (m->rowmap_ev[r]) { /* written ROWMAP_RING steps ago: long done */
        clWaitForEvents(1, &m->rowmap_ev[r]);
        clReleaseEvent(m->rowmap_ev[r]);
        m->rowmap_ev[r] = NULL;
    }
    cl_int err;
    if (!m->rowmap) {
        m->rowmap = clCreateBuffer(m->ctx->cl, CL_MEM_READ_ONLY, (size_t)m->info.max_batch * 8, NULL, &err);
        if (!m->rowmap) return tdacl__fail_cl(m->ctx, err, "model: row map buffer");
    }
    for (int b = 0; b < count; b++) host[2 * b] = slot_of(slots, b), host[2 * b + 1] = m->slot_len[slot_of(slots, b)];
    err = clEnqueueWriteBuffer(m->ctx->queue, m->rowmap, CL_FALSE, 0, (size_t)count * 8, host, 0, NULL, &m->rowmap_ev[r]);
    if (err) return tdacl__fail_cl(m->ctx, err, "model: uploading the row map");
    kv->mem = m->rowmap, kv->host = host;
    return TDACL_SUCCESS;
}

/* One decode step of the sequences in slots[0..count-1] (each at its own length; NULL: slots
 * 0..count-1). */
static tdacl_status decode_slots(tdacl_model *m, const char *call, int count, const int32_t *slots,
                                 const int32_t *tokens)
{
    if (count < 1 || count > m->info.max_batch)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: count %d is outside 1..%d (desc.max_batch)", call,
                           count, m->info.max_batch);
    int uniform = 1, pos_max = 0;
    for (int b = 0; b < count; b++) {
        const int s = slot_of(slots, b);
        if (s < 0 || s >= m->info.max_batch)
            return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: slots[%d] = %d is outside 0..%d (desc.max_batch)",
                               call, b, s, m->info.max_batch - 1);
        if (!m->slot_len[s])
            return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: slot %d holds no sequence to extend (call "
                               "tdacl_model_prefill or tdacl_model_prefill_slot first)", call, s);
        if (m->slot_len[s] >= m->info.max_context)
            return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: the context of %d tokens of slot %d is full", call,
                               m->info.max_context, s);
        for (int c = 0; slots && c < b; c++)
            if (slots[c] == s)
                return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: slot %d appears twice (slots[%d] and slots[%d])",
                                   call, s, c, b);
        uniform &= s == b && m->slot_len[s] == m->slot_len[0];
        if (m->slot_len[s] > pos_max) pos_max = m->slot_len[s];
    }
    if (!tokens && !m->drawn_on_device)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tokens is NULL and no tdacl_model_sample draw is "
                           "waiting on the device", call);
    if (!tokens && count != m->batch)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tokens is NULL but the last draw has %d ids for %d "
                           "sequences", call, m->batch, count);
    tdacl_status st = tokens ? check_tokens(m, call, tokens, count) : TDACL_SUCCESS;
    /* sequences 0..count-1 at one position need no row map */
    tdacl_kv_rows kv = {0};
    if (!st && !uniform) st = upload_rowmap(m, count, slots, &kv);
    if (st) return st;
    m->drawn_on_device = 0;
    if ((st = tdacl__model_forward(m, count, 1, pos_max, 0, uniform ? NULL : &kv, tokens, 0))) return st;
    for (int b = 0; b < count; b++) m->slot_len[slot_of(slots, b)]++;
    m->batch = count;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_model_decode(tdacl_model *m, int batch, const int32_t *tokens)
{
    const char *call = "tdacl_model_decode";
    if (!m) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: model is NULL", call);
    int held = 0;
    while (held < m->info.max_batch && m->slot_len[held]) held++;
    if (held == 0)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: no sequence to extend (call tdacl_model_prefill first)", call);
    if (batch != held)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: batch %d, but slots 0..%d hold sequences "
                           "(tdacl_model_decode_slots extends any of them)", call, batch, held - 1);
    return decode_slots(m, call, batch, NULL, tokens);
}

tdacl_status tdacl_model_decode_slots(tdacl_model *m, int count, const int32_t *slots, const int32_t *tokens)
{
    const char *call = "tdacl_model_decode_slots";
    if (!m || !slots)
        return tdacl__fail(m ? m->ctx : NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, m ? "slots" : "model");
    return decode_slots(m, call, count, slots, tokens);
}

tdacl_status tdacl_model_logits(tdacl_model *m, float *logits, int64_t count, int *rows)
{
    const char *call = "tdacl_model_logits";
    if (!m || !logits) return tdacl__fail(m ? m->ctx : NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, m ? "logits" : "model");
    if (m->batch == 0) return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: nothing has run yet", call);
    int64_t want = (int64_t)m->batch * m->logit_rows * m->info.vocab_size;
    if (count != want)
        return tdacl__fail(m->ctx, TDACL_ERR_SHAPE, "%s: count %lld does not match batch %d x rows %d x vocab %d", call,
                           (long long)count, m->batch, m->logit_rows, m->info.vocab_size);
    if (rows) *rows = m->logit_rows;
    cl_int err = clEnqueueReadBuffer(m->ctx->queue, m->logits->storage->mem, CL_TRUE, 0, (size_t)want * 4, logits, 0,
                                     NULL, NULL);
    if (err) return tdacl__fail_cl(m->ctx, err, "%s: reading the logits", call);
    return tdacl__model_decode_check(m, 1); /* the one-launch decode layer's error word */
}
