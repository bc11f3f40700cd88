#!/usr/bin/env python3
"""Hugging Face transformers anchor for tdacl's forward suite: GPT2LMHeadModel itself (GPT-2
small, random weights, no download), attn_implementation "sdpa", in fp32 and bf16 (and, with
--compile, torch.compile of the same model where it works offline), timed with CUDA events
and written in tdacl-bench's JSON schema (tdacl-bench/1) under the forward suite's row names,
so that `tdacl-bench --load ours.json --compare gpt_hf.json` prints our/transformers ratios.

Model: n_layer 12, n_head 12, n_embd 768, vocab 50257, learned positions (n_positions large
enough for the longest T or context), the architecture of tdacl-bench's "softmax" forward model.

Measured (median of >= 10 runs and >= 100 ms, after warm-up, as gpt_eager.py does):
  prefill  batch B in --B (1, 8) x T in --T (1024, 4096): one call model(ids, use_cache=True)
           from an empty cache, logits of the last position only (logits_to_keep=1), as
           tdacl-bench's forward suite times its prefill
  decode   batch 1, context in --ctx (1024, 8192): one token appended to a cache of ctx - 1
           tokens (a DynamicCache cropped back to ctx - 1 before every sample, untimed)

Rows: suite "forward", impl "hf-transformers" (or "hf-transformers-compile"), dtype "f32" or
"bf16", name "softmax-prefill" | "softmax-decode", shape {B, T, Tq, Tk, M, N, K}, nominal
FLOPs as gpt_eager.py counts them.

Example (GPU host, offline):  python3 bench/anchors/gpt_hf.py --out gpt_hf.json
"""
import argparse, datetime, inspect, json, os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_eager import Config, forward_flops, ints, timed  # noqa: E402


def row(cfg, impl, dtype, path, B, T, Tk, times, device_name, note):
    fl = forward_flops(cfg, B, T, Tk, 1)
    return {"suite": "forward", "name": f"softmax-{path}", "impl": impl, "device": device_name, "device_index": 0,
            "dtype": dtype, "path": path,
            "shape": {"B": B, "T": T, "Tq": T, "Tk": Tk, "M": B * T, "N": cfg.vocab_size, "K": cfg.n_embd},
            "time_ms": times, "flops": fl, "tflops": fl / (times["median"] * 1e-3) * 1e-12, "logits": "last",
            "position": "learned", "note": note}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--T", default="1024,4096", help="prefill lengths")
    ap.add_argument("--B", default="1,8", help="prefill batch sizes")
    ap.add_argument("--ctx", default="1024,8192", help="decode contexts (batch 1)")
    ap.add_argument("--compile", action="store_true", help="also torch.compile the model (rows impl hf-transformers-compile)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls in the fp32 rows (default: true fp32)")
    ap.add_argument("--out", required=True, help="JSON output (tdacl-bench/1)")
    a = ap.parse_args()
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    dev_name = torch.cuda.get_device_name(device)
    Ts, Bs, ctxs = ints(a.T), ints(a.B), ints(a.ctx)
    n_pos = max(Ts + ctxs) + 64
    cfg = Config(12, 12, 768, 50257, n_pos, kind="softmax", position="learned", head_norm="none")
    rows = []

    def save():
        out = {"schema": "tdacl-bench/1", "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "library": {"version": "anchors", "git": "n/a"},
               "options": {"torch": torch.__version__, "transformers": transformers.__version__, "tf32": a.tf32},
               "devices": [{"index": 0, "name": dev_name, "type": "gpu"}], "rows": rows}
        with open(a.out + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.out + ".tmp", a.out)

    torch.manual_seed(0)
    hf_cfg = GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=n_pos,
                        attn_implementation="sdpa")
    base = GPT2LMHeadModel(hf_cfg).eval()
    keep = "logits_to_keep" in inspect.signature(base.forward).parameters
    gen = torch.Generator(device="cpu").manual_seed(1)
    impls = [("hf-transformers", False)] + ([("hf-transformers-compile", True)] if a.compile else [])
    for dname in [d for d in a.dtypes.split(",") if d]:
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dname]
        model = base.to(device=device, dtype=dtype)
        for impl, comp in impls:
            fwd = torch.compile(model) if comp else model
            note = (f"transformers {transformers.__version__} GPT2LMHeadModel sdpa {dname}"
                    f"{', torch.compile' if comp else ''}{', TF32' if a.tf32 and dname == 'f32' else ''}")
            extra = {"logits_to_keep": 1} if keep else {}
            with torch.no_grad():
                for T in Ts:
                    for B in Bs:
                        try:
                            tok = torch.randint(0, cfg.vocab_size, (B, T), generator=gen).to(device)
                            t = timed(lambda: fwd(input_ids=tok, use_cache=True, **extra), device)
                            rows.append(row(cfg, impl, dname, "prefill", B, T, T, t, dev_name, note))
                            print(f"{impl} {dname} prefill B={B} T={T}: {t['median']:.3f} ms", flush=True)
                            save()
                        except Exception as e:  # out of memory, a compile failure: say so, go on
                            print(f"{impl} {dname} prefill B={B} T={T}: skipped ({type(e).__name__}: {str(e)[:120]})", flush=True)
                        torch.cuda.empty_cache()
                for ctx in ctxs:
                    try:
                        tok = torch.randint(0, cfg.vocab_size, (1, ctx), generator=gen).to(device)
                        past = fwd(input_ids=tok[:, : ctx - 1], use_cache=True, **extra).past_key_values
                        nxt = tok[:, ctx - 1 :]
                        t = timed(lambda: fwd(input_ids=nxt, past_key_values=past, use_cache=True, **extra), device,
                                  prepare=lambda: past.crop(ctx - 1))
                        rows.append(row(cfg, impl, dname, "decode", 1, 1, ctx, t, dev_name, note))
                        print(f"{impl} {dname} decode ctx={ctx}: {t['median']:.3f} ms", flush=True)
                        save()
                    except Exception as e:
                        print(f"{impl} {dname} decode ctx={ctx}: skipped ({type(e).__name__}: {str(e)[:120]})", flush=True)
                    torch.cuda.empty_cache()
    save()


if __name__ == "__main__":
    main()
