#!/usr/bin/env python3
"""Time the reference implementations libtdacl is compared with, on one CUDA GPU, and
write them in tdacl-bench's JSON schema (tdacl-bench/1) so that
`tdacl-bench --compare anchors.json` prints our/anchor ratios row by row.

  PyTorch SDPA (causal), fp32 and bf16            -> rows name=softmax impl=pytorch-sdpa
    (whatever backend PyTorch picks; the row's note names the kernel that ran: on an H200 with
    torch 2.11 that is cuDNN's sm90 wgmma kernel, not FlashAttention-2)
  FlashAttention-2 itself, bf16: SDPA held to its flash backend
                                                  -> rows name=softmax impl=fa2
  the TDA authors' Triton TRA and TDA (fp32 in)   -> rows name=tra|tda impl=authors-triton
    (only with --triton PATH/triton_threshold_attention.py; the file is never committed)

Shapes follow docs/spec.md section 5: B=4, H=8, d=64, causal, T in --T.  Inputs are random unit
vectors for tra/tda (beta=1), as in the SPEC's density sweep.  Timing: CUDA events,
warm-up, median of >= 10 runs and >= 100 ms, as tdacl-bench does.
"""
import argparse, datetime, importlib.util, json, math, statistics, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend
from torch.nn.attention import sdpa_kernel as sdpa_backend
from torch.profiler import ProfilerActivity, profile


def timed(fn, min_samples=10, min_ms=100.0, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples, total = [], 0.0
    while len(samples) < min_samples or total < min_ms:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        samples.append(ms)
        total += ms
        if len(samples) >= 1000:
            break
    s = sorted(samples)
    q = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]
    med = statistics.median(s)
    return {"min": s[0], "median": med, "max": s[-1], "mean": sum(s) / len(s),
            "spread": (q(0.9) - q(0.1)) / med if med > 0 else 0.0, "noisy": False, "samples": samples}


def sdpa_kernel_name(fn):
    """The longest-running CUDA kernel of one call of fn (which backend SDPA took)."""
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in p.key_averages() if e.device_type.name == "CUDA" and not e.key.startswith("Memset")]
    if not kernels:
        return "?"
    return max(kernels, key=lambda e: e.device_time_total).key[:100]


def attention_flops(kind, bh, t, d):
    pairs = t * (t + 1) / 2
    per_pair = 2 * (2 * d) + 2 * d if kind in ("tda", "diff_softmax") else 2 * d + 2 * d
    return bh * pairs * per_pair


def row(name, impl, dtype, B, H, T, d, times, device, beta=None, note=None):
    r = {"suite": "attention", "name": name, "impl": impl, "device": device, "device_index": 0,
         "dtype": dtype, "path": "prefill", "shape": {"B": B, "H": H, "Tq": T, "Tk": T, "d": d, "dv": d},
         "time_ms": times}
    if beta is not None:
        r["beta"] = beta
    fl = attention_flops(name, B * H, T, d)
    r["flops"] = fl
    r["tflops"] = fl / (times["median"] * 1e-3) * 1e-12
    if note:
        r["note"] = note
    return r


def write_run(path, rows, dev, options):
    """The rows as a tdacl-bench/1 run file (what `tdacl-bench --compare` reads)."""
    out = {"schema": "tdacl-bench/1", "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "library": {"version": "anchors", "git": "n/a"}, "options": options,
           "devices": [{"index": 0, "name": dev, "type": "gpu"}], "rows": rows}
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {len(rows)} rows to {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", default="1024,4096,8192,16384,32768")
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--triton", help="path of the authors' triton_threshold_attention.py")
    ap.add_argument("--skip", default="", help="comma list of impls to skip (sdpa-fp32,sdpa-bf16,fa2,tra,tda)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dev = torch.cuda.get_device_name(0)
    skip = set(filter(None, a.skip.split(",")))
    authors = None
    if a.triton:
        spec = importlib.util.spec_from_file_location("authors_triton", a.triton)
        authors = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(authors)
    rows = []
    torch.manual_seed(0)
    for T in [int(x) for x in a.T.split(",")]:
        shape = (a.B, a.H, T, a.d)
        for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            if f"sdpa-{tag}" in skip:
                continue
            try:
                q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
                sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                t = timed(sdpa)
                kernel = sdpa_kernel_name(sdpa)
                rows.append(row("softmax", "pytorch-sdpa", tag, a.B, a.H, T, a.d, t, dev, note="kernel " + kernel))
                print(f"sdpa {tag} T={T}: {t['median']:.3f} ms ({kernel})", flush=True)
                if tag == "bf16" and "fa2" not in skip:
                    with sdpa_backend(SDPBackend.FLASH_ATTENTION):
                        t = timed(sdpa)
                        kernel = sdpa_kernel_name(sdpa)
                    rows.append(row("softmax", "fa2", tag, a.B, a.H, T, a.d, t, dev,
                                    note="SDPA held to its flash backend, kernel " + kernel))
                    print(f"fa2 {tag} T={T}: {t['median']:.3f} ms ({kernel})", flush=True)
                del q, k, v
            except Exception as e:  # out of memory or no kernel for this shape
                print(f"sdpa {tag} T={T}: skipped ({type(e).__name__}: {e})", flush=True)
            torch.cuda.empty_cache()
        if authors is None:
            continue
        unit = lambda: F.normalize(torch.randn(shape, device="cuda"), dim=-1)
        beta = torch.tensor(1.0)
        if "tra" not in skip:
            q, k, v = unit(), unit(), torch.randn(shape, device="cuda")
            t = timed(lambda: authors.threshold_rela_triton(q, k, v, beta, relu_power=2.0))
            rows.append(row("tra", "authors-triton", "f32", a.B, a.H, T, a.d, t, dev, beta=1.0,
                            note="fp32 inputs, TF32 tl.dot, visits every key tile"))
            print(f"authors tra T={T}: {t['median']:.3f} ms", flush=True)
            del q, k, v
        if "tda" not in skip:
            q1, q2, k1, k2, v = unit(), unit(), unit(), unit(), torch.randn(shape, device="cuda")
            lam = torch.tensor(0.5)
            t = timed(lambda: authors.differential_threshold_rela_triton(q1, q2, k1, k2, v, beta, lam,
                                                                          relu_power=2.0, normalize=True))
            rows.append(row("tda", "authors-triton", "f32", a.B, a.H, T, a.d, t, dev, beta=1.0,
                            note="two TRA calls plus normalisation"))
            print(f"authors tda T={T}: {t['median']:.3f} ms", flush=True)
            del q1, q2, k1, k2, v
        torch.cuda.empty_cache()
    write_run(a.out, rows, dev, {"torch": torch.__version__, "triton_file": bool(a.triton)})


if __name__ == "__main__":
    sys.exit(main())
