/* The device probes of tdacl_measure_peak (peak.c). */
#ifndef TDACL_PEAK_H
#define TDACL_PEAK_H

#include "ops/variants.h"

/* The peak.mma row: NVIDIA compute capability >= 8.0 (call: unused). */
int tdacl__peak_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);

#endif
