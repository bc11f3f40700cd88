/* tdacl devices [--verbose] [--peak] [--device SEL] */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tuning.h"

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
    /* the matrix units the attention prefill uses (src/attention_mma.c decides per call) */
    if (i->nv_cc_major >= 8)
        printf("    matrix units: mma.sync bf16/f16 (sm_%d%d), used by attention prefill with bf16/f16 inputs\n",
               i->nv_cc_major, i->nv_cc_minor);
    else
        printf("    matrix units: none used (SIMT kernels; TDACL_MMA_EMULATE=1 runs the mma kernel's portable body)\n");
    if (verbose) printf("    extensions: %s\n", i->extensions);
}

/* Which tuning entries a context would use for a few representative problems. */
static void print_tuning(tdacl_context *ctx)
{
    static const struct { const char *kernel; int kind; int tq; } probes[] = {
        {"attention", TDACL_ATTN_TRA, 64}, {"attention", TDACL_ATTN_TDA, 64},
        {"attention", TDACL_ATTN_SOFTMAX, 64}, {"attention_decode", TDACL_ATTN_TRA, 1},
    };
    for (size_t i = 0; i < TDACL_ARRAY_LEN(probes); i++) {
        tdacl_problem p = {probes[i].kind, TDACL_F32, 64, 64, 8192, probes[i].tq};
        tdacl_tuned t;
        if (tdacl__tuned(ctx, probes[i].kernel, &p, &t)) continue;
        char text[160];
        tdacl__params_text(tdacl__kernel_space(probes[i].kernel), &t.values, text, sizeof text);
        printf("    tuning %s %s f32 d=64 T=8192: %s  [%s: %s]\n", probes[i].kernel,
               tdacl__kind_name(probes[i].kind), text, tdacl__tuned_source_name(t.source), t.origin);
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
                   "  --verbose  full capability record, extensions and tuning entries in use\n"
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
        if (verbose) print_tuning(ctx);
        if (peak) {
            tdacl_peak pk;
            if ((st = tdacl_measure_peak(ctx, &pk))) {
                cli_report(ctx, st);
                tdacl_context_destroy(ctx);
                return 1;
            }
            printf("    measured peak: FP32 %.1f GFLOP/s, read bandwidth %.1f GB/s, launch latency %.1f us\n",
                   pk.fp32_gflops, pk.bandwidth_gbs, pk.launch_us);
        }
        tdacl_context_destroy(ctx);
    }
    return 0;
}
