/* The layers' tensors packed for the one-launch token (cl/decode_layer.cl, -DDL_LAYERS): every
 * layer's weights in one buffer at one stride, every layer's K and V caches in another, each
 * tensor a sub-buffer of its arena, so one kernel finds layer l's tensors l strides past
 * layer 0's (OpenCL buffers hold no pointers, so a table of per-layer buffers cannot be read
 * on the device).  The other kernels see the sub-buffers as the tensors they always were. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"

const tdacl_layer_part tdacl__layer_parts[TDACL_LAYER_PARTS] = {
    {offsetof(layer, ln1_w), "ln_1.weight", 0, TDACL_PART_ALWAYS},
    {offsetof(layer, ln1_b), "ln_1.bias", 0, TDACL_PART_LAYERNORM},
    {offsetof(layer, attn_w), "attn.c_attn.weight", 1, TDACL_PART_ALWAYS},
    {offsetof(layer, attn_b), "attn.c_attn.bias", 0, TDACL_PART_ALWAYS},
    {offsetof(layer, proj_w), "attn.c_proj.weight", 1, TDACL_PART_ALWAYS},
    {offsetof(layer, proj_b), "attn.c_proj.bias", 0, TDACL_PART_ALWAYS},
    {offsetof(layer, ln2_w), "ln_2.weight", 0, TDACL_PART_ALWAYS},
    {offsetof(layer, ln2_b), "ln_2.bias", 0, TDACL_PART_LAYERNORM},
    {offsetof(layer, fc_w), "mlp.c_fc.weight", 1, TDACL_PART_ALWAYS},
    {offsetof(layer, fc_b), "mlp.c_fc.bias", 0, TDACL_PART_ALWAYS},
    {offsetof(layer, fcproj_w), "mlp.c_proj.weight", 1, TDACL_PART_ALWAYS},
    {offsetof(layer, fcproj_b), "mlp.c_proj.bias", 0, TDACL_PART_ALWAYS},
    {offsetof(layer, head_norm), "attn.head_norm.weight", 0, TDACL_PART_HEAD_NORM},
};

int tdacl__layer_part_present(const tdacl_model *m, int part)
{
    const int when = tdacl__layer_parts[part].when, rms = m->cfg.norm_type == 1;
    return !(when == TDACL_PART_LAYERNORM && rms) && !(when == TDACL_PART_HEAD_NORM && m->cfg.head_norm != TDACL_NORM_RMS);
}

static int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/* Layer l's packed layout: lay[i] the byte offset of part i (-1: absent), the total in *bytes;
 * 0 when a part is missing from the checkpoint (the load then fails naming it). */
static int layout(const tdacl_model *m, const tdacl_checkpoint *ck, int l, int64_t align, int64_t *lay, int64_t *bytes)
{
    int64_t at = 0;
    for (int i = 0; i < TDACL_PACKED_PARTS; i++) {
        lay[i] = -1;
        if (!tdacl__layer_part_present(m, i)) continue;
        char name[160];
        snprintf(name, sizeof name, "h.%d.%s", l, tdacl__layer_parts[i].suffix);
        const tdacl_ckpt_tensor *ct = tdacl__checkpoint_get(ck, name);
        if (!ct) return 0;
        int64_t n = 1;
        for (int k = 0; k < ct->ndim; k++) n *= ct->shape[k];
        lay[i] = at;
        at += round_up(n * (int64_t)tdacl_dtype_size(tdacl__layer_parts[i].matrix ? m->wdt : TDACL_F32), align);
    }
    *bytes = at;
    return 1;
}

static void not_packed(tdacl_model *m, const char *why)
{
    tdacl__log(m->ctx, TDACL_LOG_DEBUG, "model: layers not packed for the one-launch token (%s)", why);
}

tdacl_status tdacl__model_pack_plan(tdacl_model *m, const tdacl_checkpoint *ck)
{
    const tdacl_device_info *info = &m->ctx->info;
    const int L = m->info.n_layer;
    const char *env = getenv("TDACL_PACK");
    if (env && !strcmp(env, "0")) return not_packed(m, "TDACL_PACK=0"), TDACL_SUCCESS;
    if (L < 2) return not_packed(m, "one layer"), TDACL_SUCCESS;
    /* sub-buffer origins must be multiples of the device's base address alignment */
    const int64_t align = info->mem_base_align_bits >= 8 * 256 ? info->mem_base_align_bits / 8 : 256;
    int64_t lay[TDACL_PACKED_PARTS], bytes = 0;
    for (int l = 0; l < L; l++) {
        int64_t ll[TDACL_PACKED_PARTS], lb;
        if (!layout(m, ck, l, align, l ? ll : lay, l ? &lb : &bytes)) return TDACL_SUCCESS;
        if (l && (lb != bytes || memcmp(ll, lay, sizeof lay)))
            return not_packed(m, "the layers' tensors differ in size"), TDACL_SUCCESS;
    }
    const int64_t cache = round_up((int64_t)m->info.max_batch * m->info.max_context * m->C * (int64_t)tdacl_dtype_size(m->adt),
                                   align);
    if ((uint64_t)(bytes * L) > info->max_alloc_bytes || (uint64_t)(2 * cache * L) > info->max_alloc_bytes)
        return not_packed(m, "the layers' weights or caches exceed the device's largest allocation"), TDACL_SUCCESS;
    cl_int err;
    m->warena = clCreateBuffer(m->ctx->cl, CL_MEM_READ_WRITE, (size_t)(bytes * L), NULL, &err);
    if (m->warena) m->carena = clCreateBuffer(m->ctx->cl, CL_MEM_READ_WRITE, (size_t)(2 * cache * L), NULL, &err);
    if (!m->carena) {
        tdacl__model_pack_release(m);
        char why[96];
        snprintf(why, sizeof why, "allocating the arenas failed, OpenCL error %d", (int)err);
        return not_packed(m, why), TDACL_SUCCESS;
    }
    /* the weights go up as one image, padding zeroed, in one write at offset 0: Oclgrind does not
     * count writes through a sub-buffer (or at an offset) as initialising the buffer */
    m->wimage = calloc(1, (size_t)(bytes * L));
    if (!m->wimage) {
        tdacl__model_pack_release(m);
        return not_packed(m, "no host memory for the packed image"), TDACL_SUCCESS;
    }
    memcpy(m->wlay, lay, sizeof lay);
    m->wstride = bytes, m->cache_bytes = cache;
    return TDACL_SUCCESS;
}

/* n elements of src (dtype sd, any alignment) as dtype dd at dst */
static void convert(unsigned char *dst, tdacl_dtype dd, const unsigned char *src, tdacl_dtype sd, int64_t n)
{
    const size_t ss = tdacl_dtype_size(sd), ds = tdacl_dtype_size(dd);
    if (sd == dd) {
        memcpy(dst, src, (size_t)n * ss);
        return;
    }
    for (int64_t i = 0; i < n; i++, src += ss, dst += ds) {
        float f;
        uint16_t h;
        if (sd == TDACL_F32) memcpy(&f, src, 4);
        else memcpy(&h, src, 2), f = sd == TDACL_BF16 ? tdacl_bf16_to_f32(h) : tdacl_f16_to_f32(h);
        if (dd == TDACL_F32) memcpy(dst, &f, 4);
        else h = dd == TDACL_BF16 ? tdacl_f32_to_bf16(f) : tdacl_f32_to_f16(f), memcpy(dst, &h, 2);
    }
}

int tdacl__model_part_staged(tdacl_model *m, int l, int part, tdacl_dtype dt, const void *data, tdacl_dtype data_dt,
                             int64_t n)
{
    if (part >= TDACL_PACKED_PARTS || !m->wimage) return 0;
    convert(m->wimage + l * m->wstride + m->wlay[part], dt, data, data_dt, n);
    return 1;
}

tdacl_status tdacl__model_pack_upload(tdacl_model *m)
{
    if (!m->wimage) return TDACL_SUCCESS;
    cl_int err = clEnqueueWriteBuffer(m->ctx->queue, m->warena, CL_TRUE, 0, (size_t)(m->wstride * m->info.n_layer),
                                      m->wimage, 0, NULL, NULL);
    free(m->wimage);
    m->wimage = NULL;
    return err ? tdacl__fail_cl(m->ctx, err, "tdacl_model_load: writing the packed layers") : TDACL_SUCCESS;
}

tdacl_status tdacl__model_part_create(tdacl_model *m, int l, int part, tdacl_dtype dt, int nd, const int64_t *shape,
                                      tdacl_tensor **out)
{
    if (part < TDACL_PACKED_PARTS && m->warena)
        return tdacl__tensor_create_sub(m->ctx, m->warena, (size_t)(l * m->wstride + m->wlay[part]), dt, nd, shape, out);
    if ((part == TDACL_PART_KCACHE || part == TDACL_PART_VCACHE) && m->carena) {
        int64_t lay[16];
        tdacl__model_pack_layout(m, lay);
        const int64_t at = l * lay[15] + lay[part == TDACL_PART_KCACHE ? 13 : 14];
        return tdacl__tensor_create_sub(m->ctx, m->carena, (size_t)at, dt, nd, shape, out);
    }
    return tdacl_tensor_create(m->ctx, dt, nd, shape, out);
}

void tdacl__model_pack_layout(const tdacl_model *m, int64_t lay[16])
{
    memcpy(lay, m->wlay, sizeof m->wlay);
    lay[12] = m->wstride;
    lay[13] = 0, lay[14] = m->cache_bytes, lay[15] = 2 * m->cache_bytes; /* layer l: K then V */
}

void tdacl__model_pack_release(tdacl_model *m)
{
    free(m->wimage);
    m->wimage = NULL;
    if (m->warena) clReleaseMemObject(m->warena), m->warena = NULL;
    if (m->carena) clReleaseMemObject(m->carena), m->carena = NULL;
}
