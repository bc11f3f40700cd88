"""Python bindings of libtdacl (ctypes over the public C API in include/tdacl.h).

    import numpy as np, tdacl
    ctx = tdacl.Context()                     # $TDACL_DEVICE or the default device
    out = ctx.attention(q, k, v, kind="tra")  # q, k: [B, H, T, d], v: [B, H, T, dv]
    model = tdacl.Model.load("gpt2")          # a directory or a hub-cache repo id
    print(model.generate("The quick brown fox", max_new_tokens=20))

Arrays may be NumPy arrays, anything with __array__ or __dlpack__ (CPU torch tensors, JAX
arrays), of float64, float32, float16 or bfloat16 (ml_dtypes, or torch.bfloat16) in any
layout; they are copied to the device as `dtype` ("f32", "bf16" or "f16") and results come
back as float32 NumPy arrays.  For loops, keep data on the device: `ctx.tensor(array,
dtype="bf16")` uploads once, `ctx.empty(shape)` makes an output, attention takes such Tensors
for any operand and writes into `out=`.  Every failing call raises TdaclError carrying the
status name and the library's message.
"""
import ctypes
import ctypes.util
import os
import weakref
from typing import Dict, List, Optional, Sequence

import numpy as np

__all__ = ["TdaclError", "devices", "version", "Context", "Tensor", "Tokenizer", "Model"]

_DTYPES = {"f32": 0, "fp32": 0, "float32": 0, "bf16": 1, "bfloat16": 1, "f16": 2, "fp16": 2, "float16": 2}
_KINDS = {"softmax": 0, "rela": 1, "tra": 2, "tda": 3, "diff_softmax": 4, "entmax": 5, "topk_theta": 6}
_SDC = {"none": 0, "exact": 1, "exp_threshold": 2, "offline": 3}
_TWO_VIEWS = {"tda", "diff_softmax"}
_PRECISIONS = {"exact": 0, "tf32": 1, "bf16": 2}


def _load_library() -> ctypes.CDLL:
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("TDACL_LIBRARY"), os.path.join(here, "libtdacl.so")):
        if path and os.path.exists(path):
            return ctypes.CDLL(path)
    found = ctypes.util.find_library("tdacl")
    if not found:
        raise ImportError("libtdacl not found: install the package with `pip install ./python` "
                          "or set TDACL_LIBRARY to the path of libtdacl.so")
    return ctypes.CDLL(found)


_lib = _load_library()
_p = ctypes.c_void_p


class _AttentionDesc(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("beta", ctypes.c_float), ("kappa", ctypes.c_float),
                ("power", ctypes.c_float), ("lambda_", ctypes.c_float), ("scale", ctypes.c_float),
                ("normalize", ctypes.c_int), ("norm", ctypes.c_int), ("norm_eps", ctypes.c_float),
                ("out_scale", ctypes.c_float), ("offset", ctypes.c_int64), ("want_stats", ctypes.c_int),
                ("path", ctypes.c_int), ("precision", ctypes.c_int), ("alpha", ctypes.c_float),
                ("temp_delta", ctypes.c_float), ("temp_beta", ctypes.c_float), ("temp_gamma", ctypes.c_float),
                ("theta_post", ctypes.c_int), ("sdc", ctypes.c_int), ("sdc_gamma", ctypes.c_float), ("vmc", ctypes.c_int)]


class _AttentionTensors(ctypes.Structure):
    _fields_ = [("q", _p), ("k", _p), ("v", _p), ("q2", _p), ("k2", _p), ("gain", _p), ("out", _p), ("lambdas", _p),
                ("temps", _p), ("thresholds", _p), ("sdc_log_mass", _p), ("v_sum", _p)]


class _ContextDesc(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char_p), ("cache", ctypes.c_int), ("cache_dir", ctypes.c_char_p),
                ("tuning_file", ctypes.c_char_p), ("use_tuning_db", ctypes.c_int), ("log_fn", _p),
                ("log_user", _p), ("log_level", ctypes.c_int)]


class _ModelDesc(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("weight_dtype", ctypes.c_int), ("max_batch", ctypes.c_int),
                ("max_context", ctypes.c_int), ("activation_dtype", ctypes.c_int), ("thresholds", ctypes.c_char_p),
                ("topk_sdc", ctypes.c_int), ("topk_vmc", ctypes.c_int)]


_PROGRESS = ctypes.CFUNCTYPE(None, _p, ctypes.c_int64, ctypes.c_int64)


class _CalibrateDesc(ctypes.Structure):
    _fields_ = [("k", ctypes.c_int), ("k_per_layer", ctypes.POINTER(ctypes.c_int)), ("offset_std", ctypes.c_float),
                ("seq_len", ctypes.c_int), ("theta_post", ctypes.c_int), ("fit_degree", ctypes.c_int),
                ("progress", _PROGRESS), ("progress_user", _p)]


class _DeviceInfoHead(ctypes.Structure):
    """The leading fields of tdacl_device_info (the rest is read into spare room)."""
    _fields_ = [("index", ctypes.c_int), ("platform_name", ctypes.c_char * 128),
                ("platform_version", ctypes.c_char * 128), ("name", ctypes.c_char * 128),
                ("vendor", ctypes.c_char * 128), ("vendor_id", ctypes.c_uint32),
                ("driver_version", ctypes.c_char * 128), ("device_version", ctypes.c_char * 128),
                ("opencl_c_version", ctypes.c_char * 128), ("type", ctypes.c_int), ("arch", ctypes.c_char * 64),
                ("spare", ctypes.c_char * 8192)]


def _sig(name, args, res=ctypes.c_int):
    f = getattr(_lib, name)
    f.argtypes, f.restype = args, res
    return f


_status_str = _sig("tdacl_status_str", [ctypes.c_int], ctypes.c_char_p)
_last_error = _sig("tdacl_last_error", [_p], ctypes.c_char_p)
_version = _sig("tdacl_version", [], ctypes.c_char_p)
_device_count = _sig("tdacl_device_count", [ctypes.POINTER(ctypes.c_int)])
_device_get_info = _sig("tdacl_device_get_info", [ctypes.c_int, ctypes.POINTER(_DeviceInfoHead)])
_context_desc_init = _sig("tdacl_context_desc_init", [ctypes.POINTER(_ContextDesc)], None)
_context_create = _sig("tdacl_context_create", [ctypes.POINTER(_ContextDesc), ctypes.POINTER(_p)])
_context_destroy = _sig("tdacl_context_destroy", [_p])
_context_get_info = _sig("tdacl_context_get_info", [_p, ctypes.POINTER(_DeviceInfoHead)])
_tensor_create = _sig("tdacl_tensor_create", [_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                                              ctypes.POINTER(_p)])
_tensor_destroy = _sig("tdacl_tensor_destroy", [_p])
_tensor_finish = _sig("tdacl_finish", [_p])
_tensor_upload = _sig("tdacl_tensor_upload", [_p, _p, ctypes.c_int, ctypes.c_int64])
_tensor_download = _sig("tdacl_tensor_download", [_p, _p, ctypes.c_int, ctypes.c_int64])
_tensor_ndim = _sig("tdacl_tensor_ndim", [_p, ctypes.POINTER(ctypes.c_int)])
_tensor_shape = _sig("tdacl_tensor_shape", [_p, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)])
_attention_desc_init = _sig("tdacl_attention_desc_init", [ctypes.POINTER(_AttentionDesc)], None)
_attention = _sig("tdacl_attention", [_p, ctypes.POINTER(_AttentionDesc), ctypes.POINTER(_AttentionTensors), _p])
_tok_load = _sig("tdacl_tokenizer_load", [ctypes.c_char_p, ctypes.POINTER(_p)])
_tok_destroy = _sig("tdacl_tokenizer_destroy", [_p])
_tok_encode = _sig("tdacl_tokenizer_encode", [_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int32),
                                              ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)])
_tok_decode = _sig("tdacl_tokenizer_decode", [_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int64, ctypes.c_char_p,
                                              ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)])
_model_desc_init = _sig("tdacl_model_desc_init", [ctypes.POINTER(_ModelDesc)], None)
_model_load = _sig("tdacl_model_load", [_p, ctypes.POINTER(_ModelDesc), ctypes.POINTER(_p)])
_model_destroy = _sig("tdacl_model_destroy", [_p])
_model_prefill = _sig("tdacl_model_prefill", [_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)])
_model_decode = _sig("tdacl_model_decode", [_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)])
_model_prefill_slot = _sig("tdacl_model_prefill_slot", [_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)])
_model_decode_slots = _sig("tdacl_model_decode_slots", [_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int32),
                                                        ctypes.POINTER(ctypes.c_int32)])
_model_logits = _sig("tdacl_model_logits", [_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64,
                                            ctypes.POINTER(ctypes.c_int)])
_model_sample = _sig("tdacl_model_sample", [_p, ctypes.c_float, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)])
_model_sampled = _sig("tdacl_model_sampled", [_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int64])
_calibrate_desc_init = _sig("tdacl_calibrate_desc_init", [ctypes.POINTER(_CalibrateDesc)], None)
_model_calibrate = _sig("tdacl_model_calibrate", [_p, ctypes.POINTER(_CalibrateDesc), ctypes.POINTER(ctypes.c_int32),
                                                  ctypes.c_int64, ctypes.c_char_p])


class _ModelInfoHead(ctypes.Structure):
    """The leading fields of tdacl_model_info (the rest is read into spare room)."""
    _fields_ = [("n_layer", ctypes.c_int), ("n_head", ctypes.c_int), ("n_embd", ctypes.c_int),
                ("vocab_size", ctypes.c_int), ("spare", ctypes.c_char * 1024)]


_model_get_info = _sig("tdacl_model_get_info", [_p, ctypes.POINTER(_ModelInfoHead)])
_sample = _sig("tdacl_sample", [ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_float, ctypes.c_int,
                                ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int32)])


class TdaclError(RuntimeError):
    """A libtdacl call failed: .status (its name, e.g. "invalid argument") and .message."""

    def __init__(self, status: int, message: str):
        self.status = _status_str(status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.status, message))


def _check(status: int, ctx=None) -> None:
    if status:
        raise TdaclError(status, _last_error(ctx).decode(errors="replace"))


def version() -> str:
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return _version().decode()


def _info_dict(info: _DeviceInfoHead) -> Dict[str, object]:
    return {"index": info.index, "name": info.name.decode(), "platform": info.platform_name.decode(),
            "vendor": info.vendor.decode(), "arch": info.arch.decode(), "driver": info.driver_version.decode()}


def devices() -> List[Dict[str, object]]:
    """The OpenCL devices libtdacl sees: index, name, platform, vendor, arch, driver."""
    n = ctypes.c_int()
    _check(_device_count(ctypes.byref(n)))
    out = []
    for i in range(n.value):
        info = _DeviceInfoHead()
        _check(_device_get_info(i, ctypes.byref(info)))
        out.append(_info_dict(info))
    return out


def _as_array(x) -> np.ndarray:
    """An ndarray view of an array-like: NumPy arrays as they are, then __array__ (CPU torch
    tensors), then DLPack; torch.bfloat16 (which NumPy cannot hold) is widened exactly."""
    if isinstance(x, np.ndarray):
        return x
    if str(getattr(x, "dtype", "")) == "torch.bfloat16":
        x = x.float()
    if hasattr(x, "__array__"):
        return np.asarray(x)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def _host(x):
    """(C-contiguous array, host dtype code) to upload: float32, float16 and bfloat16 go as
    they are (bf16 as its bit pattern), float64 becomes float32."""
    a = _as_array(x)
    if a.dtype.name == "bfloat16":
        return np.ascontiguousarray(a).view(np.uint16), 1
    if a.dtype == np.float16:
        return np.ascontiguousarray(a), 2
    if a.dtype.kind != "f":
        raise TypeError("expected a floating-point array, got dtype %s" % a.dtype)
    return np.ascontiguousarray(a, dtype=np.float32), 0


class Context:
    """A device and its kernels.  device: a selector ("pocl", "nvidia", "0", a name part) or
    None for $TDACL_DEVICE / the default device."""

    def __init__(self, device: Optional[str] = None):
        desc = _ContextDesc()
        _context_desc_init(ctypes.byref(desc))
        self._device = device.encode() if device else None
        desc.device = self._device
        self._h = _p()
        self._children: "weakref.WeakSet[Model]" = weakref.WeakSet()
        _check(_context_create(ctypes.byref(desc), ctypes.byref(self._h)))

    @property
    def device(self) -> Dict[str, object]:
        info = _DeviceInfoHead()
        _check(_context_get_info(self._h, ctypes.byref(info)), self._h)
        return _info_dict(info)

    def close(self) -> None:
        """Releases the device; models loaded on it are closed first."""
        for child in list(getattr(self, "_children", ())):
            child.close()
        if getattr(self, "_h", None):
            _context_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _upload(self, x, dtype: int, keep: list) -> _p:
        a, host = _host(x)
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        t = _p()
        _check(_tensor_create(self._h, dtype, a.ndim, shape, ctypes.byref(t)), self._h)
        keep.append(t)
        _check(_tensor_upload(t, a.ctypes.data_as(_p), host, a.size), self._h)
        return t

    def tensor(self, x, dtype: str = "f32") -> "Tensor":
        """Uploads an array-like once; the Tensor stays on the device for repeated calls."""
        if dtype not in _DTYPES:
            raise ValueError("dtype must be f32|bf16|f16, got %r" % (dtype,))
        keep: list = []
        self._upload(x, _DTYPES[dtype], keep)
        return Tensor(self, keep[0], _DTYPES[dtype])

    def empty(self, shape: Sequence[int], dtype: str = "f32") -> "Tensor":
        """An uninitialised device tensor (an output for attention's out=)."""
        if dtype not in _DTYPES:
            raise ValueError("dtype must be f32|bf16|f16, got %r" % (dtype,))
        dims = (ctypes.c_int64 * len(shape))(*shape)
        t = _p()
        _check(_tensor_create(self._h, _DTYPES[dtype], len(shape), dims, ctypes.byref(t)), self._h)
        return Tensor(self, t, _DTYPES[dtype])

    def finish(self) -> None:
        """Waits for every call queued on this context (attention returns before the device is done)."""
        _check(_tensor_finish(self._h), self._h)

    def attention(self, q, k, v, kind: str = "tra", q2=None, k2=None, *, beta: float = 1.0, kappa: float = 1.0,
                  power: float = 2.0, lambda_: float = 0.5, scale: Optional[float] = None, normalize: bool = True,
                  norm: str = "none", gain=None, norm_eps: float = 1e-5, out_scale: float = 1.0,
                  offset: Optional[int] = None, dtype: str = "f32", precision: str = "exact",
                  alpha: float = 1.5, temp=(1.0, 0.0, 1.0), temps=None, thresholds=None, theta_post: bool = False,
                  sdc: str = "none", sdc_gamma: float = 0.05, sdc_log_mass=None, vmc: bool = False, v_sum=None,
                  out: Optional["Tensor"] = None):
        """Causal attention of one kind (docs/spec.md section 1) over [B, H, T, d] arrays.
        q: [B, H, Tq, d]; k: [B, H, Tk, d]; v: [B, H, Tk, dv]; q2/k2 for "tda" and
        "diff_softmax".  offset: absolute position of query row 0 (default Tk - Tq).
        "entmax": alpha, and the inverse temperature delta + beta * (ln n)^gamma given as
        temp=(delta, beta, gamma), or per head as temps, an [H, 3] array.
        "topk_theta" (Top-theta, docs/spec.md section 1c): thresholds [H, R] (row id n - 1 at column
        min(n - 1, R - 1)) on the scores, or on the softmax weights with theta_post=True; sdc
        "none" | "exact" | "exp_threshold" | "offline" (with sdc_log_mass [H, R]), sdc_gamma;
        vmc=True adds the dropped weight times the mean V row (v_sum [B, H, dv]: the sums of all
        Tk V rows, so that only the rows past a row's last key are read).
        Operands are array-likes (uploaded as `dtype`) or Tensors of this context (used in
        place).  Returns float32 NumPy [B, H, Tq, dv], or, with out= a Tensor, fills it and
        returns it without waiting for the device."""
        if kind not in _KINDS:
            raise ValueError("kind must be one of %s, got %r" % (", ".join(_KINDS), kind))
        if (q2 is None or k2 is None) == (kind in _TWO_VIEWS):
            raise ValueError("q2 and k2 are %s for kind %r" % ("required" if kind in _TWO_VIEWS else "not taken", kind))
        if sdc not in _SDC:
            raise ValueError("sdc must be one of %s, got %r" % (", ".join(_SDC), sdc))
        if dtype not in _DTYPES or precision not in _PRECISIONS or norm not in ("none", "rms"):
            raise ValueError("dtype must be f32|bf16|f16, precision exact|tf32|bf16, norm none|rms")
        arrays = [x if isinstance(x, Tensor) else _as_array(x) for x in (q, k, v)]
        for name, a in zip("qkv", arrays):
            if isinstance(a, Tensor) and a._ctx is not self:
                raise ValueError("%s is a Tensor of another Context" % name)
            if len(a.shape) != 4:
                raise ValueError("%s must be [B, H, T, d], got shape %s" % (name, tuple(a.shape)))
        if out is not None and (not isinstance(out, Tensor) or out._ctx is not self):
            raise ValueError("out must be a Tensor of this Context (Context.empty)")
        desc = _AttentionDesc()
        _attention_desc_init(ctypes.byref(desc))
        desc.kind, desc.beta, desc.kappa, desc.power, desc.lambda_ = _KINDS[kind], beta, kappa, power, lambda_
        desc.scale = float("nan") if scale is None else scale
        desc.normalize, desc.norm, desc.norm_eps, desc.out_scale = int(normalize), int(norm == "rms"), norm_eps, out_scale
        desc.offset = -1 if offset is None else offset
        desc.precision = _PRECISIONS[precision]
        desc.alpha = alpha
        desc.temp_delta, desc.temp_beta, desc.temp_gamma = (float(x) for x in temp)
        desc.theta_post, desc.sdc, desc.sdc_gamma, desc.vmc = int(theta_post), _SDC[sdc], sdc_gamma, int(vmc)
        keep: list = []
        dt = _DTYPES[dtype]

        def handle(x):
            return x._handle() if isinstance(x, Tensor) else self._upload(x, dt, keep)

        try:
            t = _AttentionTensors()
            t.q, t.k, t.v = (handle(a) for a in arrays)
            if kind in _TWO_VIEWS:
                t.q2, t.k2 = handle(q2), handle(k2)
            if gain is not None:
                t.gain = gain._handle() if isinstance(gain, Tensor) else self._upload(gain, 0, keep)
            if temps is not None:
                t.temps = temps._handle() if isinstance(temps, Tensor) else self._upload(temps, 0, keep)
            for name, x in (("thresholds", thresholds), ("sdc_log_mass", sdc_log_mass), ("v_sum", v_sum)):
                if x is not None:
                    setattr(t, name, x._handle() if isinstance(x, Tensor) else self._upload(x, 0, keep))
            if out is not None:
                t.out = out._handle()
                _check(_attention(self._h, ctypes.byref(desc), ctypes.byref(t), None), self._h)
                return out
            B, H, Tq, _ = arrays[0].shape
            result = np.empty((B, H, Tq, arrays[2].shape[3]), dtype=np.float32)
            shape = (ctypes.c_int64 * 4)(*result.shape)
            o = _p()
            _check(_tensor_create(self._h, 0, 4, shape, ctypes.byref(o)), self._h)
            keep.append(o)
            t.out = o
            _check(_attention(self._h, ctypes.byref(desc), ctypes.byref(t), None), self._h)
            _check(_tensor_download(o, result.ctypes.data_as(_p), 0, result.size), self._h)
            return result
        finally:
            for h in keep:
                _tensor_destroy(h)


class Tensor:
    """A tensor in device memory of one Context (Context.tensor / Context.empty): operands that
    stay on the device across calls.  .numpy() copies it back as float32."""

    def __init__(self, ctx: "Context", handle: _p, dtype: int):
        self._ctx, self._h, self._dtype = ctx, handle, dtype
        n = ctypes.c_int()
        _check(_tensor_ndim(handle, ctypes.byref(n)), ctx._h)
        dims = (ctypes.c_int64 * max(n.value, 1))()
        _check(_tensor_shape(handle, dims, None), ctx._h)
        self.shape = tuple(dims[i] for i in range(n.value))
        ctx._children.add(self)

    @property
    def dtype(self) -> str:
        return {0: "f32", 1: "bf16", 2: "f16"}[self._dtype]

    def _handle(self) -> _p:
        if not self._h:
            raise ValueError("the Tensor is closed")
        return self._h

    def numpy(self) -> np.ndarray:
        """The values as a float32 NumPy array (waits for queued work)."""
        a = np.empty(self.shape, dtype=np.float32)
        _check(_tensor_download(self._handle(), a.ctypes.data_as(_p), 0, a.size), self._ctx._h)
        return a

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def close(self) -> None:
        """Frees the device memory now (also done when the Context closes)."""
        if getattr(self, "_h", None) and self._ctx._h:
            _tensor_destroy(self._h)
        self._h = None

    def __del__(self):
        self.close()

    def __repr__(self):
        return "tdacl.Tensor(shape=%s, dtype=%s)" % (self.shape, self.dtype)


class Tokenizer:
    """GPT-2 byte-level BPE of a model directory (tokenizer.json or vocab.json + merges.txt),
    identical to Hugging Face `tokenizers` (docs/spec.md section 4.4)."""

    def __init__(self, path: str):
        self._h = _p()
        _check(_tok_load(os.fspath(path).encode(), ctypes.byref(self._h)))

    def encode(self, text: str) -> List[int]:
        b = text.encode("utf-8")
        n = ctypes.c_int64()
        _check(_tok_encode(self._h, b, len(b), None, 0, ctypes.byref(n)))
        ids = (ctypes.c_int32 * max(n.value, 1))()
        _check(_tok_encode(self._h, b, len(b), ids, n.value, ctypes.byref(n)))
        return list(ids[:n.value])

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        n = ctypes.c_size_t()
        _check(_tok_decode(self._h, arr, len(ids), None, 0, ctypes.byref(n)))
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(_tok_decode(self._h, arr, len(ids), buf, n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value]

    def decode(self, ids: Sequence[int]) -> str:
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def __del__(self):
        if getattr(self, "_h", None):
            _tok_destroy(self._h)
            self._h = None


class Model:
    """A GPT-family checkpoint on a device (Model.load)."""

    def __init__(self):
        raise TypeError("use Model.load(path)")

    @classmethod
    def load(cls, path: str, dtype: str = "f32", device: Optional[str] = None, context: Optional[Context] = None,
             max_context: int = 0, max_batch: int = 1, activations: str = "f32", thresholds: Optional[str] = None,
             sdc: Optional[str] = None, vmc: Optional[bool] = None) -> "Model":
        """Loads config.json + model.safetensors from a directory or a hub-cache repo id;
        dtype: weights on the device, "f32" or "bf16"; activations: the activations between
        kernels and the KV cache, "f32" or "bf16" (the residual stream stays f32);
        max_batch: KV-cache slots (sequences held at once).  thresholds: a Top-theta
        threshold file (Model.calibrate writes one) that runs a softmax model's attention as
        topk_theta; sdc ("none", "exact", "exp_threshold", "offline") and vmc replace the
        config's attention.sdc / attention.vmc (docs/spec.md section 4.7).  The tokenizer
        beside it, if any, is loaded too (Model.tokenizer)."""
        if sdc is not None and sdc not in _SDC:
            raise ValueError("sdc must be one of %s, got %r" % (", ".join(_SDC), sdc))
        self = cls.__new__(cls)
        self.context = context or Context(device)
        desc = _ModelDesc()
        _model_desc_init(ctypes.byref(desc))
        self._path = os.fspath(path).encode()
        desc.path, desc.weight_dtype, desc.max_context = self._path, _DTYPES[dtype], max_context
        desc.max_batch = max_batch
        desc.activation_dtype = _DTYPES[activations]
        self._thresholds = os.fspath(thresholds).encode() if thresholds is not None else None
        desc.thresholds = self._thresholds
        desc.topk_sdc = _SDC[sdc] if sdc is not None else -1
        desc.topk_vmc = int(vmc) if vmc is not None else -1
        self._h = _p()
        _check(_model_load(self.context._h, ctypes.byref(desc), ctypes.byref(self._h)), self.context._h)
        self.context._children.add(self)
        info = _ModelInfoHead()
        _check(_model_get_info(self._h, ctypes.byref(info)), self.context._h)
        self.vocab_size = info.vocab_size
        try:
            self.tokenizer: Optional[Tokenizer] = Tokenizer(path)
        except TdaclError:
            self.tokenizer = None
        return self

    def _logits(self, rows: int) -> np.ndarray:
        out = np.empty((rows, self.vocab_size), dtype=np.float32)
        _check(_model_logits(self._h, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size, None),
               self.context._h)
        return out

    def forward(self, ids: Sequence[int]) -> np.ndarray:
        """Logits [len(ids), vocab] of one sequence from position 0."""
        arr = (ctypes.c_int32 * len(ids))(*ids)
        _check(_model_prefill(self._h, 1, len(ids), arr), self.context._h)
        return self._logits(len(ids))

    def prefill_slot(self, slot: int, ids: Sequence[int]) -> np.ndarray:
        """Starts the sequence of KV-cache slot `slot` (0..max_batch-1) with ids, the other
        slots untouched; logits [len(ids), vocab]."""
        arr = (ctypes.c_int32 * len(ids))(*ids)
        _check(_model_prefill_slot(self._h, slot, len(ids), arr), self.context._h)
        return self._logits(len(ids))

    def decode_slots(self, slots: Sequence[int], ids: Sequence[int]) -> np.ndarray:
        """One step of the sequences in `slots`, each at its own length: ids[i] extends
        slots[i]; logits [len(slots), vocab] in that order."""
        if len(ids) != len(slots):
            raise ValueError("decode_slots: %d ids for %d slots" % (len(ids), len(slots)))
        sl = (ctypes.c_int32 * len(slots))(*slots)
        arr = (ctypes.c_int32 * len(ids))(*ids)
        _check(_model_decode_slots(self._h, len(slots), sl, arr), self.context._h)
        return self._logits(len(slots))

    def generate_batch(self, prompts: Sequence[Sequence[int]], max_new_tokens: int = 32, temperature: float = 0.0,
                       top_k: int = 0, seed: int = 1) -> List[List[int]]:
        """Each prompt followed by max_new_tokens ids, the prompts (of any lengths, at most
        max_batch of them) in slots 0.. and decoded together, drawn on the device
        (tdacl_model_sample, top_k 0..256 or at least the vocabulary).  The draws take the
        seed's stream row by row each step, so they differ from one generate_ids per prompt
        unless greedy."""
        n = len(prompts)
        outs = [list(p) for p in prompts]
        if max_new_tokens <= 0 or n == 0:
            return outs
        state = ctypes.c_uint64(seed)
        drawn = (ctypes.c_int32 * n)()
        slots = (ctypes.c_int32 * n)(*range(n))
        for b, p in enumerate(prompts):
            arr = (ctypes.c_int32 * len(p))(*p)
            _check(_model_prefill_slot(self._h, b, len(p), arr), self.context._h)
            # the first new id of each prompt, from its own prefill's last row
            _check(_model_sample(self._h, temperature, top_k, ctypes.byref(state)), self.context._h)
            one = ctypes.c_int32()
            _check(_model_sampled(self._h, ctypes.byref(one), 1), self.context._h)
            drawn[b] = one.value
        for i in range(max_new_tokens):
            for b in range(n):
                outs[b].append(drawn[b])
            if i + 1 == max_new_tokens:
                break
            _check(_model_decode_slots(self._h, n, slots, drawn), self.context._h)
            _check(_model_sample(self._h, temperature, top_k, ctypes.byref(state)), self.context._h)
            _check(_model_sampled(self._h, drawn, n), self.context._h)
        return outs

    def generate_ids(self, ids: Sequence[int], max_new_tokens: int = 32, temperature: float = 0.0, top_k: int = 0,
                     seed: int = 1, on_device: Optional[bool] = None) -> List[int]:
        """The prompt ids followed by max_new_tokens sampled ones (temperature 0: greedy).

        on_device (default: wherever top_k allows it, 0..256 or at least the vocabulary) draws
        on the device (tdacl_model_sample: the ids feed the next step without a round trip, the
        next step is enqueued before the previous id is read); False draws on the host from
        each step's logits (tdacl_sample).  The two follow one rule; the device sums in fp32
        (docs/spec.md section 4.2)."""
        if on_device is None:
            on_device = temperature == 0 or top_k == 1 or top_k <= 256 or top_k >= self.vocab_size
        out = list(ids)
        state = ctypes.c_uint64(seed)
        nxt = ctypes.c_int32()
        if on_device:
            arr = (ctypes.c_int32 * len(ids))(*ids)
            _check(_model_prefill(self._h, 1, len(ids), arr), self.context._h)
            if max_new_tokens > 0:
                _check(_model_sample(self._h, temperature, top_k, ctypes.byref(state)), self.context._h)
            for i in range(max_new_tokens):
                more = i + 1 < max_new_tokens
                if more:
                    _check(_model_decode(self._h, 1, None), self.context._h)
                _check(_model_sampled(self._h, ctypes.byref(nxt), 1), self.context._h)
                out.append(nxt.value)
                if more:
                    _check(_model_sample(self._h, temperature, top_k, ctypes.byref(state)), self.context._h)
            return out
        logits = self.forward(ids)[-1:]
        for i in range(max_new_tokens):
            row = np.ascontiguousarray(logits[0])
            _check(_sample(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), row.size, temperature, top_k,
                           ctypes.byref(state), ctypes.byref(nxt)))
            out.append(nxt.value)
            if i + 1 < max_new_tokens:
                _check(_model_decode(self._h, 1, ctypes.byref(nxt)), self.context._h)
                logits = self._logits(1)
        return out

    def generate(self, text: str, max_new_tokens: int = 32, temperature: float = 0.0, top_k: int = 0,
                 seed: int = 1) -> str:
        """The text and its continuation, through the model's tokenizer."""
        if self.tokenizer is None:
            raise TdaclError(1, "%s has no tokenizer (tokenizer.json or vocab.json + merges.txt)" % self._path.decode())
        ids = self.tokenizer.encode(text)
        return self.tokenizer.decode(self.generate_ids(ids, max_new_tokens, temperature, top_k, seed))

    def calibrate(self, ids: Sequence[int], out: str, k: int = 64, k_per_layer: Optional[Sequence[int]] = None,
                  offset_std: float = 0.0, seq_len: int = 0, post: bool = False, fit_degree: int = -1,
                  progress=None) -> None:
        """Writes Top-theta thresholds for this (softmax) model to `out`: the token ids cut
        into sequences of seq_len (0: the model's context), each row keeping about k keys
        (k_per_layer: one k a layer), mean + offset_std standard deviations of the per-sequence
        thresholds (the Top-theta paper's Algorithm 1); post: on the softmax weights;
        fit_degree 0..3: a polynomial in ln(row + 1) per head instead of a table.  progress:
        called with (tokens done, tokens) after each sequence.  Load the result with
        Model.load(path, thresholds=out)."""
        desc = _CalibrateDesc()
        _calibrate_desc_init(ctypes.byref(desc))
        desc.k, desc.offset_std, desc.seq_len, desc.theta_post, desc.fit_degree = k, offset_std, seq_len, int(post), \
            fit_degree
        klist = (ctypes.c_int * len(k_per_layer))(*k_per_layer) if k_per_layer is not None else None
        if klist is not None:
            desc.k_per_layer = klist
        cb = _PROGRESS(lambda user, done, total: progress(done, total)) if progress else _PROGRESS()
        desc.progress = cb
        arr = (ctypes.c_int32 * len(ids))(*ids)
        _check(_model_calibrate(self._h, ctypes.byref(desc), arr, len(ids), os.fspath(out).encode()), self.context._h)

    def close(self) -> None:
        if getattr(self, "_h", None):
            _model_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()
