"""The Python package against NumPy references (docs/spec.md section 1), on the default
device (PoCL in CI).  TDACL_LIBRARY selects the library under test; TDACL_CLI (the `tdacl`
program) makes a tiny checkpoint for the model tests."""
import math
import os
import subprocess

import numpy as np
import pytest

import tdacl


def entmax(z, alpha):
    """alpha-entmax by bisection on the threshold (independent of the library's Newton passes)."""
    u = (alpha - 1) * z
    lo, hi = u.max() - 1, u.max()
    for _ in range(200):
        tau = (lo + hi) / 2
        if (np.maximum(u - tau, 0) ** (1 / (alpha - 1))).sum() >= 1:
            lo = tau
        else:
            hi = tau
    p = np.maximum(u - lo, 0) ** (1 / (alpha - 1))
    return p / p.sum()


def reference(kind, q, k, v, q2=None, k2=None, beta=1.0, kappa=1.0, power=2.0, lam=0.5, alpha=1.5,
              temps=None):
    """Plain float64 attention of one kind, causal, offset Tk - Tq."""
    B, H, Tq, d = q.shape
    Tk = k.shape[2]
    out = np.zeros((B, H, Tq, v.shape[3]))

    def unit(x):
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)

    for b in range(B):
        for h in range(H):
            for i in range(Tq):
                p = Tk - Tq + i
                vis = slice(0, min(p + 1, Tk))
                tau = beta * math.sqrt(max(0.0, 2 * math.log((p + 1) / kappa)) / d)
                if kind in ("softmax", "rela", "diff_softmax", "entmax"):
                    s = k[b, h, vis] @ q[b, h, i] / math.sqrt(d)
                else:
                    s = unit(k[b, h, vis]) @ unit(q[b, h, i])
                if kind == "softmax":
                    w = np.exp(s - s.max()); w /= w.sum()
                elif kind == "entmax":
                    n = min(p + 1, Tk)
                    delta, tb, tg = temps[h] if temps is not None else (1.0, 0.0, 1.0)
                    w = entmax(s * (delta + (tb * math.log(n) ** tg if n > 1 else 0.0)), alpha)
                elif kind == "rela":
                    w = np.maximum(s, 0)
                elif kind == "tra":
                    w = np.maximum(s - tau, 0) ** power
                elif kind == "tda":
                    s2 = unit(k2[b, h, vis]) @ unit(q2[b, h, i])
                    w = np.maximum(s - tau, 0) ** power - min(max(lam, 0), 1) * np.maximum(s2 - tau, 0) ** power
                else:
                    s2 = k2[b, h, vis] @ q2[b, h, i] / math.sqrt(d)
                    w1 = np.exp(s - s.max()); w1 /= w1.sum()
                    w2 = np.exp(s2 - s2.max()); w2 /= w2.sum()
                    w = w1 - lam * w2
                out[b, h, i] = w @ v[b, h, vis]
    return out


@pytest.fixture(scope="module")
def ctx():
    with tdacl.Context() as c:
        yield c


@pytest.mark.parametrize("kind", ["softmax", "rela", "tra", "tda", "diff_softmax"])
@pytest.mark.parametrize("tq", [17, 1])
def test_attention_kinds(ctx, kind, tq):
    rng = np.random.default_rng(3)
    B, H, Tk, d, dv = 2, 3, 17, 32, 24
    q, q2 = rng.standard_normal((2, B, H, tq, d))          # float64 in
    k, k2 = rng.standard_normal((2, B, H, Tk, d))
    v = rng.standard_normal((B, H, Tk, dv))
    two = kind in ("tda", "diff_softmax")
    beta = 0.2  # keeps a good share of tra/tda weights non-zero at these lengths
    got = ctx.attention(q, k, v, kind, q2 if two else None, k2 if two else None, beta=beta)
    want = reference(kind, q, k, v, q2, k2, beta=beta)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 3.0])
def test_entmax(ctx, alpha):
    rng = np.random.default_rng(5)
    B, H, T, d, dv = 1, 2, 23, 32, 16
    q, k = 2 * rng.standard_normal((2, B, H, T, d))  # scores of a few units: sparse rows
    v = rng.standard_normal((B, H, T, dv))
    temps = np.array([[1.0, 0.3, 1.0], [0.8, 0.0, 1.0]])
    got = ctx.attention(q, k, v, "entmax", alpha=alpha, temps=temps)
    want = reference("entmax", q, k, v, alpha=alpha, temps=temps)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # the scalar form: plain alpha-entmax
    np.testing.assert_allclose(ctx.attention(q, k, v, "entmax", alpha=alpha),
                               reference("entmax", q, k, v, alpha=alpha), rtol=1e-4, atol=1e-4)


def topk_theta(q, k, v, thresholds, post, vmc):
    """Top-theta (docs/spec.md section 1c) in float64: pre-softmax with exact compensation or
    none, post-softmax; VMC adds the dropped weight times the mean V row."""
    B, H, T, d = q.shape
    out = np.zeros((B, H, T, v.shape[3]))
    for b in range(B):
        for h in range(H):
            for i in range(T):
                s = k[b, h, :i + 1] @ q[b, h, i] / math.sqrt(d)
                e = np.exp(s - s.max())
                theta = thresholds[h, min(i, thresholds.shape[1] - 1)]
                kept = (e / e.sum() >= theta) if post else (s >= theta)
                den = e.sum() if (post or vmc) else e[kept].sum()
                w = np.where(kept, e, 0.0) / den if den > 0 else np.zeros_like(e)  # nothing kept: 0
                out[b, h, i] = w @ v[b, h, :i + 1]
                if vmc:
                    out[b, h, i] += (1 - w.sum()) * v[b, h, :i + 1].mean(axis=0)
    return out


@pytest.mark.parametrize("post,vmc", [(False, False), (False, True), (True, False), (True, True)])
def test_topk_theta(ctx, post, vmc):
    rng = np.random.default_rng(6)
    B, H, T, d, dv = 2, 2, 21, 32, 16
    q, k = rng.standard_normal((2, B, H, T, d))
    v = rng.standard_normal((B, H, T, dv))
    # one threshold per head for every row, in the middle of a gap between two scores (or
    # weights) near the 70th percentile, so that no key sits at it
    th = np.zeros((H, 1))
    for h in range(H):
        vals = []
        for b in range(B):
            for i in range(T):
                s = k[b, h, :i + 1] @ q[b, h, i] / math.sqrt(d)
                vals += list(np.exp(s - s.max()) / np.exp(s - s.max()).sum() if post else s)
        vals = np.sort(vals)
        g = int(0.7 * len(vals))
        g = max(range(g - 20, g + 20), key=lambda j: vals[j + 1] - vals[j])
        th[h, 0] = (vals[g] + vals[g + 1]) / 2
    sdc = "exact" if (vmc and not post) else "none"
    got = ctx.attention(q, k, v, "topk_theta", thresholds=th, theta_post=post, sdc=sdc, vmc=vmc)
    want = topk_theta(q, k, v, th, post, vmc)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(tdacl.TdaclError, match="thresholds"):
        ctx.attention(q, k, v, "topk_theta")


def test_layouts_and_dtypes(ctx):
    rng = np.random.default_rng(4)
    # token-major [B, T, H, d] transposed to [B, H, T, d]: a strided view, and Fortran order
    q = rng.standard_normal((1, 9, 2, 32)).astype(np.float32).transpose(0, 2, 1, 3)
    k = np.asfortranarray(rng.standard_normal((1, 2, 9, 32)))
    v = rng.standard_normal((1, 2, 9, 32)).astype(np.float16)
    want = reference("tra", q.astype(np.float64), k, v.astype(np.float64), beta=0.2)
    np.testing.assert_allclose(ctx.attention(q, k, v, "tra", beta=0.2), want, rtol=1e-3, atol=1e-3)
    # bf16 storage: inputs rounded to 8 bits of mantissa
    got = ctx.attention(q, k, v, "tra", beta=0.2, dtype="bf16")
    np.testing.assert_allclose(got, want, rtol=0.05, atol=0.05)


def test_precision_tf32(ctx, monkeypatch):
    # fp32 storage on the tensor-core kernel as tf32 (here its portable body): within tf32's
    # rounding of the exact result; an unknown precision is refused
    monkeypatch.setenv("TDACL_MMA_EMULATE", "1")
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((1, 2, 19, 32)).astype(np.float32) for _ in range(3))
    want = reference("softmax", q.astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    np.testing.assert_allclose(ctx.attention(q, k, v, "softmax", precision="tf32"), want, rtol=5e-3, atol=5e-3)
    with pytest.raises(ValueError, match="precision"):
        ctx.attention(q, k, v, "softmax", precision="fp8")


def bf16_round(x):
    """x rounded to bfloat16 (nearest even), as float64."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def test_device_tensors(ctx):
    """Operands uploaded once and an output on the device, reused across calls."""
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((3, 1, 2, 23, 32))
    tq, tk, tv = ctx.tensor(q, dtype="bf16"), ctx.tensor(k, dtype="bf16"), ctx.tensor(v, dtype="bf16")
    assert tq.shape == (1, 2, 23, 32) and tq.dtype == "bf16"
    np.testing.assert_array_equal(tq.numpy(), bf16_round(q))
    out = ctx.empty((1, 2, 23, 32))
    want = reference("tra", bf16_round(q), bf16_round(k), bf16_round(v), beta=0.2)
    for _ in range(3):
        assert ctx.attention(tq, tk, tv, "tra", beta=0.2, out=out) is out
    ctx.finish()
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-2, atol=2e-2)
    # a device operand mixed with a host one, and NumPy reading the Tensor through __array__
    got = ctx.attention(tq, tk, v, "tra", beta=0.2, dtype="bf16")
    np.testing.assert_allclose(np.asarray(out), got, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="out must be a Tensor"):
        ctx.attention(tq, tk, tv, "tra", out=np.zeros((1, 2, 23, 32), np.float32))
    with tdacl.Context() as other:
        with pytest.raises(ValueError, match="Tensor of another Context"):
            other.attention(tq, tk, tv, "tra")
    out.close()
    with pytest.raises(ValueError, match="closed"):
        ctx.attention(tq, tk, tv, "tra", out=out)


class DLPackOnly:
    """An array exposing only the DLPack protocol (no __array__), like some frameworks' arrays."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class TorchBF16Like:
    """Stands in for a CPU torch.bfloat16 tensor: NumPy cannot hold its dtype, .float() widens."""

    dtype = "torch.bfloat16"

    def __init__(self, a):
        self._a = a

    def float(self):
        return self._a


def test_array_protocols(ctx):
    rng = np.random.default_rng(7)
    q, k, v = rng.standard_normal((3, 1, 1, 11, 32)).astype(np.float32)
    want = ctx.attention(q, k, v, "softmax")
    np.testing.assert_array_equal(ctx.attention(DLPackOnly(q), DLPackOnly(k), DLPackOnly(v), "softmax"), want)
    np.testing.assert_array_equal(ctx.attention(TorchBF16Like(q), k, v, "softmax"), want)
    # ml_dtypes bfloat16 arrays go up as their bit patterns: the same as rounding on upload
    import ml_dtypes

    qb = q.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(ctx.attention(qb, k, v, "softmax", dtype="bf16"),
                                  ctx.attention(q, k, v, "softmax", dtype="bf16"))


def test_errors(ctx):
    x = np.zeros((1, 1, 4, 32), np.float32)
    with pytest.raises(ValueError, match="q2 and k2 are required"):
        ctx.attention(x, x, x, "tda")
    with pytest.raises(tdacl.TdaclError) as e:
        ctx.attention(x, np.zeros((1, 1, 4, 16), np.float32), x, "softmax")
    assert e.value.status and "k" in e.value.message
    with pytest.raises(TypeError):
        ctx.attention(np.zeros((1, 1, 4, 32), np.int32), x, x, "softmax")
    assert tdacl.version().count(".") == 2
    assert any(dev["name"] for dev in tdacl.devices())


def test_model_and_tokenizer(ctx, tmp_path):
    cli = os.environ["TDACL_CLI"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    model_dir = tmp_path / "tiny"
    subprocess.run([cli, "make-model", "--config", os.path.join(root, "examples", "models", "tiny-softmax.json"),
                    "--out", str(model_dir), "--seed", "5"], check=True, capture_output=True)
    m = tdacl.Model.load(str(model_dir), context=ctx)
    ids = [5, 9, 200, 3]
    logits = m.forward(ids)
    assert logits.shape == (4, m.vocab_size) and np.isfinite(logits).all()
    # greedy generation: each new id is the argmax of the previous step's logits, and the
    # prefill of the whole sequence reproduces those logits
    out = m.generate_ids(ids, max_new_tokens=4)
    full = m.forward(out)
    for t in range(len(ids), len(out)):
        assert out[t] == int(np.argmax(full[t - 1]))
    # `tdacl generate` draws on the device (tdacl_model_sample) and feeds the ids back
    # without the host: the same greedy continuation; --top-k 300 draws on the host, says so
    cli_ids = subprocess.run([cli, "generate", "--model", str(model_dir), "--tokens", ",".join(map(str, ids)),
                              "--max-new", "4"], check=True, capture_output=True, text=True).stdout.strip()
    assert [int(x) for x in cli_ids.split(",")] == out
    assert m.generate_ids(ids, max_new_tokens=4, on_device=False) == out  # the host's draws agree
    # serving: prompts of different lengths in the slots of one model, decoded together,
    # continue as each does alone; a slot's own step equals the prefill of its sequence
    ms = tdacl.Model.load(str(model_dir), context=ctx, max_batch=3)
    prompts = [ids, [7], [1, 2, 3, 4, 5, 6, 7, 8, 9]]
    assert ms.generate_batch(prompts, max_new_tokens=4) == [m.generate_ids(p, max_new_tokens=4) for p in prompts]
    ms.prefill_slot(2, prompts[2])
    ms.prefill_slot(0, ids)
    step = ms.decode_slots([2, 0], [11, 12])
    np.testing.assert_allclose(step[0], m.forward(prompts[2] + [11])[-1], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(step[1], m.forward(ids + [12])[-1], rtol=1e-4, atol=1e-4)
    with pytest.raises(tdacl.TdaclError, match=r"slots\[0\] = 5 is outside"):
        ms.decode_slots([5], [5])
    ms.close()
    # bf16 weights and activations: close to the bf16-weight model's logits, not equal to them
    # (the activations really are rounded); a bad activation dtype is refused by name
    wb = tdacl.Model.load(str(model_dir), context=ctx, dtype="bf16")
    ab = tdacl.Model.load(str(model_dir), context=ctx, dtype="bf16", activations="bf16")
    lw, la = wb.forward(ids), ab.forward(ids)
    err = np.abs(la - lw).max() / np.abs(lw).max()
    assert 0 < err < 0.05, err
    assert ab.generate_ids(ids, max_new_tokens=2)[:len(ids)] == ids
    wb.close(), ab.close()
    with pytest.raises(tdacl.TdaclError, match="desc.activation_dtype must be TDACL_F32 or TDACL_BF16"):
        tdacl.Model.load(str(model_dir), context=ctx, activations="f16")
    # with 600 ids, --top-k 300 is beyond the device's 256: drawn on the host, as
    # Model.generate_ids (tdacl_sample) draws, and it says so
    import json

    config = json.load(open(os.path.join(root, "examples", "models", "tiny-softmax.json")))
    config["vocab_size"] = 600
    with open(tmp_path / "v600.json", "w") as f:
        json.dump(config, f)
    subprocess.run([cli, "make-model", "--config", str(tmp_path / "v600.json"), "--out", str(tmp_path / "v600"),
                    "--seed", "6"], check=True, capture_output=True)
    mb = tdacl.Model.load(str(tmp_path / "v600"), context=ctx)
    want = mb.generate_ids(ids, max_new_tokens=3, temperature=0.7, top_k=300, seed=11)
    with pytest.raises(tdacl.TdaclError, match="top_k 300"):
        mb.generate_ids(ids, max_new_tokens=3, temperature=0.7, top_k=300, seed=11, on_device=True)
    mb.close()
    host = subprocess.run([cli, "generate", "--model", str(tmp_path / "v600"), "--tokens", ",".join(map(str, ids)),
                           "--max-new", "3", "--temperature", "0.7", "--top-k", "300", "--seed", "11"], check=True,
                          capture_output=True, text=True)
    assert "drawing on the host" in host.stderr
    assert [int(x) for x in host.stdout.strip().split(",")] == want
    # no tokenizer in this directory: generate(text) says so
    with pytest.raises(tdacl.TdaclError, match="has no tokenizer"):
        m.generate("hi")
    m.close()
    # text to text: a byte-level BPE with exactly the model's 256 ids (no merges), trained by
    # Hugging Face tokenizers, beside the checkpoint
    from tokenizers import ByteLevelBPETokenizer

    hf = ByteLevelBPETokenizer()
    hf.train_from_iterator(["some text"], vocab_size=256, min_frequency=1)
    hf.save(str(model_dir / "tokenizer.json"))
    m = tdacl.Model.load(str(model_dir), context=ctx)
    prompt = "The quick brown fox"
    assert m.tokenizer.encode(prompt) == hf.encode(prompt).ids
    text = m.generate(prompt, max_new_tokens=5)
    want_ids = m.generate_ids(hf.encode(prompt).ids, max_new_tokens=5)
    assert text == hf.decode(want_ids) and text.startswith(prompt)
    m.close()


def test_topk_theta_and_entmax_models(ctx, tmp_path):
    """Model.calibrate writes what `tdacl calibrate` writes for the same ids; a softmax model
    runs Top-theta from it (Model.load(thresholds=)), an entmax config runs as made."""
    import json

    cli = os.environ["TDACL_CLI"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    model_dir = tmp_path / "tiny"
    subprocess.run([cli, "make-model", "--config", os.path.join(root, "examples", "models", "tiny-softmax.json"),
                    "--out", str(model_dir), "--seed", "7"], check=True, capture_output=True)
    ids = [(i * 37 + 11) % 256 for i in range(50)]
    m = tdacl.Model.load(str(model_dir), context=ctx, max_context=20)
    seen = []
    m.calibrate(ids, str(tmp_path / "py.json"), k=3, k_per_layer=[3, 4], offset_std=0.25, seq_len=20,
                progress=lambda done, total: seen.append((done, total)))
    assert seen == [(20, 50), (40, 50), (50, 50)]
    with open(tmp_path / "ids.txt", "w") as f:
        f.write(" ".join(map(str, ids)))
    subprocess.run([cli, "calibrate", "--model", str(model_dir), "--tokens", str(tmp_path / "ids.txt"),
                    "--k-per-layer", "3,4", "--offset-std", "0.25", "--seq-len", "20", "--out",
                    str(tmp_path / "cli.json")], check=True, capture_output=True)
    py, cl = json.load(open(tmp_path / "py.json")), json.load(open(tmp_path / "cli.json"))
    assert py == cl
    assert [layer["k"] for layer in py["layers"]] == [3, 4] and py["mode"] == "pre"
    assert len(py["layers"][1]["thresholds"][0]) == 20 - 4 and "sdc_log_mass" in py["layers"][0]
    with pytest.raises(tdacl.TdaclError, match="no calibration sequence is longer than k = 30"):
        m.calibrate(ids, str(tmp_path / "bad.json"), k=30, seq_len=20)
    m.close()
    # thresholds that keep every key of this sequence give softmax's logits exactly where no
    # row has more keys than k (rows 0..2), and differ past them
    dense = tdacl.Model.load(str(model_dir), context=ctx).forward(ids[:12])
    topk = tdacl.Model.load(str(model_dir), context=ctx, thresholds=str(tmp_path / "py.json"), sdc="exact", vmc=True)
    got = topk.forward(ids[:12])
    np.testing.assert_allclose(got[:3], dense[:3], rtol=1e-5, atol=1e-5)
    assert np.abs(got[3:] - dense[3:]).max() > 1e-4
    topk.close()
    with pytest.raises(ValueError, match="sdc must be one of"):
        tdacl.Model.load(str(model_dir), context=ctx, thresholds=str(tmp_path / "py.json"), sdc="some")
    # entmax: make-model writes the per-layer alpha and per-head temperature tensors
    subprocess.run([cli, "make-model", "--config", os.path.join(root, "examples", "models", "tiny-entmax.json"),
                    "--out", str(tmp_path / "ent"), "--seed", "8"], check=True, capture_output=True)
    ent = tdacl.Model.load(str(tmp_path / "ent"), context=ctx)
    out = ent.generate_ids([1, 2, 3], max_new_tokens=3)
    full = ent.forward(out)
    for t in range(3, len(out)):
        assert out[t] == int(np.argmax(full[t - 1]))
    ent.close()
