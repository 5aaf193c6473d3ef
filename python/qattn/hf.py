"""qattn as an attention implementation of Hugging Face transformers.

    import qattn.hf
    qattn.hf.use(model, "sage2-8b-sm90")   # every attention layer of model runs the scheme
    ...
    qattn.hf.use(model, None)              # back to the implementation it had

use() registers "qattn" in transformers' AttentionInterface (and its mask
function in AttentionMaskInterface) and sets model.config's attention
implementation; the scheme is read from model.config.qattn_scheme at each
call, so one registration serves any number of models and schemes. Each
call runs qattn.attention (the GPU kernels) on CUDA tensors; on CPU tensors,
or where no kernel instance takes the call, qattn.emulate (the exact CPU
emulation) runs instead, with a warning the first time for each reason.

Masks: causal (top-left when the query and key lengths match, bottom-right
for decode steps over a cache) or none; an explicit mask tensor (padding)
raises QattnError: qattn's kernels take no mask tensors.

kbias=r (augmented data, the kbias study's offsets): before quantization K
gets a per-channel offset of r standard deviations of that channel over the
sequence's tokens, signed like the channel's mean and rounded to fp16. It
leaves exact attention unchanged (a constant per query row in Q.K) and shows
what a scheme does with a K bias.
"""
import warnings

import qattn

NAME = "qattn"
calls = {"gpu": 0, "emulate": 0}  # how the calls since the last reset ran (the e2e study reports it)
_warned = set()


def reset_calls():
    calls["gpu"] = calls["emulate"] = 0


def kbias_offsets(k, r):
    """per-channel offsets r * sd * sign(mean) over the tokens, [B, H, 1, d] in k's dtype"""
    kf = k.float()
    sd = kf.std(dim=2, keepdim=True, unbiased=True) if k.shape[2] > 1 else kf.new_zeros(kf[:, :, :1].shape)
    sign = kf.mean(dim=2, keepdim=True).ge(0).float() * 2 - 1
    return (r * sd * sign).half().to(k.dtype)


def _compute_dtype(torch, q, k, v):
    """The dtype the kernels see: autocast's where it is on (as for torch SDPA, which autocast
    runs in lower precision; under autocast with float32 weights RoPE leaves q and k in float32
    and v in bf16), else the narrowest of q, k, v."""
    dev = q.device.type
    try:
        if torch.is_autocast_enabled(dev):
            return torch.get_autocast_dtype(dev)
    except (TypeError, AttributeError):  # torch < 2.4: one flag, for CUDA
        if dev == "cuda" and torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
    return min((q.dtype, k.dtype, v.dtype), key=lambda t: t.itemsize if hasattr(t, "itemsize") else
               torch.finfo(t).bits // 8)


def _mask_name(module, nq, nk, is_causal):
    causal = getattr(module, "is_causal", True) if is_causal is None else bool(is_causal)
    if not causal:
        return "none"
    return "causal" if nq == nk else "causal-br"


def attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention-function contract: query [B, Hq, Nq, d], key and value
    [B, Hkv, Nk, d] (GQA not repeated); returns (output [B, Nq, Hq, d], None)."""
    cfg = getattr(module, "config", None)
    scheme = getattr(cfg, "qattn_scheme", None)
    if scheme is None:
        raise qattn.QattnError("the model's config has no qattn_scheme: set it with qattn.hf.use(model, scheme)")
    if attention_mask is not None:
        raise qattn.QattnError("qattn takes causal or unmasked attention, not a mask tensor %s (padding?): "
                               "run unpadded batches" % (tuple(attention_mask.shape),))
    if dropout:
        raise qattn.QattnError("qattn has no attention dropout (got %g): call model.eval()" % dropout)
    r = float(getattr(cfg, "qattn_kbias", 0.0) or 0.0)
    if r:
        key = key + kbias_offsets(key, r)
    mask = _mask_name(module, query.shape[2], key.shape[2], kwargs.get("is_causal"))
    import torch
    dt = _compute_dtype(torch, query, key, value)
    query, key, value = query.to(dt), key.to(dt), value.to(dt)
    o = None
    if query.is_cuda:
        try:
            o = qattn.attention(query, key, value, scheme=scheme, mask=mask, scale=scaling)
            calls["gpu"] += 1
        except qattn.QattnError as e:
            if not getattr(cfg, "qattn_fallback", True):
                raise
            reason = str(e)
            if (scheme, reason) not in _warned:
                _warned.add((scheme, reason))
                warnings.warn("qattn: no GPU kernel for %s here (%s): running the CPU emulation" % (scheme, reason))
    if o is None:
        o = qattn.emulate(query, key, value, scheme=scheme, mask=mask, scale=scaling)
        calls["emulate"] += 1
    return o.to(device=query.device, dtype=dt).transpose(1, 2).contiguous(), None


def register():
    """Add "qattn" to transformers' attention (and mask) interfaces; idempotent."""
    from transformers import AttentionInterface
    AttentionInterface.register(NAME, attention_forward)
    try:  # the mask function decides when a call needs a mask tensor; sdpa's gives None for plain causal
        from transformers import AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask
        AttentionMaskInterface.register(NAME, sdpa_mask)
    except ImportError:  # older transformers build masks from the implementation name alone
        pass


def _set_impl(model, name):
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        setter(name)
    else:
        model.config._attn_implementation = name


def use(model, scheme, kbias=0.0, fallback=True):
    """Run model's attention with scheme (a preset name or spec string), or with
    scheme None restore the implementation it had before the first use().
    fallback=False: a CUDA call no kernel instance takes raises QattnError
    instead of running the CPU emulation."""
    cfg = model.config
    if scheme is None:
        prev = getattr(cfg, "qattn_previous", None)
        if prev is not None:
            _set_impl(model, prev)
        cfg.qattn_scheme, cfg.qattn_kbias = None, 0.0
        return model
    qattn.parse(scheme)  # a bad scheme fails here, not in the first forward
    register()
    if getattr(cfg, "_attn_implementation", None) != NAME:
        cfg.qattn_previous = getattr(cfg, "_attn_implementation", None) or "sdpa"
    cfg.qattn_scheme, cfg.qattn_kbias, cfg.qattn_fallback = scheme, float(kbias), bool(fallback)
    _set_impl(model, NAME)
    return model
