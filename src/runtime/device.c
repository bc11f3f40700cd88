/* Device discovery: every platform and device, a capability record each, and selection by
 * index or name substring.  Enumerated once per process. */
#include <ctype.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#define CL_DEVICE_IP_VERSION_INTEL 0x4250 /* cl_intel_device_attribute_query: CL_MAKE_VERSION */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tdacl_device_entry *devices;
static int device_count;
static tdacl_status enum_status;
static char enum_error[1024];

static void get_str(cl_device_id d, cl_device_info what, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, 0, NULL, &len) != CL_SUCCESS || len == 0) return;
    char *tmp = malloc(len + 1);
    if (!tmp) return;
    if (clGetDeviceInfo(d, what, len, tmp, NULL) == CL_SUCCESS) {
        tmp[len] = '\0';
        if (len >= n && n > 4) {
            memcpy(out, tmp, n - 4);
            strcpy(out + n - 4, "...");
        } else {
            snprintf(out, n, "%s", tmp);
        }
    }
    free(tmp);
    /* trim trailing spaces some drivers leave */
    for (size_t l = strlen(out); l && isspace((unsigned char)out[l - 1]); l--) out[l - 1] = 0;
}

static uint64_t get_u64(cl_device_id d, cl_device_info what)
{
    cl_ulong v = 0;
    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

static uint32_t get_u32(cl_device_id d, cl_device_info what)
{
    cl_uint v = 0;
    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

int tdacl__has_extension(const char *exts, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = exts; (p = strstr(p, name)); p += n)
        if ((p == exts || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

static void lower(char *s)
{
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

/* AMD: the gfx target names the architecture (gfx908/gfx90a/gfx94x are CDNA, gfx11xx RDNA3);
 * class defaults match on "amd-gfx9" / "amd-gfx11" prefixes. */
static void amd_arch(tdacl_device_info *info, const char *name)
{
    char arch[32];
    snprintf(arch, sizeof arch, "%s", name);
    arch[strcspn(arch, ": ")] = 0;
    snprintf(info->arch, sizeof info->arch, "amd-%s", arch);
}

/* Intel GPUs by architecture, from the IP version the driver reports
 * (cl_intel_device_attribute_query; major.minor as in Intel's graphics IP numbering), else
 * from the marketing name; the vendor ID alone says nothing about registers or matrix units. */
static const char *intel_gpu_family(uint32_t ip_version, const char *lname)
{
    if (ip_version) {
        const unsigned major = ip_version >> 22, minor = (ip_version >> 12) & 0x3ff;
        if (major >= 20) return "xe2";
        if (major == 12 && minor >= 70) return "xe-lpg";
        if (major == 12 && minor >= 60) return "xe-hpc";
        if (major == 12 && minor >= 55) return "xe-hpg";
        if (major == 12 && minor >= 50) return "xe-hp";
        if (major == 12) return "xe-lp";
        return "gen";
    }
    if (strstr(lname, "data center gpu max")) return "xe-hpc";
    if (strstr(lname, "arc(tm) a") || strstr(lname, "arc a") || strstr(lname, "data center gpu flex")) return "xe-hpg";
    if (strstr(lname, "arc(tm) b") || strstr(lname, "arc b")) return "xe2";
    if (strstr(lname, "iris(r) xe") || strstr(lname, "uhd graphics 7")) return "xe-lp";
    return "gpu";
}

/* The device class used as the tuning fallback key: implementation + architecture, so a
 * PoCL CPU device is never mistaken for an Intel driver because of its vendor ID. */
void tdacl__classify_device(tdacl_device_info *info, uint32_t intel_ip_version)
{
    char plat[128], name[128], vendor[128];
    snprintf(plat, sizeof plat, "%s", info->platform_name);
    snprintf(name, sizeof name, "%s", info->name);
    snprintf(vendor, sizeof vendor, "%s", info->vendor);
    lower(plat), lower(name), lower(vendor);
    const char *impl = "generic";
    if (strstr(plat, "portable computing language") || strstr(plat, "pocl")) impl = "pocl";
    else if (strstr(plat, "oclgrind")) impl = "oclgrind";
    else if (strstr(vendor, "nvidia")) impl = "nvidia";
    else if (strstr(vendor, "advanced micro") || strstr(vendor, "amd")) impl = "amd";
    else if (strstr(vendor, "intel")) impl = "intel";
    else if (strstr(vendor, "apple")) impl = "apple";
    else if (strstr(vendor, "arm")) impl = "arm";
    else if (strstr(vendor, "qualcomm")) impl = "qualcomm";

    const char *kind = info->type == TDACL_DEVICE_CPU ? "cpu" : info->type == TDACL_DEVICE_GPU ? "gpu" : "dev";
    if (info->nv_cc_major > 0) {
        snprintf(info->arch, sizeof info->arch, "%s-sm_%d%d", impl, info->nv_cc_major,
                 info->nv_cc_minor);
    } else if (!strcmp(impl, "pocl") && info->type == TDACL_DEVICE_CPU) {
        /* PoCL names CPU devices "pthread-<llvm cpu>-<marketing name>" or "cpu-<llvm cpu>-..." */
        const char *p = strchr(name, '-');
        char cpu[48] = "generic";
        if (p) {
            const char *end = strstr(p + 1, "-intel");
            if (!end) end = strstr(p + 1, "-amd");
            if (!end) end = strstr(p + 1, "-");
            size_t n = end ? (size_t)(end - p - 1) : strlen(p + 1);
            /* keep "skylake-avx512" together: include a second token if it names an ISA */
            if (end && !strncmp(end, "-avx", 4)) {
                const char *e2 = strchr(end + 1, '-');
                n = e2 ? (size_t)(e2 - p - 1) : strlen(p + 1);
            }
            if (n >= sizeof cpu) n = sizeof cpu - 1;
            memcpy(cpu, p + 1, n);
            cpu[n] = 0;
        }
        snprintf(info->arch, sizeof info->arch, "pocl-cpu-%s", cpu);
    } else if (!strcmp(impl, "amd") && !strncmp(name, "gfx", 3)) {
        amd_arch(info, name);
    } else if (!strcmp(impl, "intel") && info->type == TDACL_DEVICE_GPU) {
        snprintf(info->arch, sizeof info->arch, "intel-%s", intel_gpu_family(intel_ip_version, name));
    } else {
        snprintf(info->arch, sizeof info->arch, "%s-%s", impl, kind);
    }
}

static void fill_info(tdacl_device_entry *e, int index)
{
    tdacl_device_info *info = &e->info;
    memset(info, 0, sizeof *info);
    info->index = index;
    clGetPlatformInfo(e->platform, CL_PLATFORM_NAME, sizeof info->platform_name,
                      info->platform_name, NULL);
    clGetPlatformInfo(e->platform, CL_PLATFORM_VERSION, sizeof info->platform_version,
                      info->platform_version, NULL);
    cl_device_id d = e->device;
    get_str(d, CL_DEVICE_NAME, info->name, sizeof info->name);
    get_str(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    get_str(d, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
    get_str(d, CL_DEVICE_VERSION, info->device_version, sizeof info->device_version);
    get_str(d, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version, sizeof info->opencl_c_version);
    get_str(d, CL_DEVICE_EXTENSIONS, info->extensions, sizeof info->extensions);
    info->vendor_id = get_u32(d, CL_DEVICE_VENDOR_ID);
    cl_device_type type = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    info->type = (type & CL_DEVICE_TYPE_GPU)           ? TDACL_DEVICE_GPU
                 : (type & CL_DEVICE_TYPE_CPU)         ? TDACL_DEVICE_CPU
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? TDACL_DEVICE_ACCELERATOR
                                                       : TDACL_DEVICE_OTHER;
    const char *x = info->extensions;
    info->has_fp16 = tdacl__has_extension(x, "cl_khr_fp16");
    info->has_fp64 = tdacl__has_extension(x, "cl_khr_fp64");
    info->has_subgroups = tdacl__has_extension(x, "cl_khr_subgroups") || tdacl__has_extension(x, "cl_intel_subgroups");
    info->has_int64_atomics = tdacl__has_extension(x, "cl_khr_int64_base_atomics");
    if (tdacl__has_extension(x, "cl_nv_device_attribute_query")) {
        info->nv_cc_major = (int)get_u32(d, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV);
        info->nv_cc_minor = (int)get_u32(d, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV);
    }
    /* the numeric fields: a cl_uint or a cl_ulong each */
    static const struct { cl_device_info what; size_t at; int wide; } numbers[] = {
        {CL_DEVICE_MAX_COMPUTE_UNITS, offsetof(tdacl_device_info, compute_units), 0},
        {CL_DEVICE_MAX_CLOCK_FREQUENCY, offsetof(tdacl_device_info, clock_mhz), 0},
        {CL_DEVICE_GLOBAL_MEM_SIZE, offsetof(tdacl_device_info, global_mem_bytes), 1},
        {CL_DEVICE_MAX_MEM_ALLOC_SIZE, offsetof(tdacl_device_info, max_alloc_bytes), 1},
        {CL_DEVICE_LOCAL_MEM_SIZE, offsetof(tdacl_device_info, local_mem_bytes), 1},
        {CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, offsetof(tdacl_device_info, vec_width_float), 0},
        {CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF, offsetof(tdacl_device_info, vec_width_half), 0},
        {CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, offsetof(tdacl_device_info, vec_width_double), 0},
        {CL_DEVICE_MEM_BASE_ADDR_ALIGN, offsetof(tdacl_device_info, mem_base_align_bits), 0},
    };
    for (size_t i = 0; i < TDACL_ARRAY_LEN(numbers); i++) {
        char *field = (char *)info + numbers[i].at;
        if (numbers[i].wide) {
            uint64_t v = get_u64(d, numbers[i].what);
            memcpy(field, &v, sizeof v);
        } else {
            uint32_t v = get_u32(d, numbers[i].what);
            memcpy(field, &v, sizeof v);
        }
    }
    cl_device_local_mem_type lt = 0;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lt, &lt, NULL);
    info->local_mem_is_dedicated = lt == CL_LOCAL;
    size_t wg = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    info->max_work_group_size = wg;
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof info->max_work_item_sizes,
                    info->max_work_item_sizes, NULL);
    size_t res = 0;
    clGetDeviceInfo(d, CL_DEVICE_PROFILING_TIMER_RESOLUTION, sizeof res, &res, NULL);
    info->profiling_timer_ns = (int)res;
    uint32_t ip = 0;
    if (tdacl__has_extension(x, "cl_intel_device_attribute_query")) ip = get_u32(d, CL_DEVICE_IP_VERSION_INTEL);
    tdacl__classify_device(info, ip);
}

static void enumerate(void)
{
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR: no ICD installed */ || (err == CL_SUCCESS && np == 0)) {
        enum_status = TDACL_SUCCESS;
        return;
    }
    if (err != CL_SUCCESS) {
        enum_status = tdacl__cl_status(err);
        snprintf(enum_error, sizeof enum_error, "clGetPlatformIDs failed: %s (%d)",
                 tdacl__cl_error_name(err), (int)err);
        return;
    }
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats || clGetPlatformIDs(np, plats, NULL) != CL_SUCCESS) {
        free(plats);
        enum_status = TDACL_ERR_OPENCL;
        snprintf(enum_error, sizeof enum_error, "clGetPlatformIDs could not list %u platforms", np);
        return;
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || !nd)
            continue;
        cl_device_id *ids = calloc(nd, sizeof *ids);
        tdacl_device_entry *grown = realloc(devices, (size_t)(device_count + (int)nd) * sizeof *devices);
        if (!ids || !grown) {
            free(ids);
            if (grown) devices = grown;
            enum_status = TDACL_ERR_OUT_OF_MEMORY;
            snprintf(enum_error, sizeof enum_error, "out of memory listing devices");
            break;
        }
        devices = grown;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) == CL_SUCCESS) {
            for (cl_uint i = 0; i < nd; i++) {
                tdacl_device_entry *e = &devices[device_count];
                e->platform = plats[p];
                e->device = ids[i];
                fill_info(e, device_count);
                device_count++;
            }
        }
        free(ids);
    }
    free(plats);
}

tdacl_status tdacl__devices(const tdacl_device_entry **list, int *count)
{
    pthread_once(&once, enumerate);
    *list = devices;
    *count = device_count;
    if (enum_status != TDACL_SUCCESS) return tdacl__fail(NULL, enum_status, "%s", enum_error);
    return TDACL_SUCCESS;
}

tdacl_status tdacl_device_count(int *count)
{
    if (!count) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_device_count: count is NULL");
    const tdacl_device_entry *l;
    return tdacl__devices(&l, count);
}

tdacl_status tdacl_device_get_info(int index, tdacl_device_info *info)
{
    if (!info) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_device_get_info: info is NULL");
    const tdacl_device_entry *l;
    int n;
    tdacl_status st = tdacl__devices(&l, &n);
    if (st) return st;
    if (index < 0 || index >= n)
        return tdacl__fail(NULL, TDACL_ERR_NO_DEVICE,
                           "tdacl_device_get_info: index %d is out of range (%d devices)", index, n);
    *info = l[index].info;
    return TDACL_SUCCESS;
}

static int icontains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return n == 0;
}

static int all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

tdacl_status tdacl_device_select(const char *selector, int *index)
{
    if (!index) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_device_select: index is NULL");
    const tdacl_device_entry *l;
    int n;
    tdacl_status st = tdacl__devices(&l, &n);
    if (st) return st;
    const char *from = "selector";
    if (!selector || !*selector) {
        selector = getenv("TDACL_DEVICE");
        from = "TDACL_DEVICE";
    }
    if (n == 0)
        return tdacl__fail(NULL, TDACL_ERR_NO_DEVICE,
                           "no OpenCL device found (no platform registered with the ICD loader; "
                           "on Debian: apt-get install pocl-opencl-icd)");
    if (!selector || !*selector) {
        for (int i = 0; i < n; i++)
            if (l[i].info.type == TDACL_DEVICE_GPU) { *index = i; return TDACL_SUCCESS; }
        *index = 0;
        return TDACL_SUCCESS;
    }
    if (all_digits(selector)) {
        long v = strtol(selector, NULL, 10);
        if (v >= 0 && v < n) { *index = (int)v; return TDACL_SUCCESS; }
    } else {
        for (int i = 0; i < n; i++)
            /* the class ("pocl-cpu-...", "nvidia-sm_90") too: PoCL's platform and device
             * names never contain "pocl", the name users type */
            if (icontains(l[i].info.name, selector) || icontains(l[i].info.platform_name, selector) ||
                icontains(l[i].info.arch, selector)) {
                *index = i;
                return TDACL_SUCCESS;
            }
    }
    char found[1536] = "";
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof found - 1; i++)
        off += (size_t)snprintf(found + off, sizeof found - off, "%s[%d] %s / %s", i ? "; " : "", i,
                                l[i].info.platform_name, l[i].info.name);
    return tdacl__fail(NULL, TDACL_ERR_NO_DEVICE, "%s '%s' matches no OpenCL device; found: %s",
                       from, selector, found);
}
