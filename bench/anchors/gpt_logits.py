"""The logits error of each storage mode of our forward pass on a GPT-2-small checkpoint written
by Hugging Face transformers (random weights, seed 0), against transformers' own forward in
float64 on the GPU (the reference) and, beside it, transformers in fp32 and in bf16:

    python3 bench/anchors/gpt_logits.py --tdacl build-gpu/tdacl --out logits.json

Ours runs through `tdacl forward` (one process per sequence and mode): f32; bf16 weights with
fp32 activations, exact and at TDACL_PRECISION=bf16; bf16 weights and bf16 activations
(--activations bf16, docs/spec.md section 4.6).  Per mode: NMSE = sum (x - ref)^2 / sum ref^2,
max |x - ref| / max |ref|, and the share of positions whose arg-max token equals the
reference's.  Two sequences of --T random tokens.
"""
import argparse, json, os, subprocess, sys, tempfile

import numpy as np
import torch
import transformers


def metrics(x, ref):
    x, ref = np.asarray(x, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return {"nmse": float(((x - ref) ** 2).sum() / (ref ** 2).sum()),
            "max_rel": float(np.abs(x - ref).max() / np.abs(ref).max()),
            "argmax_agree": float((x.argmax(-1) == ref.argmax(-1)).mean())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tdacl", required=True, help="the tdacl command line program")
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    work = tempfile.mkdtemp(prefix="gpt-logits-")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    model.save_pretrained(os.path.join(work, "model"), safe_serialization=True)
    g = np.random.default_rng(1)
    seqs = [g.integers(0, model.config.vocab_size, args.T).tolist() for _ in range(2)]

    def hf(dtype):
        m = transformers.GPT2LMHeadModel.from_pretrained(os.path.join(work, "model"), torch_dtype=dtype,
                                                         attn_implementation="eager").cuda().eval()
        with torch.no_grad():
            out = [m(torch.tensor([s], device="cuda")).logits[0].double().cpu().numpy() for s in seqs]
        del m
        torch.cuda.empty_cache()
        return out

    ref = hf(torch.float64)
    results = {"hf-fp32": hf(torch.float32), "hf-bf16": hf(torch.bfloat16)}
    modes = {"tdacl-f32": ([], {}), "tdacl-bf16w": (["--dtype", "bf16"], {}),
             "tdacl-bf16w-precision-bf16": (["--dtype", "bf16"], {"TDACL_PRECISION": "bf16"}),
             "tdacl-bf16act": (["--dtype", "bf16", "--activations", "bf16"], {})}
    for name, (flags, env) in modes.items():
        out = []
        for i, s in enumerate(seqs):
            path = os.path.join(work, "%s-%d.npy" % (name, i))
            subprocess.run([args.tdacl, "forward", "--model", os.path.join(work, "model"), "--tokens",
                            ",".join(map(str, s)), "--out", path] + flags, check=True, env={**os.environ, **env},
                           stdout=subprocess.DEVNULL)
            out.append(np.load(path))
        results[name] = out
    rows = []
    for name, out in results.items():
        m = metrics(np.concatenate(out), np.concatenate(ref))
        rows.append({"mode": name, **m})
        print("%-28s nmse %.3g  max|err|/max|ref| %.3g  argmax agrees %.4f" % (name, m["nmse"], m["max_rel"],
                                                                              m["argmax_agree"]))
    with open(args.out, "w") as f:
        json.dump({"reference": "transformers GPT2LMHeadModel float64 (eager) on the GPU, random weights seed 0",
                   "device": torch.cuda.get_device_name(0), "T": args.T, "sequences": 2,
                   "transformers": transformers.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
