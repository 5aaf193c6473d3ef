"""qattn from Python: the exact CPU emulation of quantized-attention schemes,
the float64 reference, the scheme presets and parser, and the GPU kernel list,
over libqattn (lib/qattn_lib.h). Inputs are numpy arrays or torch tensors;
outputs come back as the inputs came (torch in, torch out).

    import qattn
    o = qattn.emulate(q, k, v, scheme="sage2-8b-sm90", causal=True)
    o_ref = qattn.reference(q, k, v, causal=True)

Shapes: layout "bhnd" (default) is q [B, Hq, N, d], k and v [B, Hkv, Nk, d];
layout "bnhd" is q [B, N, Hq, d], k and v [B, Nk, Hkv, d]. Hq must be a
multiple of Hkv (GQA / MQA). Packed sequences (varlen): B = 1 and
cu_seqlens = [0, n0, n0 + n1, ...] over the N tokens (N == Nk).
"""
import collections
import ctypes

import numpy as np

from . import _lib

__all__ = ["QattnError", "Scheme", "Kernel", "version", "schemes", "parse", "kernels", "emulate", "reference"]

_L = _lib.load()

Scheme = collections.namedtuple("Scheme", "name spec")
Kernel = collections.namedtuple("Kernel", "name family path description")


class QattnError(ValueError):
    """A bad argument, shape, value or scheme; the message says which."""


def version():
    return _L.qattn_lib_version().decode()


def schemes():
    """The preset schemes, in the order `qattn schemes` lists them."""
    return [Scheme(_L.qattn_lib_scheme_name(i).decode(), _L.qattn_lib_scheme_spec(i).decode())
            for i in range(_L.qattn_lib_scheme_count())]


def _errbuf():
    return ctypes.create_string_buffer(512)


def parse(spec):
    """The canonical full spec of a scheme string or preset name."""
    out, err = ctypes.create_string_buffer(1024), _errbuf()
    if _L.qattn_lib_scheme_parse(_bytes(spec, "scheme"), out, len(out), err, len(err)) != 0:
        raise QattnError(err.value.decode())
    return out.value.decode()


def kernels():
    """The GPU kernel instances libqattn was built with (empty without a GPU build)."""
    buf = ctypes.create_string_buffer(1024)
    return [Kernel(_L.qattn_lib_kernel_name(i).decode(), _L.qattn_lib_kernel_family(i).decode(),
                   _L.qattn_lib_kernel_path(i).decode(), _L.qattn_lib_kernel_describe(i, buf, len(buf)).decode())
            for i in range(_L.qattn_lib_kernel_count())]


def _bytes(s, what):
    if not isinstance(s, str):
        raise QattnError("%s must be a string, not %s" % (what, type(s).__name__))
    return s.encode()


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


def _as_f32(x, what):
    if _is_torch(x):
        x = x.detach().to("cpu").float().numpy()
    try:
        a = np.asarray(x)
    except Exception as e:  # anything without an array interface
        raise QattnError("%s: not an array (%s)" % (what, e))
    if a.dtype.kind not in "fiu":
        raise QattnError("%s: dtype %s is not a number type" % (what, a.dtype))
    if a.ndim != 4:
        raise QattnError("%s: expected 4 dimensions, got shape %s" % (what, tuple(a.shape)))
    return a.astype(np.float32)


def _mask_spec(causal, mask):
    if mask is not None and causal:
        raise QattnError("give causal=True or mask=..., not both")
    if mask is not None:
        return _bytes(mask, "mask")
    return b"causal" if causal else b"none"


def _problem(q, k, v, layout, cu_seqlens):
    """per-batch [H, N, d] float32 arrays, the sizes and the packed sequence lengths"""
    if layout not in ("bhnd", "bnhd"):
        raise QattnError("layout must be 'bhnd' or 'bnhd', not %r" % (layout,))
    q, k, v = _as_f32(q, "q"), _as_f32(k, "k"), _as_f32(v, "v")
    if layout == "bnhd":
        q, k, v = (np.transpose(x, (0, 2, 1, 3)) for x in (q, k, v))
    b, hq, sq, d = q.shape
    if k.shape != v.shape:
        raise QattnError("k %s and v %s must have the same shape" % (tuple(k.shape), tuple(v.shape)))
    if k.shape[0] != b or k.shape[3] != d:
        raise QattnError("q %s and k %s differ in batch or head dim" % (tuple(q.shape), tuple(k.shape)))
    hkv, sk = k.shape[1], k.shape[2]
    seqlens = None
    if cu_seqlens is not None:
        cu = np.asarray(cu_seqlens.cpu() if _is_torch(cu_seqlens) else cu_seqlens).astype(np.int64).ravel()
        if b != 1 or sq != sk:
            raise QattnError("cu_seqlens needs one packed batch (B = 1) with N == Nk, got q %s, k %s"
                             % (tuple(q.shape), tuple(k.shape)))
        if cu.size < 2 or cu[0] != 0 or cu[-1] != sq or np.any(np.diff(cu) < 0):
            raise QattnError("cu_seqlens must rise from 0 to the %d tokens, got %s" % (sq, cu.tolist()))
        seqlens = np.ascontiguousarray(np.diff(cu))
    c = np.ascontiguousarray
    return [c(x) for x in q], [c(x) for x in k], [c(x) for x in v], (b, hq, hkv, sq, sk, d), seqlens


def _ptr(a, t):
    return a.ctypes.data_as(ctypes.POINTER(t)) if a is not None else None


def _run(fn, pre, q, k, v, scale, layout, cu_seqlens, return_lse, out_dtype, torch_out):
    qs, ks, vs, (b, hq, hkv, sq, sk, d), seqlens = _problem(q, k, v, layout, cu_seqlens)
    ctype = ctypes.c_float if out_dtype == np.float32 else ctypes.c_double
    o = np.empty((b, hq, sq, d), out_dtype)
    lse = np.empty((b, hq, sq), out_dtype) if return_lse else None
    sc = 0.0 if scale is None else float(scale)
    if scale is not None and not sc > 0.0:
        raise QattnError("scale must be positive, got %r" % (scale,))
    err = _errbuf()
    f32 = ctypes.c_float
    for i in range(b):
        rc = fn(*pre, sc, _ptr(qs[i], f32), _ptr(ks[i], f32), _ptr(vs[i], f32), hq, hkv, sq, sk, d,
                _ptr(seqlens, ctypes.c_int64), 0 if seqlens is None else seqlens.size,
                _ptr(o[i], ctype), _ptr(lse[i] if return_lse else None, ctype), err, len(err))
        if rc != 0:
            raise QattnError(err.value.decode())
    if layout == "bnhd":
        o = np.ascontiguousarray(np.transpose(o, (0, 2, 1, 3)))
    if torch_out:
        import torch
        o = torch.from_numpy(o)
        lse = torch.from_numpy(lse) if return_lse else None
    return (o, lse) if return_lse else o


def emulate(q, k, v, scheme="sage2-8b-sm90", causal=False, mask=None, scale=None, layout="bhnd",
            cu_seqlens=None, return_lse=False):
    """The scheme's exact emulation (the kernels' arithmetic, on the CPU):
    o as float32 (already rounded to the scheme's output type), and with
    return_lse the log-sum-exp per row (natural log) [B, Hq, N].
    causal=True is the top-left mask (key j <= query i); mask takes
    "none", "causal", "causal-br" (bottom-right) or "window:L,R"; scale
    defaults to 1 / sqrt(d)."""
    pre = (_bytes(scheme, "scheme"), _mask_spec(causal, mask))
    torch_out = any(_is_torch(x) for x in (q, k, v))
    return _run(_L.qattn_lib_emulate, pre, q, k, v, scale, layout, cu_seqlens, return_lse, np.float32, torch_out)


def reference(q, k, v, causal=False, mask=None, scale=None, layout="bhnd", cu_seqlens=None, return_lse=False):
    """float64 attention on the same inputs (arguments as emulate's)."""
    pre = (_mask_spec(causal, mask),)
    torch_out = any(_is_torch(x) for x in (q, k, v))
    return _run(_L.qattn_lib_reference, pre, q, k, v, scale, layout, cu_seqlens, return_lse, np.float64, torch_out)
