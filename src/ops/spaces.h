/* The tuning spaces of the kernel variants (spaces.c); the variant registry names them. */
#ifndef TDACL_SPACES_H
#define TDACL_SPACES_H

#include "runtime/tuning.h"

extern const tdacl_kernel_space tdacl__attention_space;     /* cl/attention.cl */
extern const tdacl_kernel_space tdacl__attention_mma_space; /* cl/attention_mma.cl */
/* entmax's threshold pass (cl/attention_mma.cl ENTMAX_BUF) runs on its own tile: 32-key
 * tiles, one m-tile a warp, at most 4 warps (room for the rows' kept scores), v's K stages */
void tdacl__entmax_pass_tile(const tdacl_kernel_space *ks, const tdacl_param_values *v, tdacl_param_values *tile);
/* ... and the slots a lane for its kept scores on tile t: what local_mem leaves, at most 32 */
int tdacl__entmax_pass_slots(const tdacl_kernel_space *ks, const tdacl_problem *p, const tdacl_param_values *t,
                             uint64_t local_mem);
extern const tdacl_kernel_space tdacl__decode_space;        /* cl/attention_decode.cl */
extern const tdacl_kernel_space tdacl__decode_mma_space;    /* cl/attention_mma.cl, SPLIT 1 */
extern const tdacl_kernel_space tdacl__entmax_space;        /* cl/attention_entmax.cl */
extern const tdacl_kernel_space tdacl__entmax_decode_space; /* the same kernel, decode's defaults */
extern const tdacl_kernel_space tdacl__topk_space;          /* cl/attention_topk.cl */
extern const tdacl_kernel_space tdacl__topk_decode_space;   /* the same kernel, decode's defaults */

/* Query rows of the tensor-core decode: one warp's m-tile (TQP of its split form). */
#define TDACL_DECODE_MMA_ROWS 16
extern const tdacl_kernel_space tdacl__gemm_space;          /* cl/layers.cl gemm */
extern const tdacl_kernel_space tdacl__gemm_mma_space;      /* cl/gemm_mma.cl */
extern const tdacl_kernel_space tdacl__gemm_wgmma_space;    /* cl/gemm_mma.cl with GMM_WG, cl/wgmma.cl */

/* Query rows of a decode call rounded up to a power of two (TQP in cl/attention_decode.cl). */
int tdacl__decode_tqp(int64_t tq);
/* Keys a decode round scores (LIST in cl/attention_decode.cl). */
int tdacl__decode_list(int ntd, int tqp);

#endif
