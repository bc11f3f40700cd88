"""Runs gemm_mma from the PTX that NVIDIA's OpenCL compiler produced (the program cache holds
it) through the CUDA driver API, so that Nsight Compute can profile exactly that code (see
ptx_attention.py for why).  Arguments follow cl/gemm_mma.cl's signature; the build options
(from the cache key) give the tile.  c = a @ b, all bf16, no epilogue, one K chunk.

    python3 ptx_gemm.py --ptx gemm0.ptx --opts "... -DGMM_BM=64 -DGMM_BN=128 ..." --M 8192 --N 3072 --K 768
"""
import argparse, ctypes

import torch
from cuda.bindings import driver as cu

from ptx_common import check, launch_median_ms, load_kernel, opt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx", required=True)
    ap.add_argument("--opts", required=True)
    ap.add_argument("--M", type=int, default=8192)
    ap.add_argument("--N", type=int, default=3072)
    ap.add_argument("--K", type=int, default=768)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    bm, bn = opt(a.opts, "GMM_BM", 128), opt(a.opts, "GMM_BN", 128)
    nt = 32 * opt(a.opts, "GMM_WM", 2) * opt(a.opts, "GMM_WN", 2)
    M, N, K = a.M, a.N, a.K
    torch.manual_seed(0)
    dev = torch.device("cuda")
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(K, N, device=dev, dtype=torch.bfloat16) / K ** 0.5
    c = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
    check(cu.cuInit(0))
    torch.cuda.synchronize()
    fn, text = load_kernel(a.ptx, "gemm_mma")
    p = lambda t: ctypes.c_uint64(t.data_ptr() if t is not None else 0)
    i32 = ctypes.c_int32
    args = [p(c), p(x), p(w), p(None), p(None), i32(M), i32(N), i32(K), i32(K), i32(N), i32(N), i32(0), p(None), i32(K)]
    grid = ((N + bn - 1) // bn, (M + bm - 1) // bm, 1)
    ms = launch_median_ms(fn, text, "gemm_mma", args, grid, nt, a.reps)
    err = (c.float() - x.float() @ w.float()).abs().max().item()
    print("gemm %dx%dx%d grid %s block %d: %.4f ms = %.1f TFLOP/s, max |c - ref| %.3g"
          % (M, N, K, grid, nt, ms, 2.0 * M * N * K / ms / 1e9, err))


if __name__ == "__main__":
    main()
