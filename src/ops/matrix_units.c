/* Which body of cl/mma.cl the matrix-unit variants compile with on a device (MMA_NATIVE):
 * NVIDIA's mma.sync natively; Intel DPAS and AMD MFMA/WMMA (cl/mma_units.cl) only with
 * $TDACL_EXPERIMENTAL_MATRIX=1, since they are compiled offline in CI but have not run on such
 * hardware; the portable body, or a vendor body with its instruction emulated, through
 * $TDACL_MMA_EMULATE on any device (CI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/variants.h"

static int env_is(const char *name, const char *value)
{
    const char *e = getenv(name);
    return e && !strcmp(e, value);
}

/* the vendor body a device class has, or 0 */
static int vendor_body(const tdacl_device_info *info, int *sg, const char **name)
{
    const char *a = info->arch;
    if (!strncmp(a, "intel-", 6) && tdacl__has_extension(info->extensions, "cl_intel_subgroup_matrix_multiply_accumulate")) {
        /* DPAS wants the device's smallest sub-group: 8 on Xe-HPG/Xe-LPG, 16 on Xe-HPC and Xe2 */
        *sg = (!strcmp(a, "intel-xe-hpg") || !strcmp(a, "intel-xe-lpg")) ? 8 : 16;
        *name = *sg == 8 ? "Intel DPAS (sub-group 8)" : "Intel DPAS (sub-group 16)";
        return TDACL_MMA_DPAS;
    }
    if (!strcmp(a, "amd-gfx90a") || !strncmp(a, "amd-gfx94", 9) || !strncmp(a, "amd-gfx95", 9))
        return *name = "AMD MFMA 4x4x4 (CDNA)", TDACL_MMA_MFMA;
    if (!strncmp(a, "amd-gfx11", 9)) return *name = "AMD WMMA 16x16x16 (RDNA3)", TDACL_MMA_WMMA;
    return 0;
}

void tdacl__mma_choose(const tdacl_device_info *info, tdacl_mma_choice *c)
{
    memset(c, 0, sizeof *c);
    c->body = -1;
    const char *emu = getenv("TDACL_MMA_EMULATE");
    if (emu && *emu && strcmp(emu, "0")) {
        static const struct { const char *value; int body, sg; const char *name; } emulated[] = {
            {"1", TDACL_MMA_PORTABLE, 0, "portable fragment body"},
            {"portable", TDACL_MMA_PORTABLE, 0, "portable fragment body"},
            {"dpas8", TDACL_MMA_DPAS, 8, "Intel DPAS sub-group 8, emulated"},
            {"dpas16", TDACL_MMA_DPAS, 16, "Intel DPAS sub-group 16, emulated"},
            {"mfma", TDACL_MMA_MFMA, 0, "AMD MFMA 4x4x4, emulated"},
            {"wmma", TDACL_MMA_WMMA, 0, "AMD WMMA 16x16x16, emulated"},
            {"wgmma", TDACL_MMA_PORTABLE, 0, "portable fragment body, with Hopper's warpgroup products"},
        };
        for (size_t i = 0; i < TDACL_ARRAY_LEN(emulated); i++)
            if (!strcmp(emu, emulated[i].value)) {
                c->body = emulated[i].body, c->sg = emulated[i].sg, c->name = emulated[i].name;
                c->emulate = emulated[i].body != TDACL_MMA_PORTABLE;
                c->wgmma = !strcmp(emu, "wgmma");
                return;
            }
        snprintf(c->why, sizeof c->why, "TDACL_MMA_EMULATE='%.24s' is not 1, portable, dpas8, dpas16, mfma, wmma or wgmma", emu);
        return;
    }
    if (info->nv_cc_major >= 8) {
        c->body = TDACL_MMA_PTX, c->hardware = 1, c->name = "mma.sync";
        /* wgmma is sm_90 alone (sm_90a PTX: neither earlier nor later architectures run it) */
        c->wgmma = info->nv_cc_major == 9 && info->nv_cc_minor == 0;
        return;
    }
    const char *name = NULL;
    int sg = 0;
    const int body = vendor_body(info, &sg, &name);
    if (!body) {
        snprintf(c->why, sizeof c->why, "%s has no matrix units this library drives (NVIDIA sm_80+; Intel DPAS, AMD "
                 "MFMA/WMMA; TDACL_MMA_EMULATE=1 runs the portable body)", info->name);
        return;
    }
    if (!env_is("TDACL_EXPERIMENTAL_MATRIX", "1")) {
        snprintf(c->why, sizeof c->why, "%s: %s body compiled, not yet run on hardware (TDACL_EXPERIMENTAL_MATRIX=1 "
                 "enables it)", info->name, name);
        c->offered = name;
        return;
    }
    c->body = body, c->sg = sg, c->name = name, c->hardware = 1, c->experimental = 1;
}

void tdacl__mma_options(const tdacl_mma_choice *c, tdacl_strbuf *sb)
{
    tdacl__sb_printf(sb, "-DMMA_NATIVE=%d -DMMA_EMULATE=%d", c->body, c->emulate);
    /* DPAS is defined for one sub-group size, which the hardware build then requires */
    if (c->body == TDACL_MMA_DPAS) tdacl__sb_printf(sb, " -DMMA_SG=%d", c->sg);
    if (c->body == TDACL_MMA_DPAS && c->hardware) tdacl__sb_printf(sb, " -DTDACL_SUBGROUP=%d", c->sg);
}
