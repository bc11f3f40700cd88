/* Tensors: host dtype conversions against an independent reference (exact rounding in
 * double precision), device round trips for every (host dtype, tensor dtype) pair, views
 * with strides and offsets, tdacl_tensor_copy, empty tensors and every error path. */
#include <float.h>
#include <math.h>

#include "common/clcheck.h"

/* ---- the reference: formats defined by their fraction bits and exponent range ---- */

/* x rounded to nearest-even in a binary format with `mant` fraction bits, smallest normal
 * exponent `emin`, overflowing to infinity at `inf_at` (the first value that rounds up
 * past the largest finite).  Exact in double for every float input. */
static double ref_round(double x, int mant, int emin, double inf_at)
{
    if (isnan(x) || isinf(x) || x == 0) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    e -= 1;
    if (e < emin) e = emin; /* subnormal: fixed quantum */
    double q = ldexp(1.0, e - mant);
    double r = rint(a / q) * q; /* rint rounds ties to even */
    if (r >= inf_at) r = INFINITY;
    return copysign(r, x);
}
static double ref_round_f16(double x) { return ref_round(x, 10, -14, 65536.0); }
static double ref_round_bf16(double x) { return ref_round(x, 7, -126, ldexp(1.0, 128)); }

/* Value of a bit pattern from the format's definition. */
static double ref_value(uint16_t h, int mant, int ebits)
{
    int emax = (1 << ebits) - 1, bias = emax / 2;
    int s = h >> 15, e = (h >> mant) & emax, m = h & ((1 << mant) - 1);
    double v;
    if (e == 0) v = ldexp(m, 1 - bias - mant);
    else if (e == emax) v = m ? NAN : INFINITY;
    else v = ldexp((1 << mant) + m, e - bias - mant);
    return s ? -v : v;
}
static double ref_f16(uint16_t h) { return ref_value(h, 10, 5); }
static double ref_bf16(uint16_t h) { return ref_value(h, 7, 8); }

static float f_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int is_nan16(uint16_t h, int mant) { int emax = mant == 10 ? 0x1f : 0xff; return ((h >> mant) & emax) == emax && (h & ((1 << mant) - 1)); }

/* ---- host conversions ---- */

static void test_host_bf16_hand_values(void **state)
{
    (void)state;
    assert_int_equal(tdacl_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(tdacl_f32_to_bf16(-2.0f), 0xc000);
    assert_int_equal(tdacl_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(tdacl_f32_to_bf16(0.0f), 0x0000);
    /* 1 + 2^-8 lies halfway between 0x3f80 and 0x3f81: ties go to the even 0x3f80 */
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0x3f808000u)), 0x3f80);
    /* halfway between 0x3f81 and 0x3f82: even is 0x3f82 */
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0x3f818000u)), 0x3f82);
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0x3f808001u)), 0x3f81); /* just above half */
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0x3f807fffu)), 0x3f80); /* just below */
    assert_int_equal(tdacl_f32_to_bf16(3.14159265f), 0x4049);              /* 3.140625 */
    assert_int_equal(tdacl_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(tdacl_f32_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(tdacl_f32_to_bf16(FLT_MAX), 0x7f80); /* rounds up past the largest bf16 */
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0x7f7f7fffu)), 0x7f7f);
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0x00000001u)), 0x0000); /* tiny subnormal */
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0x00018000u)), 0x0002); /* subnormal tie, to even */
    /* NaN stays NaN, quiet, with its sign, also for a signalling NaN whose payload sits
     * in the low bits that truncation would drop */
    uint16_t n = tdacl_f32_to_bf16(NAN);
    assert_true(is_nan16(n, 7));
    assert_true(is_nan16(tdacl_f32_to_bf16(f_from_bits(0x7f800001u)), 7));
    assert_true(is_nan16(tdacl_f32_to_bf16(f_from_bits(0xff800001u)), 7));
    assert_int_equal(tdacl_f32_to_bf16(f_from_bits(0xff800001u)) >> 15, 1);
    assert_true(tdacl_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(tdacl_bf16_to_f32(0x4049) == 3.140625f);
    assert_true(tdacl_bf16_to_f32(0xc000) == -2.0f);
    assert_true(isinf(tdacl_bf16_to_f32(0xff80)) && tdacl_bf16_to_f32(0xff80) < 0);
    assert_true(isnan(tdacl_bf16_to_f32(0x7fc0)));
    assert_true(tdacl_bf16_to_f32(0x0001) == ldexpf(1.0f, -133));
}

static void test_host_f16_hand_values(void **state)
{
    (void)state;
    assert_int_equal(tdacl_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(tdacl_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(tdacl_f32_to_f16(0.1f), 0x2e66);
    assert_int_equal(tdacl_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(tdacl_f32_to_f16(65504.0f), 0x7bff); /* largest half */
    assert_int_equal(tdacl_f32_to_f16(65519.0f), 0x7bff); /* below the halfway point */
    assert_int_equal(tdacl_f32_to_f16(65520.0f), 0x7c00); /* halfway: to even = Inf */
    assert_int_equal(tdacl_f32_to_f16(1e6f), 0x7c00);     /* overflow */
    assert_int_equal(tdacl_f32_to_f16(-1e6f), 0xfc00);
    assert_int_equal(tdacl_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(tdacl_f32_to_f16(-INFINITY), 0xfc00);
    /* 1 + 2^-11: halfway between 0x3c00 and 0x3c01 -> 0x3c00; 1 + 3*2^-11 -> 0x3c02 */
    assert_int_equal(tdacl_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    assert_int_equal(tdacl_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
    assert_int_equal(tdacl_f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3c01);
    /* subnormal halves: quantum 2^-24 */
    assert_int_equal(tdacl_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(tdacl_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);       /* tie to even 0 */
    assert_int_equal(tdacl_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);       /* above half */
    assert_int_equal(tdacl_f32_to_f16(ldexpf(3.0f, -25)), 0x0002);       /* 1.5 quanta: to even 2 */
    assert_int_equal(tdacl_f32_to_f16(ldexpf(5.0f, -25)), 0x0002);       /* 2.5 quanta: to even 2 */
    assert_int_equal(tdacl_f32_to_f16(-ldexpf(1.0f, -24)), 0x8001);
    assert_int_equal(tdacl_f32_to_f16(ldexpf(1023.0f, -24)), 0x03ff);    /* largest subnormal */
    assert_int_equal(tdacl_f32_to_f16(ldexpf(1.0f, -14)), 0x0400);       /* smallest normal */
    assert_int_equal(tdacl_f32_to_f16(ldexpf(2047.0f, -25)), 0x0400);    /* rounds up into normal */
    assert_int_equal(tdacl_f32_to_f16(ldexpf(1.0f, -30)), 0x0000);       /* underflow */
    uint16_t n = tdacl_f32_to_f16(NAN);
    assert_true(is_nan16(n, 10));
    assert_true(is_nan16(tdacl_f32_to_f16(f_from_bits(0x7f800001u)), 10)); /* payload only in low bits */
    assert_true(is_nan16(tdacl_f32_to_f16(f_from_bits(0xffc00000u)), 10));
    assert_int_equal(tdacl_f32_to_f16(f_from_bits(0xffc00000u)) >> 15, 1);

    assert_true(tdacl_f16_to_f32(0x3c00) == 1.0f);
    assert_true(tdacl_f16_to_f32(0x3555) == 0.333251953125f);
    assert_true(tdacl_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_true(tdacl_f16_to_f32(0x8001) == -ldexpf(1.0f, -24));
    assert_true(tdacl_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    assert_true(tdacl_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(isinf(tdacl_f16_to_f32(0x7c00)) && tdacl_f16_to_f32(0x7c00) > 0);
    assert_true(isinf(tdacl_f16_to_f32(0xfc00)) && tdacl_f16_to_f32(0xfc00) < 0);
    assert_true(isnan(tdacl_f16_to_f32(0x7e00)));
    assert_true(isnan(tdacl_f16_to_f32(0x7c01)));
    assert_int_equal(bits_of(tdacl_f16_to_f32(0x8000)), 0x80000000u);
}

/* Every 16-bit pattern decodes to its defined value and encodes back to itself. */
static void test_host_all_patterns(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f16 = tdacl_f16_to_f32((uint16_t)h), bf = tdacl_bf16_to_f32((uint16_t)h);
        double rf16 = ref_f16((uint16_t)h), rbf = ref_bf16((uint16_t)h);
        if (isnan(rf16)) {
            assert_true(isnan(f16));
            assert_true(is_nan16(tdacl_f32_to_f16(f16), 10));
        } else {
            if ((double)f16 != rf16 || !signbit(f16) != !signbit(rf16)) fail_msg("f16 %04x -> %g, expected %g", h, f16, rf16);
            assert_int_equal(tdacl_f32_to_f16(f16), h);
        }
        if (isnan(rbf)) {
            assert_true(isnan(bf));
            assert_true(is_nan16(tdacl_f32_to_bf16(bf), 7));
        } else {
            if ((double)bf != rbf || !signbit(bf) != !signbit(rbf)) fail_msg("bf16 %04x -> %g, expected %g", h, bf, rbf);
            assert_int_equal(tdacl_f32_to_bf16(bf), h);
        }
    }
}

static void check_encode(float x)
{
    uint16_t h = tdacl_f32_to_f16(x), b = tdacl_f32_to_bf16(x);
    if (isnan(x)) {
        assert_true(is_nan16(h, 10) && is_nan16(b, 7));
        assert_int_equal(h >> 15, (int)signbit(x) != 0);
        assert_int_equal(b >> 15, (int)signbit(x) != 0);
        return;
    }
    double wh = ref_round_f16(x), wb = ref_round_bf16(x);
    double gh = ref_f16(h), gb = ref_bf16(b);
    if (gh != wh || !signbit(gh) != !signbit(wh))
        fail_msg("f32_to_f16(%a = 0x%08x) = 0x%04x (%a), expected %a", (double)x, bits_of(x), h, gh, wh);
    if (gb != wb || !signbit(gb) != !signbit(wb))
        fail_msg("f32_to_bf16(%a = 0x%08x) = 0x%04x (%a), expected %a", (double)x, bits_of(x), b, gb, wb);
}

/* Float inputs across the whole range (a stride over all bit patterns plus every tie and
 * its neighbours near the f16 and bf16 rounding points) round exactly like the
 * reference. */
static void test_host_rounding_sweep(void **state)
{
    (void)state;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 40961) check_encode(f_from_bits((uint32_t)u));
    for (uint32_t m = 0; m < (1u << 16); m += 7) {
        /* f16 keeps 10 of 23 fraction bits: the halfway pattern is bit 12 */
        for (uint32_t e = 100; e <= 145; e++) {
            uint32_t base = e << 23 | ((m << 13) & 0x7fe000u) | 0x1000u;
            for (int d = -1; d <= 1; d++) {
                check_encode(f_from_bits(base + (uint32_t)d));
                check_encode(f_from_bits((base + (uint32_t)d) | 0x80000000u));
            }
        }
        /* bf16 keeps 7: the halfway pattern is bit 15 */
        uint32_t bb = (m % 254 + 1) << 23 | (m << 16 & 0x7f0000u) | 0x8000u;
        for (int d = -1; d <= 1; d++) check_encode(f_from_bits(bb + (uint32_t)d));
    }
    for (uint32_t u = 0; u < 0x2000; u++) check_encode(f_from_bits(u)); /* f32 subnormals */
}

/* ---- device tensors ---- */

static tdacl_context *ctx;
static int device_denorms; /* single precision subnormals survive on the device */

static int setup(void **state)
{
    (void)state;
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 0;
    if (tdacl_context_create(&desc, &ctx)) {
        print_error("context: %s\n", tdacl_last_error(NULL));
        return -1;
    }
    cl_device_fp_config fp = 0;
    clGetDeviceInfo(ctx->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    device_denorms = (fp & CL_FP_DENORM) != 0;
    return 0;
}

/* Runs last (cmocka ignores failures in a group teardown): the tests destroyed every
 * tensor they made, and the context releases every buffer, program and kernel. */
static void test_release_context(void **state)
{
    (void)state;
    assert_int_equal(ctx->live_tensors, 0);
    assert_null(ctx->tensors);
    tu_destroy_checked(ctx);
    ctx = NULL;
}

static int teardown(void **state)
{
    (void)state;
    tdacl_context_destroy(ctx); /* only when a test failed before test_release_context */
    return 0;
}

#define N 120
static const int64_t SHAPE4[4] = {2, 3, 4, 5};

/* Test values in f32: ordinary numbers plus every special case for the conversions. */
static void make_f32(float *x, int n)
{
    for (int i = 0; i < n; i++) x[i] = 3.0f * sinf(0.37f * (float)i) * (float)(1 + i % 7);
    const float special[] = {
        1.0f, -2.5f, -0.0f, f_from_bits(0x3f808000u), f_from_bits(0x3f818000u),
        1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-24f, 0x1.8p-25f, 0x1p-25f, 0x3p-25f,
        65504.0f, 65519.0f, 65520.0f, 1e6f, -1e6f, INFINITY, -INFINITY, NAN, FLT_MAX,
        0x1p-14f, 0x1.ffcp-15f, 1e-30f, 3.0e38f, 1e-40f, -0x1p-149f};
    for (size_t i = 0; i < sizeof special / sizeof *special && (int)i < n; i++) x[i * 7 % n] = special[i]; /* 7 is coprime to 96 and 120: no overlaps */
    /* OpenCL lets a device flush f32 subnormals (PoCL keeps them); feed such a device
     * none rather than expect what it may not do */
    for (int i = 0; i < n && !device_denorms; i++)
        if (fpclassify(x[i]) == FP_SUBNORMAL) x[i] = 0.0f;
}

/* Host value i of `buf` in dtype dt as f32 (exact for 16-bit types). */
static float host_get(const void *buf, tdacl_dtype dt, int i)
{
    if (dt == TDACL_F32) return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return dt == TDACL_BF16 ? tdacl_bf16_to_f32(h) : tdacl_f16_to_f32(h);
}

static void host_set(void *buf, tdacl_dtype dt, int i, float v)
{
    if (dt == TDACL_F32) ((float *)buf)[i] = v;
    else ((uint16_t *)buf)[i] = dt == TDACL_BF16 ? tdacl_f32_to_bf16(v) : tdacl_f32_to_f16(v);
}

/* Element i of `got` (dtype dt) must equal `want` converted to dt; NaN must stay NaN
 * (payloads may differ between host and device f16 rounding). */
static void check_elem(const void *got, tdacl_dtype dt, int i, float want, const char *what)
{
    float g = host_get(got, dt, i);
    float exp_buf[1];
    host_set(exp_buf, dt, 0, want);
    float w = host_get(exp_buf, dt, 0);
    if (isnan(w)) {
        if (!isnan(g)) fail_msg("%s: element %d is %g, expected NaN", what, i, g);
        return;
    }
    if (dt == TDACL_F32 ? bits_of(g) != bits_of(w) : memcmp((const char *)got + 2 * i, exp_buf, 2))
        fail_msg("%s: element %d is %a, expected %a (from %a)", what, i, (double)g, (double)w, (double)want);
}

static tdacl_tensor *make_tensor(tdacl_dtype dt, int ndim, const int64_t *shape)
{
    tdacl_tensor *t = NULL;
    assert_ok(ctx, tdacl_tensor_create(ctx, dt, ndim, shape, &t));
    assert_non_null(t);
    return t;
}

/* Upload in every host dtype into every tensor dtype, download in every host dtype:
 * the result is the host conversion chain host -> f32 -> tensor dtype -> f32 -> out. */
static void test_roundtrip_all_dtypes(void **state)
{
    (void)state;
    float src[N];
    make_f32(src, N);
    for (int td = 0; td <= 2; td++) {
        tdacl_tensor *t = make_tensor((tdacl_dtype)td, 4, SHAPE4);
        tdacl_dtype got_dt;
        assert_ok(ctx, tdacl_tensor_dtype(t, &got_dt));
        assert_int_equal(got_dt, td);
        for (int hd = 0; hd <= 2; hd++) {
            float host[N]; /* room for N elements of any dtype, aligned for all */
            for (int i = 0; i < N; i++) host_set(host, (tdacl_dtype)hd, i, src[i]);
            assert_ok(ctx, tdacl_tensor_upload(t, host, (tdacl_dtype)hd, N));
            for (int od = 0; od <= 2; od++) {
                float out[N];
                memset(out, 0xcd, sizeof out);
                assert_ok(ctx, tdacl_tensor_download(t, out, (tdacl_dtype)od, N));
                char what[64];
                snprintf(what, sizeof what, "host %s -> tensor %s -> host %s", tdacl_dtype_name((tdacl_dtype)hd),
                         tdacl_dtype_name((tdacl_dtype)td), tdacl_dtype_name((tdacl_dtype)od));
                for (int i = 0; i < N; i++) {
                    float in_t[1];
                    host_set(in_t, (tdacl_dtype)td, 0, host_get(host, (tdacl_dtype)hd, i));
                    check_elem(out, (tdacl_dtype)od, i, host_get(in_t, (tdacl_dtype)td, 0), what);
                }
                /* same dtype both ways is bit-exact, NaN payloads included */
                if (hd == td && od == td) assert_memory_equal(out, host, (size_t)N * tdacl_dtype_size((tdacl_dtype)td));
            }
        }
        assert_ok(ctx, tdacl_tensor_destroy(t));
    }
}

static void test_accessors(void **state)
{
    (void)state;
    tdacl_tensor *t = make_tensor(TDACL_BF16, 4, SHAPE4);
    int nd = -1;
    int64_t sh[TDACL_MAX_DIMS], st[TDACL_MAX_DIMS], n = -1;
    assert_ok(ctx, tdacl_tensor_ndim(t, &nd));
    assert_int_equal(nd, 4);
    assert_ok(ctx, tdacl_tensor_shape(t, sh, st));
    assert_memory_equal(sh, SHAPE4, sizeof SHAPE4);
    const int64_t want_st[4] = {60, 20, 5, 1};
    assert_memory_equal(st, want_st, sizeof want_st);
    assert_ok(ctx, tdacl_tensor_shape(t, NULL, st)); /* either output may be NULL */
    assert_ok(ctx, tdacl_tensor_shape(t, sh, NULL));
    assert_ok(ctx, tdacl_tensor_numel(t, &n));
    assert_int_equal(n, N);
    assert_int_equal(tdacl__tensor_is_contiguous(t), 1);
    assert_ok(ctx, tdacl_tensor_destroy(t));
    assert_ok(ctx, tdacl_tensor_destroy(NULL));
    assert_string_equal(tdacl_dtype_name(TDACL_F32), "f32");
    assert_string_equal(tdacl_dtype_name(TDACL_BF16), "bf16");
    assert_string_equal(tdacl_dtype_name(TDACL_F16), "f16");
    assert_int_equal(tdacl_dtype_size(TDACL_F32), 4);
    assert_int_equal(tdacl_dtype_size(TDACL_BF16), 2);
    assert_int_equal(tdacl_dtype_size(TDACL_F16), 2);
}

/* A token-major [B,T,H,D] buffer seen as [B,H,T,D]: uploads land at the transposed
 * places, downloads gather them back, for f32 and (with conversion) bf16. */
static void test_views_token_major(void **state)
{
    (void)state;
    enum { B = 2, T = 5, H = 3, D = 4, NE = B * T * H * D };
    for (int dt = 0; dt <= 1; dt++) {
        const int64_t base_shape[4] = {B, T, H, D};
        tdacl_tensor *base = make_tensor((tdacl_dtype)dt, 4, base_shape);
        float fill[NE];
        for (int i = 0; i < NE; i++) fill[i] = -1.0f;
        assert_ok(ctx, tdacl_tensor_upload(base, fill, TDACL_F32, NE));

        const int64_t vshape[4] = {B, H, T, D}, vstr[4] = {T * H * D, D, H * D, 1};
        tdacl_tensor *v = NULL;
        assert_ok(ctx, tdacl_tensor_view(base, 4, vshape, vstr, 0, &v));
        int64_t got_st[4];
        assert_ok(ctx, tdacl_tensor_shape(v, NULL, got_st));
        assert_memory_equal(got_st, vstr, sizeof vstr);
        assert_int_equal(tdacl__tensor_is_contiguous(v), 0);
        float x[NE]; /* row-major in the view's [B,H,T,D] order */
        for (int i = 0; i < NE; i++) x[i] = (float)i * 0.25f - 7.0f;
        assert_ok(ctx, tdacl_tensor_upload(v, x, TDACL_F32, NE));

        float all[NE];
        assert_ok(ctx, tdacl_tensor_download(base, all, TDACL_F32, NE));
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++)
                    for (int d = 0; d < D; d++)
                        assert_true(all[((b * T + t) * H + h) * D + d] == x[((b * H + h) * T + t) * D + d]);
        float back[NE];
        assert_ok(ctx, tdacl_tensor_download(v, back, TDACL_F32, NE));
        assert_memory_equal(back, x, sizeof x);
        assert_ok(ctx, tdacl_tensor_destroy(v));
        assert_ok(ctx, tdacl_tensor_destroy(base));
    }
}

/* A view with an offset touches only its elements: a [B,H,2,D] window at t = 1..2 of a
 * token-major buffer, and a view with a zero stride (broadcast on download). */
static void test_views_offset_and_strides(void **state)
{
    (void)state;
    enum { B = 2, T = 4, H = 3, D = 4, NE = B * T * H * D, TW = 2 };
    const int64_t base_shape[4] = {B, T, H, D};
    tdacl_tensor *base = make_tensor(TDACL_F32, 4, base_shape);
    float fill[NE];
    for (int i = 0; i < NE; i++) fill[i] = 1000.0f + (float)i;
    assert_ok(ctx, tdacl_tensor_upload(base, fill, TDACL_F32, NE));

    const int64_t vshape[4] = {B, H, TW, D}, vstr[4] = {T * H * D, D, H * D, 1};
    tdacl_tensor *v = NULL;
    assert_ok(ctx, tdacl_tensor_view(base, 4, vshape, vstr, 1 * H * D, &v));
    float x[B * H * TW * D];
    for (int i = 0; i < B * H * TW * D; i++) x[i] = -(float)i;
    assert_ok(ctx, tdacl_tensor_upload(v, x, TDACL_F32, B * H * TW * D));
    float all[NE];
    assert_ok(ctx, tdacl_tensor_download(base, all, TDACL_F32, NE));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++) {
                    int i = ((b * T + t) * H + h) * D + d;
                    float want = (t >= 1 && t < 1 + TW) ? x[((b * H + h) * TW + (t - 1)) * D + d] : fill[i];
                    if (all[i] != want) fail_msg("base[%d,%d,%d,%d] = %g, expected %g", b, t, h, d, all[i], want);
                }
    /* strided download into bf16 host data converts as it gathers */
    uint16_t xb[B * H * TW * D];
    assert_ok(ctx, tdacl_tensor_download(v, xb, TDACL_BF16, B * H * TW * D));
    for (int i = 0; i < B * H * TW * D; i++) assert_int_equal(xb[i], tdacl_f32_to_bf16(x[i]));

    /* a contiguous window with an offset goes through the direct path */
    const int64_t rshape[1] = {5}, rstr[1] = {1};
    tdacl_tensor *r = NULL;
    assert_ok(ctx, tdacl_tensor_view(base, 1, rshape, rstr, NE - 5, &r));
    assert_int_equal(tdacl__tensor_is_contiguous(r), 1);
    float tail[5];
    assert_ok(ctx, tdacl_tensor_download(r, tail, TDACL_F32, 5));
    assert_memory_equal(tail, all + NE - 5, sizeof tail);
    const float five[5] = {1, 2, 3, 4, 5};
    assert_ok(ctx, tdacl_tensor_upload(r, five, TDACL_F32, 5));
    assert_ok(ctx, tdacl_tensor_download(base, all, TDACL_F32, NE));
    assert_memory_equal(all + NE - 5, five, sizeof five);
    assert_true(all[NE - 6] == fill[NE - 6]);

    /* stride 0 repeats one element: [3,4] over row 2 of the base's last 4 */
    const int64_t bshape[2] = {3, 4}, bstr[2] = {0, 1};
    tdacl_tensor *bc = NULL;
    assert_ok(ctx, tdacl_tensor_view(base, 2, bshape, bstr, NE - 4, &bc));
    float rep[12];
    assert_ok(ctx, tdacl_tensor_download(bc, rep, TDACL_F32, 12));
    for (int i = 0; i < 12; i++) assert_true(rep[i] == all[NE - 4 + i % 4]);

    assert_ok(ctx, tdacl_tensor_destroy(bc));
    assert_ok(ctx, tdacl_tensor_destroy(r));
    assert_ok(ctx, tdacl_tensor_destroy(v));
    assert_ok(ctx, tdacl_tensor_destroy(base));
}

/* A conversion whose f32 staging buffer would not fit one allocation goes through in
 * slices: with the staging limit cut to 2 KiB, a [5,3,7,11] bf16 tensor (a 4.6 KiB f32
 * source) and a permuted view of it (slices of 385 floats) load and read back exactly,
 * and a slice that cannot fit even alone is refused with a message. */
static void test_staging_in_slices(void **state)
{
    (void)state;
    enum { SA = 5, SB = 3, SC = 7, SD = 11, NE = SA * SB * SC * SD };
    const int64_t shape[4] = {SA, SB, SC, SD};
    tdacl_tensor *t = make_tensor(TDACL_BF16, 4, shape);
    static float x[NE], back[NE];
    for (int i = 0; i < NE; i++) x[i] = (float)(i % 97) * 0.37f - 11.0f + (float)i * 1e-3f;
    uint64_t saved = ctx->staging_limit;
    ctx->staging_limit = 2048; /* slices of 2, 2 and 1 rows of SB*SC*SD = 231 floats */
    assert_ok(ctx, tdacl_tensor_upload(t, x, TDACL_F32, NE));
    assert_ok(ctx, tdacl_tensor_download(t, back, TDACL_F32, NE));
    for (int i = 0; i < NE; i++)
        if (back[i] != tdacl_bf16_to_f32(tdacl_f32_to_bf16(x[i])))
            fail_msg("element %d: %g, expected %g", i, back[i], tdacl_bf16_to_f32(tdacl_f32_to_bf16(x[i])));
    /* a permuted view: slices along its own outermost dimension */
    const int64_t vshape[4] = {SB, SA, SC, SD}, vstr[4] = {SC * SD, SB * SC * SD, SD, 1};
    tdacl_tensor *v = NULL;
    assert_ok(ctx, tdacl_tensor_view(t, 4, vshape, vstr, 0, &v));
    static float vx[NE], vb[NE];
    for (int i = 0; i < NE; i++) vx[i] = -(float)i * 0.5f;
    assert_ok(ctx, tdacl_tensor_upload(v, vx, TDACL_F32, NE));
    assert_ok(ctx, tdacl_tensor_download(t, back, TDACL_F32, NE));
    for (int b = 0; b < SB; b++)
        for (int a = 0; a < SA; a++)
            for (int k = 0; k < SC * SD; k++) {
                float want = tdacl_bf16_to_f32(tdacl_f32_to_bf16(vx[(b * SA + a) * SC * SD + k]));
                if (back[(a * SB + b) * SC * SD + k] != want) fail_msg("view [%d,%d,%d] wrong", b, a, k);
            }
    assert_ok(ctx, tdacl_tensor_download(v, vb, TDACL_F32, NE));
    for (int i = 0; i < NE; i++) assert_true(vb[i] == tdacl_bf16_to_f32(tdacl_f32_to_bf16(vx[i])));
    ctx->staging_limit = 64; /* one slice of 231 floats needs 924 bytes */
    assert_status(ctx, tdacl_tensor_upload(t, x, TDACL_F32, NE), TDACL_ERR_TOO_LARGE);
    assert_contains(tdacl_last_error(ctx), "exceeds the staging limit");
    ctx->staging_limit = saved;
    assert_ok(ctx, tdacl_tensor_destroy(v));
    assert_ok(ctx, tdacl_tensor_destroy(t));
}

/* tdacl_tensor_copy between dtypes and layouts: contiguous f32 [B,H,T,D] into a bf16
 * token-major view and back into an f16 tensor. */
static void test_copy(void **state)
{
    (void)state;
    enum { B = 2, T = 3, H = 2, D = 8, NE = B * T * H * D };
    const int64_t bhtd[4] = {B, H, T, D}, bthd[4] = {B, T, H, D}, vstr[4] = {T * H * D, D, H * D, 1};
    float x[NE];
    make_f32(x, NE);
    tdacl_tensor *src = make_tensor(TDACL_F32, 4, bhtd);
    assert_ok(ctx, tdacl_tensor_upload(src, x, TDACL_F32, NE));
    tdacl_tensor *dbase = make_tensor(TDACL_BF16, 4, bthd), *dview = NULL;
    assert_ok(ctx, tdacl_tensor_view(dbase, 4, bhtd, vstr, 0, &dview));
    assert_ok(ctx, tdacl_tensor_copy(dview, src));
    assert_ok(ctx, tdacl_finish(ctx));
    uint16_t raw[NE];
    assert_ok(ctx, tdacl_tensor_download(dbase, raw, TDACL_BF16, NE));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    int si = ((b * H + h) * T + t) * D + d, di = ((b * T + t) * H + h) * D + d;
                    check_elem(raw, TDACL_BF16, di, x[si], "copy f32 -> bf16 view");
                }
    /* strided bf16 -> contiguous f16: every value passes through f32 exactly */
    tdacl_tensor *h16 = make_tensor(TDACL_F16, 4, bhtd);
    assert_ok(ctx, tdacl_tensor_copy(h16, dview));
    uint16_t hr[NE];
    assert_ok(ctx, tdacl_tensor_download(h16, hr, TDACL_F16, NE));
    for (int i = 0; i < NE; i++) check_elem(hr, TDACL_F16, i, tdacl_bf16_to_f32(tdacl_f32_to_bf16(x[i])), "copy bf16 -> f16");

    /* errors: shapes, ranks, NULLs, contexts */
    const int64_t other[4] = {B, H, T, D + 1};
    tdacl_tensor *wrong = make_tensor(TDACL_F32, 4, other), *flat = make_tensor(TDACL_F32, 1, (const int64_t[]){NE});
    assert_status(ctx, tdacl_tensor_copy(wrong, src), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(ctx), "shape[3]");
    assert_status(ctx, tdacl_tensor_copy(flat, src), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(ctx), "dims");
    assert_status(ctx, tdacl_tensor_copy(NULL, src), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "dst is NULL");
    assert_status(ctx, tdacl_tensor_copy(src, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "src is NULL");
    assert_status(NULL, tdacl_tensor_copy(NULL, NULL), TDACL_ERR_INVALID_ARGUMENT);

    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 0;
    tdacl_context *ctx2 = NULL;
    assert_ok(NULL, tdacl_context_create(&desc, &ctx2));
    tdacl_tensor *foreign = NULL;
    assert_ok(ctx2, tdacl_tensor_create(ctx2, TDACL_F32, 4, bhtd, &foreign));
    assert_status(ctx, tdacl_tensor_copy(src, foreign), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "different contexts");
    assert_ok(ctx2, tdacl_tensor_destroy(foreign));
    assert_int_equal(ctx2->live_tensors, 0);
    tu_destroy_checked(ctx2);

    tdacl_tensor *all[] = {src, dview, dbase, h16, wrong, flat};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) assert_ok(ctx, tdacl_tensor_destroy(all[i]));
}

static void test_zero_elements_and_scalars(void **state)
{
    (void)state;
    const int64_t shape[3] = {2, 0, 3};
    tdacl_tensor *t = make_tensor(TDACL_F32, 3, shape), *t2 = make_tensor(TDACL_BF16, 3, shape);
    int64_t n = -1;
    assert_ok(ctx, tdacl_tensor_numel(t, &n));
    assert_int_equal(n, 0);
    assert_ok(ctx, tdacl_tensor_upload(t, NULL, TDACL_F32, 0)); /* nothing to read */
    assert_ok(ctx, tdacl_tensor_download(t, NULL, TDACL_BF16, 0));
    assert_ok(ctx, tdacl_tensor_copy(t2, t));
    assert_status(ctx, tdacl_tensor_upload(t, NULL, TDACL_F32, 1), TDACL_ERR_SHAPE);
    /* views of empty storage: empty ones are fine, anything addressed is not */
    tdacl_tensor *v = NULL;
    const int64_t z[1] = {0}, one[1] = {1}, s1[1] = {1};
    assert_ok(ctx, tdacl_tensor_view(t, 1, z, s1, 0, &v));
    assert_ok(ctx, tdacl_tensor_destroy(v));
    assert_status(ctx, tdacl_tensor_view(t, 1, one, s1, 0, &v), TDACL_ERR_SHAPE);
    assert_null(v);
    assert_ok(ctx, tdacl_tensor_destroy(t));
    assert_ok(ctx, tdacl_tensor_destroy(t2));

    /* ndim 0: one element */
    tdacl_tensor *s = make_tensor(TDACL_F16, 0, NULL);
    assert_ok(ctx, tdacl_tensor_numel(s, &n));
    assert_int_equal(n, 1);
    const float pi = 3.14159265f;
    float back = 0;
    assert_ok(ctx, tdacl_tensor_upload(s, &pi, TDACL_F32, 1));
    assert_ok(ctx, tdacl_tensor_download(s, &back, TDACL_F32, 1));
    assert_true(back == tdacl_f16_to_f32(tdacl_f32_to_f16(pi)));
    assert_ok(ctx, tdacl_tensor_destroy(s));
}

static void test_create_errors(void **state)
{
    (void)state;
    tdacl_tensor *t = (tdacl_tensor *)0x1;
    const int64_t neg[2] = {3, -1};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, 2, neg, &t), TDACL_ERR_SHAPE);
    assert_null(t);
    assert_contains(tdacl_last_error(ctx), "shape[1] = -1");
    const int64_t seven[7] = {1, 1, 1, 1, 1, 1, 1};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, TDACL_MAX_DIMS + 1, seven, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "ndim 7");
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, -1, seven, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, 2, NULL, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "shape is NULL");
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, 2, neg, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "out is NULL");
    assert_status(NULL, tdacl_tensor_create(NULL, TDACL_F32, 2, neg, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "ctx is NULL");
    /* six dims is the maximum and works */
    const int64_t six[6] = {1, 2, 1, 3, 1, 2};
    tdacl_tensor *ok = make_tensor(TDACL_F32, 6, six);
    float v6[12], r6[12];
    for (int i = 0; i < 12; i++) v6[i] = (float)i;
    const int64_t st6[6] = {12, 1, 12, 2, 12, 6}; /* a permuted view over all 12 */
    tdacl_tensor *p6 = NULL;
    assert_ok(ctx, tdacl_tensor_view(ok, 6, six, st6, 0, &p6));
    assert_ok(ctx, tdacl_tensor_upload(p6, v6, TDACL_F32, 12));
    assert_ok(ctx, tdacl_tensor_download(ok, r6, TDACL_F32, 12));
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 3; k++)
            for (int m = 0; m < 2; m++) assert_true(r6[j * 1 + k * 2 + m * 6] == v6[(j * 3 + k) * 2 + m]);
    assert_ok(ctx, tdacl_tensor_destroy(p6));
    assert_ok(ctx, tdacl_tensor_destroy(ok));
}

static void test_too_large(void **state)
{
    (void)state;
    tdacl_device_info info;
    assert_ok(ctx, tdacl_context_get_info(ctx, &info));
    tdacl_tensor *t = (tdacl_tensor *)0x1;
    /* one element more than the largest allocation, for 4- and 2-byte types */
    const int64_t over4[1] = {(int64_t)(info.max_alloc_bytes / 4) + 1};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, 1, over4, &t), TDACL_ERR_TOO_LARGE);
    assert_null(t);
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)info.max_alloc_bytes);
    assert_contains(tdacl_last_error(ctx), num);
    assert_contains(tdacl_last_error(ctx), "maximum allocation");
    const int64_t over2[2] = {2, (int64_t)(info.max_alloc_bytes / 4) + 1};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_BF16, 2, over2, &t), TDACL_ERR_TOO_LARGE);
    /* counts whose byte size overflows 64 bits */
    const int64_t huge[3] = {INT64_C(1) << 30, INT64_C(1) << 30, INT64_C(1) << 30};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, 3, huge, &t), TDACL_ERR_TOO_LARGE);
    assert_contains(tdacl_last_error(ctx), "overflows");
    const int64_t max1[1] = {INT64_MAX};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F16, 1, max1, &t), TDACL_ERR_TOO_LARGE);
    /* a zero extent makes the count 0, but the other extents still give the strides,
     * which must not overflow either */
    const int64_t zero_mid[3] = {INT64_C(1) << 20, 0, INT64_C(1) << 20};
    assert_ok(ctx, tdacl_tensor_create(ctx, TDACL_F32, 3, zero_mid, &t));
    int64_t n = -1, st[3];
    assert_ok(ctx, tdacl_tensor_numel(t, &n));
    assert_int_equal(n, 0);
    assert_ok(ctx, tdacl_tensor_shape(t, NULL, st));
    assert_true(st[0] == INT64_C(1) << 20 && st[1] == INT64_C(1) << 20 && st[2] == 1);
    assert_ok(ctx, tdacl_tensor_destroy(t));
    const int64_t zero_huge[3] = {0, INT64_MAX, 2};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, 3, zero_huge, &t), TDACL_ERR_TOO_LARGE);
    const int64_t zero_huge2[3] = {INT64_MAX, 0, INT64_MAX};
    assert_status(ctx, tdacl_tensor_create(ctx, TDACL_F32, 3, zero_huge2, &t), TDACL_ERR_TOO_LARGE);
    assert_null(t);
}

static void test_view_errors(void **state)
{
    (void)state;
    const int64_t shape[2] = {4, 6};
    tdacl_tensor *base = make_tensor(TDACL_F32, 2, shape), *v = (tdacl_tensor *)0x1;
    const int64_t vs[2] = {4, 6}, st[2] = {6, 1};
    /* exactly fitting is fine; one element further is not */
    assert_ok(ctx, tdacl_tensor_view(base, 2, vs, st, 0, &v));
    assert_ok(ctx, tdacl_tensor_destroy(v));
    assert_status(ctx, tdacl_tensor_view(base, 2, vs, st, 1, &v), TDACL_ERR_SHAPE);
    assert_null(v);
    assert_contains(tdacl_last_error(ctx), "reaches element 24");
    const int64_t st_big[2] = {7, 1};
    assert_status(ctx, tdacl_tensor_view(base, 2, vs, st_big, 0, &v), TDACL_ERR_SHAPE);
    const int64_t st_neg[2] = {-6, 1};
    assert_status(ctx, tdacl_tensor_view(base, 2, vs, st_neg, 18, &v), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(ctx), "strides[0]");
    assert_status(ctx, tdacl_tensor_view(base, 2, vs, st, -1, &v), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(ctx), "offset -1");
    const int64_t st_ovf[2] = {INT64_MAX / 2, 1};
    assert_status(ctx, tdacl_tensor_view(base, 2, vs, st_ovf, 0, &v), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(ctx), "overflows");
    const int64_t vneg[2] = {-4, 6};
    assert_status(ctx, tdacl_tensor_view(base, 2, vneg, st, 0, &v), TDACL_ERR_SHAPE);
    assert_status(ctx, tdacl_tensor_view(base, 2, vs, NULL, 0, &v), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "strides is NULL");
    assert_status(ctx, tdacl_tensor_view(base, 2, NULL, st, 0, &v), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(ctx, tdacl_tensor_view(base, 7, vs, st, 0, &v), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(ctx, tdacl_tensor_view(base, 2, vs, st, 0, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_view(NULL, 2, vs, st, 0, &v), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "base is NULL");
    /* a view of a view addresses the same storage */
    tdacl_tensor *row = NULL, *sub = NULL;
    const int64_t rs[1] = {6}, r1[1] = {1}, ss[1] = {3}, s2[1] = {2};
    assert_ok(ctx, tdacl_tensor_view(base, 1, rs, r1, 12, &row));
    assert_ok(ctx, tdacl_tensor_view(row, 1, ss, s2, 13, &sub));
    float all[24], got[3];
    for (int i = 0; i < 24; i++) all[i] = (float)i;
    assert_ok(ctx, tdacl_tensor_upload(base, all, TDACL_F32, 24));
    assert_ok(ctx, tdacl_tensor_download(sub, got, TDACL_F32, 3));
    assert_true(got[0] == 13 && got[1] == 15 && got[2] == 17);
    assert_ok(ctx, tdacl_tensor_destroy(sub));
    assert_ok(ctx, tdacl_tensor_destroy(row));
    assert_ok(ctx, tdacl_tensor_destroy(base));
}

static void test_transfer_errors(void **state)
{
    (void)state;
    const int64_t shape[2] = {3, 4};
    tdacl_tensor *t = make_tensor(TDACL_F32, 2, shape);
    float buf[13] = {0};
    assert_status(ctx, tdacl_tensor_upload(t, buf, TDACL_F32, 13), TDACL_ERR_SHAPE);
    assert_contains(tdacl_last_error(ctx), "count 13");
    assert_contains(tdacl_last_error(ctx), "12 elements");
    assert_status(ctx, tdacl_tensor_upload(t, buf, TDACL_F32, 11), TDACL_ERR_SHAPE);
    assert_status(ctx, tdacl_tensor_upload(t, buf, TDACL_F32, -12), TDACL_ERR_SHAPE);
    assert_status(ctx, tdacl_tensor_download(t, buf, TDACL_F32, 13), TDACL_ERR_SHAPE);
    assert_status(ctx, tdacl_tensor_upload(t, NULL, TDACL_F32, 12), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "host pointer is NULL");
    assert_status(ctx, tdacl_tensor_download(t, NULL, TDACL_F32, 12), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_upload(NULL, buf, TDACL_F32, 12), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "tensor is NULL");
    assert_status(NULL, tdacl_tensor_download(NULL, buf, TDACL_F32, 12), TDACL_ERR_INVALID_ARGUMENT);
    /* invalid dtype values everywhere a dtype is taken */
    const int bad[] = {3, -1, 1000};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tdacl_dtype d = (tdacl_dtype)bad[i];
        assert_status(ctx, tdacl_tensor_upload(t, buf, d, 12), TDACL_ERR_DTYPE);
        assert_contains(tdacl_last_error(ctx), "host_dtype");
        assert_status(ctx, tdacl_tensor_download(t, buf, d, 12), TDACL_ERR_DTYPE);
        tdacl_tensor *x = (tdacl_tensor *)0x1;
        assert_status(ctx, tdacl_tensor_create(ctx, d, 2, shape, &x), TDACL_ERR_DTYPE);
        assert_null(x);
        assert_contains(tdacl_last_error(ctx), "dtype");
        assert_string_equal(tdacl_dtype_name(d), "invalid");
        assert_int_equal(tdacl_dtype_size(d), 0);
    }
    /* the failures left the data alone */
    float x[12], y[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i + 0.5f;
    assert_ok(ctx, tdacl_tensor_upload(t, x, TDACL_F32, 12));
    assert_status(ctx, tdacl_tensor_upload(t, buf, TDACL_F32, 13), TDACL_ERR_SHAPE);
    assert_ok(ctx, tdacl_tensor_download(t, y, TDACL_F32, 12));
    assert_memory_equal(x, y, sizeof x);
    /* accessors with NULL outputs */
    int nd;
    int64_t n;
    tdacl_dtype dt;
    assert_status(ctx, tdacl_tensor_ndim(t, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(ctx, tdacl_tensor_numel(t, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(ctx, tdacl_tensor_dtype(t, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_ndim(NULL, &nd), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_numel(NULL, &n), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_dtype(NULL, &dt), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_shape(NULL, NULL, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_ok(ctx, tdacl_tensor_destroy(t));
}

/* Views keep the storage alive: destroy the base first, keep using the view. */
static void test_destroy_order(void **state)
{
    (void)state;
    int live0 = ctx->live_tensors;
    const int64_t shape[1] = {16}, vs[1] = {8}, st[1] = {2};
    tdacl_tensor *base = make_tensor(TDACL_F32, 1, shape), *v = NULL, *w = NULL;
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)(i * i);
    assert_ok(ctx, tdacl_tensor_upload(base, x, TDACL_F32, 16));
    assert_ok(ctx, tdacl_tensor_view(base, 1, vs, st, 1, &v));
    assert_ok(ctx, tdacl_tensor_view(base, 1, vs, st, 0, &w));
    assert_int_equal(ctx->live_tensors, live0 + 3);
    assert_int_equal(base->storage->refs, 3);
    assert_ok(ctx, tdacl_tensor_destroy(base));
    assert_int_equal(v->storage->refs, 2);
    float got[8];
    assert_ok(ctx, tdacl_tensor_download(v, got, TDACL_F32, 8));
    for (int i = 0; i < 8; i++) assert_true(got[i] == x[2 * i + 1]);
    const float y[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
    assert_ok(ctx, tdacl_tensor_upload(v, y, TDACL_F32, 8));
    assert_ok(ctx, tdacl_tensor_destroy(v));
    assert_ok(ctx, tdacl_tensor_download(w, got, TDACL_F32, 8)); /* the even ones are intact */
    for (int i = 0; i < 8; i++) assert_true(got[i] == x[2 * i]);
    assert_ok(ctx, tdacl_tensor_destroy(w));
    assert_int_equal(ctx->live_tensors, live0);
}

/* Destroying a context with live tensors releases them (and so the OpenCL context) and
 * logs a warning; the sanitizer build's leak check proves nothing is left behind. */
static void test_context_destroy_with_live_tensors(void **state)
{
    (void)state;
    tu_log log = {0};
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 0;
    desc.log_fn = tu_log_fn;
    desc.log_user = &log;
    desc.log_level = TDACL_LOG_WARN;
    tdacl_context *c = NULL;
    assert_ok(NULL, tdacl_context_create(&desc, &c));
    const int64_t shape[1] = {4}, vs[1] = {2}, st[1] = {2};
    tdacl_tensor *a = NULL, *b = NULL, *v = NULL, *gone = NULL;
    assert_ok(c, tdacl_tensor_create(c, TDACL_F32, 1, shape, &a));
    assert_ok(c, tdacl_tensor_create(c, TDACL_BF16, 1, shape, &gone));
    assert_ok(c, tdacl_tensor_create(c, TDACL_F16, 1, shape, &b));
    assert_ok(c, tdacl_tensor_view(a, 1, vs, st, 1, &v));
    assert_ok(c, tdacl_tensor_destroy(gone)); /* from the middle of the list */
    assert_ok(c, tdacl_tensor_destroy(a));    /* the view keeps a's storage */
    assert_int_equal(c->live_tensors, 2);
    tu_destroy_checked(c); /* the two live tensors' buffers are released too */
    assert_int_equal(log.count, 1);
    assert_int_equal(log.level[0], TDACL_LOG_WARN);
    assert_contains(log.msg[0], "2 tensor(s) still alive");
    tu_log_clear(&log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_bf16_hand_values),
        cmocka_unit_test(test_host_f16_hand_values),
        cmocka_unit_test(test_host_all_patterns),
        cmocka_unit_test(test_host_rounding_sweep),
        cmocka_unit_test(test_roundtrip_all_dtypes),
        cmocka_unit_test(test_accessors),
        cmocka_unit_test(test_views_token_major),
        cmocka_unit_test(test_views_offset_and_strides),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_staging_in_slices),
        cmocka_unit_test(test_zero_elements_and_scalars),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_view_errors),
        cmocka_unit_test(test_transfer_errors),
        cmocka_unit_test(test_destroy_order),
        cmocka_unit_test(test_context_destroy_with_live_tensors),
        cmocka_unit_test(test_release_context), /* last */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
