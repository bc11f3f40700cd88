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

static tdacl_status check_desc(const char *call, const tdacl_context_desc *desc)
{
    if (desc->log_level > TDACL_LOG_OFF)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.log_level %d is not a tdacl_log_level", call,
                           desc->log_level);
    if (desc->cache < -1 || desc->cache > 1)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.cache must be -1, 0 or 1 (got %d)", call,
                           desc->cache);
    if (desc->use_tuning_db != 0 && desc->use_tuning_db != 1)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.use_tuning_db must be 0 or 1 (got %d)", call,
                           desc->use_tuning_db);
    return TDACL_SUCCESS;
}

static tdacl_context *new_context(int index, const tdacl_context_desc *desc)
{
    const tdacl_device_entry *list;
    int n;
    tdacl__devices(&list, &n);
    tdacl_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->device_index = index;
    ctx->info = list[index].info;
    ctx->platform = list[index].platform;
    ctx->device = list[index].device;
    ctx->diag.log_fn = desc->log_fn;
    ctx->diag.log_user = desc->log_user;
    ctx->diag.log_level = desc->log_level;
    ctx->use_tuning_db = desc->use_tuning_db;
    ctx->queue_profiling = 1;
    return ctx;
}

/* Everything after the OpenCL context and queue exist: options, cache, tuning, profile. */
static tdacl_status finish_context(tdacl_context *ctx, const tdacl_context_desc *desc, tdacl_context **out)
{
    make_base_options(ctx);
    tdacl__cache_init(ctx, desc);
    tdacl_status st = tdacl__tuning_open(ctx, desc->tuning_file);
    if (!st) tdacl__clblast_overrides(ctx);
    if (st) {
        tdacl_status keep = st;
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", ctx->diag.last_error);
        tdacl_context_destroy(ctx);
        return tdacl__fail(NULL, keep, "%s", msg);
    }
    const char *profile;
    tdacl__log(ctx, TDACL_LOG_INFO, "context on [%d] %s / %s (%s)%s", ctx->device_index, ctx->info.platform_name,
               ctx->info.name, ctx->info.arch, ctx->borrowed ? ", the caller's OpenCL context" : "");
    if (ctx->queue_profiling) tdacl__profile_init(ctx);
    else if ((profile = getenv("TDACL_PROFILE")) && *profile && strcmp(profile, "0"))
        tdacl__log(ctx, TDACL_LOG_WARN, "TDACL_PROFILE: the caller's queue has no profiling; nothing is timed");
    *out = ctx;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_context_create(const tdacl_context_desc *desc_in, tdacl_context **out)
{
    if (!out) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_context_create: out is NULL");
    *out = NULL;
    tdacl_context_desc desc;
    if (desc_in) desc = *desc_in;
    else tdacl_context_desc_init(&desc);
    tdacl_status st = check_desc("tdacl_context_create", &desc);
    if (st) return st;
    int index;
    if ((st = tdacl_device_select(desc.device, &index))) return st;
    tdacl_context *ctx = new_context(index, &desc);
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "tdacl_context_create: out of memory");
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
    return finish_context(ctx, &desc, out);
}

tdacl_status tdacl_context_create_from_cl(const tdacl_context_desc *desc_in, void *cl_context_handle,
                                          void *cl_device_handle, void *cl_queue_handle, tdacl_context **out)
{
    const char *call = "tdacl_context_create_from_cl";
    if (!out) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: out is NULL", call);
    *out = NULL;
    if (!cl_context_handle || !cl_device_handle)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call,
                           cl_context_handle ? "cl_device_id" : "cl_context");
    tdacl_context_desc desc;
    if (desc_in) desc = *desc_in;
    else tdacl_context_desc_init(&desc);
    tdacl_status st = check_desc(call, &desc);
    if (st) return st;
    cl_context clctx = (cl_context)cl_context_handle;
    cl_device_id dev = (cl_device_id)cl_device_handle;
    cl_command_queue queue = (cl_command_queue)cl_queue_handle;
    /* the device must be one the library enumerated: its capability record drives everything */
    const tdacl_device_entry *list;
    int n, index = -1;
    if ((st = tdacl__devices(&list, &n))) return st;
    for (int i = 0; i < n; i++)
        if (list[i].device == dev) index = i;
    if (index < 0)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT,
                           "%s: the cl_device_id is not one of the %d devices libtdacl enumerates (sub-devices and "
                           "devices of unlisted platforms are not supported)", call, n);
    cl_uint ndev = 0;
    cl_device_id devs[64];
    cl_int err = clGetContextInfo(clctx, CL_CONTEXT_DEVICES, sizeof devs, devs, NULL);
    if (!err) err = clGetContextInfo(clctx, CL_CONTEXT_NUM_DEVICES, sizeof ndev, &ndev, NULL);
    if (err) return tdacl__fail_cl(NULL, err, "%s: clGetContextInfo on the cl_context", call);
    int member = 0;
    for (cl_uint i = 0; i < ndev && i < 64; i++) member |= devs[i] == dev;
    if (!member)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: the cl_context does not contain device [%d] %s",
                           call, index, list[index].info.name);
    cl_command_queue_properties qprops = 0;
    if (queue) {
        cl_context qctx = NULL;
        cl_device_id qdev = NULL;
        err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
        if (!err) err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
        if (!err) err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof qprops, &qprops, NULL);
        if (err) return tdacl__fail_cl(NULL, err, "%s: clGetCommandQueueInfo on the cl_command_queue", call);
        if (qctx != clctx || qdev != dev)
            return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT,
                               "%s: the cl_command_queue belongs to another %s", call, qctx != clctx ? "context" : "device");
        if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
            return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT,
                               "%s: the cl_command_queue is out-of-order; the library's kernels depend on in-order "
                               "execution", call);
    }
    tdacl_context *ctx = new_context(index, &desc);
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", call);
    ctx->borrowed = 1;
    clRetainContext(clctx);
    ctx->cl = clctx;
    if (queue) {
        clRetainCommandQueue(queue);
        ctx->queue = queue;
        ctx->queue_profiling = (qprops & CL_QUEUE_PROFILING_ENABLE) != 0;
    } else {
        ctx->queue = clCreateCommandQueue(clctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
        if (!ctx->queue) {
            st = tdacl__fail_cl(NULL, err, "%s: clCreateCommandQueue(%s)", call, ctx->info.name);
            clReleaseContext(clctx);
            free(ctx);
            return st;
        }
    }
    return finish_context(ctx, &desc, out);
}

void tdacl__context_retarget(tdacl_context *ctx, const tdacl_device_info *info)
{
    ctx->info = *info;
    make_base_options(ctx);
    if (ctx->tuning) ctx->tuning->nmemo = ctx->tuning->next_memo = 0; /* lookups of the old class */
}

tdacl_status tdacl_context_get_cl(const tdacl_context *ctx, void **cl_context_out, void **cl_device_out,
                                  void **cl_queue_out)
{
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_context_get_cl: ctx is NULL");
    if (cl_context_out) *cl_context_out = ctx->cl;
    if (cl_device_out) *cl_device_out = ctx->device;
    if (cl_queue_out) *cl_queue_out = ctx->queue;
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

tdacl_status tdacl__arrival_counters(tdacl_context *ctx, size_t count, cl_mem *mem)
{
    const int slot = TDACL_SCRATCH_ARRIVALS;
    const int fresh = !ctx->scratch[slot] || ctx->scratch_bytes[slot] < count * 4;
    tdacl_status st = tdacl__scratch(ctx, slot, count * 4, mem);
    if (st || !fresh) return st;
    /* a write from zeroed host memory (once per growth): Oclgrind's shadow memory does not
     * count a clEnqueueFillBuffer as initialising */
    size_t bytes = ctx->scratch_bytes[slot];
    void *zeros = calloc(1, bytes);
    if (!zeros) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "arrival counters: out of memory");
    cl_int err = clEnqueueWriteBuffer(ctx->queue, *mem, CL_TRUE, 0, bytes, zeros, 0, NULL, NULL);
    free(zeros);
    return err ? tdacl__fail_cl(ctx, err, "clEnqueueWriteBuffer(arrival counters)") : TDACL_SUCCESS;
}
