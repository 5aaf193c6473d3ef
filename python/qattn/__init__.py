"""qattn from Python: the exact CPU emulation of quantized-attention schemes,
the float64 reference, the scheme presets and parser, and the GPU kernel list,
over libqattn (lib/qattn_lib.h). Inputs are numpy arrays or torch tensors;
outputs come back as the inputs came (torch in, torch out).

    import qattn
    o = qattn.emulate(q, k, v, scheme="sage2-8b-sm90", causal=True)
    o_ref = qattn.reference(q, k, v, causal=True)
    o = qattn.attention(q_cuda, k_cuda, v_cuda, scheme="sage2-8b-sm90")   # the GPU kernels

Shapes: layout "bhnd" (default) is q [B, Hq, N, d], k and v [B, Hkv, Nk, d];
layout "bnhd" is q [B, N, Hq, d], k and v [B, Nk, Hkv, d]. Hq must be a
multiple of Hkv (GQA / MQA). Packed sequences (varlen): B = 1 and
cu_seqlens = [0, n0, n0 + n1, ...] over the N tokens (N == Nk).
"""
import collections
import ctypes
import threading

import numpy as np

from . import _lib

__all__ = ["QattnError", "Scheme", "Kernel", "version", "schemes", "parse", "kernels", "emulate", "reference",
           "attention"]

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


_TORCH_DTYPE_NAMES = {"float16": b"fp16", "bfloat16": b"bf16", "float32": b"fp32"}
_plans = {}  # a call's arguments, shapes, strides, dtypes, devices -> its _Plan
_workspaces = {}  # (device index, raw stream) -> a uint8 CUDA tensor, grown to the largest call's need


def _workspace(torch, dev, stream, nbytes):
    """A workspace of at least nbytes for calls on (dev, stream). Calls on one stream run in
    order, so each can reuse the one before's workspace; a larger need replaces it (torch's
    allocator frees the old one once the stream's earlier work is done with it)."""
    key = (dev, stream)
    ws = _workspaces.get(key)
    if ws is None or ws.numel() < nbytes:
        ws = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=torch.device("cuda", dev))
        _workspaces[key] = ws
    return ws


def _strides(t, layout, varlen):
    """{batch, head, token} element strides of a 4-D [B, H, N, d] / [B, N, H, d] tensor, or of a
    varlen [T, H, d] one (batch stride 0)"""
    if t.stride(-1) != 1:
        raise QattnError("the head dim must be contiguous (stride 1), got strides %s" % (tuple(t.stride()),))
    if varlen:
        return (0, t.stride(1), t.stride(0))
    return (t.stride(0), t.stride(1), t.stride(2)) if layout == "bhnd" else (t.stride(0), t.stride(2), t.stride(1))


def attention(q, k, v, scheme="sage2-8b-sm90", causal=False, mask=None, scale=None, layout="bhnd",
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False):
    """The scheme on the GPU kernels (the plan `qattn kernels --plan` shows:
    quantization kernels, then the attention instance) for torch CUDA
    tensors, on torch's current stream, with a torch-allocated workspace:
    no host copies and no synchronisation. q, k, v: fp16, bf16 or fp32,
    layout "bhnd" ([B, H, N, d]) or "bnhd" ([B, N, H, d]); varlen: q [Tq,
    Hq, d], k and v [Tk, Hkv, d] with cu_seqlens_q / cu_seqlens_k (int32
    CUDA tensors [B + 1]) and max_seqlen_q / max_seqlen_k (ints: reading
    them from the device would synchronise). Returns o in the scheme's
    output type (`out`, bf16 for the presets) and layout, and with
    return_lse the natural-log LSE [B, Hq, N] (varlen: [Hq, Tq]) in fp32.
    A scheme or problem no instance takes raises QattnError naming the
    property."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    # a call shape seen before skips the checks: the key holds everything they looked at
    try:
        key = (scheme, causal, mask, scale, layout, return_lse, varlen, max_seqlen_q, max_seqlen_k,
               cu_seqlens_q.shape if varlen else None, q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(),
               q.dtype, k.dtype, v.dtype, q.get_device(), k.get_device(), v.get_device())
        plan = _plans.get(key)
    except (AttributeError, TypeError):  # not tensors, or an unhashable argument: the checks say which
        key, plan = None, None
    if plan is None:
        plan = _prepare(q, k, v, scheme, causal, mask, scale, layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                        max_seqlen_k, return_lse, varlen)
        if key is not None:
            _plans[key] = plan
    torch = _torch
    if varlen:
        cu_q, cu_k = (c.to(device=q.device, dtype=torch.int32).contiguous() for c in (cu_seqlens_q, cu_seqlens_k))
        cuq_p, cuk_p = cu_q.data_ptr(), cu_k.data_ptr()
    else:
        cuq_p = cuk_p = None
    dev = plan.dev
    stream = _stream_of(dev)
    o = torch.empty_like(q, dtype=plan.out_dtype, memory_format=torch.contiguous_format)  # the fastest allocation
    lse = q.new_empty(plan.lse_shape, dtype=torch.float32) if return_lse else None
    ws = _workspaces.get((dev, stream))
    if ws is None or ws.numel() < plan.ws_bytes:
        ws = _workspace(torch, dev, stream, plan.ws_bytes)
    err = _errbuf_tls()
    args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr() if return_lse else None, cuq_p,
            cuk_p, ws.data_ptr(), ws.numel(), stream, err, 512)
    rc = _L.qattn_lib_gpu_run(plan.handle, *args)
    if rc == _STALE:  # its entry went to another call shape (more than the library keeps): prepare again
        plan.handle, plan.ws_bytes = _prepare_handle(plan.prep)
        rc = _L.qattn_lib_gpu_run(plan.handle, *args)
    if rc != 0:
        raise QattnError(err.value.decode())
    if return_lse and not varlen:
        lse = lse.view(plan.lse_shape[0], plan.nseq, -1).permute(1, 0, 2)
    return (o, lse) if return_lse else o


_STALE = 1  # QATTN_LIB_STALE
_tls = threading.local()
_torch = None
_stream_of = None  # device index -> torch's current stream there, as an integer handle


class _Plan:
    __slots__ = ("handle", "out_dtype", "ws_bytes", "lse_shape", "nseq", "dev", "prep")


def _errbuf_tls():
    b = getattr(_tls, "err", None)
    if b is None:
        b = _tls.err = ctypes.create_string_buffer(512)
    return b


def _prepare_handle(prep):
    err, wsb = _errbuf(), ctypes.c_size_t(0)
    h = _L.qattn_lib_gpu_prepare(*prep, ctypes.byref(wsb), err, len(err))
    if h < 0:
        raise QattnError(err.value.decode())
    return h, wsb.value


def _prepare(q, k, v, scheme, causal, mask, scale, layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
             return_lse, varlen):
    """Every check of a call shape, then its prepared call in libqattn"""
    global _torch, _stream_of
    try:
        import torch
    except ImportError:
        raise QattnError("attention runs on torch CUDA tensors and torch is not installed "
                         "(emulate() takes numpy arrays)") from None
    _torch = torch
    # the private accessor costs a fraction of torch.cuda.current_stream()'s microseconds
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _stream_of = raw if raw is not None else (lambda dev: torch.cuda.current_stream(dev).cuda_stream)
    if not all(isinstance(x, torch.Tensor) and x.is_cuda for x in (q, k, v)):
        raise QattnError("attention runs on torch CUDA tensors (emulate() takes CPU arrays)")
    if not (q.device == k.device == v.device):
        raise QattnError("q, k, v must be on one device (got %s, %s, %s)" % (q.device, k.device, v.device))
    if layout not in ("bhnd", "bnhd"):
        raise QattnError("layout must be 'bhnd' or 'bnhd', not %r" % (layout,))
    if not (q.dtype == k.dtype == v.dtype) or str(q.dtype).split(".")[-1] not in _TORCH_DTYPE_NAMES:
        raise QattnError("q, k, v must share one dtype of float16, bfloat16, float32 (got %s, %s, %s)"
                         % (q.dtype, k.dtype, v.dtype))
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None or max_seqlen_q is None or max_seqlen_k is None:
            raise QattnError("varlen needs cu_seqlens_q, cu_seqlens_k, max_seqlen_q and max_seqlen_k")
        if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
            raise QattnError("varlen takes q [Tq, Hq, d], k and v [Tk, Hkv, d]")
        nseq, hq, hkv, d = cu_seqlens_q.numel() - 1, q.shape[1], k.shape[1], q.shape[2]
        if cu_seqlens_k.numel() != nseq + 1:
            raise QattnError("cu_seqlens_q and cu_seqlens_k must have the same length")
        sq, sk, tq, tk = int(max_seqlen_q), int(max_seqlen_k), q.shape[0], k.shape[0]
    else:
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            raise QattnError("q, k, v must be 4-D (%s), got %s" % (layout, tuple(q.shape)))
        hi, ni = (1, 2) if layout == "bhnd" else (2, 1)
        nseq, hq, hkv, d = q.shape[0], q.shape[hi], k.shape[hi], q.shape[3]
        sq, sk = q.shape[ni], k.shape[ni]
        tq, tk = nseq * sq, nseq * sk
    if k.shape != v.shape:
        raise QattnError("k %s and v %s must have the same shape" % (tuple(k.shape), tuple(v.shape)))
    sc = 0.0 if scale is None else float(scale)
    if scale is not None and not sc > 0.0:
        raise QattnError("scale must be positive, got %r" % (scale,))
    sch, msk = _bytes(scheme, "scheme"), _mask_spec(causal, mask)
    dt = _TORCH_DTYPE_NAMES[str(q.dtype).split(".")[-1]]
    out_name = _L.qattn_lib_scheme_out(sch)
    if out_name is None:
        parse(scheme)  # raises with the parser's message
    out_dtype = {b"fp16": torch.float16, b"bf16": torch.bfloat16, b"fp32": torch.float32}[out_name]
    o_st = _strides(torch.empty(0, device="meta").new_empty(q.shape, dtype=out_dtype), layout, varlen)
    st = [(ctypes.c_int64 * 3)(*x) for x in (_strides(q, layout, varlen), _strides(k, layout, varlen),
                                              _strides(v, layout, varlen), o_st)]
    plan = _Plan()
    plan.prep = (sch, msk, sc, dt, nseq, hq, hkv, d, sq, sk, st[0], st[1], st[2], st[3], 1 if return_lse else 0,
                 1 if varlen else 0, tq, tk)
    plan.handle, plan.ws_bytes = _prepare_handle(plan.prep)
    plan.out_dtype, plan.lse_shape, plan.nseq, plan.dev = out_dtype, (hq, tq), nseq, q.device.index
    return plan
