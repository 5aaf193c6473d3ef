#!/usr/bin/env python3
"""Export per-layer Q, K, V of a Hugging Face causal LM to a qattn activation file.

What is captured: for every attention layer, the query, key and value tensors
exactly as the model hands them to its attention function (transformers'
AttentionInterface): Q and K after the rotary embedding (and after any q/k
norm), K and V before grouped-query repetition.  The capture is a registered
attention function that records its inputs and then calls the model's own
implementation (sdpa, eager, ...), so the model's output is unchanged.

Each sequence is run through the model on its own (positions start at 0);
several sequences are packed along the token axis and listed in /seqlens.

File layout (schema "qattn-activations/1", see docs/DESIGN.md, "Activation files (HDF5)"):
  root attributes schema, model, source, license, text_source, rope_applied=1,
  causal=1, softmax_scale, optional eval_loss, vocab_size;
  /layer_NN/{q [Hq,N,d], k [Hkv,N,d], v [Hkv,N,d]}; /seqlens int64.

Command line (any local model directory or hub name that loads offline):
  python3 data/export_torch.py --model DIR --text FILE --seq-len 2048 \
      --num-seqs 2 --out acts.h5 --license "..." --text-source "..."

From Python:
  from export_torch import export
  export(model, [ids0, ids1], "acts.h5", model_name=..., license=..., ...)
"""
import argparse
import math
import os
import sys

CAPTURE_PREFIX = "qattn_capture"
SCHEMA = "qattn-activations/1"


class _Recorder:
    def __init__(self, store_dtype, keep_output):
        self.store_dtype = store_dtype
        self.keep_output = keep_output
        self.calls = []  # per call: dict(layer, q, k, v, out, scaling, kwargs)
        self.order = 0


def _module_eager(module):
    """The modeling file's own eager attention function, for models running 'eager'."""
    mod = sys.modules.get(type(module).__module__)
    fn = getattr(mod, "eager_attention_forward", None)
    if fn is None:
        raise RuntimeError("%s: no eager_attention_forward in %s; load the model with "
                           "attn_implementation='sdpa'" % (type(module).__name__, type(module).__module__))
    return fn


def _make_capture(orig, rec):
    import torch
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def capture(module, query, key, value, attention_mask, *args, **kwargs):
        if orig == "eager" or orig is None:
            fn = _module_eager(module)
        else:
            fn = ALL_ATTENTION_FUNCTIONS[orig]
        out = fn(module, query, key, value, attention_mask, *args, **kwargs)
        with torch.no_grad():
            layer = getattr(module, "layer_idx", None)
            if layer is None:
                layer = rec.order
            rec.order += 1
            scaling = kwargs.get("scaling", None)
            if scaling is None and len(args) >= 1 and isinstance(args[0], float):
                scaling = args[0]
            call = {
                "layer": int(layer),
                # [B, H, n, d] -> [H, B*n, d]; B is 1 here
                "q": query.detach()[0].to("cpu", rec.store_dtype),
                "k": key.detach()[0].to("cpu", rec.store_dtype),
                "v": value.detach()[0].to("cpu", rec.store_dtype),
                "scaling": None if scaling is None else float(scaling),
                "sliding_window": kwargs.get("sliding_window", None),
                "softcap": kwargs.get("softcap", None),
            }
            if rec.keep_output:
                o = out[0] if isinstance(out, tuple) else out
                call["out"] = o.detach()[0].to("cpu", torch.float32)  # [n, Hq, d]
            rec.calls.append(call)
        return out

    return capture


def _current_impl(model):
    impl = getattr(model.config, "_attn_implementation", None)
    return impl or "eager"


def _set_impl(model, name):
    try:
        model.set_attn_implementation(name)
    except AttributeError:
        model.config._attn_implementation = name
    if _current_impl(model) != name:
        model.config._attn_implementation = name


class capture_qkv:
    """Context manager: while active, every attention call of `model` is recorded.

    rec = capture_qkv(model); with rec: model(ids); rec.calls -> list of dicts
    """

    def __init__(self, model, store_dtype=None, keep_output=False):
        import torch
        from transformers import AttentionInterface
        try:
            from transformers import AttentionMaskInterface
            from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
        except ImportError:  # older transformers: masks do not depend on the name
            AttentionMaskInterface = ALL_MASK_ATTENTION_FUNCTIONS = None
        self.model = model
        self.orig = _current_impl(model)
        if self.orig.startswith(CAPTURE_PREFIX):
            raise RuntimeError("capture_qkv is already active on this model")
        if "flash" in self.orig or "paged" in self.orig:
            # flash kernels take Q/K/V in [B, n, H, d] or varlen layouts; keep one layout
            raise RuntimeError("attn_implementation %r: load the model with 'sdpa' or 'eager' to export" % self.orig)
        self.rec = _Recorder(store_dtype or torch.float32, keep_output)
        self.name = "%s_%s" % (CAPTURE_PREFIX, self.orig)
        AttentionInterface.register(self.name, _make_capture(self.orig, self.rec))
        if AttentionMaskInterface is not None:
            mask_fn = None
            try:
                mask_fn = ALL_MASK_ATTENTION_FUNCTIONS[self.orig]
            except KeyError:
                from transformers.masking_utils import sdpa_mask
                mask_fn = sdpa_mask
            AttentionMaskInterface.register(self.name, mask_fn)

    @property
    def calls(self):
        return self.rec.calls

    def __enter__(self):
        _set_impl(self.model, self.name)
        return self

    def __exit__(self, *exc):
        _set_impl(self.model, self.orig)
        return False


def run_capture(model, sequences, store_dtype=None, keep_output=False, autocast_dtype=None):
    """Run each token sequence (1-D LongTensor or list of ints) through `model`
    separately and return per-layer packed tensors.

    Returns dict: layers -> list of (q [Hq,N,d], k [Hkv,N,d], v [Hkv,N,d]),
    outputs -> list of [N, Hq, d] (if keep_output), seqlens, scaling (per layer),
    sliding_window, softcap (per layer), logits (list, one per sequence).
    """
    import torch
    device = next(model.parameters()).device
    per_seq = []
    logits = []
    was_training = model.training
    model.eval()
    try:
        for ids in sequences:
            ids = torch.as_tensor(ids, dtype=torch.long, device=device).reshape(1, -1)
            cap = capture_qkv(model, store_dtype=store_dtype, keep_output=keep_output)
            with torch.no_grad(), cap:
                if autocast_dtype is not None:
                    with torch.autocast(device.type, dtype=autocast_dtype):
                        out = model(input_ids=ids, use_cache=False)
                else:
                    out = model(input_ids=ids, use_cache=False)
            logits.append(out.logits.detach().float().cpu())
            calls = sorted(cap.calls, key=lambda c: c["layer"])
            if not calls:
                raise RuntimeError("no attention call was captured: this model does not dispatch "
                                   "through transformers' AttentionInterface")
            layers = [c["layer"] for c in calls]
            if layers != list(range(len(calls))):
                raise RuntimeError("captured layers %s are not 0..L-1 (one call per layer expected)" % layers)
            per_seq.append(calls)
    finally:
        model.train(was_training)
    nl = len(per_seq[0])
    res = {"layers": [], "outputs": [], "scaling": [], "sliding_window": [], "softcap": [],
           "seqlens": [int(len(s) if not hasattr(s, "shape") else s.shape[-1]) for s in sequences],
           "logits": logits}
    for l in range(nl):
        cs = [calls[l] for calls in per_seq]
        q = torch.cat([c["q"] for c in cs], dim=1)
        k = torch.cat([c["k"] for c in cs], dim=1)
        v = torch.cat([c["v"] for c in cs], dim=1)
        res["layers"].append((q, k, v))
        if keep_output:
            res["outputs"].append(torch.cat([c["out"] for c in cs], dim=0))
        res["scaling"].append(cs[0]["scaling"])
        res["sliding_window"].append(cs[0]["sliding_window"])
        res["softcap"].append(cs[0]["softcap"])
    return res


def write_h5(path, layers, seqlens, attrs, dtype="float16", compress=True):
    """Write the qattn activation file.  layers: list of (q, k, v) tensors or
    arrays [H, N, d].  Written to PATH.tmp, then renamed."""
    import h5py
    import numpy as np
    np_dtype = {"float16": np.float16, "float32": np.float32}[dtype]
    tmp = path + ".tmp"
    try:
        with h5py.File(tmp, "w") as f:
            for key, val in attrs.items():
                if val is None:
                    continue
                if isinstance(val, str):
                    f.attrs[key] = val
                elif isinstance(val, (bool, int, np.integer)):
                    f.attrs[key] = np.int64(val)
                else:
                    f.attrs[key] = np.float64(val)
            hq = hkv = n = d = None
            for i, (q, k, v) in enumerate(layers):
                g = f.create_group("layer_%02d" % i)
                for name, t in (("q", q), ("k", k), ("v", v)):
                    a = t.numpy() if hasattr(t, "numpy") else np.asarray(t)
                    a = np.ascontiguousarray(a.astype(np.float32, copy=False))
                    if not np.isfinite(a).all():
                        raise ValueError("layer %d %s has NaN/Inf" % (i, name))
                    if np_dtype == np.float16 and np.abs(a).max() > 65504:
                        raise ValueError("layer %d %s exceeds the float16 range (max |x| %g); "
                                         "export float32" % (i, name, np.abs(a).max()))
                    a = a.astype(np_dtype)
                    kw = {}
                    if compress:
                        kw = dict(chunks=(1,) + a.shape[1:], shuffle=True,
                                  compression="gzip", compression_opts=9)
                    g.create_dataset(name, data=a, **kw)
                if hq is None:
                    hq, n, d = q.shape
                    hkv = k.shape[0]
                if tuple(q.shape) != (hq, n, d) or tuple(k.shape) != (hkv, n, d) or tuple(v.shape) != (hkv, n, d):
                    raise ValueError("layer %d shapes q%s k%s v%s differ from layer 0" %
                                     (i, tuple(q.shape), tuple(k.shape), tuple(v.shape)))
            if sum(seqlens) != n:
                raise ValueError("seqlens %s do not sum to N=%d" % (seqlens, n))
            f.create_dataset("seqlens", data=np.asarray(seqlens, dtype=np.int64))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def export(model, sequences, path, *, model_name, source, license, text_source,
           eval_loss=None, vocab_size=None, dtype="float16", compress=True,
           autocast_dtype=None, extra_attrs=None, keep_output=False):
    """Capture Q/K/V of `model` on `sequences` and write them to `path`.
    Returns the run_capture() result (float32 tensors; with keep_output, also
    each layer's attention output as the model computed it)."""
    import torch
    res = run_capture(model, sequences, store_dtype=torch.float32, autocast_dtype=autocast_dtype,
                      keep_output=keep_output)
    scal = res["scaling"]
    d = res["layers"][0][0].shape[-1]
    scale = scal[0] if scal[0] is not None else 1.0 / math.sqrt(d)
    if any(s is not None and abs(s - scale) > 1e-12 * abs(scale) for s in scal):
        raise ValueError("layers use different softmax scales %s; the format holds one" % scal)
    attrs = {
        "schema": SCHEMA, "model": model_name, "source": source, "license": license,
        "text_source": text_source, "rope_applied": 1, "causal": 1,
        "softmax_scale": float(scale),
        "eval_loss": eval_loss,
        "vocab_size": vocab_size if vocab_size is not None else getattr(model.config, "vocab_size", None),
    }
    # Features the plain-attention format cannot express: recorded, and warned about.
    sw = [w for w in res["sliding_window"] if w is not None]
    sc = [c for c in res["softcap"] if c is not None]
    if sw:
        attrs["sliding_window"] = int(min(sw))
        if min(sw) < max(res["seqlens"]):
            print("warning: sliding window %d < sequence length: plain causal attention on "
                  "these Q/K/V differs from the model's" % min(sw), file=sys.stderr)
    if sc:
        attrs["attn_logit_softcapping"] = float(sc[0])
        print("warning: the model soft-caps attention logits (%g); qattn's reference does not" % sc[0],
              file=sys.stderr)
    if extra_attrs:
        attrs.update(extra_attrs)
    write_h5(path, res["layers"], res["seqlens"], attrs, dtype=dtype, compress=compress)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description="Export Q/K/V activations of a causal LM to HDF5 (qattn schema).")
    ap.add_argument("--model", required=True, help="local model directory (or hub name available offline)")
    ap.add_argument("--tokenizer", help="tokenizer directory or tokenizer.json (default: --model)")
    ap.add_argument("--text", required=True, help="UTF-8 text file to take the sequences from")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--num-seqs", type=int, default=2)
    ap.add_argument("--token-offset", type=int, default=0, help="first token of the first sequence")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=["float16", "float32"], default="float16", help="stored dtype")
    ap.add_argument("--compute-dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                    help="dtype the model runs in while capturing")
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"], help="attention implementation to delegate to")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--model-name", help="root attribute 'model' (default: --model)")
    ap.add_argument("--source", default="exported by qattn data/export_torch.py")
    ap.add_argument("--license", default="unknown")
    ap.add_argument("--text-source", help="root attribute 'text_source' (default: --text)")
    ap.add_argument("--eval-loss", type=float)
    ap.add_argument("--no-compress", action="store_true")
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cdt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.compute_dtype]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=cdt, attn_implementation=args.attn)
    model.to(device)
    tokpath = args.tokenizer or args.model
    if tokpath.endswith(".json"):
        from tokenizers import Tokenizer
        tk = Tokenizer.from_file(tokpath)
        encode = lambda s: tk.encode(s).ids
    else:
        from transformers import AutoTokenizer
        tk = AutoTokenizer.from_pretrained(tokpath)
        encode = lambda s: tk(s, add_special_tokens=False)["input_ids"]
    with open(args.text, encoding="utf-8") as f:
        ids = encode(f.read())
    need = args.token_offset + args.seq_len * args.num_seqs
    if len(ids) < need:
        sys.exit("%s: %d tokens, need %d" % (args.text, len(ids), need))
    seqs = [ids[args.token_offset + i * args.seq_len: args.token_offset + (i + 1) * args.seq_len]
            for i in range(args.num_seqs)]
    export(model, seqs, args.out, model_name=args.model_name or args.model, source=args.source,
           license=args.license, text_source=args.text_source or os.path.basename(args.text),
           eval_loss=args.eval_loss, dtype=args.dtype, compress=not args.no_compress)
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))


if __name__ == "__main__":
    main()
