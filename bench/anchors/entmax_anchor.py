#!/usr/bin/env python3
"""alpha-entmax attention against the public implementations, on one CUDA GPU:

  check: our `entmax` kind (the Python package over this build's library, on the OpenCL
         device) against the PyPI `entmax` package (entmax15, sparsemax, entmax_bisect, in
         float64 on the GPU over each row's visible keys) at alpha 1.25, 1.5, 2, 3, with and
         without ASEntmax's length-adaptive temperature, and against AdaSplash's forward
         (v1 at alpha 1.5 and 2, v2 at 1.5) -> the largest error of each, printed and in --out
  time:  AdaSplash's forward (`adasplash` v2 and v1, alpha 1.5, causal) and PyTorch SDPA
         bf16 at B=4, H=8, d=64 for each T of --T, CUDA events as tdacl-bench times -> rows
         in tdacl-bench's JSON schema (name=entmax impl=adasplash-v2|adasplash-v1,
         name=softmax impl=pytorch-sdpa) in --anchors, so `tdacl-bench --compare` prints
         ratios (without --anchors: the checks only).

Needs torch, triton, the `entmax` and `adasplash` wheels (bench/gpu-entmax-anchor.sh carries
them), and TDACL_LIBRARY / PYTHONPATH for our package.
"""
import argparse, json, math, sys

import numpy as np
import torch
import torch.nn.functional as F

from anchors import row, timed, write_run


def pypi_rows(q, k, v, alpha, temp):
    """Each row of each head through the entmax package over its visible keys (float64)."""
    import entmax

    B, H, T, d = q.shape
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d)
    out = torch.zeros(B, H, T, v.shape[-1], dtype=torch.float64, device=q.device)
    for i in range(T):
        n = i + 1
        z = s[:, :, i, :n] * (temp[0] + temp[1] * math.log(n) ** temp[2] if n > 1 else temp[0])
        if alpha == 1.5:
            p = entmax.entmax15(z, dim=-1)
        elif alpha == 2.0:
            p = entmax.sparsemax(z, dim=-1)
        else:
            p = entmax.entmax_bisect(z, alpha=alpha, dim=-1, n_iter=200)
        out[:, :, i] = torch.einsum("bhj,bhjc->bhc", p, v[:, :, :n])
    return out


def check(ctx, errors):
    import tdacl

    torch.manual_seed(1)
    B, H, T, d = 1, 2, 128, 64  # AdaSplash takes power-of-two lengths
    q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64, device="cuda") for _ in range(3))
    for alpha in (1.25, 1.5, 2.0, 3.0):
        for temp in ((1.0, 0.0, 1.0), (1.0, 0.5, 1.0)):
            want = pypi_rows(q, k, v, alpha, temp).cpu().numpy()
            got = ctx.attention(q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), "entmax", alpha=alpha, temp=temp)
            err = float(np.abs(got - want).max())
            errors.append({"against": "pypi-entmax", "alpha": alpha, "temp": list(temp), "max_abs_error": err,
                           "scale": float(np.abs(want).max())})
            print(f"entmax alpha={alpha} temp={temp}: max |ours - entmax package| = {err:.3g}", flush=True)
    import adasplash

    qh, kh, vh = (x.to(torch.float16) for x in (q, k, v))  # AdaSplash's kernels take 16-bit inputs
    for name, fn, alpha in (("adasplash-v1", lambda: adasplash.adasplash_v1(qh, kh, vh, alpha=1.5, is_causal=True), 1.5),
                            ("adasplash-v1", lambda: adasplash.adasplash_v1(qh, kh, vh, alpha=2.0, is_causal=True), 2.0),
                            ("adasplash-v2", lambda: adasplash.adasplash_v2(qh, kh, vh), 1.5)):
        try:
            theirs = fn().double().cpu().numpy()
        except Exception as e:  # a Triton build or shape it refuses
            print(f"{name} alpha={alpha}: not run ({type(e).__name__}: {e})", flush=True)
            continue
        ours = ctx.attention(qh.cpu().numpy(), kh.cpu().numpy(), vh.cpu().numpy(), "entmax", alpha=alpha, dtype="f16")
        want = pypi_rows(qh.double(), kh.double(), vh.double(), alpha, (1.0, 0.0, 1.0)).cpu().numpy()
        e1, e2 = float(np.abs(ours - theirs).max()), float(np.abs(theirs - want).max())
        e3 = float(np.abs(ours - want).max())
        errors.append({"against": name, "alpha": alpha, "ours_vs_theirs": e1, "theirs_vs_pypi": e2, "ours_vs_pypi": e3})
        print(f"{name} alpha={alpha}: |ours - theirs| {e1:.3g}, |theirs - entmax package| {e2:.3g}, "
              f"|ours - entmax package| {e3:.3g}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", default="1024,4096,8192")
    ap.add_argument("--out", required=True, help="the checks (JSON)")
    ap.add_argument("--anchors", help="the timed rows (tdacl-bench JSON); none: the checks only")
    a = ap.parse_args()
    import tdacl

    ctx = tdacl.Context("nvidia")
    errors = []
    check(ctx, errors)
    with open(a.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "checks": errors}, f, indent=1)
    if not a.anchors:
        return 0
    import adasplash

    dev = torch.cuda.get_device_name(0)
    rows = []
    B, H, d = 4, 8, 64
    for T in [int(x) for x in a.T.split(",")]:
        q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for impl, fn in (("adasplash-v2", lambda: adasplash.adasplash_v2(q, k, v)),
                         ("adasplash-v1", lambda: adasplash.adasplash_v1(q, k, v, alpha=1.5, is_causal=True))):
            try:
                t = timed(fn)
                r = row("entmax", impl, "bf16", B, H, T, d, t, dev, note="alpha 1.5, causal, forward")
                r["alpha"] = 1.5
                rows.append(r)
                print(f"{impl} bf16 T={T}: {t['median']:.3f} ms", flush=True)
            except Exception as e:  # a Triton build or shape it refuses
                print(f"{impl} bf16 T={T}: skipped ({type(e).__name__}: {e})", flush=True)
        t = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        rows.append(row("softmax", "pytorch-sdpa", "bf16", B, H, T, d, t, dev))
        print(f"sdpa bf16 T={T}: {t['median']:.3f} ms", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    write_run(a.anchors, rows, dev, {"torch": torch.__version__})


if __name__ == "__main__":
    sys.exit(main())
