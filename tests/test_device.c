/* Device discovery and selection, checked against a direct OpenCL enumeration (the
 * independent reference) on whatever platforms are installed (PoCL in CI). */
#include <ctype.h>

#include "common/clcheck.h"

/* ---- the reference: plain OpenCL calls, no libtdacl ---- */

typedef struct ref_device {
    char platform[256], name[256];
    cl_device_type type;
    cl_uint compute_units;
    size_t max_wg;
    cl_ulong local_mem, max_alloc;
} ref_device;

static int ref_enumerate(ref_device *out, int max)
{
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return 0;
    int n = 0;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_device_id ids[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) != CL_SUCCESS) continue;
        for (cl_uint i = 0; i < nd && i < 16 && n < max; i++, n++) {
            ref_device *r = &out[n];
            memset(r, 0, sizeof *r);
            clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof r->platform, r->platform, NULL);
            clGetDeviceInfo(ids[i], CL_DEVICE_NAME, sizeof r->name, r->name, NULL);
            clGetDeviceInfo(ids[i], CL_DEVICE_TYPE, sizeof r->type, &r->type, NULL);
            clGetDeviceInfo(ids[i], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof r->compute_units, &r->compute_units, NULL);
            clGetDeviceInfo(ids[i], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof r->max_wg, &r->max_wg, NULL);
            clGetDeviceInfo(ids[i], CL_DEVICE_LOCAL_MEM_SIZE, sizeof r->local_mem, &r->local_mem, NULL);
            clGetDeviceInfo(ids[i], CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof r->max_alloc, &r->max_alloc, NULL);
        }
    }
    return n;
}

static int lower_contains(const char *hay, const char *needle)
{
    char h[256], n[256];
    size_t i;
    for (i = 0; hay[i] && i < sizeof h - 1; i++) h[i] = (char)tolower((unsigned char)hay[i]);
    h[i] = 0;
    for (i = 0; needle[i] && i < sizeof n - 1; i++) n[i] = (char)tolower((unsigned char)needle[i]);
    n[i] = 0;
    return strstr(h, n) != NULL;
}

static int is_pocl_cpu(const tdacl_device_info *info)
{
    return strstr(info->platform_name, "Portable Computing Language") && info->type == TDACL_DEVICE_CPU;
}

/* Index of the first PoCL CPU device (the CI machine has one). */
static int pocl_index(void)
{
    int n = 0;
    assert_ok(NULL, tdacl_device_count(&n));
    for (int i = 0; i < n; i++) {
        tdacl_device_info info;
        assert_ok(NULL, tdacl_device_get_info(i, &info));
        if (is_pocl_cpu(&info)) return i;
    }
    fail_msg("no PoCL CPU device found; install pocl-opencl-icd");
    return -1;
}

static void test_count_matches_opencl(void **state)
{
    (void)state;
    ref_device ref[64];
    int nref = ref_enumerate(ref, 64);
    int n = -1;
    assert_ok(NULL, tdacl_device_count(&n));
    assert_true(n >= 1);
    assert_int_equal(n, nref);
}

static void test_capability_records(void **state)
{
    (void)state;
    ref_device ref[64];
    int nref = ref_enumerate(ref, 64);
    int n = 0;
    assert_ok(NULL, tdacl_device_count(&n));
    assert_int_equal(n, nref);
    int pocl_seen = 0;
    for (int i = 0; i < n; i++) {
        tdacl_device_info info;
        memset(&info, 0xab, sizeof info); /* every field must be overwritten */
        assert_ok(NULL, tdacl_device_get_info(i, &info));
        assert_int_equal(info.index, i);
        assert_true(info.name[0] != '\0');
        assert_true(info.platform_name[0] != '\0');
        assert_string_equal(info.platform_name, ref[i].platform);
        /* the library trims trailing blanks some drivers leave */
        assert_int_equal(strncmp(info.name, ref[i].name, strlen(info.name)), 0);
        assert_true(info.compute_units > 0);
        assert_int_equal(info.compute_units, ref[i].compute_units);
        assert_true(info.max_work_group_size > 0);
        assert_int_equal(info.max_work_group_size, ref[i].max_wg);
        assert_true(info.local_mem_bytes > 0);
        assert_int_equal(info.local_mem_bytes, ref[i].local_mem);
        assert_int_equal(info.max_alloc_bytes, ref[i].max_alloc);
        assert_true(info.max_alloc_bytes > 0 && info.max_alloc_bytes <= info.global_mem_bytes);
        assert_true(info.max_work_item_sizes[0] > 0);
        assert_int_equal(strncmp(info.device_version, "OpenCL ", 7), 0);
        assert_int_equal(strncmp(info.opencl_c_version, "OpenCL C ", 9), 0);
        assert_true(info.arch[0] != '\0');
        assert_int_equal(info.type == TDACL_DEVICE_GPU, (ref[i].type & CL_DEVICE_TYPE_GPU) != 0);
        assert_int_equal(info.type == TDACL_DEVICE_CPU,
                         (ref[i].type & CL_DEVICE_TYPE_CPU) && !(ref[i].type & CL_DEVICE_TYPE_GPU));
        /* fp64 flag follows the extension string */
        assert_int_equal(info.has_fp64, strstr(info.extensions, "cl_khr_fp64") != NULL);
        if (is_pocl_cpu(&info)) {
            pocl_seen = 1;
            assert_int_equal(strncmp(info.arch, "pocl-cpu-", 9), 0);
            assert_int_equal(info.nv_cc_major, 0);
        }
    }
    assert_true(pocl_seen);
}

static void test_get_info_errors(void **state)
{
    (void)state;
    int n = 0;
    tdacl_device_info info;
    assert_ok(NULL, tdacl_device_count(&n));
    assert_status(NULL, tdacl_device_get_info(n, &info), TDACL_ERR_NO_DEVICE);
    assert_contains(tdacl_last_error(NULL), "out of range");
    assert_status(NULL, tdacl_device_get_info(-1, &info), TDACL_ERR_NO_DEVICE);
    assert_status(NULL, tdacl_device_get_info(0, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "info is NULL");
    assert_status(NULL, tdacl_device_count(NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "count is NULL");
    assert_status(NULL, tdacl_device_select("0", NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "index is NULL");
}

static void test_select_by_index(void **state)
{
    (void)state;
    int n = 0, idx = -1;
    assert_ok(NULL, tdacl_device_count(&n));
    assert_ok(NULL, tdacl_device_select("0", &idx));
    assert_int_equal(idx, 0);
    assert_ok(NULL, tdacl_device_select("00", &idx)); /* still the number 0 */
    assert_int_equal(idx, 0);
    char sel[32];
    snprintf(sel, sizeof sel, "%d", n - 1);
    assert_ok(NULL, tdacl_device_select(sel, &idx));
    assert_int_equal(idx, n - 1);
}

static void test_select_by_substring(void **state)
{
    (void)state;
    int want = pocl_index(), idx = -1;
    tdacl_device_info info;
    assert_ok(NULL, tdacl_device_get_info(want, &info));
    /* PoCL's platform ("Portable Computing Language") and device names lack "pocl", so
     * that selector matches through the class ("pocl-cpu-..."); the first match wins. */
    const char *sels[] = {"pocl", "POCL", "PoCl", "portable computing"};
    for (size_t s = 0; s < sizeof sels / sizeof *sels; s++) {
        int n = 0, first = -1;
        assert_ok(NULL, tdacl_device_count(&n));
        for (int i = 0; i < n && first < 0; i++) {
            tdacl_device_info x;
            assert_ok(NULL, tdacl_device_get_info(i, &x));
            if (lower_contains(x.name, sels[s]) || lower_contains(x.platform_name, sels[s]) ||
                lower_contains(x.arch, sels[s]))
                first = i;
        }
        assert_true(first >= 0);
        assert_ok(NULL, tdacl_device_select(sels[s], &idx));
        assert_int_equal(idx, first);
    }
    /* a piece from the middle of the device name, in the opposite case */
    size_t len = strlen(info.name);
    assert_true(len >= 6);
    char piece[16] = "";
    size_t from = len / 3, k;
    for (k = 0; k < 5; k++) {
        char c = info.name[from + k];
        piece[k] = (char)(isupper((unsigned char)c) ? tolower((unsigned char)c) : toupper((unsigned char)c));
    }
    piece[k] = 0;
    assert_ok(NULL, tdacl_device_select(piece, &idx));
    tdacl_device_info got;
    assert_ok(NULL, tdacl_device_get_info(idx, &got));
    assert_true(lower_contains(got.name, piece) || lower_contains(got.platform_name, piece) ||
                lower_contains(got.arch, piece));
    assert_true(idx <= want);
}

static void test_select_no_match(void **state)
{
    (void)state;
    int n = 0, idx = 12345;
    tdacl_device_info info0;
    assert_ok(NULL, tdacl_device_count(&n));
    assert_ok(NULL, tdacl_device_get_info(0, &info0));

    char sel[32];
    snprintf(sel, sizeof sel, "%d", n); /* one past the end */
    assert_status(NULL, tdacl_device_select(sel, &idx), TDACL_ERR_NO_DEVICE);
    assert_int_equal(idx, 12345); /* untouched on failure */
    const char *msg = tdacl_last_error(NULL);
    assert_contains(msg, sel);
    assert_contains(msg, "found:");
    assert_contains(msg, info0.name);
    assert_contains(msg, "[0]");

    assert_status(NULL, tdacl_device_select("99999999999999999999999", &idx), TDACL_ERR_NO_DEVICE);
    assert_contains(tdacl_last_error(NULL), info0.name);

    assert_status(NULL, tdacl_device_select("no-such-device-zz9", &idx), TDACL_ERR_NO_DEVICE);
    msg = tdacl_last_error(NULL);
    assert_contains(msg, "no-such-device-zz9");
    assert_contains(msg, info0.name);
    assert_contains(msg, info0.platform_name);
    /* "-1" is not all digits, so it is a name that matches nothing */
    assert_status(NULL, tdacl_device_select("-1", &idx), TDACL_ERR_NO_DEVICE);
}

static void test_default_and_env(void **state)
{
    (void)state;
    int n = 0, idx = -1, want_default = -1;
    assert_ok(NULL, tdacl_device_count(&n));
    for (int i = 0; i < n && want_default < 0; i++) {
        tdacl_device_info x;
        assert_ok(NULL, tdacl_device_get_info(i, &x));
        if (x.type == TDACL_DEVICE_GPU) want_default = i;
    }
    if (want_default < 0) want_default = 0;

    unsetenv("TDACL_DEVICE");
    assert_ok(NULL, tdacl_device_select(NULL, &idx));
    assert_int_equal(idx, want_default);
    assert_ok(NULL, tdacl_device_select("", &idx));
    assert_int_equal(idx, want_default);

    /* the environment names the device when the caller passes none */
    char sel[32];
    snprintf(sel, sizeof sel, "%d", n - 1);
    setenv("TDACL_DEVICE", sel, 1);
    idx = -1;
    assert_ok(NULL, tdacl_device_select(NULL, &idx));
    assert_int_equal(idx, n - 1);
    setenv("TDACL_DEVICE", "pocl", 1);
    assert_ok(NULL, tdacl_device_select("", &idx));
    assert_int_equal(idx, pocl_index());

    /* a bad environment value fails and says where the selector came from... */
    setenv("TDACL_DEVICE", "bogus-device-from-env", 1);
    assert_status(NULL, tdacl_device_select(NULL, &idx), TDACL_ERR_NO_DEVICE);
    assert_contains(tdacl_last_error(NULL), "TDACL_DEVICE");
    assert_contains(tdacl_last_error(NULL), "bogus-device-from-env");
    /* ...also through tdacl_context_create, which reports on the thread */
    tdacl_context *ctx = (tdacl_context *)0x1;
    assert_status(NULL, tdacl_context_create(NULL, &ctx), TDACL_ERR_NO_DEVICE);
    assert_null(ctx);
    assert_contains(tdacl_last_error(NULL), "bogus-device-from-env");
    /* ...while an explicit selector overrides it */
    assert_ok(NULL, tdacl_device_select("0", &idx));
    assert_int_equal(idx, 0);
    unsetenv("TDACL_DEVICE");
}

/* A context on the device `sel` names (PoCL's), without the program cache; desc keeps its
 * descriptor for further use. */
static tdacl_context *pocl_context(const char *sel, tdacl_context_desc *desc)
{
    tdacl_context_desc_init(desc);
    desc->device = sel;
    desc->cache = 0;
    tdacl_context *ctx = NULL;
    assert_ok(NULL, tdacl_context_create(desc, &ctx));
    return ctx;
}

static void test_context_on_selected_device(void **state)
{
    (void)state;
    int want = pocl_index();
    tdacl_device_info ref, got;
    assert_ok(NULL, tdacl_device_get_info(want, &ref));
    tdacl_context_desc desc;
    tdacl_context *ctx = pocl_context("pOcL", &desc);
    assert_ok(ctx, tdacl_context_get_info(ctx, &got));
    assert_int_equal(got.index, want);
    assert_string_equal(got.name, ref.name);
    assert_string_equal(got.arch, ref.arch);
    assert_memory_equal(&got, &ref, sizeof got);
    assert_ok(ctx, tdacl_finish(ctx));
    tu_destroy_checked(ctx);

    desc.device = "no-such-device-zz9";
    ctx = (tdacl_context *)0x1;
    assert_status(NULL, tdacl_context_create(&desc, &ctx), TDACL_ERR_NO_DEVICE);
    assert_null(ctx);
    assert_contains(tdacl_last_error(NULL), ref.name);
}

/* The peak probes give every figure a positive value; a kernel with sixteen pointer arguments
 * costs no less to enqueue than one with one (the per-argument figure is never negative), and
 * PoCL's CPU device has no matrix units the library drives (their rates 0). */
static void test_measure_peak(void **state)
{
    (void)state;
    tdacl_context_desc desc;
    tdacl_context *ctx = pocl_context("pocl", &desc);
    tdacl_peak pk;
    assert_ok(ctx, tdacl_measure_peak(ctx, &pk));
    assert_true(pk.fp32_gflops > 0 && pk.bandwidth_gbs > 0 && pk.launch_us > 0);
    assert_true(pk.enqueue_us > 0 && pk.enqueue_us < 1e5);
    assert_true(pk.enqueue_arg_us >= 0 && pk.enqueue_arg_us < 1e4);
    assert_true(pk.mma_bf16_gflops == 0 && pk.mma_tf32_gflops == 0);
    tu_destroy_checked(ctx);
}

/* The tuning class from a capability record: architectures, not vendor IDs (an Intel GPU by
 * its IP version or, without one, its name; PoCL's CPU device never as its CPU's vendor). */
static void test_classify(void **state)
{
    (void)state;
#define IP(major, minor, rev) (((uint32_t)(major) << 22) | ((uint32_t)(minor) << 12) | (uint32_t)(rev))
    static const struct {
        const char *platform, *vendor, *name;
        tdacl_device_type type;
        int cc_major, cc_minor;
        uint32_t ip;
        const char *want;
    } cases[] = {
        {"NVIDIA CUDA", "NVIDIA Corporation", "NVIDIA H100 80GB HBM3", TDACL_DEVICE_GPU, 9, 0, 0, "nvidia-sm_90"},
        {"AMD Accelerated Parallel Processing", "Advanced Micro Devices, Inc.", "gfx90a:sramecc+:xnack-", TDACL_DEVICE_GPU, 0, 0, 0, "amd-gfx90a"},
        {"AMD Accelerated Parallel Processing", "Advanced Micro Devices, Inc.", "gfx1100", TDACL_DEVICE_GPU, 0, 0, 0, "amd-gfx1100"},
        {"Intel(R) OpenCL Graphics", "Intel(R) Corporation", "Intel(R) Arc(TM) A770 Graphics", TDACL_DEVICE_GPU, 0, 0, IP(12, 55, 8), "intel-xe-hpg"},
        {"Intel(R) OpenCL Graphics", "Intel(R) Corporation", "Intel(R) Data Center GPU Max 1550", TDACL_DEVICE_GPU, 0, 0, IP(12, 60, 7), "intel-xe-hpc"},
        {"Intel(R) OpenCL Graphics", "Intel(R) Corporation", "Intel(R) Arc(TM) B580 Graphics", TDACL_DEVICE_GPU, 0, 0, IP(20, 1, 0), "intel-xe2"},
        {"Intel(R) OpenCL Graphics", "Intel(R) Corporation", "Intel(R) Arc(TM) Graphics", TDACL_DEVICE_GPU, 0, 0, IP(12, 71, 4), "intel-xe-lpg"},
        {"Intel(R) OpenCL Graphics", "Intel(R) Corporation", "Intel(R) UHD Graphics 770", TDACL_DEVICE_GPU, 0, 0, IP(12, 0, 0), "intel-xe-lp"},
        /* older drivers without the IP version: the name */
        {"Intel(R) OpenCL HD Graphics", "Intel(R) Corporation", "Intel(R) Arc(TM) A750 Graphics", TDACL_DEVICE_GPU, 0, 0, 0, "intel-xe-hpg"},
        {"Intel(R) OpenCL HD Graphics", "Intel(R) Corporation", "Intel(R) Data Center GPU Max 1100", TDACL_DEVICE_GPU, 0, 0, 0, "intel-xe-hpc"},
        {"Intel(R) OpenCL HD Graphics", "Intel(R) Corporation", "Intel(R) HD Graphics 530", TDACL_DEVICE_GPU, 0, 0, 0, "intel-gpu"},
        {"Intel(R) OpenCL", "Intel(R) Corporation", "Intel(R) Xeon(R) Gold 6338", TDACL_DEVICE_CPU, 0, 0, 0, "intel-cpu"},
        {"Portable Computing Language", "GenuineIntel", "cpu-skylake-avx512-Intel(R) Xeon(R)", TDACL_DEVICE_CPU, 0, 0, 0, "pocl-cpu-skylake-avx512"},
    };
#undef IP
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tdacl_device_info info;
        memset(&info, 0, sizeof info);
        snprintf(info.platform_name, sizeof info.platform_name, "%s", cases[i].platform);
        snprintf(info.vendor, sizeof info.vendor, "%s", cases[i].vendor);
        snprintf(info.name, sizeof info.name, "%s", cases[i].name);
        info.type = cases[i].type;
        info.nv_cc_major = cases[i].cc_major, info.nv_cc_minor = cases[i].cc_minor;
        tdacl__classify_device(&info, cases[i].ip);
        if (strcmp(info.arch, cases[i].want)) fail_msg("%s: class '%s', expected '%s'", cases[i].name, info.arch, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_count_matches_opencl),
        cmocka_unit_test(test_capability_records),
        cmocka_unit_test(test_get_info_errors),
        cmocka_unit_test(test_select_by_index),
        cmocka_unit_test(test_select_by_substring),
        cmocka_unit_test(test_select_no_match),
        cmocka_unit_test(test_default_and_env),
        cmocka_unit_test(test_context_on_selected_device),
        cmocka_unit_test(test_measure_peak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
