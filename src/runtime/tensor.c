/* Tensors: refcounted device storage plus shape, strides (elements) and offset.  Upload
 * and download of contiguous same-dtype data go straight through the queue; anything else
 * (views, conversions) goes through the strided copy kernel in cl/tensor.cl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

/* The copy and fill kernels: runtime infrastructure, not an operation with variants. */
static const tdacl_program_def tdacl__tensor_program = {"tensor", {"common.cl", "tensor.cl"}, 0};

static int valid_dtype(int dt) { return dt >= TDACL_F32 && dt <= TDACL_F16; }

/* Tensors are listed on their context so that tdacl_context_destroy can release any the
 * user left alive (and their storage, which would otherwise pin the cl_context). */
static void link_live(tdacl_context *ctx, tdacl_tensor *t)
{
    t->live_prev = NULL;
    t->live_next = ctx->tensors;
    if (ctx->tensors) ctx->tensors->live_prev = t;
    ctx->tensors = t;
    ctx->live_tensors++;
}

static void unlink_live(tdacl_tensor *t)
{
    if (t->live_prev) t->live_prev->live_next = t->live_next;
    else t->ctx->tensors = t->live_next;
    if (t->live_next) t->live_next->live_prev = t->live_prev;
    t->ctx->live_tensors--;
}

int64_t tdacl__numel(const tdacl_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int tdacl__tensor_is_contiguous(const tdacl_tensor *t)
{
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
        expect *= t->shape[i];
    }
    return 1;
}

int tdacl__view_is_injective(const tdacl_tensor *t)
{
    /* sorted by stride, each dimension of extent > 1 must step past everything the smaller
     * strides can reach; that is sufficient (and for the usual layouts necessary) */
    int idx[TDACL_MAX_DIMS], n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > 1) idx[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->strides[idx[j]] < t->strides[idx[j - 1]]; j--) {
            int x = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = x;
        }
    int64_t reach = 0; /* largest element offset the dimensions so far can add */
    for (int i = 0; i < n; i++) {
        int64_t s = t->strides[idx[i]], e = t->shape[idx[i]];
        if (s <= reach) return 0;
        reach += s * (e - 1);
    }
    return 1;
}

/* t becomes a row-major tensor on storage s (offset 0), listed on ctx. */
static void contiguous_on(tdacl_tensor *t, tdacl_context *ctx, tdacl_storage *s, tdacl_dtype dtype, int ndim,
                          const int64_t *shape)
{
    t->ctx = ctx;
    t->storage = s;
    t->dtype = dtype;
    t->ndim = ndim;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->strides[i] = stride;
        stride *= shape[i] ? shape[i] : 1;
    }
    link_live(ctx, t);
}

/* Checks ndim and shape; computes the element count with overflow detection. */
static tdacl_status check_shape(const tdacl_context *ctx, const char *call, int ndim,
                                const int64_t *shape, int64_t *numel)
{
    if (ndim < 0 || ndim > TDACL_MAX_DIMS)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: ndim %d is outside 0..%d", call,
                           ndim, TDACL_MAX_DIMS);
    if (ndim > 0 && !shape)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: shape is NULL", call);
    /* span (the product of the non-zero extents) bounds the count and every contiguous
     * stride, so it is what must not overflow: after a zero extent the count stays 0
     * but the strides of {0, INT64_MAX, 2} would still overflow */
    int64_t n = 1, span = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: shape[%d] = %lld is negative", call, i,
                               (long long)shape[i]);
        if (shape[i] && span > INT64_MAX / 8 / shape[i])
            return tdacl__fail(ctx, TDACL_ERR_TOO_LARGE, "%s: the element count overflows", call);
        if (shape[i]) span *= shape[i];
        n *= shape[i];
    }
    *numel = n;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_tensor_create(tdacl_context *ctx, tdacl_dtype dtype, int ndim,
                                 const int64_t *shape, tdacl_tensor **out)
{
    const char *call = "tdacl_tensor_create";
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", call);
    if (!out) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: out is NULL", call);
    *out = NULL;
    if (!valid_dtype(dtype))
        return tdacl__fail(ctx, TDACL_ERR_DTYPE, "%s: dtype %d is not a tdacl_dtype", call, (int)dtype);
    int64_t n;
    tdacl_status st = check_shape(ctx, call, ndim, shape, &n);
    if (st) return st;
    uint64_t bytes = (uint64_t)n * tdacl_dtype_size(dtype);
    if (bytes > ctx->info.max_alloc_bytes)
        return tdacl__fail(ctx, TDACL_ERR_TOO_LARGE,
                           "%s: %llu bytes exceed the device's maximum allocation of %llu bytes (%s)",
                           call, (unsigned long long)bytes,
                           (unsigned long long)ctx->info.max_alloc_bytes, ctx->info.name);
    tdacl_tensor *t = calloc(1, sizeof *t);
    tdacl_storage *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t), free(s);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    cl_int err;
    size_t alloc = bytes ? (size_t)bytes : 4; /* OpenCL refuses empty buffers */
    s->mem = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, alloc, NULL, &err);
    if (!s->mem) {
        free(t), free(s);
        return tdacl__fail_cl(ctx, err, "%s: clCreateBuffer(%zu bytes)", call, alloc);
    }
    s->bytes = (size_t)bytes;
    s->refs = 1;
    contiguous_on(t, ctx, s, dtype, ndim, shape);
    *out = t;
    return TDACL_SUCCESS;
}

tdacl_status tdacl__tensor_create_sub(tdacl_context *ctx, cl_mem parent, size_t origin, tdacl_dtype dtype, int ndim,
                                     const int64_t *shape, tdacl_tensor **out)
{
    const char *call = "tdacl__tensor_create_sub";
    *out = NULL;
    int64_t n;
    tdacl_status st = check_shape(ctx, call, ndim, shape, &n);
    if (st) return st;
    const size_t bytes = (size_t)n * tdacl_dtype_size(dtype);
    tdacl_tensor *t = calloc(1, sizeof *t);
    tdacl_storage *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t), free(s);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    cl_buffer_region region = {origin, bytes ? bytes : 4};
    cl_int err;
    s->mem = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (!s->mem) {
        free(t), free(s);
        return tdacl__fail_cl(ctx, err, "%s: clCreateSubBuffer(%zu bytes at %zu)", call, region.size, origin);
    }
    s->bytes = bytes;
    s->refs = 1;
    contiguous_on(t, ctx, s, dtype, ndim, shape);
    *out = t;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_tensor_from_cl_mem(tdacl_context *ctx, void *cl_mem_handle, size_t offset_bytes,
                                      tdacl_dtype dtype, int ndim, const int64_t *shape, tdacl_tensor **out)
{
    const char *call = "tdacl_tensor_from_cl_mem";
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", call);
    if (!out) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: out is NULL", call);
    *out = NULL;
    if (!cl_mem_handle) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: cl_mem is NULL", call);
    if (!valid_dtype(dtype))
        return tdacl__fail(ctx, TDACL_ERR_DTYPE, "%s: dtype %d is not a tdacl_dtype", call, (int)dtype);
    int64_t n;
    tdacl_status st = check_shape(ctx, call, ndim, shape, &n);
    if (st) return st;
    cl_mem mem = (cl_mem)cl_mem_handle;
    cl_context owner = NULL;
    cl_mem_object_type type = 0;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, NULL);
    if (!err) err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (!err) err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err) return tdacl__fail_cl(ctx, err, "%s: clGetMemObjectInfo on the cl_mem", call);
    if (type != CL_MEM_OBJECT_BUFFER)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: the cl_mem is not a buffer (an image?)", call);
    if (owner != ctx->cl)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT,
                           "%s: the cl_mem belongs to another cl_context (create the context with "
                           "tdacl_context_create_from_cl on the buffer's context)", call);
    size_t el = tdacl_dtype_size(dtype);
    if (offset_bytes % el)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: offset %zu bytes is not a multiple of the %s size (%zu)",
                           call, offset_bytes, tdacl_dtype_name(dtype), el);
    if (offset_bytes > size || (uint64_t)n * el > size - offset_bytes)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: %lld %s elements at offset %zu need %llu bytes; the buffer has %zu",
                           call, (long long)n, tdacl_dtype_name(dtype), offset_bytes,
                           (unsigned long long)(offset_bytes + (uint64_t)n * el), size);
    tdacl_tensor *t = calloc(1, sizeof *t);
    tdacl_storage *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t), free(s);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    clRetainMemObject(mem); /* released by the last tensor on this storage */
    s->mem = mem;
    s->bytes = size;
    s->refs = 1;
    contiguous_on(t, ctx, s, dtype, ndim, shape);
    t->offset = (int64_t)(offset_bytes / el);
    *out = t;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_tensor_get_cl_mem(const tdacl_tensor *t, void **cl_mem_out, size_t *offset_bytes)
{
    if (!t) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tensor_get_cl_mem: t is NULL");
    if (cl_mem_out) *cl_mem_out = t->storage->mem;
    if (offset_bytes) *offset_bytes = (size_t)t->offset * tdacl_dtype_size(t->dtype);
    return TDACL_SUCCESS;
}

tdacl_status tdacl_tensor_view(tdacl_tensor *base, int ndim, const int64_t *shape,
                               const int64_t *strides, int64_t offset, tdacl_tensor **out)
{
    const char *call = "tdacl_tensor_view";
    if (!base) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: base is NULL", call);
    tdacl_context *ctx = base->ctx;
    if (!out) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: out is NULL", call);
    *out = NULL;
    int64_t n;
    tdacl_status st = check_shape(ctx, call, ndim, shape, &n);
    if (st) return st;
    if (ndim > 0 && !strides)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: strides is NULL", call);
    if (offset < 0)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: offset %lld is negative", call, (long long)offset);
    int64_t capacity = (int64_t)(base->storage->bytes / tdacl_dtype_size(base->dtype));
    if (n > 0) {
        int64_t last = offset;
        for (int i = 0; i < ndim; i++) {
            if (strides[i] < 0)
                return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: strides[%d] = %lld is negative", call,
                                   i, (long long)strides[i]);
            if (strides[i] && (shape[i] - 1) > (INT64_MAX - last) / strides[i])
                return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: the addressed range overflows", call);
            last += (shape[i] - 1) * strides[i];
        }
        if (last >= capacity)
            return tdacl__fail(ctx, TDACL_ERR_SHAPE,
                               "%s: the view reaches element %lld but the storage holds %lld", call,
                               (long long)last, (long long)capacity);
    }
    tdacl_tensor *t = calloc(1, sizeof *t);
    if (!t) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    t->ctx = ctx;
    t->storage = base->storage;
    t->storage->refs++;
    t->dtype = base->dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i], t->strides[i] = strides[i];
    t->offset = offset;
    link_live(ctx, t);
    *out = t;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_tensor_destroy(tdacl_tensor *t)
{
    if (!t) return TDACL_SUCCESS;
    if (--t->storage->refs == 0) {
        clReleaseMemObject(t->storage->mem);
        free(t->storage);
    }
    unlink_live(t);
    free(t);
    return TDACL_SUCCESS;
}

TDACL_GETTER(tdacl_tensor_ndim, tdacl_tensor, "t", int, "ndim", o->ndim)

tdacl_status tdacl_tensor_shape(const tdacl_tensor *t, int64_t *shape, int64_t *strides)
{
    if (!t) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tensor_shape: t is NULL");
    for (int i = 0; i < t->ndim; i++) {
        if (shape) shape[i] = t->shape[i];
        if (strides) strides[i] = t->strides[i];
    }
    return TDACL_SUCCESS;
}

TDACL_GETTER(tdacl_tensor_dtype, tdacl_tensor, "t", tdacl_dtype, "dtype", o->dtype)

TDACL_GETTER(tdacl_tensor_numel, tdacl_tensor, "t", int64_t, "numel", tdacl__numel(o))

/* The strided copy: dst[view] <- src[view] for buffers described by (mem, dtype, offset,
 * strides) over one shape. */
typedef struct strided {
    cl_mem mem;
    tdacl_dtype dtype;
    int64_t offset;
    const int64_t *strides;
} strided;

static tdacl_status copy_kernel(tdacl_context *ctx, const char *call, strided src, strided dst,
                                int ndim, const int64_t *shape, int64_t n)
{
    if (n == 0) return TDACL_SUCCESS;
    char opts[64];
    snprintf(opts, sizeof opts, "-DSRC_DT=%d -DDST_DT=%d", (int)src.dtype, (int)dst.dtype);
    cl_kernel k;
    tdacl_status st = tdacl__kernel_get(ctx, &tdacl__tensor_program, opts, "tensor_copy", &k);
    if (st) return st;
    cl_long8 sh = {{1, 1, 1, 1, 1, 1, 1, 1}}, ss = {{0}}, ds = {{0}};
    for (int i = 0; i < ndim; i++) {
        sh.s[i] = shape[i];
        ss.s[i] = src.strides[i];
        ds.s[i] = dst.strides[i];
    }
    cl_long so = src.offset, dof = dst.offset, cn = n;
    cl_int nd = ndim;
    st = tdacl__set_args(ctx, k, "tensor_copy", sizeof(cl_mem), &src.mem, sizeof so, &so,
                         sizeof ss, &ss, sizeof(cl_mem), &dst.mem, sizeof dof, &dof, sizeof ds, &ds,
                         sizeof sh, &sh, sizeof nd, &nd, sizeof cn, &cn, (size_t)0);
    if (st) return st;
    size_t local = 64, global = (size_t)n;
    (void)call;
    return tdacl__launch(ctx, k, 1, &global, &local, NULL, "tensor_copy");
}

static tdacl_status check_transfer(const tdacl_tensor *t, const void *host, int host_dtype,
                                   int64_t count, const char *call)
{
    if (!t) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", call);
    tdacl_context *ctx = t->ctx;
    int64_t n = tdacl__numel(t);
    if (!host && n > 0) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: host pointer is NULL", call);
    if (!valid_dtype(host_dtype))
        return tdacl__fail(ctx, TDACL_ERR_DTYPE, "%s: host_dtype %d is not a tdacl_dtype", call, host_dtype);
    if (count != n)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: count %lld does not match the tensor's %lld elements",
                           call, (long long)count, (long long)n);
    return TDACL_SUCCESS;
}

/* Upload (or download) through a staging buffer in host_dtype and the strided copy kernel.
 * The staging buffer holds at most ctx->staging_limit bytes (default: the device's largest
 * allocation), so a bf16 tensor fed from f32 data twice its size still loads: whole slices
 * along the outermost dimension of extent > 1 go through one at a time. */
static tdacl_status staged(const tdacl_tensor *t, void *host, tdacl_dtype host_dtype, int64_t count, int up,
                           const char *call)
{
    tdacl_context *ctx = t->ctx;
    size_t hsize = tdacl_dtype_size(host_dtype);
    uint64_t limit = ctx->staging_limit ? ctx->staging_limit : ctx->info.max_alloc_bytes;
    const int nd = t->ndim; /* (read once: the analyzer otherwise lets it change across the OpenCL calls) */
    int outer = 0; /* the dimension to slice */
    while (outer < nd - 1 && t->shape[outer] == 1) outer++;
    int64_t inner = 1; /* elements of one slice */
    for (int i = outer + 1; i < nd; i++) inner *= t->shape[i];
    int64_t rows = nd ? t->shape[outer] : 1;
    int64_t per = (int64_t)(limit / hsize / (uint64_t)inner);
    if (per < 1)
        return tdacl__fail(ctx, TDACL_ERR_TOO_LARGE, "%s: one slice of %lld elements in %s exceeds the staging limit of "
                           "%llu bytes", call, (long long)inner, tdacl_dtype_name(host_dtype), (unsigned long long)limit);
    if (per > rows) per = rows;
    size_t bytes = (size_t)(per * inner) * hsize;
    cl_int err;
    cl_mem tmp = clCreateBuffer(ctx->cl, up ? CL_MEM_READ_ONLY : CL_MEM_WRITE_ONLY, bytes, NULL, &err);
    if (!tmp) return tdacl__fail_cl(ctx, err, "%s: staging clCreateBuffer(%zu bytes)", call, bytes);
    int64_t cstr[TDACL_MAX_DIMS], shape[TDACL_MAX_DIMS], s = 1;
    for (int i = nd - 1; i >= 0; i--) cstr[i] = s, s *= t->shape[i], shape[i] = t->shape[i];
    tdacl_status st = TDACL_SUCCESS;
    for (int64_t r0 = 0; r0 < rows && !st; r0 += per) {
        int64_t n = rows - r0 < per ? rows - r0 : per;
        if (nd) shape[outer] = n;
        size_t chunk = (size_t)(n * inner) * hsize;
        char *h = (char *)host + (size_t)(r0 * inner) * hsize;
        strided tmpv = {tmp, host_dtype, 0, cstr};
        strided dev = {t->storage->mem, t->dtype, t->offset + (nd ? r0 * t->strides[outer] : 0), t->strides};
        if (up) {
            err = clEnqueueWriteBuffer(ctx->queue, tmp, CL_TRUE, 0, chunk, h, 0, NULL, NULL);
            if (err) st = tdacl__fail_cl(ctx, err, "%s: clEnqueueWriteBuffer", call);
            if (!st) st = copy_kernel(ctx, call, tmpv, dev, nd, shape, n * inner);
            if (!st && (err = clFinish(ctx->queue))) st = tdacl__fail_cl(ctx, err, "%s: clFinish", call);
        } else {
            st = copy_kernel(ctx, call, dev, tmpv, nd, shape, n * inner);
            if (!st && (err = clEnqueueReadBuffer(ctx->queue, tmp, CL_TRUE, 0, chunk, h, 0, NULL, NULL)))
                st = tdacl__fail_cl(ctx, err, "%s: clEnqueueReadBuffer", call);
        }
    }
    clReleaseMemObject(tmp);
    (void)count;
    return st;
}

/* Host <-> device: one blocking read or write when the view is contiguous in the host's
 * dtype, else through the staging buffer (conversion and strides on the device). */
static tdacl_status transfer(const tdacl_tensor *t, void *host, tdacl_dtype host_dtype, int64_t count, int upload,
                             const char *call)
{
    tdacl_status st = check_transfer(t, host, (int)host_dtype, count, call);
    if (st || count == 0) return st;
    tdacl_context *ctx = t->ctx;
    if (host_dtype != t->dtype || !tdacl__tensor_is_contiguous(t))
        return staged(t, host, host_dtype, count, upload, call);
    size_t hsize = tdacl_dtype_size(host_dtype), at = (size_t)t->offset * hsize, n = (size_t)count * hsize;
    cl_int err = upload ? clEnqueueWriteBuffer(ctx->queue, t->storage->mem, CL_TRUE, at, n, host, 0, NULL, NULL)
                        : clEnqueueReadBuffer(ctx->queue, t->storage->mem, CL_TRUE, at, n, host, 0, NULL, NULL);
    return err ? tdacl__fail_cl(ctx, err, "%s: %s", call, upload ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer")
               : TDACL_SUCCESS;
}

tdacl_status tdacl_tensor_upload(tdacl_tensor *t, const void *host, tdacl_dtype host_dtype, int64_t count)
{
    return transfer(t, (void *)host, host_dtype, count, 1, "tdacl_tensor_upload");
}

tdacl_status tdacl_tensor_download(const tdacl_tensor *t, void *host, tdacl_dtype host_dtype, int64_t count)
{
    return transfer(t, host, host_dtype, count, 0, "tdacl_tensor_download");
}

tdacl_status tdacl_tensor_copy(tdacl_tensor *dst, const tdacl_tensor *src)
{
    const char *call = "tdacl_tensor_copy";
    if (!dst || !src)
        return tdacl__fail(dst ? dst->ctx : src ? src->ctx : NULL, TDACL_ERR_INVALID_ARGUMENT,
                           "%s: %s is NULL", call, dst ? "src" : "dst");
    tdacl_context *ctx = dst->ctx;
    if (src->ctx != ctx)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: src and dst belong to different contexts", call);
    if (src->ndim != dst->ndim)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: src has %d dims, dst %d", call, src->ndim, dst->ndim);
    for (int i = 0; i < src->ndim; i++)
        if (src->shape[i] != dst->shape[i])
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: shape[%d] differs (src %lld, dst %lld)", call,
                               i, (long long)src->shape[i], (long long)dst->shape[i]);
    strided s = {src->storage->mem, src->dtype, src->offset, src->strides};
    strided d = {dst->storage->mem, dst->dtype, dst->offset, dst->strides};
    return copy_kernel(ctx, call, s, d, src->ndim, src->shape, tdacl__numel(src));
}

tdacl_status tdacl__tensor_fill_normal(tdacl_tensor *t, uint32_t seed, float mean, float stddev)
{
    if (!t) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "fill_normal: tensor is NULL");
    tdacl_context *ctx = t->ctx;
    if (!tdacl__tensor_is_contiguous(t))
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "fill_normal: the tensor must be contiguous");
    int64_t n = tdacl__numel(t);
    if (n == 0) return TDACL_SUCCESS;
    char opts[48];
    snprintf(opts, sizeof opts, "-DSRC_DT=0 -DDST_DT=%d", (int)t->dtype);
    cl_kernel k;
    tdacl_status st = tdacl__kernel_get(ctx, &tdacl__tensor_program, opts, "tensor_fill_normal", &k);
    if (st) return st;
    cl_mem m = t->storage->mem;
    cl_long off = t->offset, cn = n;
    cl_uint s = seed;
    cl_float mu = mean, sd = stddev;
    st = tdacl__set_args(ctx, k, "tensor_fill_normal", sizeof m, &m, sizeof off, &off, sizeof cn, &cn,
                         sizeof s, &s, sizeof mu, &mu, sizeof sd, &sd, (size_t)0);
    if (st) return st;
    size_t local = 64, global = (size_t)n;
    return tdacl__launch(ctx, k, 1, &global, &local, NULL, "tensor_fill_normal");
}
