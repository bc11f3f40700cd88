/* Programs: building from the embedded sources or the binary cache, and the per-context
 * registry of built programs and kernel objects.  Which files make a program is the
 * caller's (the variant registry of the ops layer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime.h"

typedef struct kernel_entry {
    char name[64]; /* the library's own kernel names, all short */
    cl_kernel kernel;
    struct kernel_entry *next;
} kernel_entry;

struct tdacl_program_entry {
    char *name;    /* program name or test label */
    char *options; /* caller options (without the base options) */
    cl_program program;
    kernel_entry *kernels;
    tdacl_program_entry *next;
};

const tdacl_embedded_source *tdacl__find_source(const char *name)
{
    for (int i = 0; i < tdacl_embedded_source_count; i++)
        if (!strcmp(tdacl_embedded_sources[i].name, name)) return &tdacl_embedded_sources[i];
    return NULL;
}

const char *tdacl__base_options(const tdacl_context *ctx)
{
    return ctx->base_options;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static void set_build_log(tdacl_context *ctx, cl_program prog)
{
    size_t n = 0;
    free(ctx->build_log);
    ctx->build_log = NULL;
    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS)
        return;
    ctx->build_log = malloc(n + 1);
    if (!ctx->build_log) return;
    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, n, ctx->build_log, NULL) !=
        CL_SUCCESS)
        n = 0;
    ctx->build_log[n] = '\0';
}

const char *tdacl_build_log(const tdacl_context *ctx)
{
    return (ctx && ctx->build_log) ? ctx->build_log : "";
}

/* The first line of the log that mentions an error, for the status message. */
static void first_error_line(const char *log, char *out, size_t n)
{
    const char *p = log ? strstr(log, "error") : NULL;
    if (!p) {
        snprintf(out, n, "%s", "(see tdacl_build_log)");
        return;
    }
    while (p > log && p[-1] != '\n') p--;
    size_t len = strcspn(p, "\n");
    if (len >= n) len = n - 1;
    memcpy(out, p, len);
    out[len] = 0;
}

static void cache_key(const tdacl_context *ctx, const char *source, const char *options,
                      tdacl_strbuf *key)
{
    const tdacl_device_info *i = &ctx->info;
    tdacl__sb_printf(key,
                     "tdacl-program v1\nplatform: %s | %s\ndevice: %s | %s\ndriver: %s\n"
                     "options: %s\nsource: %016llx %zu\n",
                     i->platform_name, i->platform_version, i->name, i->device_version,
                     i->driver_version, options,
                     (unsigned long long)tdacl__fnv1a64(source, strlen(source), TDACL_FNV_SEED),
                     strlen(source));
}

/* A first compile takes seconds (up to minutes on PoCL) with nothing else to show for it: say
 * so once per context.  At the default log level the note goes only to a terminal (stderr a
 * TTY, no log callback), so pipes and scripts stay quiet; TDACL_LOG=info logs it anywhere. */
static void announce_compile(tdacl_context *ctx)
{
    if (ctx->compile_announced) return;
    ctx->compile_announced = 1;
    const char *where = ctx->cache.enabled ? ctx->cache.dir : NULL;
    if (tdacl__log_enabled(ctx, TDACL_LOG_INFO)) {
        tdacl__log(ctx, TDACL_LOG_INFO, "compiling kernels for %s; %s%s", ctx->info.name,
                   where ? "cached for next time in " : "not cached (TDACL_CACHE=off)", where ? where : "");
    } else if (tdacl__log_enabled(ctx, TDACL_LOG_WARN) && !tdacl__diag(ctx)->log_fn && !tdacl__log_has_callback() &&
               isatty(STDERR_FILENO)) {
        fprintf(stderr, "tdacl: compiling kernels for %s; %s\n", ctx->info.name,
                where ? "cached for next time" : "not cached (TDACL_CACHE=off)");
    }
}

/* A program whose PTX holds lines marked SM90A_MARK (cl/wgmma.cl's sm_90a instructions,
 * comments to NVIDIA's OpenCL compiler, which targets sm_90): the same PTX retargeted to
 * sm_90a with the marks removed, loaded in its place.  A program without marked lines (the
 * portable body) stays as it is. */
#define SM90A_MARK "//@sm_90a@ "
static tdacl_status retarget_sm90a(tdacl_context *ctx, const char *label, const char *opts, cl_program *prog)
{
    size_t size = 0;
    cl_int err = clGetProgramInfo(*prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL);
    if (err != CL_SUCCESS || !size) return tdacl__fail_cl(ctx, err, "program '%s': reading its PTX", label);
    unsigned char *ptx = calloc(size + 1, 1), *fixed = malloc(size + 2);
    unsigned char *bins[1] = {ptx};
    if (!ptx || !fixed) {
        free(ptx), free(fixed);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "program '%s': out of memory", label);
    }
    err = clGetProgramInfo(*prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL);
    const char *text = (const char *)ptx, *target = err == CL_SUCCESS ? strstr(text, ".target sm_90") : NULL;
    tdacl_status st = TDACL_SUCCESS;
    if (err != CL_SUCCESS) {
        st = tdacl__fail_cl(ctx, err, "program '%s': reading its PTX", label);
    } else if (strstr(text, SM90A_MARK) && (!target || target[13] == 'a' || (target[13] >= '0' && target[13] <= '9'))) {
        st = tdacl__fail(ctx, TDACL_ERR_BUILD, "program '%s' has sm_90a lines (wgmma) but its PTX does not target sm_90",
                         label);
    } else if (strstr(text, SM90A_MARK)) {
        size_t n = 0;
        for (const char *c = text; *c;) {
            if (c == target + 13) fixed[n++] = 'a';
            if (!strncmp(c, SM90A_MARK, sizeof SM90A_MARK - 1)) {
                c += sizeof SM90A_MARK - 1;
                continue;
            }
            fixed[n++] = (unsigned char)*c++;
        }
        fixed[n++] = 0;
        const unsigned char *bin = fixed;
        cl_int bin_status = CL_SUCCESS;
        cl_program p = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &n, &bin, &bin_status, &err);
        if (p && err == CL_SUCCESS && bin_status == CL_SUCCESS) err = clBuildProgram(p, 1, &ctx->device, opts, NULL, NULL);
        if (!p || err != CL_SUCCESS || bin_status != CL_SUCCESS) {
            if (p) set_build_log(ctx, p), clReleaseProgram(p);
            st = tdacl__fail(ctx, TDACL_ERR_BUILD, "program '%s' retargeted to sm_90a did not build: %s (%d); see tdacl_build_log",
                             label, tdacl__cl_error_name(err ? err : bin_status), (int)(err ? err : bin_status));
        } else {
            clReleaseProgram(*prog);
            *prog = p;
            tdacl__log(ctx, TDACL_LOG_DEBUG, "program '%s': its PTX loaded as sm_90a (wgmma)", label);
            set_build_log(ctx, p);
            if (ctx->build_log && ctx->build_log[0] && tdacl__log_enabled(ctx, TDACL_LOG_DEBUG))
                tdacl__log(ctx, TDACL_LOG_DEBUG, "build log of '%s' as sm_90a:\n%s", label, ctx->build_log);
        }
    }
    free(ptx), free(fixed);
    return st;
}

static tdacl_status build(tdacl_context *ctx, const char *label, const char *source,
                          const char *options, int sm90a, cl_program *out)
{
    tdacl_strbuf opts = {0}, key = {0};
    tdacl__sb_printf(&opts, "%s%s%s", ctx->base_options, options && *options ? " " : "",
                     options ? options : "");
    cache_key(ctx, source, opts.data, &key);
    if (opts.oom || key.oom) {
        tdacl__sb_free(&opts), tdacl__sb_free(&key);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "building '%s': out of memory", label);
    }
    cl_int err;
    cl_program prog = NULL;
    double t0 = tdacl__now();
    unsigned char *bin = NULL;
    size_t bin_size = 0;
    if (tdacl__cache_load(ctx, key.data, &bin, &bin_size)) {
        const unsigned char *bins[1] = {bin};
        cl_int bin_status = CL_SUCCESS;
        prog = clCreateProgramWithBinary(ctx->cl, 1, &ctx->device, &bin_size, bins, &bin_status, &err);
        if (prog && err == CL_SUCCESS && bin_status == CL_SUCCESS)
            err = clBuildProgram(prog, 1, &ctx->device, opts.data, NULL, NULL);
        if (!prog || err != CL_SUCCESS || bin_status != CL_SUCCESS) {
            if (prog) clReleaseProgram(prog);
            prog = NULL;
            ctx->cache.stats.hits--;
            ctx->cache.stats.misses++;
            tdacl__cache_discard(ctx, key.data);
        } else {
            tdacl__log(ctx, TDACL_LOG_DEBUG, "program '%s' loaded from cache in %.1f ms", label,
                       1e3 * (tdacl__now() - t0));
        }
        free(bin);
    }
    if (!prog) {
        announce_compile(ctx);
        size_t len = strlen(source);
        prog = clCreateProgramWithSource(ctx->cl, 1, &source, &len, &err);
        if (!prog) {
            tdacl__sb_free(&opts), tdacl__sb_free(&key);
            return tdacl__fail_cl(ctx, err, "clCreateProgramWithSource('%s')", label);
        }
        err = clBuildProgram(prog, 1, &ctx->device, opts.data, NULL, NULL);
        set_build_log(ctx, prog);
        if (err != CL_SUCCESS) {
            char line[512];
            first_error_line(ctx->build_log, line, sizeof line);
            tdacl_status st = tdacl__fail(
                ctx, err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS ? TDACL_ERR_BUILD : tdacl__cl_status(err),
                "building program '%s' (options: %s) failed: %s (%d); first error: %s",
                label, opts.data, tdacl__cl_error_name(err), (int)err, line);
            tdacl__log(ctx, TDACL_LOG_ERROR, "build log of '%s':\n%s", label,
                       ctx->build_log ? ctx->build_log : "");
            clReleaseProgram(prog);
            tdacl__sb_free(&opts), tdacl__sb_free(&key);
            return st;
        }
        if (ctx->build_log && ctx->build_log[0] && tdacl__log_enabled(ctx, TDACL_LOG_DEBUG))
            tdacl__log(ctx, TDACL_LOG_DEBUG, "build log of '%s':\n%s", label, ctx->build_log);
        if (sm90a) {
            tdacl_status st = retarget_sm90a(ctx, label, opts.data, &prog);
            if (st) {
                clReleaseProgram(prog);
                tdacl__sb_free(&opts), tdacl__sb_free(&key);
                return st;
            }
        }
        tdacl__log(ctx, TDACL_LOG_INFO, "program '%s' compiled in %.1f ms (options: %s)", label,
                   1e3 * (tdacl__now() - t0), opts.data);
        if (ctx->cache.enabled) {
            size_t size = 0;
            if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) ==
                    CL_SUCCESS && size) {
                unsigned char *b = malloc(size);
                unsigned char *bins[1] = {b};
                if (b && clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) ==
                             CL_SUCCESS)
                    tdacl__cache_store(ctx, key.data, b, size);
                free(b);
            }
        }
    }
    tdacl__sb_free(&opts), tdacl__sb_free(&key);
    *out = prog;
    return TDACL_SUCCESS;
}

static tdacl_program_entry *find_entry(tdacl_context *ctx, const char *name, const char *options)
{
    for (tdacl_program_entry *e = ctx->programs; e; e = e->next)
        if (!strcmp(e->name, name) && !strcmp(e->options, options)) return e;
    return NULL;
}

static tdacl_status add_entry(tdacl_context *ctx, const char *name, const char *options,
                              cl_program prog)
{
    tdacl_program_entry *e = calloc(1, sizeof *e);
    if (e) e->name = dup_str(name), e->options = dup_str(options);
    if (!e || !e->name || !e->options) {
        if (e) free(e->name), free(e->options);
        free(e);
        clReleaseProgram(prog);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "program registry: out of memory");
    }
    e->program = prog;
    e->next = ctx->programs;
    ctx->programs = e;
    return TDACL_SUCCESS;
}

/* Builds source and keeps the program in the context's registry. */
static tdacl_status build_registered(tdacl_context *ctx, const char *label, const char *source, const char *options,
                                     cl_program *program)
{
    cl_program prog;
    tdacl_status st = build(ctx, label, source, options, 0, &prog);
    if (!st) st = add_entry(ctx, label, options, prog);
    if (!st) *program = prog;
    return st;
}

/* Compiler options per device class and program, chosen from the vendor compilers' resource
 * reports (tools/offline-compile.sh, bench/results/offline/): Intel's attention kernels
 * spill at 128 registers per thread, and on Xe-HPC IGC picks SIMD32 unless asked for 16.
 * The first entry whose class prefix matches and which names the program applies. */
static const struct {
    const char *arch_prefix;
    const char *programs; /* space-separated program names */
    const char *options;
} class_options[] = {
    {"intel-xe-hpc", "attention attention_entmax attention_topk", "-DTDACL_SUBGROUP=16 -cl-intel-256-GRF-per-thread"},
    {"intel-xe-hpc", "attention_decode", "-DTDACL_SUBGROUP=16 -DEARLY_FETCH=0 -cl-intel-256-GRF-per-thread"},
    {"intel-xe-hpg", "attention attention_entmax", "-cl-intel-256-GRF-per-thread"},
    {"intel-xe-hpg", "attention_decode", "-DEARLY_FETCH=0 -cl-intel-256-GRF-per-thread"},
    /* the DPAS body (experimental): without 256 registers IGC spills kilobytes per thread */
    {"intel-", "attention_mma gemm_mma", "-cl-intel-256-GRF-per-thread"},
    /* Xe-HPC at SIMD32: six rows of the LM head GEMV in flight per work-item spilled 512-640 bytes */
    {"intel-xe-hpc", "layers", "-DGVT_BATCH=3"},
    /* RDNA3: two 16-bit key chunks in flight need more than 256 VGPRs in tda decode */
    {"amd-gfx11", "attention_decode", "-DEARLY_FETCH=0"},
    /* CDNA: the split combine in the decode kernel tips diff_softmax's 238 VGPRs into scratch */
    {"amd-gfx9", "attention_decode", "-DFUSED_COMBINE=0"},
};

const char *tdacl__program_class_options(const tdacl_context *ctx, const char *program)
{
    const size_t n = strlen(program);
    for (size_t i = 0; i < TDACL_ARRAY_LEN(class_options); i++) {
        if (strncmp(ctx->info.arch, class_options[i].arch_prefix, strlen(class_options[i].arch_prefix))) continue;
        for (const char *p = class_options[i].programs; (p = strstr(p, program)) != NULL; p += n)
            if ((p == class_options[i].programs || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
                return class_options[i].options;
    }
    return "";
}

tdacl_status tdacl__program_get(tdacl_context *ctx, const tdacl_program_def *def, const char *options,
                                cl_program *program)
{
    if (!options) options = "";
    const char *name = def->name;
    tdacl_program_entry *e = find_entry(ctx, name, options);
    if (e) {
        *program = e->program;
        return TDACL_SUCCESS;
    }
    tdacl_strbuf src = {0};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(def->files) && def->files[i]; i++) {
        const tdacl_embedded_source *s = tdacl__find_source(def->files[i]);
        if (!s) {
            tdacl__sb_free(&src);
            return tdacl__fail(ctx, TDACL_ERR_INTERNAL, "kernel source %s is not embedded", def->files[i]);
        }
        tdacl__sb_printf(&src, "/* ---- %s ---- */\n%.*s\n", s->name, (int)s->size, s->text);
    }
    if (src.oom) {
        tdacl__sb_free(&src);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "program '%s': out of memory", name);
    }
    if (!src.data) return tdacl__fail(ctx, TDACL_ERR_INTERNAL, "program '%s' names no kernel source", name);
    /* the registry keys the program by the caller's options; the class's own are fixed per context */
    const char *cls = tdacl__program_class_options(ctx, name);
    tdacl_strbuf all = {0};
    tdacl__sb_printf(&all, "%s%s%s", options, *options && *cls ? " " : "", cls);
    cl_program prog = NULL;
    tdacl_status st = all.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "program '%s': out of memory", name)
                              : build(ctx, name, src.data, all.data, def->sm90a, &prog);
    if (!st) st = add_entry(ctx, name, options, prog);
    if (!st) *program = prog;
    tdacl__sb_free(&src), tdacl__sb_free(&all);
    return st;
}

tdacl_status tdacl__program_build_source(tdacl_context *ctx, const char *label, const char *source,
                                         const char *options, cl_program *program)
{
    return build_registered(ctx, label, source, options ? options : "", program);
}

tdacl_status tdacl__kernel_get(tdacl_context *ctx, const tdacl_program_def *def, const char *options,
                               const char *kernel, cl_kernel *out)
{
    if (!options) options = "";
    const char *program = def->name;
    if (strlen(kernel) >= sizeof ((kernel_entry *)0)->name)
        return tdacl__fail(ctx, TDACL_ERR_INTERNAL, "kernel name '%.80s' is too long", kernel);
    cl_program prog;
    tdacl_status st = tdacl__program_get(ctx, def, options, &prog);
    if (st) return st;
    tdacl_program_entry *e = find_entry(ctx, program, options);
    for (kernel_entry *k = e->kernels; k; k = k->next)
        if (!strcmp(k->name, kernel)) {
            *out = k->kernel;
            return TDACL_SUCCESS;
        }
    cl_int err;
    cl_kernel k = clCreateKernel(prog, kernel, &err);
    if (!k) return tdacl__fail_cl(ctx, err, "clCreateKernel(%s.%s)", program, kernel);
    kernel_entry *ke = calloc(1, sizeof *ke);
    if (!ke) {
        clReleaseKernel(k);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "kernel registry: out of memory");
    }
    snprintf(ke->name, sizeof ke->name, "%s", kernel);
    ke->kernel = k;
    ke->next = e->kernels;
    e->kernels = ke;
    *out = k;
    return TDACL_SUCCESS;
}

void tdacl__programs_release(tdacl_context *ctx)
{
    tdacl_program_entry *e = ctx->programs;
    while (e) {
        tdacl_program_entry *next = e->next;
        for (kernel_entry *k = e->kernels, *kn; k; k = kn) {
            kn = k->next;
            clReleaseKernel(k->kernel);
            free(k);
        }
        clReleaseProgram(e->program);
        free(e->name);
        free(e->options);
        free(e);
        e = next;
    }
    ctx->programs = NULL;
}
