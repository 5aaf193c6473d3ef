#!/usr/bin/env python3
"""Train one of qattn's small Qwen2-style models and export its activations.

Recipe (see data/README.md): a byte-level BPE tokenizer trained on the corpus
that data/build_corpus.py writes from Debian packages; a Qwen2 decoder
(RMSNorm, SwiGLU, RoPE, bias on q/k/v, grouped-query attention 4:1) trained at
context 2048 with AdamW, bf16 autocast and a cosine schedule, fixed seeds.
The held-out split (2% of the corpus) is evaluated periodically; the weights
with the best held-out loss are kept, evaluated once more in float32, used for
the channel statistics labelled "best" and exported to <out>/<model>.h5.

Never alters weights or activations: the statistics and the exported file are
what the trained model produces.

Outputs in --out: curve_<model>.csv (step, tokens, seconds, lr, train_loss,
eval_loss), stats_<model>.csv (per checkpoint, layer, tensor, head: channel
statistics of Q/K/V and attention-sink mass), summary_<model>.json,
<model>.h5, and tokenizer.json when --train-tokenizer is given.

Usage (GPU machine): python3 data/train.py --model qattn-qwen2-hd64 --corpus DIR --out DIR
"""
import argparse
import csv
import hashlib
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SEP = "\n\x1e\n"
EOS = "<|endoftext|>"
SEQ = 2048

# Both: 8 layers, 4 query heads, 1 key/value head (GQA 4:1), hidden = 4 * head_dim,
# SwiGLU width ~ 8/3 hidden rounded to a multiple of 64, tied embeddings.
MODELS = {
    "qattn-qwen2-hd64": dict(arch=dict(hidden_size=256, intermediate_size=704, num_hidden_layers=8,
                                       num_attention_heads=4, num_key_value_heads=1),
                             lr=2e-3, batch=32, steps=6500, warmup=200),
    "qattn-qwen2-hd128": dict(arch=dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                                        num_attention_heads=4, num_key_value_heads=1),
                              lr=1.5e-3, batch=32, steps=4600, warmup=200),
}


def log(*a):
    print(*a, flush=True)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def train_tokenizer(chunks, vocab_size, path):
    """Byte-level BPE (GPT-2 style pre-tokenisation).  The trainer has no random
    state: the same corpus gives the same merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(chunks, trainer=trainer, length=len(chunks))
    tok.save(path)
    return tok


def encode(tok, chunks):
    import numpy as np
    eos = tok.token_to_id(EOS)
    parts = []
    B = 256
    for i in range(0, len(chunks), B):
        for e in tok.encode_batch(chunks[i:i + B]):
            parts.append(np.asarray(e.ids, dtype=np.uint16))
            parts.append(np.asarray([eos], dtype=np.uint16))
    return np.concatenate(parts)


def cosine_lr(s, lr_max, warmup, steps):
    """Linear warm-up over `warmup` steps, then cosine from lr_max to 10% of it at `steps`."""
    if s < warmup:
        return lr_max * (s + 1) / warmup
    p = min(1.0, (s - warmup) / max(1, steps - warmup))
    return lr_max * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def write_curve(path, curve):
    """The training curve: step, tokens, seconds, lr, train_loss, eval_loss."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "tokens", "seconds", "lr", "train_loss", "eval_loss"])
        w.writeheader()
        for r in curve:
            w.writerow({k: (("%.6g" % v) if isinstance(v, float) else v) for k, v in r.items()})


def channel_stats(x):
    """x [H, N, d] float32 -> per head: max and median over channels of |mean|/std,
    amax ratio (max over channels of max|x| / median over channels of max|x|),
    max over channels of excess kurtosis.  Same definitions as `qattn inspect`."""
    m = x.mean(1)
    s = x.std(1, unbiased=False).clamp_min(1e-30)
    r = m.abs() / s
    amax = x.abs().amax(1)
    kurt = ((x - m[:, None]) ** 4).mean(1) / s ** 4 - 3.0
    out = []
    for h in range(x.shape[0]):
        out.append(dict(absmean_over_std_max=float(r[h].max()),
                        absmean_over_std_median=float(r[h].quantile(0.5)),
                        amax_ratio=float(amax[h].max() / amax[h].quantile(0.5)),
                        kurtosis_max=float(kurt[h].max())))
    return out


def sink_mass(q, k, seqlens, scale, skip=16):
    """Mean attention probability on each sequence's first token, over query rows
    t >= skip, per query head.  q [Hq,N,d], k [Hkv,N,d] (float32, on any device)."""
    import torch
    hq, hkv = q.shape[0], k.shape[0]
    g = hq // hkv
    res = torch.zeros(hq, dtype=torch.float64)
    s0 = 0
    for L in seqlens:
        qs, ks = q[:, s0:s0 + L].double(), k[:, s0:s0 + L].double()
        mask = torch.triu(torch.ones(L, L, dtype=torch.bool, device=q.device), 1)
        for h in range(hq):
            s = (qs[h] @ ks[h // g].T) * scale
            s.masked_fill_(mask, float("-inf"))
            p = torch.softmax(s, dim=1)
            res[h] += p[skip:, 0].mean().cpu()
        s0 += L
    return [float(x) / len(seqlens) for x in res]


def qkv_stats(model, seqs, label, step, tokens, eval_loss):
    """Rows for stats CSV: channel statistics of every layer's Q, K, V on `seqs`
    (float32 forward, no autocast) and the attention-sink mass."""
    import torch
    import export_torch
    res = export_torch.run_capture(model, seqs, store_dtype=torch.float32)
    dev = next(model.parameters()).device
    rows = []
    for l, (q, k, v) in enumerate(res["layers"]):
        q, k, v = q.to(dev), k.to(dev), v.to(dev)
        scale = res["scaling"][l] or 1.0 / math.sqrt(q.shape[-1])
        for name, t in (("q", q), ("k", k), ("v", v)):
            for h, st in enumerate(channel_stats(t)):
                rows.append(dict(checkpoint=label, step=step, tokens=tokens, eval_loss=eval_loss,
                                 layer=l, tensor=name, head=h, sink_mass="", **st))
        for h, sm in enumerate(sink_mass(q, k, res["seqlens"], scale)):
            rows.append(dict(checkpoint=label, step=step, tokens=tokens, eval_loss=eval_loss, layer=l,
                             tensor="attn", head=h, absmean_over_std_max="", absmean_over_std_median="",
                             amax_ratio="", kurtosis_max="", sink_mass=sm))
    return rows


def summarize_stats(rows):
    """Per tensor: mean over layers of (max over heads) |mean|/std and amax ratio."""
    out = {}
    for t in ("q", "k", "v"):
        per_layer = {}
        for r in rows:
            if r["tensor"] == t:
                a = per_layer.setdefault(r["layer"], [0.0, 0.0])
                a[0] = max(a[0], r["absmean_over_std_max"])
                a[1] = max(a[1], r["amax_ratio"])
        n = len(per_layer)
        out[t] = (sum(v[0] for v in per_layer.values()) / n, max(v[0] for v in per_layer.values()),
                  sum(v[1] for v in per_layer.values()) / n)
    sinks = [r["sink_mass"] for r in rows if r["tensor"] == "attn"]
    out["sink_mean"] = sum(sinks) / len(sinks)
    out["sink_max"] = max(sinks)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--corpus", required=True, help="directory with train.txt and heldout.txt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--train-tokenizer", action="store_true", help="train the tokenizer, write OUT/tokenizer.json")
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=0, help="default: steps/25")
    ap.add_argument("--eval-windows", type=int, default=0, help="0: all held-out windows")
    ap.add_argument("--time-budget", type=float, default=420.0, help="seconds of training before stopping early")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--num-export-seqs", type=int, default=2)
    ap.add_argument("--no-export", action="store_true")
    ap.add_argument("--no-verify", action="store_true", help="skip the corpus sha256 check")
    ap.add_argument("--save-dir", help="also save the best checkpoint (save_pretrained) here")
    args = ap.parse_args()

    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM
    import export_torch

    spec = MODELS[args.model]
    steps = args.steps or spec["steps"]
    batch = args.batch or spec["batch"]
    lr_max = args.lr or spec["lr"]
    warmup = args.warmup if args.warmup is not None else spec["warmup"]
    eval_every = args.eval_every or max(1, steps // 25)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()

    # ---------------------------------------------------------------- data
    sums = {}
    with open(os.path.join(HERE, "corpus", "SHA256SUMS")) as f:
        for line in f:
            h, n = line.split()
            sums[n] = h
    texts = {}
    for name in ("train.txt", "heldout.txt"):
        p = os.path.join(args.corpus, name)
        if not args.no_verify:
            got = sha256_file(p)
            if got != sums[name]:
                sys.exit("%s: sha256 %s, data/corpus/SHA256SUMS says %s (rebuild with data/build_corpus.py "
                         "or pass --no-verify)" % (p, got, sums[name]))
        with open(p, encoding="utf-8") as f:
            texts[name] = f.read().rstrip("\n").split(SEP)
    log("corpus: %d train chunks, %d held-out chunks (%.1fs)" %
        (len(texts["train.txt"]), len(texts["heldout.txt"]), time.time() - t_start))
    from tokenizers import Tokenizer
    if args.train_tokenizer:
        t0 = time.time()
        tok = train_tokenizer(texts["train.txt"], args.vocab_size, os.path.join(args.out, "tokenizer.json"))
        log("tokenizer: trained vocab %d in %.1fs" % (tok.get_vocab_size(), time.time() - t0))
    else:
        tok = Tokenizer.from_file(args.tokenizer)
    vocab = tok.get_vocab_size()
    t0 = time.time()
    train_ids = encode(tok, texts["train.txt"])
    held_ids = encode(tok, texts["heldout.txt"])
    train_bytes = sum(len(c.encode("utf-8")) for c in texts["train.txt"])
    log("tokens: train %d (%.2f bytes/token), held-out %d (%.1fs)" %
        (len(train_ids), train_bytes / len(train_ids), len(held_ids), time.time() - t0))
    del texts

    # ---------------------------------------------------------------- seeds, model
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    cfg = Qwen2Config(vocab_size=vocab, max_position_embeddings=SEQ, tie_word_embeddings=True,
                      rms_norm_eps=1e-6, attention_dropout=0.0, use_cache=False,
                      bos_token_id=tok.token_to_id(EOS), eos_token_id=tok.token_to_id(EOS),
                      attn_implementation="sdpa", **spec["arch"])
    model = Qwen2ForCausalLM(cfg).to(dev)
    model.config._attn_implementation = "sdpa"
    nparams = sum(p.numel() for p in model.parameters())
    hd = cfg.hidden_size // cfg.num_attention_heads
    log("model %s: %d parameters, head_dim %d, %d layers, heads %d/%d, attention_bias %s" %
        (args.model, nparams, hd, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads,
         getattr(model.model.layers[0].self_attn.q_proj, "bias", None) is not None))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr_max, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")

    def lr_at(s):
        return cosine_lr(s, lr_max, warmup, steps)

    fmodel = torch.compile(model, dynamic=False) if args.compile else model

    train_gpu = torch.from_numpy(train_ids.astype(np.int32)).to(dev)
    held = torch.from_numpy(held_ids.astype(np.int64))
    n_win = (len(held) - 1) // SEQ
    if args.eval_windows:
        n_win = min(n_win, args.eval_windows)
    held_windows = torch.stack([held[i * SEQ: i * SEQ + SEQ + 1] for i in range(n_win)])
    rng = np.random.default_rng(args.seed)
    exp_idx = sorted(rng.choice(n_win, size=args.num_export_seqs, replace=False).tolist())
    export_seqs = [held_windows[i, :SEQ].clone() for i in exp_idx]
    log("held-out: %d windows of %d tokens; export windows %s" % (n_win, SEQ, exp_idx))
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    ar = torch.arange(SEQ + 1, device=dev)

    def evaluate(fp32=False):
        model.eval()
        tot, cnt = 0.0, 0
        with torch.no_grad():
            for i in range(0, n_win, 32):
                w = held_windows[i:i + 32].to(dev)
                x, y = w[:, :-1], w[:, 1:]
                if fp32:
                    logits = model(input_ids=x, use_cache=False).logits
                else:
                    with torch.autocast(dev.type, dtype=torch.bfloat16):
                        logits = model(input_ids=x, use_cache=False).logits
                tot += float(F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1), reduction="sum"))
                cnt += y.numel()
        model.train()
        return tot / cnt

    stats_at = sorted(set([0] + [int(steps * f) for f in (0.05, 0.1, 0.25, 0.5, 0.75)]))
    curve, stats_rows = [], []
    best = (float("inf"), -1, None)
    model.train()
    t_train = time.time()
    tokens = 0
    acc, acc_n = torch.zeros((), device=dev), 0
    step = 0
    stopped_early = False
    for step in range(steps + 1):
        if step in stats_at:
            el = evaluate()
            stats_rows += qkv_stats(model, export_seqs, "step%d" % step, step, tokens, el)
            log("stats at step %d (eval %.4f): %s" % (step, el, summarize_stats(
                [r for r in stats_rows if r["step"] == step])))
        if step % eval_every == 0 or step == steps:
            el = evaluate()
            tl = float(acc / max(1, acc_n)) if acc_n else float("nan")
            curve.append(dict(step=step, tokens=tokens, seconds=round(time.time() - t_train, 2),
                              lr=lr_at(step), train_loss=tl, eval_loss=el))
            acc, acc_n = torch.zeros((), device=dev), 0
            if el < best[0]:
                best = (el, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            log("step %5d tokens %10d %6.1fs lr %.2e train %.4f eval %.4f%s" %
                (step, tokens, time.time() - t_train, lr_at(step), tl, el, " *" if best[1] == step else ""))
        if step == steps:
            break
        if time.time() - t_train > args.time_budget:
            stopped_early = True
            log("time budget %.0fs reached at step %d: stopping" % (args.time_budget, step))
            el = evaluate()
            curve.append(dict(step=step, tokens=tokens, seconds=round(time.time() - t_train, 2),
                              lr=lr_at(step), train_loss=float(acc / max(1, acc_n)), eval_loss=el))
            if el < best[0]:
                best = (el, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            break
        for g_ in opt.param_groups:
            g_["lr"] = lr_at(step)
        off = torch.randint(0, len(train_gpu) - SEQ - 1, (batch,), device=dev, generator=gen)
        w = train_gpu[off[:, None] + ar].long()
        x, y = w[:, :-1], w[:, 1:]
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = fmodel(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        acc += loss.detach()
        acc_n += 1
        tokens += x.numel()
    train_seconds = time.time() - t_train
    last_step = step
    # final statistics of the last weights, then the best
    if last_step not in stats_at:
        el = curve[-1]["eval_loss"]
        stats_rows += qkv_stats(model, export_seqs, "step%d" % last_step, last_step, tokens, el)
    model.load_state_dict(best[2])
    best_tokens = best[1] * batch * SEQ
    eval_fp32 = evaluate(fp32=True)
    log("best checkpoint: step %d, held-out loss %.4f (bf16 autocast), %.4f (float32); log(vocab) %.4f" %
        (best[1], best[0], eval_fp32, math.log(vocab)))
    stats_rows += qkv_stats(model, export_seqs, "best", best[1], best_tokens, eval_fp32)

    # ---------------------------------------------------------------- outputs
    write_curve(os.path.join(args.out, "curve_%s.csv" % args.model), curve)
    fields = ["checkpoint", "step", "tokens", "eval_loss", "layer", "tensor", "head", "absmean_over_std_max",
              "absmean_over_std_median", "amax_ratio", "kurtosis_max", "sink_mass"]
    with open(os.path.join(args.out, "stats_%s.csv" % args.model), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in stats_rows:
            w.writerow({k: (("%.6g" % v) if isinstance(v, float) else v) for k, v in r.items()})
    h5path = os.path.join(args.out, args.model + ".h5")
    text_source = ("held-out split (2%%) of the qattn Debian-package corpus (data/corpus/MANIFEST.tsv; "
                   "heldout.txt sha256 %s), tokenized with data/tokenizer.json; held-out windows %s of %d "
                   "tokens (window i = tokens [2048*i, 2048*i+2048))" % (sums["heldout.txt"][:16], exp_idx, SEQ))
    if not args.no_export:
        t0 = time.time()
        export_torch.export(model, export_seqs, h5path, model_name=args.model,
                            source="trained by qattn data/train.py (seed %d, step %d of %d)" % (args.seed, best[1], last_step),
                            license="derived from Debian texts under GPL-2/GPL-2+, GFDL, PSF-2.0, PostgreSQL, BSD-style and public-domain terms (see data/README.md)",
                            text_source=text_source, eval_loss=eval_fp32, vocab_size=vocab, dtype="float16")
        log("exported %s: %d bytes (%.1fs)" % (h5path, os.path.getsize(h5path), time.time() - t0))
    if args.save_dir:
        model.save_pretrained(args.save_dir)
        tok.save(os.path.join(args.save_dir, "tokenizer.json"))
    summ = dict(model=args.model, config=cfg.to_dict(), parameters=nparams, head_dim=hd, seed=args.seed,
                steps_planned=steps, steps_run=last_step, stopped_early=stopped_early, batch=batch, seq=SEQ,
                lr=lr_max, warmup=warmup, weight_decay=args.weight_decay, compile=args.compile,
                tokens_trained=tokens, train_tokens_available=int(len(train_ids)),
                epochs=tokens / len(train_ids), heldout_tokens=int(len(held_ids)), eval_windows=n_win,
                bytes_per_token=train_bytes / len(train_ids), vocab_size=vocab,
                best_step=best[1], best_eval_loss_bf16=best[0], eval_loss_fp32=eval_fp32, log_vocab=math.log(vocab),
                train_seconds=train_seconds, total_seconds=time.time() - t_start, export_windows=exp_idx,
                torch=torch.__version__, transformers=transformers.__version__,
                device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                stats_best=summarize_stats([r for r in stats_rows if r["checkpoint"] == "best"]))
    with open(os.path.join(args.out, "summary_%s.json" % args.model), "w") as f:
        json.dump(summ, f, indent=1, default=str)
    # ---------------------------------------------------------------- table
    log("\n== %s summary ==" % args.model)
    log("parameters %d, vocab %d, tokens trained %d (%.2f epochs), steps %d%s, train %.0fs, total %.0fs"
        % (nparams, vocab, tokens, summ["epochs"], last_step, " (time budget)" if stopped_early else "",
           train_seconds, summ["total_seconds"]))
    log("held-out loss: best %.4f at step %d (bf16), %.4f float32; log(vocab) %.4f"
        % (best[0], best[1], eval_fp32, math.log(vocab)))
    log("%-10s %8s %8s %8s %8s %8s" % ("checkpoint", "eval", "K mos", "Q mos", "V mos", "sink"))
    for lab in dict.fromkeys(r["checkpoint"] for r in stats_rows):
        rs = [r for r in stats_rows if r["checkpoint"] == lab]
        s = summarize_stats(rs)
        log("%-10s %8.4f %8.2f %8.2f %8.2f %8.3f" % (lab, rs[0]["eval_loss"], s["k"][0], s["q"][0], s["v"][0], s["sink_mean"]))
    log("(mos = mean over layers of the max over heads and channels of |mean|/std; sink = mean attention on token 0)")


if __name__ == "__main__":
    main()
