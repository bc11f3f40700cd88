/* tdacl_matmul against a double-precision reference: every variant (GEMV for M <= 8, the
 * tiled GEMM beyond, and the tensor-core GEMM for bf16 weights at precision bf16 -- natively
 * on NVIDIA sm_80+, through the portable body of cl/mma.cl elsewhere), b in [K, N] and
 * [N, K], f32, bf16 and f16 weights, every epilogue step, a residual that is c itself, row
 * strides wider than the rows, sizes that are multiples of no tile; then the argument
 * errors. */
#include <math.h>

#include "common/testutil.h"

static tdacl_context *g_ctx;
static const char *g_mma_row = "gemm.mma"; /* the row check_case pins for its tensor-core cases */

static int setup(void **state)
{
    (void)state;
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    return tdacl_context_create(&desc, &g_ctx) == TDACL_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tdacl_context_destroy(g_ctx);
    return 0;
}

static uint64_t g_rng = 12345;
static double uniform(void) /* in (-1, 1) */
{
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

static float stored(float x, tdacl_dtype dt)
{
    if (dt == TDACL_BF16) return tdacl_bf16_to_f32(tdacl_f32_to_bf16(x));
    if (dt == TDACL_F16) return tdacl_f16_to_f32(tdacl_f32_to_f16(x));
    return x;
}

/* x rounded to tf32 (10 mantissa bits, to nearest, ties away: PTX cvt.rna), as the tensor-core
 * GEMM takes fp32 operands at precision tf32 */
static float tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

static double gelu(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

/* A [rows, cols] tensor with row stride ld (>= cols) holding host[r * cols + c]. */
static tdacl_tensor *upload_2d(tdacl_dtype dt, int rows, int cols, int ld, const float *host)
{
    int64_t full[2] = {rows, ld}, shape[2] = {rows, cols}, strides[2] = {ld, 1};
    tdacl_tensor *base = NULL, *view = NULL;
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, dt, 2, full, &base));
    if (ld == cols) {
        view = base;
    } else {
        assert_ok(g_ctx, tdacl_tensor_view(base, 2, shape, strides, 0, &view));
        tdacl_tensor_destroy(base); /* the view keeps the storage */
    }
    if (host) assert_ok(g_ctx, tdacl_tensor_upload(view, host, TDACL_F32, (int64_t)rows * cols));
    return view;
}

typedef struct mm_case {
    int M, N, K, trans;
    tdacl_dtype wdt;
    unsigned epi;
    int residual_is_c, lda_pad;
    tdacl_precision precision; /* BF16 (bf16 weights) / TF32 (f32 weights): the tensor-core GEMM,
                                  a rounded to bf16 / a and b to tf32 */
    int ldb_pad;               /* b's row stride beyond its row length */
    tdacl_dtype adt, cdt;      /* storage of a; of c and the residual (f32 when left out) */
} mm_case;

/* unit roundoff of a storage dtype: a value rounded to it is within u |x| */
static double unit_roundoff(tdacl_dtype dt) { return dt == TDACL_BF16 ? 0x1p-8 : dt == TDACL_F16 ? 0x1p-11 : 0x1p-24; }

static void check_case(const mm_case *c)
{
    const int M = c->M, N = c->N, K = c->K, lda = K + c->lda_pad;
    float *a = malloc((size_t)M * K * 4), *b = malloc((size_t)K * N * 4), *bias = malloc((size_t)N * 4);
    float *res = malloc((size_t)M * N * 4), *got = malloc((size_t)M * N * 4);
    /* at precision bf16 the reference takes a rounded as the kernel stages it, at tf32 a and b
     * rounded as the kernel's fragments take them; the products of two bf16 or two tf32 values
     * are exact in f32, so the f32 accumulation bound below still holds */
    /* bf16 a with bf16 b takes the tensor-core row at any precision (more rows than the GEMV) */
    const int mma = c->precision != TDACL_PRECISION_EXACT || (c->adt == TDACL_BF16 && c->wdt == TDACL_BF16 && M > 8);
    const int tf = c->precision == TDACL_PRECISION_TF32;
    for (int i = 0; i < M * K; i++) a[i] = stored((float)uniform(), c->adt);
    float *a_used = malloc((size_t)M * K * 4), *b_used = malloc((size_t)K * N * 4);
    for (int i = 0; i < M * K; i++)
        a_used[i] = c->precision == TDACL_PRECISION_BF16 ? stored(a[i], TDACL_BF16) : tf ? tf32(a[i]) : a[i];
    for (int i = 0; i < K * N; i++) b[i] = stored((float)uniform(), c->wdt), b_used[i] = tf ? tf32(b[i]) : b[i];
    for (int i = 0; i < N; i++) bias[i] = (float)uniform();
    for (int i = 0; i < M * N; i++) res[i] = stored((float)uniform(), c->cdt);
    tdacl_tensor *ta = upload_2d(c->adt, M, K, lda, a);
    tdacl_tensor *tb = c->trans ? upload_2d(c->wdt, N, K, K + c->ldb_pad, b)
                                : upload_2d(c->wdt, K, N, N + c->ldb_pad, b); /* b[n*K+k] or b[k*N+n] */
    tdacl_tensor *tc = upload_2d(c->cdt, M, N, N, c->residual_is_c ? res : NULL);
    tdacl_tensor *tbias = NULL, *tres = NULL;
    if (c->epi & TDACL_EPILOGUE_BIAS) {
        int64_t n1[1] = {N};
        assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 1, n1, &tbias));
        assert_ok(g_ctx, tdacl_tensor_upload(tbias, bias, TDACL_F32, N));
    }
    if (c->epi & TDACL_EPILOGUE_RESIDUAL) tres = c->residual_is_c ? tc : upload_2d(c->cdt, M, N, N, res);
    tdacl_matmul_desc desc;
    tdacl_matmul_desc_init(&desc);
    desc.transpose_b = c->trans, desc.epilogue = c->epi, desc.precision = c->precision;
    tdacl_matmul_tensors t = {ta, tb, tbias, tres, tc};
    /* the tensor-core cases pin that row: a call it cannot run fails instead of passing on
     * the FP32 lanes */
    if (mma && *g_mma_row) setenv("TDACL_VARIANT", g_mma_row, 1);
    tdacl_status st = tdacl_matmul(g_ctx, &desc, &t);
    unsetenv("TDACL_VARIANT");
    assert_ok(g_ctx, st);
    assert_ok(g_ctx, tdacl_tensor_download(tc, got, TDACL_F32, (int64_t)M * N));
    /* f32 accumulation over K terms: gamma_(K+2) of sum |a||b| + |bias|, through gelu (slope
     * below 1.2), plus the final additions' rounding; then the one rounding to c's dtype */
    const double u = 0x1p-24, uc = unit_roundoff(c->cdt);
    double worst = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double bv = c->trans ? b_used[(size_t)n * K + k] : b_used[(size_t)k * N + n];
                acc += (double)a_used[(size_t)m * K + k] * bv, mag += fabs((double)a_used[(size_t)m * K + k] * bv);
            }
            if (c->epi & TDACL_EPILOGUE_BIAS) acc += bias[n], mag += fabs(bias[n]);
            if (c->epi & TDACL_EPILOGUE_GELU) acc = gelu(acc), mag *= 1.2;
            if (c->epi & TDACL_EPILOGUE_RESIDUAL) acc += res[(size_t)m * N + n], mag += fabs(res[(size_t)m * N + n]);
            const double err = fabs(got[(size_t)m * N + n] - acc), tol = (K + 8) * u * mag + (4 * u + uc) * fabs(acc) + 1e-30;
            if (!(err <= tol))
                fail_msg("M%d N%d K%d trans%d %s epi%u: c[%d][%d] = %.9g, reference %.9g (error %.3g > %.3g)", M, N, K, c->trans,
                         tdacl_dtype_name(c->wdt), c->epi, m, n, got[(size_t)m * N + n], acc, err, tol);
            if (err / tol > worst) worst = err / tol;
        }
    print_message("matmul M%-3d N%-3d K%-3d trans%d %-4s epi%u a %-4s c %-4s%s: worst error %.2f of the bound\n", M, N,
                  K, c->trans, tdacl_dtype_name(c->wdt), c->epi, tdacl_dtype_name(c->adt), tdacl_dtype_name(c->cdt),
                  tf ? " mma tf32" : mma ? " mma" : "", worst);
    tdacl_tensor_destroy(ta), tdacl_tensor_destroy(tb), tdacl_tensor_destroy(tc), tdacl_tensor_destroy(tbias);
    if (tres && tres != tc) tdacl_tensor_destroy(tres);
    free(a), free(a_used), free(b), free(b_used), free(bias), free(res), free(got);
}

static void test_matmul_values(void **state)
{
    (void)state;
    /* the tensor-core row runs through its portable body where there is no mma.sync */
    tdacl_device_info info;
    assert_ok(g_ctx, tdacl_context_get_info(g_ctx, &info));
    if (info.nv_cc_major < 8) setenv("TDACL_MMA_EMULATE", "1", 1);
    const unsigned ALL = TDACL_EPILOGUE_BIAS | TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL;
    static const mm_case cases[] = {
        {1, 67, 129, 0, TDACL_F32, 7, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},                      /* GEMV, split K, every epilogue step */
        {5, 64, 96, 1, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},     /* GEMV on [N, K] (tied head) */
        {8, 33, 20, 0, TDACL_F16, TDACL_EPILOGUE_RESIDUAL, 1, 3, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32}, /* residual = c; a with a wider row stride */
        /* GEMV, 8 columns a work-item (16-byte loads: N and the row stride multiples of 8) */
        {3, 72, 200, 0, TDACL_BF16, 7, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},
        {6, 136, 77, 0, TDACL_F16, TDACL_EPILOGUE_BIAS, 0, 2, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},
        {1, 64, 300, 0, TDACL_F32, 7, 1, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},
        {4, 37, 45, 1, TDACL_F32, 7, 0, 1, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32}, /* [N, K], K and the row stride odd: one element a load */
        {2, 301, 264, 1, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32}, /* [N, K], 16-byte loads, N % 4 != 0 */
        /* rows 8-element aligned (padded strides), lengths not: 16-byte loads, a short last group */
        {3, 29, 300, 1, TDACL_BF16, 7, 0, 0, TDACL_PRECISION_EXACT, 4, TDACL_F32, TDACL_F32},
        {5, 203, 64, 0, TDACL_BF16, TDACL_EPILOGUE_GELU, 0, 0, TDACL_PRECISION_EXACT, 5, TDACL_F32, TDACL_F32},
        {2, 77, 90, 0, TDACL_F32, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_EXACT, 3, TDACL_F32, TDACL_F32},
        {77, 67, 129, 0, TDACL_F32, 7, 0, 5, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},                    /* the tiled GEMM, every edge */
        {40, 50, 70, 1, TDACL_BF16, TDACL_EPILOGUE_GELU, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},    /* GEMM on [N, K] */
        {9, 130, 33, 0, TDACL_BF16, 0, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},                      /* one row past the GEMV limit */
        /* the tensor-core GEMM: element loads (odd strides), 16-byte copies, two tiles each
         * way with partial K steps, both layouts of b */
        {77, 67, 129, 0, TDACL_BF16, 7, 0, 5, TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
        {130, 136, 72, 0, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
        {40, 50, 70, 1, TDACL_BF16, TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL, 1, 0, TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
        {65, 64, 64, 1, TDACL_BF16, 7, 0, 4, TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
        /* f32 weights at precision tf32 (fp32 tiles): element and 16-byte loads, both layouts */
        {77, 67, 129, 0, TDACL_F32, 7, 0, 5, TDACL_PRECISION_TF32, 0, TDACL_F32, TDACL_F32},
        {130, 136, 72, 0, TDACL_F32, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_TF32, 0, TDACL_F32, TDACL_F32},
        {40, 50, 70, 1, TDACL_F32, TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL, 1, 0, TDACL_PRECISION_TF32, 0, TDACL_F32, TDACL_F32},
        /* a and c stored as bf16 / f16 (the model's bf16 activations): the GEMVs (both layouts,
         * norm-free), the FP32-lane GEMM, the tensor-core GEMM copying bf16 a as it is (16-byte
         * copies: row stride 72; element copies: 70; at precision exact), an f16 a rounded to
         * bf16 there, a bf16 a under tf32 */
        {3, 72, 200, 0, TDACL_BF16, 7, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32},
        {5, 203, 64, 0, TDACL_F32, 7, 1, 0, TDACL_PRECISION_EXACT, 0, TDACL_F16, TDACL_F16},
        {2, 301, 264, 1, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16},
        {77, 67, 129, 0, TDACL_F32, 7, 0, 5, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16},
        {40, 50, 70, 1, TDACL_BF16, TDACL_EPILOGUE_GELU, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F16, TDACL_BF16},
        {130, 136, 72, 0, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16},
        {40, 50, 70, 1, TDACL_BF16, TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL, 1, 0, TDACL_PRECISION_EXACT, 0,
         TDACL_BF16, TDACL_BF16},
        {65, 64, 64, 1, TDACL_BF16, 7, 0, 8, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32},
        /* the GEMV on [N, K] with f16 weights and a, a's rows padded to 144; bf16 with a's
         * row stride 75 */
        {3, 45, 136, 1, TDACL_F16, TDACL_EPILOGUE_BIAS, 0, 8, TDACL_PRECISION_EXACT, 0, TDACL_F16, TDACL_F32},
        {2, 40, 72, 1, TDACL_BF16, 7, 0, 3, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32},
        /* the GEMV on [N, K] with a too long for its local-memory copy (8 rows of 600 > 16 KB):
         * a read from global memory, 16-byte and element loads of b */
        {8, 37, 600, 1, TDACL_BF16, 7, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},
        {7, 21, 601, 1, TDACL_F32, TDACL_EPILOGUE_BIAS, 0, 1, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32},
        {77, 67, 129, 0, TDACL_BF16, 7, 0, 0, TDACL_PRECISION_BF16, 0, TDACL_F16, TDACL_F32},
        {40, 50, 70, 0, TDACL_F32, 7, 0, 0, TDACL_PRECISION_TF32, 0, TDACL_BF16, TDACL_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mm_case c = cases[i];
        if (c.epi == 7) c.epi = ALL;
        check_case(&c);
    }
    /* the transposed GEMV both ways, whatever this device takes: a staged in local memory (the
     * GPUs' path) and read from global memory (CPUs'); a bad setting is refused by name */
    for (int stage = 0; stage < 2; stage++) {
        setenv("TDACL_GEMV_STAGE", stage ? "1" : "0", 1);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            mm_case c = cases[i];
            if (!c.trans || c.M > 8) continue; /* 8: the GEMV's rows (src/ops/gemm.h) */
            if (c.epi == 7) c.epi = ALL;
            check_case(&c);
        }
    }
    setenv("TDACL_GEMV_STAGE", "yes", 1);
    {
        const int N = 8, K = 16;
        tdacl_tensor *a = upload_2d(TDACL_F32, 1, K, K, NULL), *b = upload_2d(TDACL_F32, N, K, K, NULL);
        tdacl_tensor *c = upload_2d(TDACL_F32, 1, N, N, NULL);
        tdacl_matmul_desc d;
        tdacl_matmul_desc_init(&d);
        d.transpose_b = 1;
        tdacl_matmul_tensors t = {a, b, NULL, NULL, c};
        assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &t), TDACL_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(tdacl_last_error(g_ctx), "TDACL_GEMV_STAGE=yes"));
        tdacl_tensor_destroy(a), tdacl_tensor_destroy(b), tdacl_tensor_destroy(c);
    }
    unsetenv("TDACL_GEMV_STAGE");
    /* K split over work-groups (few tiles: a decode step of many sequences), forced to 3 and
     * 7 chunks: chunks ending inside a K step, residual = c, both layouts, every row */
    static const mm_case split[] = {
        {9, 67, 301, 0, TDACL_F32, 7, 0, 5, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},
        {33, 50, 200, 1, TDACL_BF16, 7, 1, 0, TDACL_PRECISION_EXACT, 0, TDACL_F32, TDACL_F32},
        {12, 136, 230, 0, TDACL_BF16, 7, 1, 0, TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
        {40, 50, 330, 1, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 4, TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
        {17, 67, 129, 0, TDACL_F32, 7, 0, 0, TDACL_PRECISION_TF32, 0, TDACL_F32, TDACL_F32},
        {12, 136, 230, 0, TDACL_BF16, 7, 1, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16},
        {9, 67, 301, 0, TDACL_F32, 7, 0, 5, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16},
    };
    for (int chunks = 3; chunks <= 7; chunks += 4) {
        char n[8];
        snprintf(n, sizeof n, "%d", chunks);
        setenv("TDACL_GEMM_SPLIT_K", n, 1);
        for (size_t i = 0; i < sizeof split / sizeof *split; i++) {
            mm_case c = split[i];
            if (c.epi == 7) c.epi = ALL;
            check_case(&c);
        }
    }
    setenv("TDACL_GEMM_SPLIT_K", "two", 1);
    {
        const int M = 20, N = 8, K = 16;
        tdacl_tensor *a = upload_2d(TDACL_F32, M, K, K, NULL), *b = upload_2d(TDACL_F32, K, N, N, NULL);
        tdacl_tensor *c = upload_2d(TDACL_F32, M, N, N, NULL);
        tdacl_matmul_desc d;
        tdacl_matmul_desc_init(&d);
        tdacl_matmul_tensors t = {a, b, NULL, NULL, c};
        assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &t), TDACL_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(tdacl_last_error(g_ctx), "TDACL_GEMM_SPLIT_K=two"));
        tdacl_tensor_destroy(a), tdacl_tensor_destroy(b), tdacl_tensor_destroy(c);
    }
    unsetenv("TDACL_GEMM_SPLIT_K");
}

/* A context whose user tuning file (at path) holds the one entry, logging from `level` into log. */
static tdacl_context *context_with_entry(const char *path, const char *entry, tu_log *log, tdacl_log_level level)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", entry);
    fclose(f);
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.tuning_file = path;
    desc.log_fn = tu_log_fn, desc.log_user = log, desc.log_level = level;
    tdacl_context *ctx = NULL;
    assert_int_equal(tdacl_context_create(&desc, &ctx), TDACL_SUCCESS);
    return ctx;
}

/* The tensor-core GEMM's warp layouts and K steps other than the device's own, through a
 * user tuning file (every entry must be taken: a refused one warns and falls back, and the
 * check fails on any warning; the last, invalid entry shows that such a warning is seen). */
static void test_matmul_mma_layouts(void **state)
{
    (void)state;
    tdacl_device_info info;
    assert_ok(g_ctx, tdacl_context_get_info(g_ctx, &info));
    if (info.nv_cc_major < 8) setenv("TDACL_MMA_EMULATE", "1", 1);
    /* a16: bf16 a and c, copied into the tiles as they are through GMM_STAGES stages, at K =
     * 100 and 40 (fewer steps than the pipeline is deep: empty copy groups in the prologue) */
    static const struct { const char *params; int valid, a16; } sets[] = {
        {"GMM_BM=64 GMM_BN=64 GMM_WM=4 GMM_WN=1 GMM_BK=64 GMM_STAGES=2", 1, 0},  /* warps stacked along M, 64-wide K steps */
        {"GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=2", 1, 0}, /* warps side by side along N */
        {"GMM_BM=128 GMM_BN=64 GMM_WM=4 GMM_WN=2 GMM_BK=32 GMM_STAGES=2", 1, 0}, /* eight warps */
        {"GMM_BM=64 GMM_BN=64 GMM_WM=1 GMM_WN=1 GMM_BK=64 GMM_STAGES=2", 1, 0},  /* one warp owns the tile */
        {"GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=3", 1, 1},
        {"GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=16 GMM_STAGES=4", 1, 1},
        {"GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=40 GMM_STAGES=2", 0, 0},  /* refused: K steps of 16 */
    };
    char *dir = tu_mkdtemp("mma-layouts");
    char path[512];
    snprintf(path, sizeof path, "%s/tuning.tdb", dir);
    tdacl_context *saved = g_ctx;
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        char entry[256];
        snprintf(entry, sizeof entry, "gemm_mma class=%s : %s", info.arch, sets[i].params);
        tu_log log = {0};
        g_ctx = context_with_entry(path, entry, &log, TDACL_LOG_WARN);
        const mm_case c = {77, 136, 100, (int)i % 2, TDACL_BF16, TDACL_EPILOGUE_BIAS | TDACL_EPILOGUE_RESIDUAL, 0, 3,
                           TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32};
        if (!sets[i].a16) check_case(&c);
        for (int K = 100; sets[i].a16 && K >= 40; K -= 60) {
            const mm_case c16 = {77, 136, K, (int)i % 2, TDACL_BF16, TDACL_EPILOGUE_BIAS | TDACL_EPILOGUE_RESIDUAL, 0, 4,
                                 TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16};
            check_case(&c16);
        }
        const int warned = tu_log_find(&log, TDACL_LOG_WARN, "tuning database", NULL) >= 0;
        if (warned == sets[i].valid) fail_msg("%s: %s", sets[i].params, warned ? log.msg[0] : "no warning for an invalid entry");
        tdacl_context_destroy(g_ctx);
        tu_log_clear(&log);
    }
    g_ctx = saved;
    unsetenv("TDACL_MMA_EMULATE");
    remove(path);
    tu_rm_rf(dir);
    free(dir);
}

/* The AMD and Intel bodies of the fragment layer (cl/mma_units.cl) in the GEMM, their
 * instructions emulated from the vendors' documented lane layouts: the tensor-core cases of
 * test_matmul_values through each, and the debug log names the body that ran. */
static void test_matmul_mma_units(void **state)
{
    (void)state;
    static const struct { const char *env, *name; } bodies[] = {
        {"dpas8", "Intel DPAS sub-group 8, emulated"}, {"dpas16", "Intel DPAS sub-group 16, emulated"},
        {"mfma", "AMD MFMA 4x4x4, emulated"},          {"wmma", "AMD WMMA 16x16x16, emulated"},
    };
    static const mm_case cases[] = {
        {77, 67, 129, 0, TDACL_BF16, TDACL_EPILOGUE_BIAS | TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL, 0, 5,
         TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
        {40, 50, 70, 1, TDACL_BF16, TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL, 1, 0, TDACL_PRECISION_BF16, 0, TDACL_F32, TDACL_F32},
    };
    tdacl_context *saved = g_ctx;
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        setenv("TDACL_MMA_EMULATE", bodies[i].env, 1);
        tu_log log = {0};
        tdacl_context_desc desc;
        tdacl_context_desc_init(&desc);
        desc.log_fn = tu_log_fn, desc.log_user = &log, desc.log_level = TDACL_LOG_DEBUG;
        assert_int_equal(tdacl_context_create(&desc, &g_ctx), TDACL_SUCCESS);
        for (size_t j = 0; j < sizeof cases / sizeof *cases; j++) check_case(&cases[j]);
        char want[96];
        snprintf(want, sizeof want, "took gemm.mma (%s)", bodies[i].name);
        if (tu_log_find(&log, TDACL_LOG_DEBUG, want, NULL) < 0) fail_msg("no log line '%s'", want);
        tdacl_context_destroy(g_ctx);
        tu_log_clear(&log);
    }
    g_ctx = saved;
    unsetenv("TDACL_MMA_EMULATE");
}

/* gemm.wgmma: the GEMM on Hopper's warpgroup products (natively on sm_90, elsewhere through
 * the portable body's emulation of them, TDACL_MMA_EMULATE=wgmma), tiles in wgmma's swizzle:
 * bf16 a and b, both layouts of b, 16-byte and element copies, edge tiles, K split, each tile
 * shape of its space through a user tuning file; a call it cannot take is refused by name, and
 * a bf16 call takes it unpinned. */
static void test_matmul_wgmma(void **state)
{
    (void)state;
    tdacl_device_info info;
    assert_ok(g_ctx, tdacl_context_get_info(g_ctx, &info));
    const int native = info.nv_cc_major == 9 && info.nv_cc_minor == 0;
    if (!native) setenv("TDACL_MMA_EMULATE", "wgmma", 1);
    const unsigned ALL = TDACL_EPILOGUE_BIAS | TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL;
    static const mm_case cases[] = {
        {77, 67, 129, 0, TDACL_BF16, 7, 0, 5, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32},  /* element copies of a */
        {130, 136, 72, 0, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16},
        {40, 50, 70, 1, TDACL_BF16, TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL, 1, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16,
         TDACL_BF16},
        {65, 64, 64, 1, TDACL_BF16, 7, 0, 8, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32},
        {129, 200, 96, 1, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 0, TDACL_PRECISION_EXACT, 4, TDACL_BF16, TDACL_F32},
        {64, 128, 32, 0, TDACL_BF16, 0, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32}, /* one whole tile, one step */
    };
    g_mma_row = "gemm.wgmma";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mm_case c = cases[i];
        if (c.epi == 7) c.epi = ALL;
        check_case(&c);
    }
    setenv("TDACL_GEMM_SPLIT_K", "3", 1);
    const mm_case split = {12, 136, 230, 0, TDACL_BF16, ALL, 1, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16};
    check_case(&split);
    unsetenv("TDACL_GEMM_SPLIT_K");
    /* every tile shape and stage count (a refused entry would warn: the check fails on any) */
    static const char *const sets[] = {"GWG_BM=128 GWG_BN=128 GWG_STAGES=3", "GWG_BM=64 GWG_BN=128 GWG_STAGES=4",
                                       "GWG_BM=128 GWG_BN=64 GWG_STAGES=2"};
    char *dir = tu_mkdtemp("wgmma-tiles");
    char path[512];
    snprintf(path, sizeof path, "%s/tuning.tdb", dir);
    tdacl_context *saved = g_ctx;
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        char entry[256];
        snprintf(entry, sizeof entry, "gemm_wgmma class=%s : %s", info.arch, sets[i]);
        tu_log log = {0};
        g_ctx = context_with_entry(path, entry, &log, TDACL_LOG_DEBUG);
        for (int trans = 0; trans < 2; trans++) {
            const mm_case c = {150, 136, 100, trans, TDACL_BF16, ALL, 0, 8, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16};
            check_case(&c);
        }
        if (tu_log_find(&log, TDACL_LOG_WARN, "tuning database", NULL) >= 0) fail_msg("%s: %s", sets[i], log.msg[0]);
        /* unpinned, a bf16 call takes this row, and the log says so */
        g_mma_row = "gemm.wgmma";
        if (i == 0) {
            const mm_case c = {70, 64, 64, 0, TDACL_BF16, 0, 0, 0, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16};
            g_mma_row = "";
            check_case(&c);
            g_mma_row = "gemm.wgmma";
            if (tu_log_find(&log, TDACL_LOG_DEBUG, "took gemm.wgmma", NULL) < 0) fail_msg("no log line 'took gemm.wgmma'");
        }
        tdacl_context_destroy(g_ctx);
        tu_log_clear(&log);
    }
    g_ctx = saved;
    remove(path);
    tu_rm_rf(dir);
    free(dir);
    /* f32 a: refused by name when pinned */
    {
        const int M = 20, N = 16, K = 32;
        tdacl_tensor *a = upload_2d(TDACL_F32, M, K, K, NULL), *b = upload_2d(TDACL_BF16, K, N, N, NULL);
        tdacl_tensor *c = upload_2d(TDACL_BF16, M, N, N, NULL);
        tdacl_matmul_desc d;
        tdacl_matmul_desc_init(&d);
        d.precision = TDACL_PRECISION_BF16;
        tdacl_matmul_tensors t = {a, b, NULL, NULL, c};
        setenv("TDACL_VARIANT", "gemm.wgmma", 1);
        assert_true(tdacl_matmul(g_ctx, &d, &t) != TDACL_SUCCESS);
        assert_non_null(strstr(tdacl_last_error(g_ctx), "takes both in bf16"));
        /* and any call when TDACL_WGMMA=0 turns the row off */
        tdacl_tensor *a16 = upload_2d(TDACL_BF16, M, K, K, NULL);
        tdacl_matmul_tensors t16 = {a16, b, NULL, NULL, c};
        setenv("TDACL_WGMMA", "0", 1);
        assert_true(tdacl_matmul(g_ctx, &d, &t16) != TDACL_SUCCESS);
        assert_non_null(strstr(tdacl_last_error(g_ctx), "TDACL_WGMMA=0 turns it off"));
        unsetenv("TDACL_WGMMA");
        assert_ok(g_ctx, tdacl_matmul(g_ctx, &d, &t16));
        unsetenv("TDACL_VARIANT");
        tdacl_tensor_destroy(a16);
        tdacl_tensor_destroy(a), tdacl_tensor_destroy(b), tdacl_tensor_destroy(c);
    }
    g_mma_row = "gemm.mma";
    unsetenv("TDACL_MMA_EMULATE");
}

/* The same at two tiny shapes (both layouts of b, edge tiles, two K steps): what
 * matmul_wgmma_oclgrind runs under Oclgrind (races, uninitialised values, out-of-bounds local
 * reads of the swizzled tiles) */
static void test_matmul_wgmma_tiny(void **state)
{
    (void)state;
    tdacl_device_info info;
    assert_ok(g_ctx, tdacl_context_get_info(g_ctx, &info));
    if (!(info.nv_cc_major == 9 && info.nv_cc_minor == 0)) setenv("TDACL_MMA_EMULATE", "wgmma", 1);
    static const mm_case cases[] = {
        {70, 64, 40, 0, TDACL_BF16, TDACL_EPILOGUE_BIAS | TDACL_EPILOGUE_GELU | TDACL_EPILOGUE_RESIDUAL, 0, 0,
         TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_BF16},
        {33, 72, 48, 1, TDACL_BF16, TDACL_EPILOGUE_BIAS, 0, 8, TDACL_PRECISION_EXACT, 0, TDACL_BF16, TDACL_F32},
    };
    g_mma_row = "gemm.wgmma";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
    g_mma_row = "gemm.mma";
    unsetenv("TDACL_MMA_EMULATE");
}

static void test_matmul_errors(void **state)
{
    (void)state;
    int64_t s_ak[2] = {4, 8}, s_kn[2] = {8, 6}, s_mn[2] = {4, 6}, s_bad[2] = {4, 7}, s_n[1] = {6}, s_3d[3] = {1, 4, 8};
    tdacl_tensor *a, *b, *c, *bias, *c_bad, *c16, *a3, *big, *off;
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 2, s_ak, &a));
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_BF16, 2, s_kn, &b));
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 2, s_mn, &c));
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 1, s_n, &bias));
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 2, s_bad, &c_bad));
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_BF16, 2, s_mn, &c16));
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 3, s_3d, &a3));
    int64_t s_big[2] = {8, 8}, st[2] = {8, 1};
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 2, s_big, &big));
    assert_ok(g_ctx, tdacl_tensor_view(big, 2, s_ak, st, 8, &off)); /* rows 1..4 of big: offset 8 */
    tdacl_matmul_desc d;
    tdacl_matmul_desc_init(&d);
    tdacl_matmul_tensors t = {a, b, NULL, NULL, c};
    assert_ok(g_ctx, tdacl_matmul(g_ctx, &d, &t));
    assert_status(NULL, tdacl_matmul(NULL, &d, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(g_ctx, tdacl_matmul(g_ctx, NULL, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "desc is NULL");
    tdacl_matmul_tensors u = t;
    u.c = c_bad;
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &u), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(g_ctx), "c is [4, 7], expected [4, 6]");
    d.epilogue = TDACL_EPILOGUE_RESIDUAL; /* a bf16 residual for an f32 c */
    u = t, u.residual = c16;
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &u), TDACL_ERR_DTYPE);
    assert_contains(tdacl_last_error(g_ctx), "residual is bf16 but c is f32");
    d.epilogue = 0;
    u = t, u.a = a3;
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &u), TDACL_ERR_SHAPE);
    u = t, u.a = off;
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &u), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(g_ctx), "offset 8");
    d.transpose_b = 1; /* b [8, 6] read as [N, K] holds K = 6, a has K = 8 */
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &t), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(g_ctx), "holds K = 6");
    d.transpose_b = 2;
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &t), TDACL_ERR_INVALID_ARGUMENT);
    tdacl_matmul_desc_init(&d);
    d.epilogue = TDACL_EPILOGUE_BIAS; /* bias missing */
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "bias missing");
    d.epilogue = 0x10;
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &t), TDACL_ERR_INVALID_ARGUMENT);
    d.epilogue = 0;
    u = t, u.bias = bias; /* bias given without the flag */
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &u), TDACL_ERR_INVALID_ARGUMENT);
    u = t, u.c = (tdacl_tensor *)off, u.a = big; /* c inside a's storage */
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &u), TDACL_ERR_SHAPE); /* c [4, 8] against [8, 6] */
    int64_t s_kk[2] = {8, 8};
    tdacl_tensor *bsq;
    assert_ok(g_ctx, tdacl_tensor_create(g_ctx, TDACL_F32, 2, s_kk, &bsq));
    tdacl_matmul_tensors w = {big, bsq, NULL, NULL, big}; /* c is a */
    assert_status(g_ctx, tdacl_matmul(g_ctx, &d, &w), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(g_ctx), "c shares its storage with a");
    tdacl_tensor *all[] = {a, b, c, bias, c_bad, c16, a3, big, off, bsq};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tdacl_tensor_destroy(all[i]);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) cmocka_set_test_filter(argv[++i]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_values),
        cmocka_unit_test(test_matmul_mma_layouts),
        cmocka_unit_test(test_matmul_mma_units),
        cmocka_unit_test(test_matmul_wgmma),
        cmocka_unit_test(test_matmul_wgmma_tiny),
        cmocka_unit_test(test_matmul_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
