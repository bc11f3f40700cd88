/* tdacl devices [--verbose] [--peak] [--device SEL] */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "base/kinds.h"
#include "ops/attention.h"
#include "ops/gemm.h"

static const char *type_name(tdacl_device_type t)
{
    return t == TDACL_DEVICE_GPU ? "GPU" : t == TDACL_DEVICE_CPU ? "CPU" : t == TDACL_DEVICE_ACCELERATOR ? "accelerator" : "other";
}

static void print_record(const tdacl_device_info *i, int verbose)
{
    printf("[%d] %s / %s (%s, %s)\n", i->index, i->platform_name, i->name, type_name(i->type), i->arch);
    printf("    vendor %s (0x%x), driver %s, %s, %s\n", i->vendor, i->vendor_id, i->driver_version,
           i->device_version, i->opencl_c_version);
    printf("    %u compute units @ %u MHz, global %.1f GiB (max alloc %.1f GiB), local %llu KiB%s\n",
           i->compute_units, i->clock_mhz, (double)i->global_mem_bytes / (1 << 30),
           (double)i->max_alloc_bytes / (1 << 30), (unsigned long long)(i->local_mem_bytes >> 10),
           i->local_mem_is_dedicated ? "" : " (emulated)");
    printf("    max work-group %zu, preferred vector width float %u half %u double %u\n",
           i->max_work_group_size, i->vec_width_float, i->vec_width_half, i->vec_width_double);
    printf("    fp16 %s, fp64 %s, subgroups %s, int64 atomics %s", i->has_fp16 ? "yes" : "no",
           i->has_fp64 ? "yes" : "no", i->has_subgroups ? "yes" : "no", i->has_int64_atomics ? "yes" : "no");
    if (i->nv_cc_major) printf(", compute capability %d.%d", i->nv_cc_major, i->nv_cc_minor);
    printf("\n");
    /* the matrix units the attention prefill uses (the variant registry decides per call) */
    tdacl_mma_choice m;
    tdacl__mma_choose(i, &m);
    if (m.body == TDACL_MMA_PTX) {
        printf("    matrix units: mma.sync bf16/f16/tf32 (sm_%d%d), used by attention prefill and decode steps of 2..16\n"
               "                  rows with bf16/f16 inputs and f32 at precision tf32 or bf16, and by the GEMM with\n"
               "                  bf16 weights (f32 weights at precision tf32)\n",
               i->nv_cc_major, i->nv_cc_minor);
        if (m.wgmma)
            printf("                  wgmma.mma_async bf16 (sm_90a), used by the GEMM with bf16 a and weights\n"
                   "                  (gemm.wgmma; TDACL_WGMMA=0 turns it off)\n");
    } else if (m.hardware)
        printf("    matrix units: %s bf16/f16, EXPERIMENTAL (TDACL_EXPERIMENTAL_MATRIX=1): compiled, not yet run on\n"
               "                  hardware; used as mma.sync is elsewhere\n", m.name);
    else if (m.offered)
        printf("    matrix units: %s: compiled, not yet run on hardware; not used (TDACL_EXPERIMENTAL_MATRIX=1\n"
               "                  enables it)\n", m.offered);
    else if (m.body >= 0)
        printf("    matrix units: none; the mma kernels run through the %s (TDACL_MMA_EMULATE)\n", m.name);
    else
        printf("    matrix units: none used (%s)\n", m.why);
    if (verbose) printf("    extensions: %s\n", i->extensions);
}

static void print_choice(const tdacl_variant_def *row, const char *why, const tdacl_tuned *t, const char *what)
{
    char text[160] = "";
    if (row->space) tdacl__params_text(row->space, &t->values, text, sizeof text);
    if (row->space)
        printf("    %-40s %-22s %s  [%s: %s]\n", what, row->name, text, tdacl__tuned_source_name(t->source), t->origin);
    else
        printf("    %-40s %s\n", what, row->name);
    if (strstr(why, ": ")) printf("      (%s)\n", why);
}

/* Which variant and parameters a context takes for a few representative calls (planned on
 * small device tensors, not run). */
static void print_variants(tdacl_context *ctx)
{
    static const struct { tdacl_attention_kind kind; tdacl_dtype dt; int tq; } probes[] = {
        {TDACL_ATTN_TRA, TDACL_F32, 64},  {TDACL_ATTN_TRA, TDACL_BF16, 64},     {TDACL_ATTN_TDA, TDACL_BF16, 64},
        {TDACL_ATTN_SOFTMAX, TDACL_BF16, 64}, {TDACL_ATTN_TRA, TDACL_F32, 1}, {TDACL_ATTN_TRA, TDACL_BF16, 1},
    };
    const int64_t tk = 8192, d = 64;
    for (size_t i = 0; i < TDACL_ARRAY_LEN(probes); i++) {
        int64_t qs[4] = {1, 1, probes[i].tq, d}, ks[4] = {1, 1, tk, d};
        tdacl_tensor *q = NULL, *k = NULL, *v = NULL, *q2 = NULL, *k2 = NULL, *o = NULL;
        int two = tdacl__kind_views(probes[i].kind) == 2;
        tdacl_status st = tdacl_tensor_create(ctx, probes[i].dt, 4, qs, &q);
        if (!st) st = tdacl_tensor_create(ctx, probes[i].dt, 4, ks, &k);
        if (!st) st = tdacl_tensor_create(ctx, probes[i].dt, 4, ks, &v);
        if (!st && two) st = tdacl_tensor_create(ctx, probes[i].dt, 4, qs, &q2);
        if (!st && two) st = tdacl_tensor_create(ctx, probes[i].dt, 4, ks, &k2);
        if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, qs, &o);
        tdacl_attention_tensors t = {q, k, v, q2, k2, NULL, o, NULL, NULL, NULL, NULL, NULL};
        tdacl_attention_desc desc;
        tdacl_attention_desc_init(&desc);
        desc.kind = probes[i].kind;
        tdacl_attention_plan plan;
        memset(&plan, 0, sizeof plan); /* the message below reads plan.path even when a step failed */
        tdacl_tuned tuned;
        const tdacl_attention_call call = {&plan, &t, NULL, NULL};
        if (!st) st = tdacl__attention_plan(ctx, &desc, &t, &plan);
        if (!st) st = tdacl__variant_params(ctx, plan.row, &call, NULL, &tuned);
        char what[96];
        snprintf(what, sizeof what, "attention %s %s %s d=%d Tq=%d:", plan.path == TDACL_PATH_DECODE ? "decode" : "prefill",
                 tdacl_attention_kind_name(probes[i].kind), tdacl_dtype_name(probes[i].dt), (int)d, probes[i].tq);
        if (!st) print_choice(plan.row, plan.variant_why, &tuned, what);
        else printf("    %-40s %s\n", what, tdacl_last_error(ctx));
        tdacl_tensor *all[] = {q, k, v, q2, k2, o};
        for (size_t j = 0; j < TDACL_ARRAY_LEN(all); j++) tdacl_tensor_destroy(all[j]);
    }
    static const int rows_of[] = {1, 1024};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(rows_of); i++) {
        int64_t as[2] = {rows_of[i], 768}, ws[2] = {768, 768};
        tdacl_tensor *a = NULL, *w = NULL, *c = NULL;
        tdacl_status st = tdacl_tensor_create(ctx, TDACL_F32, 2, as, &a);
        if (!st) st = tdacl_tensor_create(ctx, TDACL_BF16, 2, ws, &w);
        if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 2, as, &c);
        const tdacl_matmul_call call = {c, a, w, NULL, NULL, 0, rows_of[i], 768, 768, 0, NULL, TDACL_PRECISION_EXACT, NULL};
        const tdacl_variant_def *row = NULL;
        char why[256] = "", what[96];
        tdacl_tuned tuned;
        if (!st) st = tdacl__variant_choose(ctx, TDACL_OP_MATMUL, &call, &row, why, sizeof why);
        if (!st) st = tdacl__variant_params(ctx, row, &call, NULL, &tuned);
        snprintf(what, sizeof what, "matmul bf16 weights M=%d N=K=768:", rows_of[i]);
        if (!st) print_choice(row, why, &tuned, what);
        else printf("    %-40s %s\n", what, tdacl_last_error(ctx));
        tdacl_tensor_destroy(a), tdacl_tensor_destroy(w), tdacl_tensor_destroy(c);
    }
}

int cmd_devices(int argc, char **argv)
{
    int verbose = 0, peak = 0;
    const char *sel = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "--peak")) peak = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--help")) {
            printf("usage: tdacl devices [--verbose] [--peak] [--device SEL]\n"
                   "  --verbose  full capability record, extensions, and the variant and parameters\n"
                   "             representative calls take\n"
                   "  --peak     measure FP32 FMA rate, read bandwidth and launch latency\n"
                   "  --device   only the devices matching SEL (index or name substring)\n");
            return 0;
        } else {
            fprintf(stderr, "tdacl devices: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    int n = 0;
    tdacl_status st = tdacl_device_count(&n);
    if (st) return cli_report(NULL, st);
    if (n == 0) {
        fprintf(stderr, "tdacl: no OpenCL device found (install an ICD, e.g. pocl-opencl-icd)\n");
        return 1;
    }
    int only = -1;
    if (sel && (st = tdacl_device_select(sel, &only))) return cli_report(NULL, st);
    int def = -1;
    tdacl_device_select(NULL, &def);
    for (int i = 0; i < n; i++) {
        if (only >= 0 && i != only) continue;
        tdacl_device_info info;
        if ((st = tdacl_device_get_info(i, &info))) return cli_report(NULL, st);
        print_record(&info, verbose);
        if (i == def) printf("    (default device)\n");
        if (!verbose && !peak) continue;
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        tdacl_context *ctx;
        if (cli_open(idx, &ctx)) return 1;
        if (verbose) print_variants(ctx);
        if (peak) {
            tdacl_peak pk;
            if ((st = tdacl_measure_peak(ctx, &pk))) {
                cli_report(ctx, st);
                tdacl_context_destroy(ctx);
                return 1;
            }
            printf("    measured peak: FP32 %.1f GFLOP/s, read bandwidth %.1f GB/s, launch latency %.1f us", pk.fp32_gflops,
                   pk.bandwidth_gbs, pk.launch_us);
            printf(", enqueue %.2f us a launch + %.2f us a pointer argument", pk.enqueue_us, pk.enqueue_arg_us);
            if (pk.mma_bf16_gflops > 0) printf(", mma.sync bf16 %.1f GFLOP/s", pk.mma_bf16_gflops);
            if (pk.mma_tf32_gflops > 0) printf(", mma.sync tf32 %.1f GFLOP/s", pk.mma_tf32_gflops);
            printf("\n");
        }
        tdacl_context_destroy(ctx);
    }
    return 0;
}
