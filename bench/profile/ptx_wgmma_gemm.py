"""Runs gemm_wgmma of bench/probes/wgmma_gemm_probe.c from the sm_90a PTX that probe saved
through the CUDA driver API: is the same code faster there than through NVIDIA's OpenCL, and
(under Nsight Compute) where does it stall?  c = a @ b, bf16, b [K, N] (MN-major) or, with
--kmajor, given as bt [N, K].

    python3 ptx_wgmma_gemm.py --ptx OUT/gemm-bn128-s3-p0-w20-k1-m0-x0.ptx --bn 128 --kmajor --M 8192 --N 3072 --K 768
"""
import argparse, ctypes

import torch
from cuda.bindings import driver as cu

from ptx_common import check, launch_median_ms, load_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx", required=True)
    ap.add_argument("--bn", type=int, default=128)
    ap.add_argument("--wgs", type=int, default=2, help="warpgroups a work-group (128 rows of c for 2)")
    ap.add_argument("--kmajor", action="store_true")
    ap.add_argument("--M", type=int, default=8192)
    ap.add_argument("--N", type=int, default=3072)
    ap.add_argument("--K", type=int, default=768)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--lead", type=int, default=128,
                    help="B's descriptor offsets in bytes (the probe's b_lead, b_stride): 128 / 512 for the no-swizzle "
                         "K-major form, 16 / 512 swizzled K-major, 512 / BN x 16 swizzled MN-major")
    ap.add_argument("--stride", type=int, default=512)
    a = ap.parse_args()
    M, N, K = a.M, a.N, a.K
    torch.manual_seed(0)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    wb = w.t().contiguous() if a.kmajor else w
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    check(cu.cuInit(0))
    torch.cuda.synchronize()
    fn, text = load_kernel(a.ptx, "gemm_wgmma")
    p = lambda t: ctypes.c_uint64(t.data_ptr())
    i32 = ctypes.c_int32
    args = [p(x), p(wb), p(c), i32(M), i32(N), i32(K), i32(a.lead), i32(a.stride)]
    grid = (N // a.bn, M // (64 * a.wgs), 1)
    ms = launch_median_ms(fn, text, "gemm_wgmma", args, grid, 128 * a.wgs, a.reps)
    err = (c.float() - x.float() @ w.float()).abs().max().item()
    print("gemm_wgmma %dx%dx%d through the CUDA driver: %.4f ms = %.1f TFLOP/s, max |c - ref| %.3g"
          % (M, N, K, ms, 2.0 * M * N * K / ms / 1e9, err))


if __name__ == "__main__":
    main()
