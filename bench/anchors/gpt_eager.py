#!/usr/bin/env python3
"""Eager PyTorch anchor for tdacl's GPT-family forward pass (docs/spec.md section 4): the same
architecture written with plain, naive PyTorch ops (every attention kind materialises its
T x T score matrix), timed on one CUDA GPU and written in tdacl-bench's JSON schema
(tdacl-bench/1), so that `tdacl-bench --compare gpt_eager.json` prints our/anchor ratios.

Model: GPT-2 small by default (12 layers, 12 heads, n_embd 768, vocab 50257), every
attention kind of docs/spec.md section 1 (--kinds), fp32 weights and activations.  Positions and
head Norm default to "auto", the models of tdacl-bench's forward suite (whose rows these
are compared with by name, batch and lengths): tda, tra and diff_softmax use RoPE (theta
10000) and the rms head Norm; softmax (plain GPT-2) and rela use learned positions and no
head Norm.  --position / --head-norm / --ntk F override that.  Random N(0, 0.02) weights
(gains 1, biases 0, per-layer beta = --beta, lambda 0.5), or --checkpoint DIR: a directory
written by `tdacl make-model` or any GPT-2 style config.json + model.safetensors (needs the
safetensors package; "transformer." prefixes are stripped, BF16/F16 tensors become fp32).

Measured (CUDA events, warm-up, median of >= 10 runs and >= 100 ms, as anchors.py does):
  prefill  batch B in --B (1, 8) x T in --T (1024, 4096): one forward pass of B sequences of
           T tokens from position 0 that fills a KV cache and computes the logits of the last
           position of each sequence (as tdacl-bench's forward suite times it; --logits all:
           every position, [B, T, vocab], as the public tdacl_model_prefill returns them)
  decode   batch 1, context in --ctx (1024, 8192): one token appended to a KV cache holding
           ctx - 1 tokens (filled by an untimed prefill), i.e. the new token's query sees ctx
           keys; logits [1, 1, vocab]

Row layout (suite "forward", impl "pytorch-eager", dtype "f32"):
  name   "<kind>-prefill" | "<kind>-decode"      (kind: softmax rela tra tda diff_softmax)
  path   "prefill" | "decode"
  shape  {"B": batch, "T": new tokens per sequence (T or 1), "Tq": same as T (the key
          tdacl-bench's loader reads), "Tk": keys the last query sees (T for prefill, ctx for
          decode), "M": tokens processed = B*T, "N": vocab, "K": n_embd}
  flops  nominal: 2 x (matmul weights) x tokens + 2 x n_embd x vocab x logit rows + the
         attention's causal FLOPs of docs/spec.md section 5 (2 products per pair, 3 for two-view kinds)
  also   "time_ms" {min, median, max, mean, spread, noisy, samples}, "tflops", "logits"
         ("all" | "last"), "position", "note" (model and options)
Rows are keyed by name, B, Tq and Tk only (not by position or head Norm): compare files
made with the same model options.

Other options: --device cpu runs the same code on the CPU (tiny sizes, for testing the
script); --check also verifies that decoding with the KV cache reproduces the prefill logits
and, with --dump-logits FILE.npy, saves prefill logits of --check-tokens for comparison with
tdacl (tests/ref/gpt_ref.c computes the same function in double precision).

Example (H100, offline):  python3 bench/anchors/gpt_eager.py --out gpt_eager.json
"""
import argparse, datetime, json, math, os, statistics, sys, time

import torch
import torch.nn.functional as F

KINDS = ("softmax", "rela", "tra", "tda", "diff_softmax")
TWO_VIEW = ("tda", "diff_softmax")
THRESHOLD = ("tra", "tda")
OOM = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


# ---- configuration and weights -------------------------------------------------------------

class Config:
    def __init__(self, n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024,
                 layer_norm_epsilon=1e-5, norm_type="layernorm", kind="softmax", beta=1.0, kappa=1.0,
                 power=2.0, head_norm="none", position="learned", rope_theta=10000.0, ntk=1.0):
        self.n_layer, self.n_head, self.n_embd = n_layer, n_head, n_embd
        self.vocab_size, self.n_positions = vocab_size, n_positions
        self.layer_norm_epsilon, self.norm_type = layer_norm_epsilon, norm_type
        self.kind, self.beta, self.kappa, self.power, self.head_norm = kind, beta, kappa, power, head_norm
        self.position, self.rope_theta, self.ntk = position, rope_theta, ntk
        self.head_dim = n_embd // n_head

    @staticmethod
    def from_json(path):
        with open(path) as f:
            j = json.load(f)
        a = j.get("attention") or {}
        rs = j.get("rope_scaling") or {}
        return Config(n_layer=j.get("n_layer", j.get("num_hidden_layers")), n_head=j.get("n_head", j.get("num_attention_heads")),
                      n_embd=j.get("n_embd", j.get("hidden_size")), vocab_size=j["vocab_size"],
                      n_positions=j.get("n_positions", j.get("max_position_embeddings")),
                      layer_norm_epsilon=j.get("layer_norm_epsilon", 1e-5), norm_type=j.get("norm_type", "layernorm"),
                      kind=a.get("kind", "softmax"), beta=a.get("beta", 1.0), kappa=a.get("kappa", 1.0),
                      power=a.get("power", 2.0), head_norm=a.get("head_norm", "none"),
                      position=j.get("position", "learned"), rope_theta=j.get("rope_theta", 10000.0),
                      ntk=rs.get("factor", 1.0) if rs else 1.0)

    def describe(self):
        s = (f"{self.n_layer}L {self.n_head}H C{self.n_embd} V{self.vocab_size} {self.kind} {self.position}"
             f" norm={self.norm_type} head_norm={self.head_norm}")
        if self.kind in THRESHOLD:
            s += f" beta={self.beta} kappa={self.kappa} p={self.power}"
        if self.position == "rope":
            s += f" theta={self.rope_theta}" + (f" ntk={self.ntk}" if self.ntk != 1 else "")
        return s


def tensor_list(cfg):
    """(name, shape, init) of every tensor docs/spec.md section 4 requires, GPT-2 Conv1D [in, out]."""
    C, V, L = cfg.n_embd, cfg.vocab_size, cfg.n_layer
    nq = 5 if cfg.kind in TWO_VIEW else 3
    ln = cfg.norm_type != "rmsnorm"
    out = [("wte.weight", (V, C), "normal")]
    if cfg.position == "learned":
        out.append(("wpe.weight", (cfg.n_positions, C), "normal"))
    for l in range(L):
        h = f"h.{l}."
        out += [(h + "ln_1.weight", (C,), "ones")] + ([(h + "ln_1.bias", (C,), "zeros")] if ln else [])
        out += [(h + "attn.c_attn.weight", (C, nq * C), "normal"), (h + "attn.c_attn.bias", (nq * C,), "zeros"),
                (h + "attn.c_proj.weight", (C, C), "normal"), (h + "attn.c_proj.bias", (C,), "zeros")]
        if cfg.kind in THRESHOLD:
            out.append((h + "attn.beta", (), "beta"))
        if cfg.kind in TWO_VIEW:
            out.append((h + "attn.lambda", (), "lambda"))
        if cfg.head_norm == "rms":
            out.append((h + "attn.head_norm.weight", (cfg.head_dim,), "ones"))
        out += [(h + "ln_2.weight", (C,), "ones")] + ([(h + "ln_2.bias", (C,), "zeros")] if ln else [])
        out += [(h + "mlp.c_fc.weight", (C, 4 * C), "normal"), (h + "mlp.c_fc.bias", (4 * C,), "zeros"),
                (h + "mlp.c_proj.weight", (4 * C, C), "normal"), (h + "mlp.c_proj.bias", (C,), "zeros")]
    out += [("ln_f.weight", (C,), "ones")] + ([("ln_f.bias", (C,), "zeros")] if ln else [])
    return out


def random_weights(cfg, device, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    w = {}
    for name, shape, init in tensor_list(cfg):
        if init == "normal":
            t = torch.randn(shape, generator=g) * 0.02
        elif init == "ones":
            t = torch.ones(shape)
        elif init == "zeros":
            t = torch.zeros(shape)
        elif init == "beta":
            t = torch.tensor(float(cfg.beta))
        else:
            t = torch.tensor(0.5)
        w[name] = t.to(device=device, dtype=torch.float32)
    return w


def load_checkpoint(path, device):
    from safetensors.torch import load_file  # only needed here
    cfg = Config.from_json(os.path.join(path, "config.json"))
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files:
        raise SystemExit(f"{path}: no .safetensors file")
    w = {}
    for f in files:
        for k, t in load_file(os.path.join(path, f)).items():
            w[k[len("transformer."):] if k.startswith("transformer.") else k] = t.to(device=device, dtype=torch.float32)
    for name, shape, _ in tensor_list(cfg):
        if name not in w:
            raise SystemExit(f"{path}: tensor {name} missing")
        if name.endswith(("attn.beta", "attn.lambda")):
            continue  # scalars ([] or [1]; lambda may be [n_head])
        if tuple(w[name].shape) != tuple(shape):
            raise SystemExit(f"{path}: tensor {name} has shape {tuple(w[name].shape)}, expected {shape}")
    return cfg, w


# ---- the model ---------------------------------------------------------------------------------

class GPT:
    """Naive eager forward pass.  x: [B, T, C]; per head q, k, v: [B, H, T, d]."""

    def __init__(self, cfg, w, device):
        self.cfg, self.w, self.device = cfg, w, device
        self.nv = 2 if cfg.kind in TWO_VIEW else 1
        H, d = cfg.n_head, cfg.head_dim
        self.lm_head = w.get("lm_head.weight", w["wte.weight"])  # [V, C]
        self.lam, self.beta = [], []
        for l in range(cfg.n_layer):
            lam = w.get(f"h.{l}.attn.lambda")
            lam = torch.full((H,), 0.0, device=device) if lam is None else lam.reshape(-1).expand(H).clone()
            self.lam.append(lam.view(1, H, 1, 1))
            b = w.get(f"h.{l}.attn.beta")
            self.beta.append(float(cfg.beta) if b is None else float(b.reshape(-1)[0]))
        self.rope_cos = self.rope_sin = None
        if cfg.position == "rope":
            theta = cfg.rope_theta * (cfg.ntk ** (d / (d - 2)) if cfg.ntk != 1 else 1.0)
            self.inv_freq = theta ** (-torch.arange(0, d // 2, device=device, dtype=torch.float64) * 2.0 / d)

    def norm(self, x, prefix):
        wt = self.w[prefix + ".weight"]
        if self.cfg.norm_type == "rmsnorm":
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.layer_norm_epsilon) * wt
        return F.layer_norm(x, (x.shape[-1],), wt, self.w[prefix + ".bias"], self.cfg.layer_norm_epsilon)

    def rope(self, x, pos0):
        """Rotate-half RoPE: element m < d/2 pairs with m + d/2, angle pos * theta^(-2m/d)."""
        T, half = x.shape[2], x.shape[3] // 2
        pos = torch.arange(pos0, pos0 + T, device=x.device, dtype=torch.float64)
        ang = torch.outer(pos, self.inv_freq)
        c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)

    def tau(self, l, pos0, Tq):
        """Length-adaptive threshold per query row: [Tq, 1]."""
        p = torch.arange(pos0, pos0 + Tq, device=self.device, dtype=torch.float32)
        return self.beta[l] * torch.sqrt(torch.clamp(2 * torch.log((p + 1) / self.cfg.kappa), min=0) / self.cfg.head_dim).unsqueeze(1)

    def attention(self, l, qs, ks, v, pos0):
        """qs, ks: lists (1 or 2 views) of [B, H, Tq|Tk, d]; v: [B, H, Tk, d] -> [B, H, Tq, d]."""
        cfg, Tq, Tk = self.cfg, qs[0].shape[2], ks[0].shape[2]
        i = torch.arange(pos0, pos0 + Tq, device=self.device).unsqueeze(1)
        visible = torch.arange(Tk, device=self.device).unsqueeze(0) <= i  # [Tq, Tk]
        if cfg.kind in THRESHOLD:
            tau = self.tau(l, pos0, Tq)
            a = [torch.relu(q @ k.transpose(-1, -2) - tau).pow(cfg.power) * visible for q, k in zip(qs, ks)]
            w = a[0] if cfg.kind == "tra" else a[0] - self.lam[l].clamp(0, 1) * a[1]
        elif cfg.kind == "rela":
            w = torch.relu(qs[0] @ ks[0].transpose(-1, -2) / math.sqrt(cfg.head_dim)) * visible
        else:
            a = [torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(cfg.head_dim)).masked_fill(~visible, float("-inf")), dim=-1)
                 for q, k in zip(qs, ks)]
            w = a[0] if cfg.kind == "softmax" else a[0] - self.lam[l] * a[1]
        o = w @ v
        if cfg.head_norm == "rms":
            o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5) * self.w[f"h.{l}.attn.head_norm.weight"]
        return o

    def new_cache(self, B, Tmax):
        shape = (B, self.cfg.n_head, Tmax, self.cfg.head_dim)
        return [{"k": [torch.empty(shape, device=self.device) for _ in range(self.nv)],
                 "v": torch.empty(shape, device=self.device)} for _ in range(self.cfg.n_layer)]

    def forward(self, tokens, cache=None, pos0=0, last_only=False):
        """tokens [B, T] at positions pos0..pos0+T-1 -> logits [B, T or 1, V].  With a cache,
        k/v are written at pos0.. and the queries attend over cache[:pos0+T]."""
        cfg, w = self.cfg, self.w
        B, T = tokens.shape
        C, H, d = cfg.n_embd, cfg.n_head, cfg.head_dim
        x = w["wte.weight"][tokens]
        if cfg.position == "learned":
            x = x + w["wpe.weight"][pos0:pos0 + T]
        for l in range(cfg.n_layer):
            h = f"h.{l}."
            qkv = torch.addmm(w[h + "attn.c_attn.bias"], self.norm(x, h + "ln_1").view(B * T, C), w[h + "attn.c_attn.weight"])
            parts = qkv.view(B, T, -1, H, d).permute(2, 0, 3, 1, 4)  # [NQ, B, H, T, d]
            qs, ks, v = [parts[2 * i] for i in range(self.nv)], [parts[2 * i + 1] for i in range(self.nv)], parts[-1]
            if cfg.position == "rope":
                qs, ks = [self.rope(q, pos0) for q in qs], [self.rope(k, pos0) for k in ks]
            if cfg.kind in THRESHOLD:
                qs, ks = [F.normalize(q, dim=-1, eps=1e-12) for q in qs], [F.normalize(k, dim=-1, eps=1e-12) for k in ks]
            if cache is not None:
                c = cache[l]
                for i in range(self.nv):
                    c["k"][i][:, :, pos0:pos0 + T] = ks[i]
                c["v"][:, :, pos0:pos0 + T] = v
                ks, v = [k[:, :, :pos0 + T] for k in c["k"]], c["v"][:, :, :pos0 + T]
            o = self.attention(l, qs, ks, v, pos0).transpose(1, 2).reshape(B * T, C)
            x = x + torch.addmm(w[h + "attn.c_proj.bias"], o, w[h + "attn.c_proj.weight"]).view(B, T, C)
            f = F.gelu(torch.addmm(w[h + "mlp.c_fc.bias"], self.norm(x, h + "ln_2").view(B * T, C), w[h + "mlp.c_fc.weight"]),
                       approximate="tanh")
            x = x + torch.addmm(w[h + "mlp.c_proj.bias"], f, w[h + "mlp.c_proj.weight"]).view(B, T, C)
        x = self.norm(x[:, -1:] if last_only else x, "ln_f")
        return x @ self.lm_head.t()


# ---- timing and rows ------------------------------------------------------------------------

def timed(fn, device, min_samples=10, min_ms=100.0, warmup=3, prepare=None):
    """Median of >= min_samples runs and >= min_ms in all (CUDA events; wall clock on CPU);
    prepare(), when given, runs untimed before every run."""
    prepare = prepare or (lambda: None)
    for _ in range(warmup):
        prepare()
        fn()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    samples, total = [], 0.0
    while len(samples) < min_samples or total < min_ms:
        prepare()
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ms = a.elapsed_time(b)
        else:
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
        samples.append(ms)
        total += ms
        if len(samples) >= 1000:
            break
    s = sorted(samples)
    q = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]
    med = statistics.median(s)
    return {"min": s[0], "median": med, "max": s[-1], "mean": sum(s) / len(s),
            "spread": (q(0.9) - q(0.1)) / med if med > 0 else 0.0, "noisy": False, "samples": samples}


def forward_flops(cfg, B, T, Tk_last, logit_rows):
    """Nominal FLOPs of one forward call: matmuls (2 per weight per token), the LM head for
    the logit rows, and the causal attention of docs/spec.md section 5 for queries at Tk_last-T..Tk_last-1."""
    C, nq = cfg.n_embd, 5 if cfg.kind in TWO_VIEW else 3
    per_token = 2 * cfg.n_layer * (C * nq * C + C * C + 8 * C * C)
    pos0 = Tk_last - T
    pairs = T * pos0 + T * (T + 1) / 2  # visible (query, key) pairs
    products = 3 if cfg.kind in TWO_VIEW else 2
    attn = cfg.n_layer * cfg.n_head * products * 2 * cfg.head_dim * pairs
    return B * (per_token * T + attn + 2 * C * cfg.vocab_size * logit_rows)


def make_row(cfg, kind, path, B, T, Tk, times, device_name, logits, tf32):
    rows = T if (path == "prefill" and logits == "all") else 1
    fl = forward_flops(cfg, B, T, Tk, rows)
    return {"suite": "forward", "name": f"{kind}-{path}", "impl": "pytorch-eager", "device": device_name,
            "device_index": 0, "dtype": "f32", "path": path,
            "shape": {"B": B, "T": T, "Tq": T, "Tk": Tk, "M": B * T, "N": cfg.vocab_size, "K": cfg.n_embd},
            "time_ms": times, "flops": fl, "tflops": fl / (times["median"] * 1e-3) * 1e-12,
            "logits": "all" if rows == T and path == "prefill" else "last", "position": cfg.position,
            "note": f"naive eager PyTorch, {cfg.describe()}, {'TF32 matmuls' if tf32 else 'fp32 matmuls (no TF32)'}"}


# ---- self-check ---------------------------------------------------------------------------------

def check(model, tokens, prompt, dump=None):
    """Decoding with the KV cache must reproduce the prefill logits (same math, other order)."""
    B, T = tokens.shape
    with torch.no_grad():
        full = model.forward(tokens)
        cache = model.new_cache(B, T)
        parts = [model.forward(tokens[:, :prompt], cache, 0)]
        for t in range(prompt, T):
            parts.append(model.forward(tokens[:, t:t + 1], cache, t))
        inc = torch.cat(parts, dim=1)
    err = (inc - full).abs().max().item()
    scale = full.abs().max().item()
    print(f"check {model.cfg.kind}: decode vs prefill max |diff| {err:.3g} (max |logit| {scale:.3g})", flush=True)
    if dump:
        import numpy as np
        np.save(dump, full.double().cpu().numpy())
        print(f"wrote prefill logits {tuple(full.shape)} to {dump}")
    return err <= 1e-4 * max(scale, 1e-30) + 1e-6


# ---- main ------------------------------------------------------------------------------------

def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--checkpoint", help="checkpoint directory (config.json + *.safetensors); default random weights")
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--position", choices=("auto", "learned", "rope"), default="auto")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--ntk", type=float, default=1.0, help="NTK-aware RoPE scaling factor")
    ap.add_argument("--head-norm", choices=("auto", "none", "rms"), default="auto")
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--T", default="1024,4096", help="prefill lengths")
    ap.add_argument("--B", default="1,8", help="prefill batch sizes")
    ap.add_argument("--ctx", default="1024,8192", help="decode contexts (batch 1)")
    ap.add_argument("--logits", choices=("all", "last"), default="last", help="prefill logits of every position or the last")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls (default: true fp32)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--check", action="store_true", help="verify decode == prefill before timing")
    ap.add_argument("--check-tokens", help="comma list of tokens for --check (default: random, 40 tokens)")
    ap.add_argument("--dump-logits", help="with --check: save the prefill logits of the check tokens (.npy)")
    ap.add_argument("--no-time", action="store_true", help="only --check")
    ap.add_argument("--out", help="JSON output (tdacl-bench/1)")
    a = ap.parse_args()
    if not a.no_time and not a.out:
        ap.error("--out is required unless --no-time")
    device = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    Ts, Bs, ctxs = ints(a.T), ints(a.B), ints(a.ctx)
    need_pos = max(Ts + ctxs + [64])
    rows, ok = [], True

    def save():  # after every row, so an interrupted run keeps what it measured
        if not a.out:
            return
        out = {"schema": "tdacl-bench/1", "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "library": {"version": "anchors", "git": "n/a"},
               "options": {"torch": torch.__version__, "tf32": a.tf32, "logits": a.logits, "position": a.position,
                           "checkpoint": a.checkpoint or "random"},
               "devices": [{"index": 0, "name": dev_name, "type": "gpu" if device.type == "cuda" else "cpu"}], "rows": rows}
        with open(a.out + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.out + ".tmp", a.out)
    kinds = [k for k in a.kinds.split(",") if k]
    for kind in kinds:
        if kind not in KINDS:
            ap.error(f"unknown kind {kind}")
    if a.checkpoint:
        ccfg, w = load_checkpoint(a.checkpoint, device)
        kinds = [ccfg.kind]
    for kind in kinds:
        if a.checkpoint:
            cfg = ccfg
        else:
            tdacl_like = kind in ("tra", "tda", "diff_softmax")  # "auto": tdacl-bench's forward models
            position = a.position if a.position != "auto" else ("rope" if tdacl_like else "learned")
            head_norm = a.head_norm if a.head_norm != "auto" else ("rms" if tdacl_like else "none")
            cfg = Config(a.n_layer, a.n_head, a.n_embd, a.vocab, need_pos, kind=kind, beta=a.beta, head_norm=head_norm,
                         position=position, rope_theta=a.rope_theta, ntk=a.ntk)
            w = random_weights(cfg, device)
        model = GPT(cfg, w, device)
        gen = torch.Generator(device="cpu").manual_seed(1)
        if a.check:
            if a.check_tokens:
                tok = torch.tensor([ints(a.check_tokens)], device=device)
            else:
                tok = torch.randint(0, cfg.vocab_size, (2, 40), generator=gen).to(device)
            ok &= check(model, tok, max(1, tok.shape[1] // 3), a.dump_logits)
        if a.no_time:
            continue
        with torch.no_grad():
            for T in Ts:
                for B in Bs:
                    if cfg.position == "learned" and T > cfg.n_positions:
                        print(f"{kind} prefill B={B} T={T}: skipped (n_positions {cfg.n_positions})", flush=True)
                        continue
                    try:
                        tok = torch.randint(0, cfg.vocab_size, (B, T), generator=gen).to(device)
                        cache = model.new_cache(B, T)
                        t = timed(lambda: model.forward(tok, cache, 0, last_only=a.logits == "last"), device)
                        rows.append(make_row(cfg, kind, "prefill", B, T, T, t, dev_name, a.logits, a.tf32))
                        print(f"{kind} prefill B={B} T={T}: {t['median']:.3f} ms", flush=True)
                        save()
                        del tok, cache
                    except OOM as e:
                        print(f"{kind} prefill B={B} T={T}: skipped (out of memory: {str(e)[:80]})", flush=True)
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
            for ctx in ctxs:
                if cfg.position == "learned" and ctx > cfg.n_positions:
                    print(f"{kind} decode ctx={ctx}: skipped (n_positions {cfg.n_positions})", flush=True)
                    continue
                try:
                    tok = torch.randint(0, cfg.vocab_size, (1, ctx), generator=gen).to(device)
                    cache = model.new_cache(1, ctx)
                    model.forward(tok[:, :ctx - 1], cache, 0, last_only=True)  # fill ctx - 1 positions, untimed
                    nxt = tok[:, ctx - 1:]
                    t = timed(lambda: model.forward(nxt, cache, ctx - 1), device)  # idempotent: rewrites slot ctx-1
                    rows.append(make_row(cfg, kind, "decode", 1, 1, ctx, t, dev_name, "last", a.tf32))
                    print(f"{kind} decode ctx={ctx}: {t['median']:.3f} ms", flush=True)
                    save()
                    del tok, cache
                except OOM as e:
                    print(f"{kind} decode ctx={ctx}: skipped (out of memory: {str(e)[:80]})", flush=True)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        del model, w
    save()
    if a.out:
        print(f"wrote {len(rows)} rows to {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
