#!/usr/bin/env python3
"""Round-trip check of data/export_torch.py (run on a machine with torch + transformers).

For each model family (Llama, Qwen2, Mistral, Gemma, and Gemma2 when available)
build a tiny randomly initialised float32 model with grouped-query attention,
export its Q/K/V on two packed sequences (lengths 100 and 77) to a float32 HDF5
file, read the file back with h5py, recompute attention from the file alone
(float64: softmax scale from the file, causal mask within each /seqlens
segment, GQA head mapping h -> h // (Hq/Hkv)) and compare with the attention
output the model itself computed in every layer.  Also checks that capturing
leaves the model's logits unchanged, and reports the float16 file's error.

Prints one line per (family, implementation, device) and a summary table;
exits non-zero if any float32 check exceeds the tolerance.
Usage: python3 data/check_export.py [--devices cpu,cuda] [--csv out.csv]
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

TOL = 1e-5  # max |o - r| / max |r| for float32 files


def families():
    import transformers as T
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    fams = [
        ("llama", "LlamaConfig", "LlamaForCausalLM", dict(common, head_dim=16)),
        ("qwen2", "Qwen2Config", "Qwen2ForCausalLM", dict(common)),
        ("mistral", "MistralConfig", "MistralForCausalLM", dict(common, head_dim=16, sliding_window=None)),
        ("gemma", "GemmaConfig", "GemmaForCausalLM", dict(common, head_dim=16)),
        # Gemma2: query_pre_attn_scalar makes the scale differ from 1/sqrt(d); attention
        # logit soft-capping (tanh) is something plain attention does not do.
        ("gemma2", "Gemma2Config", "Gemma2ForCausalLM",
         dict(common, head_dim=16, query_pre_attn_scalar=24, sliding_window=4096,
              attn_logit_softcapping=50.0, final_logit_softcapping=30.0)),
    ]
    out = []
    for name, cc, mc, kw in fams:
        if not hasattr(T, cc) or not hasattr(T, mc):
            out.append((name, None, None, kw))
        else:
            out.append((name, getattr(T, cc), getattr(T, mc), kw))
    return out


def reference(q, k, v, seqlens, scale, softcap=None):
    """float64 attention from file contents: q [Hq,N,d], k/v [Hkv,N,d] -> [N,Hq,d]."""
    import numpy as np
    hq, n, d = q.shape
    hkv = k.shape[0]
    g = hq // hkv
    out = np.zeros((n, hq, d))
    q = q.astype(np.float64)
    k = k.astype(np.float64)
    v = v.astype(np.float64)
    s0 = 0
    for L in seqlens:
        sl = slice(s0, s0 + L)
        mask = np.triu(np.ones((L, L), dtype=bool), 1)
        for h in range(hq):
            s = q[h, sl] @ k[h // g, sl].T * scale
            if softcap:
                s = softcap * np.tanh(s / softcap)
            s[mask] = -np.inf
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[sl, h] = p @ v[h // g, sl]
        s0 += L
    return out


def check_one(name, Cfg, Model, kw, impl, device, seed=0):
    import h5py
    import numpy as np
    import torch
    torch.manual_seed(seed)
    cfg = Cfg(**kw)
    cfg._attn_implementation = impl
    try:
        model = Model._from_config(cfg, attn_implementation=impl, dtype=torch.float32)
    except TypeError:
        model = Model._from_config(cfg, attn_implementation=impl, torch_dtype=torch.float32)
    model.to(device).eval()
    # Random init leaves attention nearly uniform; scale q/k projections up so the
    # softmax is peaked and the check is sensitive to Q/K (RoPE, scale, mask).
    with torch.no_grad():
        for n_, p in model.named_parameters():
            if n_.endswith("q_proj.weight") or n_.endswith("k_proj.weight"):
                p.mul_(8.0)
    g = torch.Generator().manual_seed(seed + 1)
    seqs = [torch.randint(0, cfg.vocab_size, (100,), generator=g),
            torch.randint(0, cfg.vocab_size, (77,), generator=g)]
    with torch.no_grad():
        ref_logits = [model(input_ids=s.reshape(1, -1).to(device), use_cache=False).logits.float().cpu() for s in seqs]
    rows = []
    with tempfile.TemporaryDirectory() as td:
        path32 = os.path.join(td, "a32.h5")
        path16 = os.path.join(td, "a16.h5")
        res = export_torch.export(model, seqs, path32, model_name="tiny-" + name, source="check_export.py",
                                  license="none (random weights)", text_source="random tokens",
                                  dtype="float32", compress=True, keep_output=True)
        # logits unchanged by capturing
        dlog = max(float((a - b).abs().max()) for a, b in zip(ref_logits, res["logits"]))
        export_torch.write_h5(path16, res["layers"], res["seqlens"],
                              {"schema": export_torch.SCHEMA, "model": "x", "source": "x", "license": "x",
                               "text_source": "x", "rope_applied": 1, "causal": 1}, dtype="float16")
        worst32 = worst16 = worst_sc = 0.0
        with h5py.File(path32, "r") as f32, h5py.File(path16, "r") as f16:
            seqlens = [int(x) for x in f32["seqlens"][()]]
            scale = float(f32.attrs["softmax_scale"])
            softcap = float(f32.attrs["attn_logit_softcapping"]) if "attn_logit_softcapping" in f32.attrs else None
            nl = len([k for k in f32.keys() if k.startswith("layer_")])
            for l in range(nl):
                model_out = res["outputs"][l].numpy().astype(np.float64)  # [N, Hq, d]
                grp = f32["layer_%02d" % l]
                q, k, v = grp["q"][()], grp["k"][()], grp["v"][()]
                r = reference(q, k, v, seqlens, scale, softcap=None)
                err = np.abs(model_out - r).max() / np.abs(model_out).max()
                if softcap:
                    worst_sc = max(worst_sc, np.abs(model_out - reference(q, k, v, seqlens, scale, softcap)).max()
                                   / np.abs(model_out).max())
                g16 = f16["layer_%02d" % l]
                q16, k16, v16 = g16["q"][()], g16["k"][()], g16["v"][()]
                err16 = np.abs(model_out - reference(q16, k16, v16, seqlens, scale)).max() / np.abs(model_out).max()
                if softcap:  # compare with the reference (capped or not) that the model matched
                    e16c = np.abs(model_out - reference(q16, k16, v16, seqlens, scale, softcap)).max() \
                        / np.abs(model_out).max()
                    err16 = min(err16, e16c)
                worst32 = max(worst32, err)
                worst16 = max(worst16, err16)
        rows.append(dict(family=name, impl=impl, device=device, layers=nl,
                         hq=q.shape[0], hkv=k.shape[0], d=q.shape[2], scale=scale, softcap=softcap,
                         err_plain=worst32, err_softcap=worst_sc if softcap else None,
                         err_f16=worst16, dlogits=dlog))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default=None, help="comma list; default cpu and cuda if available")
    ap.add_argument("--csv", help="write the results table here")
    args = ap.parse_args()
    import torch
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    devices = args.devices.split(",") if args.devices else (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    print("torch %s, transformers %s, devices %s" % (torch.__version__, transformers.__version__, devices))
    all_rows, failed = [], []
    for name, Cfg, Model, kw in families():
        if Cfg is None:
            print("%-8s skipped: not in this transformers" % name)
            continue
        for impl in ("sdpa", "eager"):
            for dev in devices:
                try:
                    rows = check_one(name, Cfg, Model, kw, impl, dev)
                except Exception as e:  # report and go on with the others
                    import traceback
                    traceback.print_exc()
                    failed.append("%s/%s/%s: %s" % (name, impl, dev, e))
                    continue
                for r in rows:
                    # soft-capping models: the plain-attention error is expected to be larger;
                    # the check compares with the soft-capped reference
                    # (eager applies the cap, sdpa ignores it: whichever reference the model matched)
                    e = min(r["err_softcap"], r["err_plain"]) if r["softcap"] else r["err_plain"]
                    ok = e <= TOL and r["dlogits"] <= 1e-5
                    if not ok:
                        failed.append("%s/%s/%s: err %.3g dlogits %.3g" % (name, impl, dev, e, r["dlogits"]))
                    r["ok"] = ok
                    all_rows.append(r)
                    print("%-8s %-5s %-4s layers %d Hq %d Hkv %d d %d scale %.5f: max rel err f32 %.2e%s, f16 file %.2e, logits changed by %.1e %s"
                          % (r["family"], r["impl"], r["device"], r["layers"], r["hq"], r["hkv"], r["d"], r["scale"],
                             r["err_plain"],
                             (" (vs soft-capped reference %.2e)" % r["err_softcap"]) if r["softcap"] else "",
                             r["err_f16"], r["dlogits"], "OK" if ok else "FAIL"), flush=True)
    if args.csv:
        import csv
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["family", "impl", "device", "layers", "hq", "hkv", "d", "scale",
                                              "softcap", "err_plain", "err_softcap", "err_f16", "dlogits", "ok"])
            w.writeheader()
            for r in all_rows:
                w.writerow(r)
    print("\nexport round trip: %d checks run, %d failed (tolerance %.0e on max|o-r|/max|r|, float32 file)"
          % (len(all_rows), len(failed), TOL))
    for f in failed:
        print("  FAIL", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
