#!/usr/bin/env python3
"""Which kernel PyTorch's scaled_dot_product_attention runs by default on this GPU, and the time
of each of its backends (default, flash = FlashAttention-2, cudnn, efficient), bf16, B=4, H=8,
causal, d in 64 and 128, T = 4096..32768.  CUDA events over 20 calls after 3 warm-up calls.

    python3 bench/probes/sdpa_backends.py

(bench/anchors/anchors.py writes both the default backend's rows, impl pytorch-sdpa, and
FlashAttention-2's, impl fa2, for the bench tables.)"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile


def timed(fn, n=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n


def kernels(fn):
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    return [e.key for e in p.key_averages() if e.device_type.name == "CUDA"]


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version())
    backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION))
    for d in (64, 128):
        for T in (4096, 8192, 16384, 32768):
            q, k, v = (torch.randn(4, 8, T, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out = ["default %.4f" % timed(f), "default-kernels=" + "|".join(k[:90] for k in kernels(f))]
            for name, be in backends:
                try:
                    with sdpa_kernel(be):
                        out.append("%s %.4f" % (name, timed(f)))
                except RuntimeError as ex:
                    out.append("%s failed (%s)" % (name, str(ex)[:60]))
            print("d%d T%d " % (d, T) + "  ".join(out), flush=True)


if __name__ == "__main__":
    main()
