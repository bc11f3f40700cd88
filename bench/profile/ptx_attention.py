"""Runs attention_mma_fwd from the PTX that NVIDIA's OpenCL compiler produced (the program
cache holds it) through the CUDA driver API, so that Nsight Compute, which cannot attach to
OpenCL kernels, can profile exactly that code.  The arguments follow cl/attention_mma.cl's
signature; the build options (from the cache key) give the tile.

    python3 ptx_attention.py --ptx kind2.ptx --opts "-DKIND=2 ... -DBN=64 -DNWARPS=4 -DMT=2" --T 8192
"""
import argparse, ctypes, math

import torch
from cuda.bindings import driver as cu

from ptx_common import check, launch_median_ms, load_kernel, opt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx", required=True)
    ap.add_argument("--opts", required=True)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--T", type=int, default=8192)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    kind, D, DV = opt(a.opts, "KIND"), opt(a.opts, "D"), opt(a.opts, "DV")
    nwarps, mt, kinv_on = opt(a.opts, "NWARPS", 4), opt(a.opts, "MT", 1), opt(a.opts, "KINV", 0)
    nt, bm = 32 * nwarps, 16 * mt * nwarps
    B, H, T, d = a.B, a.H, a.T, D
    two = kind in (3, 4)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    mk = lambda: torch.randn(B, H, T, d, device=dev, dtype=torch.bfloat16)
    q, k, v = mk(), mk(), mk()
    q2, k2 = (mk(), mk()) if two else (q, k)
    odt = {0: torch.float32, 1: torch.bfloat16, 2: torch.float16}[opt(a.opts, "ODT", 0)]
    out = torch.empty(B, H, T, DV, device=dev, dtype=odt)
    inv = lambda x: (1.0 / x.float().norm(dim=-1).clamp_min(1e-30)).reshape(-1).contiguous()
    qinv, kinv, q2inv, k2inv = (inv(q), inv(k), inv(q2), inv(k2)) if kinv_on else (None,) * 4
    check(cu.cuInit(0))
    torch.cuda.synchronize()
    ctx = check(cu.cuCtxGetCurrent())
    fn, text = load_kernel(a.ptx, "attention_mma_fwd")

    keep = []
    def ptr(t):
        return ctypes.c_uint64(t.data_ptr() if t is not None else 0)
    def long4(t):
        st = t.stride()
        return (ctypes.c_int64 * 4)(*st)
    scale = 1.0 if kind in (2, 3) and kinv_on else 1.0 / math.sqrt(d)
    args = [ptr(q), ptr(k), ptr(v), ptr(q2 if two else None), ptr(k2 if two else None),
            ptr(qinv), ptr(kinv), ptr(q2inv if two else None), ptr(k2inv if two else None),
            ptr(None), ptr(None), ptr(out), ptr(None),
            long4(q), long4(k), long4(v), long4(q2), long4(k2), long4(out),
            *[ctypes.c_int64(0) for _ in range(6)],
            ctypes.c_int32(H), ctypes.c_int64(T), ctypes.c_int64(T), ctypes.c_int64(0), ctypes.c_int32(d), ctypes.c_int32(DV),
            ctypes.c_float(scale), ctypes.c_float(a.beta), ctypes.c_float(1.0), ctypes.c_int32(2), ctypes.c_float(2.0),
            ctypes.c_float(0.5), ctypes.c_int32(0), ctypes.c_float(1e-6), ctypes.c_float(1.0), ctypes.c_int32(0)]
    grid = (1, B * H, (T + bm - 1) // bm)
    ms = launch_median_ms(fn, text, "attention_mma_fwd", args, grid, nt, a.reps)
    print("kind %d grid %s block %d: %.4f ms (median of %d)" % (kind, grid, nt, ms, a.reps))
    print("out finite:", bool(torch.isfinite(out.float()).all()), "mean |out|: %.4g" % out.float().abs().mean().item())


if __name__ == "__main__":
    main()
