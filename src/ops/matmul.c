/* The public matmul: validation of tdacl_matmul's descriptor and tensors, then the matmul
 * operation of the variant registry (tdacl__gemm). */
#include <stdio.h>
#include <string.h>

#include "ops/gemm.h"

_Static_assert((int)TDACL_EPILOGUE_BIAS == (int)TDACL_EPI_BIAS && (int)TDACL_EPILOGUE_GELU == (int)TDACL_EPI_GELU &&
                   (int)TDACL_EPILOGUE_RESIDUAL == (int)TDACL_EPI_RESIDUAL,
               "the public epilogue flags are the kernel's");

void tdacl_matmul_desc_init(tdacl_matmul_desc *d)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
}

/* A 2-D view from its storage's first element, unit column stride, row stride >= width. */
static tdacl_status check_2d(tdacl_context *ctx, const char *name, const tdacl_tensor *x)
{
    const char *call = "tdacl_matmul";
    if (x->ctx != ctx) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %s belongs to another context", call, name);
    if (x->ndim != 2) return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: %s must have 2 dims, has %d", call, name, x->ndim);
    if (x->shape[0] < 1 || x->shape[1] < 1 || x->shape[0] > INT32_MAX || x->shape[1] > INT32_MAX)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: %s is [%lld, %lld]; each dim must be 1..2^31-1", call, name,
                           (long long)x->shape[0], (long long)x->shape[1]);
    if (x->offset != 0 || x->strides[1] != 1 || x->strides[0] < x->shape[1] || x->strides[0] > INT32_MAX)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE,
                           "%s: %s must start at its storage's first element with unit column stride and a row "
                           "stride >= its width (offset %lld, strides {%lld, %lld})", call, name, (long long)x->offset,
                           (long long)x->strides[0], (long long)x->strides[1]);
    return TDACL_SUCCESS;
}

tdacl_status tdacl_matmul(tdacl_context *ctx, const tdacl_matmul_desc *desc, const tdacl_matmul_tensors *t)
{
    const char *call = "tdacl_matmul";
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", call);
    if (!desc || !t) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, !desc ? "desc" : "tensors");
    if (desc->transpose_b != 0 && desc->transpose_b != 1)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.transpose_b must be 0 or 1 (got %d)", call, desc->transpose_b);
    if ((int)desc->precision < TDACL_PRECISION_EXACT || (int)desc->precision > TDACL_PRECISION_BF16)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.precision %d is not a tdacl_precision", call,
                           (int)desc->precision);
    const unsigned all = TDACL_EPILOGUE_BIAS | TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL;
    if (desc->epilogue & ~all)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.epilogue 0x%x has bits that are no tdacl_epilogue", call,
                           desc->epilogue);
    if (!t->a || !t->b || !t->c)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tensor %s is NULL", call, !t->a ? "a" : !t->b ? "b" : "c");
    const int want_bias = (desc->epilogue & TDACL_EPILOGUE_BIAS) != 0, want_res = (desc->epilogue & TDACL_EPILOGUE_RESIDUAL) != 0;
    if (want_bias != (t->bias != NULL))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: bias %s but TDACL_EPILOGUE_BIAS is %s", call,
                           t->bias ? "given" : "missing", want_bias ? "set" : "not set");
    if (want_res != (t->residual != NULL))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: residual %s but TDACL_EPILOGUE_RESIDUAL is %s", call,
                           t->residual ? "given" : "missing", want_res ? "set" : "not set");
    tdacl_status st;
    if ((st = check_2d(ctx, "a", t->a)) || (st = check_2d(ctx, "b", t->b)) || (st = check_2d(ctx, "c", t->c))) return st;
    const int64_t M = t->a->shape[0], K = t->a->shape[1];
    const int64_t N = desc->transpose_b ? t->b->shape[0] : t->b->shape[1];
    const int64_t KB = desc->transpose_b ? t->b->shape[1] : t->b->shape[0];
    if (KB != K)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: a is [%lld, %lld] but b (%s) holds K = %lld", call, (long long)M,
                           (long long)K, desc->transpose_b ? "[N, K]" : "[K, N]", (long long)KB);
    if (t->c->shape[0] != M || t->c->shape[1] != N)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: c is [%lld, %lld], expected [%lld, %lld]", call,
                           (long long)t->c->shape[0], (long long)t->c->shape[1], (long long)M, (long long)N);
    if (t->bias) {
        const tdacl_tensor *x = t->bias;
        const int64_t n = x->ndim == 1 ? x->shape[0] : x->ndim == 2 && x->shape[0] == 1 ? x->shape[1] : -1;
        if (x->ctx != ctx || x->dtype != TDACL_F32 || n != N || x->offset != 0 || !tdacl__tensor_is_contiguous(x))
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: bias must be a contiguous f32 [N] or [1, N] tensor with N = %lld "
                               "from its storage's first element", call, (long long)N);
    }
    if (t->residual) {
        if ((st = check_2d(ctx, "residual", t->residual))) return st;
        if (t->residual->dtype != t->c->dtype)
            return tdacl__fail(ctx, TDACL_ERR_DTYPE, "%s: residual is %s but c is %s (the residual is read in c's dtype)",
                               call, tdacl_dtype_name(t->residual->dtype), tdacl_dtype_name(t->c->dtype));
        if (t->residual->shape[0] != M || t->residual->shape[1] != N || t->residual->strides[0] != t->c->strides[0])
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: residual must have c's shape [%lld, %lld] and row stride %lld",
                               call, (long long)M, (long long)N, (long long)t->c->strides[0]);
    }
    const tdacl_tensor *inputs[3] = {t->a, t->b, t->bias};
    static const char *const names[3] = {"a", "b", "bias"};
    for (int i = 0; i < 3; i++)
        if (inputs[i] && inputs[i]->storage == t->c->storage)
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: c shares its storage with %s", call, names[i]);
    if (t->residual && t->residual->storage == t->c->storage && t->residual != t->c &&
        (t->residual->offset != t->c->offset || t->residual->strides[0] != t->c->strides[0]))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: residual overlaps c without being c", call);
    tdacl_precision precision = desc->precision;
    if ((st = tdacl__precision_env(ctx, call, &precision))) return st;
    return tdacl__gemm(ctx, t->c, t->a, t->b, t->bias, t->residual, (int)desc->epilogue, (int)M, (int)N, (int)K,
                       desc->transpose_b, precision, NULL, NULL, NULL);
}
