/* tdacl __programs CLASS DIR (internal): writes every kernel program the library would build
 * for a device of capability class CLASS (e.g. amd-gfx90a, intel-dg2) -- the exact source text
 * program.c compiles and its full option string -- for representative calls: attention
 * prefill and decode of every kind in f32/bf16/f16 at d=64, and the GEMM and GEMV with f32 and
 * bf16 weights.  Parameters come from the same lookup as on such a device (class defaults,
 * else the generic ladder).  Then the same calls once more with TDACL_EXPERIMENTAL_MATRIX=1:
 * the matrix-unit programs of the class's DPAS, MFMA or WMMA body (cl/mma_units.cl), labelled
 * "experimental".  tools/offline-compile.sh compiles them with vendor compilers.
 * DIR/NN.cl holds a source, DIR/index.tsv lines "NN.cl<TAB>label<TAB>options". */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/fileio.h"
#include "base/kinds.h"
#include "cli/cli.h"
#include "ops/attention.h"
#include "ops/gemm.h"

typedef struct dump {
    const char *dir;
    FILE *index;
    int count;
    uint64_t seen[256]; /* hashes of (options, source) already written */
    int nseen;
} dump;

static int write_program(tdacl_context *ctx, dump *d, const tdacl_variant_def *row, const void *call, const char *label)
{
    char tagged[96];
    if (row->matrix_units && getenv("TDACL_EXPERIMENTAL_MATRIX")) {
        snprintf(tagged, sizeof tagged, "%s experimental", label);
        label = tagged;
    }
    tdacl_tuned used;
    if (row->space && tdacl__variant_params(ctx, row, call, NULL, &used)) return 1;
    tdacl_strbuf opts = {0}, src = {0};
    tdacl__sb_printf(&opts, "%s ", tdacl__base_options(ctx));
    tdacl__variant_options(row, call, row->space ? &used.values : NULL, &opts);
    const char *cls = tdacl__program_class_options(ctx, row->program.name);
    if (*cls) tdacl__sb_printf(&opts, " %s", cls);
    for (size_t i = 0; i < TDACL_ARRAY_LEN(row->program.files) && row->program.files[i]; i++) {
        const tdacl_embedded_source *s = tdacl__find_source(row->program.files[i]);
        if (!s) return 1;
        tdacl__sb_printf(&src, "/* ---- %s ---- */\n%.*s\n", s->name, (int)s->size, s->text);
    }
    if (opts.oom || src.oom || !src.data) return 1;
    const uint64_t key = tdacl__fnv1a64(src.data, strlen(src.data), tdacl__fnv1a64(opts.data, strlen(opts.data), 1));
    int dup = 0;
    for (int i = 0; i < d->nseen; i++) dup |= d->seen[i] == key;
    int rc = 0;
    if (!dup && d->nseen < 256) {
        d->seen[d->nseen++] = key;
        char path[TDACL_PATH_LIMIT + 16];
        snprintf(path, sizeof path, "%s/%02d.cl", d->dir, d->count);
        FILE *f = fopen(path, "w");
        rc = !f || fputs(src.data, f) < 0;
        if (f && fclose(f)) rc = 1;
        fprintf(d->index, "%02d.cl\t%s %s\t%s\n", d->count++, row->name, label, opts.data);
    }
    tdacl__sb_free(&opts), tdacl__sb_free(&src);
    return rc;
}

static int attention_programs(tdacl_context *ctx, dump *d)
{
    static const tdacl_dtype dts[3] = {TDACL_F32, TDACL_BF16, TDACL_F16};
    int bad = 0;
    for (int kind = 0; tdacl__kind(kind); kind++)
        for (int di = 0; di < 3; di++)
            for (int decode = 0; decode < 2; decode++) {
                const int64_t tq = decode ? 1 : 64, tk = decode ? 8192 : 64, dim = 64;
                int64_t qs[4] = {1, 1, tq, dim}, ks[4] = {1, 1, tk, dim};
                int two = tdacl__kind_views(kind) == 2;
                tdacl_tensor *t[7] = {0};
                tdacl_status st = tdacl_tensor_create(ctx, dts[di], 4, qs, &t[0]);
                if (!st) st = tdacl_tensor_create(ctx, dts[di], 4, ks, &t[1]);
                if (!st) st = tdacl_tensor_create(ctx, dts[di], 4, ks, &t[2]);
                if (!st && two) st = tdacl_tensor_create(ctx, dts[di], 4, qs, &t[3]);
                if (!st && two) st = tdacl_tensor_create(ctx, dts[di], 4, ks, &t[4]);
                if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, qs, &t[5]);
                const int64_t ths[2] = {1, 1}; /* topk_theta's thresholds (one head, one row id) */
                if (!st && kind == TDACL_ATTN_TOPK_THETA) st = tdacl_tensor_create(ctx, TDACL_F32, 2, ths, &t[6]);
                tdacl_attention_tensors at = {t[0], t[1], t[2], t[3], t[4], NULL, t[5], NULL, NULL, t[6], NULL, NULL};
                tdacl_attention_desc desc;
                tdacl_attention_desc_init(&desc);
                desc.kind = (tdacl_attention_kind)kind;
                desc.path = decode ? TDACL_PATH_DECODE : TDACL_PATH_PREFILL;
                /* the matrix-unit pass also takes f32 storage onto the units (bf16 compute) */
                if (getenv("TDACL_EXPERIMENTAL_MATRIX") && dts[di] == TDACL_F32) desc.precision = TDACL_PRECISION_BF16;
                tdacl_attention_plan plan;
                const tdacl_attention_call call = {&plan, &at, NULL, NULL};
                char label[64];
                snprintf(label, sizeof label, "%s %s d=64", tdacl__kind_name(kind), tdacl_dtype_name(dts[di]));
                if (!st) st = tdacl__attention_plan(ctx, &desc, &at, &plan);
                if (st || write_program(ctx, d, plan.row, &call, label)) {
                    fprintf(stderr, "tdacl __programs: %s: %s\n", label, tdacl_last_error(ctx));
                    bad++;
                }
                if (!st && decode && dts[di] == TDACL_F32 && kind != TDACL_ATTN_ENTMAX && kind != TDACL_ATTN_TOPK_THETA) {
                    /* the model's decode of sequences at their own positions (f32 caches;
                     * models do not take entmax or topk_theta) */
                    const int32_t pairs[2] = {0, 100};
                    const tdacl_kv_rows rows = {t[0]->storage->mem, pairs};
                    snprintf(label, sizeof label, "%s %s d=64 kv_rows", tdacl__kind_name(kind), tdacl_dtype_name(dts[di]));
                    st = tdacl__attention_plan_rows(ctx, &desc, &at, &rows, &plan);
                    if (st || write_program(ctx, d, plan.row, &call, label)) {
                        fprintf(stderr, "tdacl __programs: %s: %s\n", label, tdacl_last_error(ctx));
                        bad++;
                    }
                }
                for (int i = 0; i < 7; i++) tdacl_tensor_destroy(t[i]);
            }
    return bad;
}

static int matmul_programs(tdacl_context *ctx, dump *d)
{
    static const int rows_of[2] = {1, 1024};
    static const tdacl_dtype wdts[2] = {TDACL_F32, TDACL_BF16};
    int bad = 0;
    for (int r = 0; r < 2; r++)
        for (int w = 0; w < 2; w++) {
            int64_t as[2] = {rows_of[r], 768}, ws[2] = {768, 3072}, cs[2] = {rows_of[r], 3072}, bs[2] = {1, 3072};
            tdacl_tensor *a = NULL, *wt = NULL, *c = NULL, *bias = NULL;
            tdacl_status st = tdacl_tensor_create(ctx, TDACL_F32, 2, as, &a);
            if (!st) st = tdacl_tensor_create(ctx, wdts[w], 2, ws, &wt);
            if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 2, cs, &c);
            if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 2, bs, &bias);
            const tdacl_matmul_call call = {c,    a,    wt, bias, NULL, TDACL_EPI_BIAS | TDACL_EPI_GELU, rows_of[r], 3072,
                                            768,  0,    NULL, wdts[w] == TDACL_BF16 ? TDACL_PRECISION_BF16 : TDACL_PRECISION_EXACT, NULL};
            const tdacl_variant_def *row = NULL;
            char why[256], label[64];
            snprintf(label, sizeof label, "M=%d N=3072 K=768 %s weights", rows_of[r], tdacl_dtype_name(wdts[w]));
            if (!st) st = tdacl__variant_choose(ctx, TDACL_OP_MATMUL, &call, &row, why, sizeof why);
            if (st || write_program(ctx, d, row, &call, label)) {
                fprintf(stderr, "tdacl __programs: matmul %s: %s\n", label, tdacl_last_error(ctx));
                bad++;
            }
            /* one row more: the decode step's fused QKV GEMV (norm prologue, RoPE and KV scatter, d = 64) */
            if (!st && r == 0) {
                const tdacl_gemv_fusion fuse = {.norm_w = bias, .scatter = 1, .cos_t = c->storage->mem,
                                                .sin_t = c->storage->mem, .d = 64, .C = 768};
                tdacl_matmul_call fused = call;
                fused.fuse = &fuse, fused.precision = TDACL_PRECISION_EXACT;
                snprintf(label, sizeof label, "M=1 fused QKV %s weights", tdacl_dtype_name(wdts[w]));
                if (tdacl__variant_choose(ctx, TDACL_OP_MATMUL, &fused, &row, why, sizeof why) ||
                    write_program(ctx, d, row, &fused, label)) {
                    fprintf(stderr, "tdacl __programs: matmul %s: %s\n", label, tdacl_last_error(ctx));
                    bad++;
                }
            }
            tdacl_tensor_destroy(a), tdacl_tensor_destroy(wt), tdacl_tensor_destroy(c), tdacl_tensor_destroy(bias);
        }
    return bad;
}

int cmd_programs(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: tdacl __programs CLASS DIR (internal; see tools/offline-compile.sh)\n");
        return 2;
    }
    tdacl_context *ctx;
    if (cli_open(NULL, &ctx)) return 1;
    /* a GPU of that class as the lookup and the base options see it */
    tdacl_device_info info = ctx->info;
    snprintf(info.arch, sizeof info.arch, "%s", argv[1]);
    snprintf(info.name, sizeof info.name, "offline %s", argv[1]);
    info.type = TDACL_DEVICE_GPU;
    info.nv_cc_major = info.nv_cc_minor = 0;
    info.has_fp16 = 1;
    info.local_mem_bytes = 64 * 1024;
    info.max_work_group_size = 1024;
    /* what such devices report that the matrix-unit bodies look for */
    if (!strncmp(argv[1], "intel-", 6))
        snprintf(info.extensions, sizeof info.extensions, "cl_khr_fp16 cl_khr_subgroups cl_intel_subgroups "
                 "cl_intel_required_subgroup_size cl_intel_subgroup_matrix_multiply_accumulate");
    tdacl__context_retarget(ctx, &info);
    dump d = {.dir = argv[2]};
    char path[TDACL_PATH_LIMIT + 16];
    snprintf(path, sizeof path, "%s/index.tsv", argv[2]);
    if (tdacl__mkdir_p(argv[2], 0755) || !(d.index = fopen(path, "w"))) {
        fprintf(stderr, "tdacl __programs: cannot write %s: %s\n", path, strerror(errno));
        tdacl_context_destroy(ctx);
        return 1;
    }
    unsetenv("TDACL_MMA_EMULATE");
    int bad = attention_programs(ctx, &d) + matmul_programs(ctx, &d);
    setenv("TDACL_EXPERIMENTAL_MATRIX", "1", 1);
    bad += attention_programs(ctx, &d) + matmul_programs(ctx, &d);
    unsetenv("TDACL_EXPERIMENTAL_MATRIX");
    if (fclose(d.index)) bad++;
    tdacl_context_destroy(ctx);
    printf("%d programs for %s in %s\n", d.count, argv[1], argv[2]);
    return bad ? 1 : 0;
}
