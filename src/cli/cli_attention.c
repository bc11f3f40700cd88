/* tdacl attention: one attention call on .npy inputs, for interop with other frameworks. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kinds.h"
#include "cli/cli.h"
#include "ops/attention.h"
#include "tools/npy.h"

static void usage(FILE *f)
{
    char kinds[128];
    tdacl__kind_names(kinds, sizeof kinds);
    fprintf(f,
            "usage: tdacl attention --kind KIND --q q.npy --k k.npy\n"
            "       --v v.npy [--q2 q2.npy --k2 k2.npy] --out o.npy [--beta B] [--kappa K]\n"
            "       [--power P] [--lambda L] [--scale S] [--normalize 0|1] [--norm none|rms]\n"
            "       [--offset N] [--dtype f32|bf16|f16] [--path auto|prefill|decode]\n"
            "       [--alpha A] [--temp DELTA,BETA,GAMMA]   (entmax)\n"
            "       [--thresholds th.npy] [--theta-post 0|1] [--sdc none|exact|exp_threshold|offline]\n"
            "       [--sdc-gamma G] [--sdc-log-mass eta.npy] [--vmc 0|1]   (topk_theta; th, eta: [H,R])\n"
            "       [--stats stats.json] [--device SEL]\n"
            "Inputs are little-endian float32 .npy arrays [B,H,T,D] in C order; the output is\n"
            "float32 [B,H,Tq,Dv].  --dtype bf16 rounds the inputs to bf16 storage on the device.\n"
            "KIND: %s (two-view kinds take --q2 and --k2).\n", kinds);
}

/* q, k, v, q2, k2 ([B,H,T,D]), then topk_theta's thresholds and sdc_log_mass ([H,R]) */
#define NFILES 7
typedef struct inputs {
    tdacl_npy a[NFILES];
    tdacl_tensor *t[NFILES];
} inputs;

int cmd_attention(int argc, char **argv)
{
    const char *files[NFILES] = {0}, *out_path = NULL, *stats_path = NULL, *device = NULL;
    static const char *names[NFILES] = {"q", "k", "v", "q2", "k2", "thresholds", "sdc-log-mass"};
    tdacl_attention_desc desc;
    tdacl_attention_desc_init(&desc);
    tdacl_dtype dtype = TDACL_F32;
    int have_kind = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help")) { usage(stdout); return 0; }
        if (!cli_known(o, "--q --k --v --q2 --k2 --out --stats --device --kind --beta --kappa --power --lambda "
                          "--scale --normalize --offset --norm --dtype --path --alpha --temp --thresholds --theta-post --sdc "
                          "--sdc-gamma --sdc-log-mass --vmc")) {
            fprintf(stderr, "tdacl attention: unknown option '%s' (see tdacl attention --help)\n", o);
            return 2;
        }
        if (i + 1 >= argc) { fprintf(stderr, "tdacl attention: option %s needs a value\n", o); return 2; }
        const char *val = argv[++i];
        double x;
        long long n;
        int bad = 0, matched = 0;
        for (int f = 0; f < NFILES; f++)
            if (!strcmp(o + 2, names[f]) && !strncmp(o, "--", 2)) files[f] = val, matched = 1;
        if (matched) continue;
        if (!strcmp(o, "--out")) out_path = val;
        else if (!strcmp(o, "--stats")) stats_path = val;
        else if (!strcmp(o, "--device")) device = val;
        else if (!strcmp(o, "--kind")) {
            if (tdacl_attention_kind_from_name(val, &desc.kind)) {
                fprintf(stderr, "tdacl attention: --kind: %s\n", tdacl_last_error(NULL));
                return 2;
            }
            have_kind = 1;
        } else if (!strcmp(o, "--beta")) bad = cli_double(val, &x), desc.beta = (float)x;
        else if (!strcmp(o, "--kappa")) bad = cli_double(val, &x), desc.kappa = (float)x;
        else if (!strcmp(o, "--power")) bad = cli_double(val, &x), desc.power = (float)x;
        else if (!strcmp(o, "--lambda")) bad = cli_double(val, &x), desc.lambda = (float)x;
        else if (!strcmp(o, "--scale")) bad = cli_double(val, &x), desc.scale = (float)x;
        else if (!strcmp(o, "--alpha")) bad = cli_double(val, &x), desc.alpha = (float)x;
        else if (!strcmp(o, "--temp")) {
            char extra;
            bad = sscanf(val, "%f,%f,%f%c", &desc.temp_delta, &desc.temp_beta, &desc.temp_gamma, &extra) != 3;
        }
        else if (!strcmp(o, "--sdc-gamma")) bad = cli_double(val, &x), desc.sdc_gamma = (float)x;
        else if (!strcmp(o, "--theta-post")) bad = cli_long(val, &n) || (n != 0 && n != 1), desc.theta_post = (int)n;
        else if (!strcmp(o, "--vmc")) bad = cli_long(val, &n) || (n != 0 && n != 1), desc.vmc = (int)n;
        else if (!strcmp(o, "--sdc")) {
            static const char *const sdc[4] = {"none", "exact", "exp_threshold", "offline"};
            bad = 1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(val, sdc[k])) desc.sdc = (tdacl_sdc)k, bad = 0;
        }
        else if (!strcmp(o, "--normalize")) bad = cli_long(val, &n) || (n != 0 && n != 1), desc.normalize = (int)n;
        else if (!strcmp(o, "--offset")) bad = cli_long(val, &n) || n < 0, desc.offset = n;
        else if (!strcmp(o, "--norm")) {
            if (!strcmp(val, "none")) desc.norm = TDACL_NORM_NONE;
            else if (!strcmp(val, "rms")) desc.norm = TDACL_NORM_RMS;
            else bad = 1;
        } else if (!strcmp(o, "--dtype")) {
            int dt = tdacl__dtype_from_name(val);
            if (dt < 0) bad = 1;
            else dtype = (tdacl_dtype)dt;
        } else if (!strcmp(o, "--path")) {
            if (!strcmp(val, "auto")) desc.path = TDACL_PATH_AUTO;
            else if (!strcmp(val, "prefill")) desc.path = TDACL_PATH_PREFILL;
            else if (!strcmp(val, "decode")) desc.path = TDACL_PATH_DECODE;
            else bad = 1;
        } else {
            fprintf(stderr, "tdacl attention: unknown option '%s'\n", o);
            usage(stderr);
            return 2;
        }
        if (bad) { fprintf(stderr, "tdacl attention: bad value '%s' for %s\n", val, o); return 2; }
    }
    if (!have_kind || !files[0] || !files[1] || !files[2] || !out_path) {
        fprintf(stderr, "tdacl attention: --kind, --q, --k, --v and --out are required\n");
        usage(stderr);
        return 2;
    }
    int two = tdacl__kind_views(desc.kind) == 2;
    if (two && (!files[3] || !files[4])) {
        fprintf(stderr, "tdacl attention: kind %s needs --q2 and --k2\n", tdacl_attention_kind_name(desc.kind));
        return 2;
    }
    if (!two && (files[3] || files[4])) {
        fprintf(stderr, "tdacl attention: --q2/--k2 only apply to two-view kinds (kind %s has one view)\n",
                tdacl_attention_kind_name(desc.kind));
        return 2;
    }
    inputs in;
    memset(&in, 0, sizeof in);
    int rc = 1;
    tdacl_context *ctx = NULL;
    tdacl_tensor *out = NULL;
    float *host = NULL;
    tdacl_status st;
    for (int f = 0; f < NFILES; f++) {
        if (!files[f]) continue;
        if ((st = tdacl__npy_read(files[f], &in.a[f]))) { cli_report(NULL, st); goto done; }
        if (in.a[f].ndim != (f < 5 ? 4 : 2)) {
            fprintf(stderr, "tdacl attention: %s has %d dims; expected %s\n", files[f], in.a[f].ndim,
                    f < 5 ? "[B,H,T,D]" : "[H,R]");
            goto done;
        }
        int64_t bad = 0;
        for (int64_t i = 0; i < in.a[f].count; i++) bad += !isfinite(in.a[f].data[i]);
        if (bad) /* computed as given (the output will not be finite), but said once */
            fprintf(stderr, "tdacl attention: warning: %s holds %lld non-finite value(s)\n", files[f], (long long)bad);
    }
    if (cli_open(device, &ctx)) goto done;
    for (int f = 0; f < NFILES; f++) {
        if (!files[f]) continue;
        if ((st = tdacl_tensor_create(ctx, f < 5 ? dtype : TDACL_F32, in.a[f].ndim, in.a[f].shape, &in.t[f])) ||
            (st = tdacl_tensor_upload(in.t[f], in.a[f].data, TDACL_F32, in.a[f].count))) {
            cli_report(ctx, st);
            goto done;
        }
    }
    int64_t oshape[4] = {in.a[0].shape[0], in.a[0].shape[1], in.a[0].shape[2], in.a[2].shape[3]};
    if ((st = tdacl_tensor_create(ctx, TDACL_F32, 4, oshape, &out))) { cli_report(ctx, st); goto done; }
    tdacl_attention_tensors t = {in.t[0], in.t[1], in.t[2], in.t[3], in.t[4], NULL, out, NULL, NULL, in.t[5], in.t[6], NULL};
    desc.want_stats = stats_path != NULL;
    tdacl_attention_stats stats;
    if ((st = tdacl_attention(ctx, &desc, &t, &stats))) { cli_report(ctx, st); goto done; }
    int64_t count = oshape[0] * oshape[1] * oshape[2] * oshape[3];
    host = malloc((size_t)(count ? count : 1) * sizeof *host);
    if (!host) { fprintf(stderr, "tdacl attention: out of memory\n"); goto done; }
    if ((st = tdacl_tensor_download(out, host, TDACL_F32, count))) { cli_report(ctx, st); goto done; }
    if ((st = tdacl__npy_write(out_path, 4, oshape, host))) { cli_report(NULL, st); goto done; }
    if (stats_path) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "kind", tdacl_attention_kind_name(desc.kind));
        cJSON_AddStringToObject(j, "path", stats.path == TDACL_PATH_DECODE ? "decode" : "prefill");
        cJSON_AddNumberToObject(j, "visible_pairs", (double)stats.visible_pairs);
        cJSON_AddNumberToObject(j, "zero_weights", (double)stats.zero_weights);
        cJSON_AddNumberToObject(j, "sparsity", stats.sparsity);
        cJSON *sv = cJSON_AddArrayToObject(j, "survivors");
        cJSON_AddItemToArray(sv, cJSON_CreateNumber((double)stats.survivors[0]));
        if (two) cJSON_AddItemToArray(sv, cJSON_CreateNumber((double)stats.survivors[1]));
        cJSON_AddNumberToObject(j, "kernel_ms", stats.kernel_ms);
        cJSON_AddNumberToObject(j, "tiles_visited", (double)stats.tiles_visited);
        cJSON_AddNumberToObject(j, "tiles_skipped_v", (double)stats.tiles_skipped_v);
        cJSON_AddNumberToObject(j, "threshold_rows_refined", (double)stats.threshold_rows_refined);
        char *text = cJSON_Print(j);
        cJSON_Delete(j);
        FILE *f = text ? fopen(stats_path, "w") : NULL;
        int ok = f && fprintf(f, "%s\n", text) > 0;
        if (f && fclose(f)) ok = 0;
        free(text);
        if (!ok) { fprintf(stderr, "tdacl attention: cannot write %s\n", stats_path); goto done; }
    }
    printf("%s: [%lld,%lld,%lld,%lld] written to %s (%.3f ms", tdacl_attention_kind_name(desc.kind),
           (long long)oshape[0], (long long)oshape[1], (long long)oshape[2], (long long)oshape[3], out_path,
           stats.kernel_ms);
    if (desc.want_stats) printf(", sparsity %.6f", stats.sparsity);
    printf(")\n");
    rc = 0;
done:
    free(host);
    tdacl_tensor_destroy(out);
    for (int f = 0; f < NFILES; f++) {
        tdacl_tensor_destroy(in.t[f]);
        tdacl__npy_free(&in.a[f]);
    }
    tdacl_context_destroy(ctx);
    return rc;
}
