/* A decode step's layers in one launch each (src/ops/decode_layer.h, cl/decode_layer.cl):
 * the model's side, its buffers and the grid barrier's bookkeeping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kinds.h"
#include "model/model_impl.h"
#include "ops/decode_layer.h"

enum { DL_CHECK_STEPS = 8 };

static cl_mem mem(const tdacl_tensor *t) { return t ? t->storage->mem : NULL; }

static tdacl_status buffer(tdacl_model *m, cl_mem *b, size_t bytes, const char *what)
{
    if (*b) clReleaseMemObject(*b);
    cl_int err;
    *b = clCreateBuffer(m->ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
    return *b ? TDACL_SUCCESS : tdacl__fail_cl(m->ctx, err, "model decode layer: %s (%zu bytes)", what, bytes);
}

/* The barrier counter, error word and per-(row, head) arrival counters, zeroed. */
static tdacl_status reset_sync(tdacl_model *m)
{
    const size_t words = 2 + (size_t)m->info.max_batch * (size_t)m->H;
    tdacl_status st = m->dl_sync ? TDACL_SUCCESS : buffer(m, &m->dl_sync, words * 4, "barrier counters");
    if (st) return st;
    cl_uint *zeros = calloc(words, 4); /* a write, not a fill: Oclgrind counts it as initialising */
    if (!zeros) return tdacl__fail(m->ctx, TDACL_ERR_OUT_OF_MEMORY, "model decode layer: out of memory");
    cl_int err = clEnqueueWriteBuffer(m->ctx->queue, m->dl_sync, CL_TRUE, 0, words * 4, zeros, 0, NULL, NULL);
    free(zeros);
    m->dl_bar = 0;
    return err ? tdacl__fail_cl(m->ctx, err, "model decode layer: zeroing the barrier counters") : TDACL_SUCCESS;
}

/* The error word read without waiting (dl_flag_ev marks its landing). */
static tdacl_status read_flag(tdacl_model *m)
{
    m->dl_unread = 0;
    cl_int err = clEnqueueReadBuffer(m->ctx->queue, m->dl_sync, CL_FALSE, 4, 4, &m->dl_flag, 0, NULL, &m->dl_flag_ev);
    return err ? tdacl__fail_cl(m->ctx, err, "model decode layer: reading its error word") : TDACL_SUCCESS;
}

/* The last read of the error word, if it has landed (wait: once it has). */
static tdacl_status landed(tdacl_model *m, int wait)
{
    if (!m->dl_flag_ev) return TDACL_SUCCESS;
    cl_int state = CL_QUEUED;
    if (!wait) clGetEventInfo(m->dl_flag_ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
    if (!wait && state > CL_COMPLETE) return TDACL_SUCCESS; /* still on its way */
    cl_int err = clWaitForEvents(1, &m->dl_flag_ev);
    clReleaseEvent(m->dl_flag_ev);
    m->dl_flag_ev = NULL;
    if (err) return tdacl__fail_cl(m->ctx, err, "model decode layer: reading its error word");
    if (!m->dl_flag) return TDACL_SUCCESS;
    m->dl_flag = 0;
    tdacl_status st = reset_sync(m);
    return st ? st : tdacl__fail(m->ctx, TDACL_ERR_INTERNAL, "model decode: a grid barrier of the one-launch decode layer "
                                 "gave up waiting (its work-groups were not all resident); the logits since are NaN. "
                                 "TDACL_DECODE=launches decodes without it");
}

tdacl_status tdacl__model_decode_check(tdacl_model *m, int wait)
{
    tdacl_status st = landed(m, wait);
    if (st || !wait || !m->dl_unread) return st;
    /* waiting (a read of the logits): the steps since that read too */
    return (st = read_flag(m)) ? st : landed(m, 1);
}

void tdacl__model_decode_release(tdacl_model *m)
{
    if (m->dl_flag_ev) clWaitForEvents(1, &m->dl_flag_ev), clReleaseEvent(m->dl_flag_ev);
    cl_mem *bufs[] = {&m->dl_sync, &m->dl_xmid, &m->dl_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) clReleaseMemObject(*bufs[i]), *bufs[i] = NULL;
}

/* The shape of a step of B rows at position pos (the buffers come later). */
static void call_shape(const tdacl_model *m, int B, int pos, int wg, tdacl_decode_layer_call *c)
{
    memset(c, 0, sizeof *c);
    c->kind = m->kind, c->rope = m->cfg.position == TDACL_POSITION_ROPE, c->views = m->kqkv == 5 ? 2 : 1;
    c->head_norm = m->cfg.head_norm != TDACL_NORM_NONE, c->rms = m->cfg.norm_type == 1;
    c->wdt = m->wdt, c->adt = m->adt, c->M = B, c->C = m->C, c->H = m->H, c->d = m->d, c->pos = pos;
    c->cache_ld = (int64_t)m->info.max_context * m->C;
    c->eps = m->cfg.layer_norm_epsilon, c->scale = 1.0f / sqrtf((float)m->d);
    c->wg = wg;
    c->astage = tdacl__decode_layer_astage(m->ctx, B, c->wg);
}

/* The persistent row runs the whole stack in one launch where the layers are packed
 * (TDACL_DECODE_LAUNCH=layer: one launch a layer). */
static int stacked(const tdacl_model *m, const tdacl_variant_def *row)
{
    const char *per = getenv("TDACL_DECODE_LAUNCH");
    return m->warena && tdacl__decode_layer_barriers(row, 1) && !(per && !strcmp(per, "layer"));
}

const char *tdacl__model_decode_layer_choice(tdacl_model *m, int B, int *launches, char *why, size_t n)
{
    *launches = 5 * m->info.n_layer;
    const char *env = getenv("TDACL_DECODE");
    if (env && !strcmp(env, "launches")) return snprintf(why, n, "TDACL_DECODE=launches"), NULL;
    tdacl_decode_layer_call c;
    int wg;
    tdacl__decode_layer_wg(&wg); /* a bad $TDACL_DECODE_WG fails the step itself (tdacl__model_decode_layers) */
    call_shape(m, B, 0, wg, &c);
    const tdacl_variant_def *row = NULL;
    if (!tdacl__variant_choose(m->ctx, TDACL_OP_DECODE_LAYER, &c, &row, why, n)) {
        *launches = stacked(m, row) ? 1 : tdacl__decode_layer_barriers(row, 1) ? m->info.n_layer : 5 * m->info.n_layer;
        return row->name;
    }
    tdacl__clear_error(m->ctx);
    return NULL;
}

tdacl_status tdacl__model_decode_layers(tdacl_model *m, int B, int pos, const tdacl_kv_rows *kv, int *taken)
{
    *taken = 0;
    const char *env = getenv("TDACL_DECODE");
    if (env && !strcmp(env, "launches")) return TDACL_SUCCESS;
    int wg;
    const int bad_wg = tdacl__decode_layer_wg(&wg); /* refused below, where the kernel would run */
    tdacl_decode_layer_call c;
    call_shape(m, B, pos, wg, &c);
    const tdacl_variant_def *row = NULL;
    char why[600];
    tdacl_status st = tdacl__variant_choose(m->ctx, TDACL_OP_DECODE_LAYER, &c, &row, why, sizeof why);
    if (st) {
        if (!m->dl_logged)
            tdacl__log(m->ctx, TDACL_LOG_DEBUG, "model decode step: five launches a layer (%s)", why);
        m->dl_logged = 1;
        tdacl__clear_error(m->ctx);
        return TDACL_SUCCESS;
    }
    const int stack = stacked(m, row);
    const int barriers = tdacl__decode_layer_barriers(row, stack ? m->info.n_layer : 1);
    if (!m->dl_logged)
        tdacl__log(m->ctx, TDACL_LOG_DEBUG, "model decode step: %s (%s)",
                   stack      ? "one launch for every layer"
                   : barriers ? (m->warena ? "one launch a layer (TDACL_DECODE_LAUNCH=layer)"
                                           : "one launch a layer (the layers are not packed)")
                              : "the one-launch layer's five steps in a launch each",
                   why);
    m->dl_logged = 1;
    if ((st = tdacl__decode_layer_groups(m->ctx, row, &c.groups))) return st;
    if (bad_wg)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "TDACL_DECODE_WG=%s is not a power of two 64..1024",
                           getenv("TDACL_DECODE_WG"));
    /* the last step's error word, if it has landed */
    if ((st = tdacl__model_decode_check(m, 0))) return st;
    tdacl__decode_layer_splits(c.groups, B, m->H, pos + 1, &c.nsplit, &c.split_len);
    const size_t floats = tdacl__decode_layer_scratch(B, m->H, m->d, c.nsplit);
    if (!m->dl_sync) st = reset_sync(m);
    if (!st && !m->dl_xmid) st = buffer(m, &m->dl_xmid, (size_t)m->info.max_batch * (size_t)m->C * 4, "residual");
    if (!st && floats > m->dl_scratch_floats) {
        st = buffer(m, &m->dl_scratch, floats * 4, "attention partials");
        m->dl_scratch_floats = st ? 0 : floats;
    }
    if (st) return st;
    c.x = mem(m->x), c.xmid = m->dl_xmid, c.qkv = mem(m->qkv), c.att = mem(m->att), c.hid = mem(m->hid);
    c.scratch = m->dl_scratch, c.sync = m->dl_sync, c.rowmap = kv ? kv->mem : NULL;
    /* the first layer embeds the rows where they are staged; else the embedding kernel first */
    const int embed_inside = (int64_t)B * m->C <= c.astage;
    if (!embed_inside) st = tdacl__model_embed(m, B, 1, pos, kv);
    /* only the first launch embeds */
    c.tokens = embed_inside ? m->tokens : NULL;
    c.wte = c.tokens ? mem(m->wte) : NULL, c.wpe = c.tokens ? mem(m->wpe) : NULL;
    if (stack) {
        c.n_layer = m->info.n_layer, c.warena = m->warena, c.carena = m->carena;
        tdacl__model_pack_layout(m, c.lay);
    }
    for (int l = 0; l < (stack ? 1 : m->info.n_layer) && !st; l++) {
        if (!stack) {
            const layer *L = &m->layers[l];
            c.ln1_w = mem(L->ln1_w), c.ln1_b = mem(L->ln1_b), c.attn_w = mem(L->attn_w), c.attn_b = mem(L->attn_b);
            c.proj_w = mem(L->proj_w), c.proj_b = mem(L->proj_b), c.ln2_w = mem(L->ln2_w), c.ln2_b = mem(L->ln2_b);
            c.fc_w = mem(L->fc_w), c.fc_b = mem(L->fc_b), c.fcproj_w = mem(L->fcproj_w), c.fcproj_b = mem(L->fcproj_b);
            c.kc = mem(L->kcache), c.vc = mem(L->vcache);
        }
        c.bar_base = m->dl_bar;
        st = row->launch(m->ctx, row, &c, NULL);
        m->dl_bar += (uint32_t)(barriers * c.groups);
        c.tokens = c.wte = c.wpe = NULL;
    }
    /* the error word back without waiting, every DL_CHECK_STEPS steps when the last read has
     * landed: each read between two kernels of the in-order queue costs the step a stall */
    m->dl_unread++;
    if (!st && !m->dl_flag_ev && m->dl_unread >= DL_CHECK_STEPS) st = read_flag(m);
    if (!st) *taken = 1;
    return st;
}
