/* Context: one device, its OpenCL context and profiling queue, the program registry and
 * cache, the tuning database and a reusable scratch buffer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "runtime/tuning.h"

void tdacl_context_desc_init(tdacl_context_desc *desc)
{
    if (!desc) return;
    memset(desc, 0, sizeof *desc);
    desc->cache = -1;
    desc->use_tuning_db = 1;
    desc->log_level = -1;
}

static void make_base_options(tdacl_context *ctx)
{
    const tdacl_device_info *i = &ctx->info;
    const char *extra = getenv("TDACL_BUILD_OPTIONS");
    snprintf(ctx->base_options, sizeof ctx->base_options,
             "-cl-std=CL1.2 -DTDACL_DEVICE_GPU=%d -DTDACL_DEVICE_CPU=%d -DTDACL_NVIDIA=%d "
             "-DTDACL_HAS_FP16=%d%s%s",
             i->type == TDACL_DEVICE_GPU, i->type == TDACL_DEVICE_CPU, i->nv_cc_major > 0,
             i->has_fp16, extra && *extra ? " " : "", extra ? extra : "");
}

tdacl_status tdacl_context_create(const tdacl_context_desc *desc_in, tdacl_context **out)
{
    if (!out) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_context_create: out is NULL");
    *out = NULL;
    tdacl_context_desc desc;
    if (desc_in) desc = *desc_in;
    else tdacl_context_desc_init(&desc);
    if (desc.log_level > TDACL_LOG_OFF)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT,
                           "tdacl_context_create: desc.log_level %d is not a tdacl_log_level", desc.log_level);
    if (desc.cache < -1 || desc.cache > 1)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT,
                           "tdacl_context_create: desc.cache must be -1, 0 or 1 (got %d)", desc.cache);
    if (desc.use_tuning_db != 0 && desc.use_tuning_db != 1)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT,
                           "tdacl_context_create: desc.use_tuning_db must be 0 or 1 (got %d)", desc.use_tuning_db);

    int index;
    tdacl_status st = tdacl_device_select(desc.device, &index);
    if (st) return st;
    const tdacl_device_entry *list;
    int n;
    tdacl__devices(&list, &n);

    tdacl_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "tdacl_context_create: out of memory");
    ctx->device_index = index;
    ctx->info = list[index].info;
    ctx->platform = list[index].platform;
    ctx->device = list[index].device;
    ctx->diag.log_fn = desc.log_fn;
    ctx->diag.log_user = desc.log_user;
    ctx->diag.log_level = desc.log_level;
    ctx->use_tuning_db = desc.use_tuning_db;

    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    ctx->cl = clCreateContext(props, 1, &ctx->device, NULL, NULL, &err);
    if (!ctx->cl) {
        st = tdacl__fail_cl(NULL, err, "tdacl_context_create: clCreateContext(%s)", ctx->info.name);
        free(ctx);
        return st;
    }
    ctx->queue = clCreateCommandQueue(ctx->cl, ctx->device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (!ctx->queue) {
        st = tdacl__fail_cl(NULL, err, "tdacl_context_create: clCreateCommandQueue(%s)", ctx->info.name);
        clReleaseContext(ctx->cl);
        free(ctx);
        return st;
    }
    make_base_options(ctx);
    tdacl__cache_init(ctx, &desc);
    st = tdacl__tuning_open(ctx, desc.tuning_file);
    if (!st) tdacl__clblast_overrides(ctx);
    if (st) {
        tdacl_status keep = st;
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", ctx->diag.last_error);
        tdacl_context_destroy(ctx);
        return tdacl__fail(NULL, keep, "%s", msg);
    }
    tdacl__log(ctx, TDACL_LOG_INFO, "context on [%d] %s / %s (%s)", index, ctx->info.platform_name,
               ctx->info.name, ctx->info.arch);
    tdacl__profile_init(ctx);
    *out = ctx;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_context_destroy(tdacl_context *ctx)
{
    if (!ctx) return TDACL_SUCCESS;
    if (ctx->queue) clFinish(ctx->queue);
    tdacl__profile_report(ctx);
    if (ctx->live_tensors)
        tdacl__log(ctx, TDACL_LOG_WARN,
                   "tdacl_context_destroy: %d tensor(s) still alive; their handles are now invalid",
                   ctx->live_tensors);
    if (ctx->nchildren)
        tdacl__log(ctx, TDACL_LOG_WARN,
                   "tdacl_context_destroy: %d model(s) still alive; destroyed now, their handles are invalid",
                   ctx->nchildren);
    while (ctx->nchildren) { /* each destroy removes its own entry */
        struct tdacl_child c = ctx->children[ctx->nchildren - 1];
        c.destroy(c.obj);
        if (ctx->nchildren && ctx->children[ctx->nchildren - 1].obj == c.obj) ctx->nchildren--;
    }
    free(ctx->children);
    /* release them as documented; their buffers would otherwise keep ctx->cl alive */
    while (ctx->tensors) tdacl_tensor_destroy(ctx->tensors);
    tdacl__programs_release(ctx);
    tdacl__tuning_close(ctx);
    for (int i = 0; i < TDACL_SCRATCH_SLOTS; i++)
        if (ctx->scratch[i]) clReleaseMemObject(ctx->scratch[i]);
    if (ctx->queue) clReleaseCommandQueue(ctx->queue);
    if (ctx->cl) clReleaseContext(ctx->cl);
    free(ctx->build_log);
    free(ctx);
    return TDACL_SUCCESS;
}

tdacl_status tdacl_context_get_info(const tdacl_context *ctx, tdacl_device_info *info)
{
    if (!ctx || !info)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tdacl_context_get_info: %s is NULL",
                           ctx ? "info" : "ctx");
    *info = ctx->info;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_finish(tdacl_context *ctx)
{
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_finish: ctx is NULL");
    cl_int err = clFinish(ctx->queue);
    return err ? tdacl__fail_cl(ctx, err, "tdacl_finish: clFinish") : TDACL_SUCCESS;
}

tdacl_status tdacl_context_cache_stats(const tdacl_context *ctx, tdacl_cache_stats *stats)
{
    if (!ctx || !stats)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tdacl_context_cache_stats: %s is NULL",
                           ctx ? "stats" : "ctx");
    *stats = ctx->cache.stats;
    return TDACL_SUCCESS;
}

tdacl_status tdacl__child_add(tdacl_context *ctx, void *obj, tdacl_status (*destroy)(void *obj))
{
    if (ctx->nchildren == ctx->children_cap) {
        int cap = ctx->children_cap ? 2 * ctx->children_cap : 8;
        struct tdacl_child *g = realloc(ctx->children, (size_t)cap * sizeof *g);
        if (!g) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of host memory");
        ctx->children = g, ctx->children_cap = cap;
    }
    ctx->children[ctx->nchildren].obj = obj;
    ctx->children[ctx->nchildren++].destroy = destroy;
    return TDACL_SUCCESS;
}

void tdacl__child_remove(tdacl_context *ctx, void *obj)
{
    for (int i = 0; i < ctx->nchildren; i++)
        if (ctx->children[i].obj == obj) {
            ctx->children[i] = ctx->children[--ctx->nchildren];
            return;
        }
}

tdacl_status tdacl__scratch(tdacl_context *ctx, int slot, size_t bytes, cl_mem *mem)
{
    if (bytes == 0) bytes = 16;
    if (ctx->scratch[slot] && ctx->scratch_bytes[slot] >= bytes) {
        *mem = ctx->scratch[slot];
        return TDACL_SUCCESS;
    }
    if (bytes > ctx->info.max_alloc_bytes)
        return tdacl__fail(ctx, TDACL_ERR_TOO_LARGE,
                           "scratch buffer of %zu bytes exceeds the device's max allocation (%llu)",
                           bytes, (unsigned long long)ctx->info.max_alloc_bytes);
    if (ctx->scratch[slot]) {
        clFinish(ctx->queue);
        clReleaseMemObject(ctx->scratch[slot]);
        ctx->scratch[slot] = NULL;
        ctx->scratch_bytes[slot] = 0;
    }
    size_t grow = bytes + bytes / 4;
    if (grow > ctx->info.max_alloc_bytes) grow = bytes;
    cl_int err;
    ctx->scratch[slot] = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, grow, NULL, &err);
    if (!ctx->scratch[slot]) return tdacl__fail_cl(ctx, err, "clCreateBuffer(scratch, %zu bytes)", grow);
    ctx->scratch_bytes[slot] = grow;
    *mem = ctx->scratch[slot];
    return TDACL_SUCCESS;
}
