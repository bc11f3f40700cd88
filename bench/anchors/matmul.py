"""torch.addmm in bf16 (cuBLAS) on the shapes of tdacl-bench's gemm suite (GPT-2 small's
projections, M = 1024 and 8192 rows): c = bias + a @ w, all bf16, timed with CUDA events.
Rows in tdacl-bench's JSON schema (suite gemm, name gemm_bias), so
`tdacl-bench --load ours.json --compare this.json` prints ours against cuBLAS.  Each timing
is written under two dtype labels: "bf16act" (ours with bf16 a and c, as torch's: the like
for like row) and "bf16" (ours with bf16 weights and fp32 a and c).

    python3 bench/anchors/matmul.py --out matmul-anchors.json
"""
import argparse, datetime, json

import torch

from anchors import timed

SHAPES = [(2304, 768), (768, 768), (3072, 768), (768, 3072)]  # (N, K): qkv, attn out, MLP up, down


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--M", default="1024,8192")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.cuda.get_device_name(0)
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for m in [int(x) for x in args.M.split(",")]:
        for n, k in SHAPES:
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
            w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g)
            bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            times = timed(lambda: torch.addmm(bias, a, w, out=c))
            fl = 2.0 * m * n * k
            for label in ("bf16act", "bf16"):
                rows.append({"suite": "gemm", "name": "gemm_bias", "impl": "torch-addmm", "device": dev,
                             "device_index": 0, "dtype": label, "path": "", "shape": {"M": m, "N": n, "K": k},
                             "time_ms": times, "flops": fl, "tflops": fl / (times["median"] * 1e-3) * 1e-12})
            print("torch.addmm bf16 M%d N%d K%d: %.4f ms (%.0f TFLOP/s)" % (m, n, k, times["median"], rows[-1]["tflops"]))
    out = {"schema": "tdacl-bench/1",
           "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "library": "torch " + torch.__version__, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote %d rows to %s" % (len(rows), args.out))


if __name__ == "__main__":
    main()
