#!/usr/bin/env python3
"""Train qattn's third small model, whose attention has DeepSeek-V4's shape, and export it.

qattn-mqa512: 8 layers, 16 query heads of width 512 and one 512-wide KV row per token
(multi-query attention) that serves as key and as value. The row is 448 channels without
position ("nope", RMS-normalised like DeepSeek's latent) followed by 64 with RoPE; the
query heads split the same way. Softmax scale 1/sqrt(512). Hidden 256, SwiGLU 704, tied
embeddings, no biases. Same corpus, tokenizer, context (2048), optimiser and seeds as
data/train.py; the step count is fixed after 20 timed steps so that training fits
--time-budget (the schedule is step-based from then on; the summary records it).

Export (data/README.md, "The MQA-512 file"): one held-out window, the KV row of all
2048 positions and the query rows of the last --q-rows positions, for the layers in
--layers, float16; q [16, Nq, 512], k [1, N, 512] and v a hard link to k.

Usage (GPU machine): python3 data/train_mqa512.py --corpus DIR --out DIR
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train import SEP, SEQ, channel_stats, cosine_lr, encode, sha256_file, write_curve  # noqa: E402


def log(*a):
    if os.environ.get("RANK", "0") == "0":
        print(*a, flush=True)

MODEL = "qattn-mqa512"
ARCH = dict(hidden=256, ffn=704, layers=8, heads=16, head_dim=512, rope_dim=64)


def build_model(vocab, arch, attn="sdpa"):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, n, eps=1e-6):
            super().__init__()
            self.w = nn.Parameter(torch.ones(n))
            self.eps = eps

        def forward(self, x):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.w

    def rope(x, cos, sin):
        # rotate-half convention (as Qwen2/Llama) over the last dim
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    class Attention(nn.Module):
        def __init__(self, a):
            super().__init__()
            self.h, self.d, self.r = a["heads"], a["head_dim"], a["rope_dim"]
            self.wq = nn.Linear(a["hidden"], self.h * self.d, bias=False)
            self.wkv = nn.Linear(a["hidden"], self.d, bias=False)
            self.kv_norm = RMSNorm(self.d - self.r)
            self.wo = nn.Linear(self.h * self.d, a["hidden"], bias=False)
            self.capture = None

        def forward(self, x, cos, sin):
            B, N, _ = x.shape
            dn = self.d - self.r
            q = self.wq(x).view(B, N, self.h, self.d).transpose(1, 2)          # [B, H, N, 512]
            kv = self.wkv(x)                                                   # [B, N, 512]
            q = torch.cat([q[..., :dn], rope(q[..., dn:], cos, sin)], dim=-1)
            kv = torch.cat([self.kv_norm(kv[..., :dn]), rope(kv[..., dn:], cos, sin)], dim=-1)
            kv = kv.unsqueeze(1)                                               # [B, 1, N, 512]
            if self.capture is not None:
                self.capture.append((q.detach()[0].float().cpu(), kv.detach()[0].float().cpu()))
            kvx = kv.expand(B, self.h, N, self.d)
            if attn == "math":
                s = torch.matmul(q, kvx.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))
                mask = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1)
                p = torch.softmax(s.float().masked_fill(mask, float("-inf")), dim=-1).to(q.dtype)
                o = torch.matmul(p, kvx)
            else:
                o = F.scaled_dot_product_attention(q, kvx, kvx, is_causal=True, scale=1.0 / math.sqrt(self.d))
            return self.wo(o.transpose(1, 2).reshape(B, N, self.h * self.d))

    class Block(nn.Module):
        def __init__(self, a):
            super().__init__()
            self.n1, self.n2 = RMSNorm(a["hidden"]), RMSNorm(a["hidden"])
            self.attn = Attention(a)
            self.gate = nn.Linear(a["hidden"], a["ffn"], bias=False)
            self.up = nn.Linear(a["hidden"], a["ffn"], bias=False)
            self.down = nn.Linear(a["ffn"], a["hidden"], bias=False)

        def forward(self, x, cos, sin):
            x = x + self.attn(self.n1(x), cos, sin)
            h = self.n2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class Model(nn.Module):
        def __init__(self, a):
            super().__init__()
            self.a = a
            self.emb = nn.Embedding(vocab, a["hidden"])
            self.blocks = nn.ModuleList([Block(a) for _ in range(a["layers"])])
            self.norm = RMSNorm(a["hidden"])
            inv = 1.0 / (10000.0 ** (torch.arange(0, a["rope_dim"], 2, dtype=torch.float32) / a["rope_dim"]))
            t = torch.arange(SEQ, dtype=torch.float32)[:, None] * inv[None]
            ang = torch.cat([t, t], dim=-1)                                    # [SEQ, 64]
            self.register_buffer("cos", ang.cos(), persistent=False)
            self.register_buffer("sin", ang.sin(), persistent=False)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)

        def forward(self, ids):
            N = ids.shape[1]
            cos, sin = self.cos[:N].to(self.emb.weight.dtype), self.sin[:N].to(self.emb.weight.dtype)
            x = self.emb(ids)
            for b in self.blocks:
                x = b(x, cos, sin)
            return F.linear(self.norm(x), self.emb.weight)

    return Model(arch)


def capture(model, ids):
    """float32 forward of one sequence: per layer (q [H, N, 512], kv [1, N, 512])."""
    import torch
    for b in model.blocks:
        b.attn.capture = []
    was = model.training
    model.eval()
    with torch.no_grad():
        logits = model(ids.reshape(1, -1).to(next(model.parameters()).device))
    model.train(was)
    out = []
    for b in model.blocks:
        out.append(b.attn.capture[0])
        b.attn.capture = None
    return out, logits


def export(path, layers_qkv, layer_ids, q_rows, attrs):
    """The MQA-512 file: root attributes as qattn-activations/1 plus q_offset, rope_dim,
    layer_ids; /layer_LL/{q,k} float16, v a hard link to k; /seqlens = [N]."""
    import h5py
    import numpy as np
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        for k, v in attrs.items():
            f.attrs[k] = v
        n = layers_qkv[0][1].shape[1]
        f.attrs["q_offset"] = np.int64(n - q_rows)
        f.attrs["layer_ids"] = np.asarray(layer_ids, dtype=np.int64)
        for i, l in enumerate(layer_ids):
            q, kv = layers_qkv[l]
            g = f.create_group("layer_%02d" % i)
            qa = q[:, n - q_rows:].numpy().astype(np.float16)
            ka = kv.numpy().astype(np.float16)
            for name, a in (("q", qa), ("k", ka)):
                if not np.isfinite(a).all():
                    raise SystemExit("layer %d %s: a value outside float16's range" % (l, name))
                g.create_dataset(name, data=a, chunks=(1,) + a.shape[1:], shuffle=True, compression="gzip",
                                 compression_opts=9)
            g["v"] = g["k"]  # one KV row serves as key and value
        f.create_dataset("seqlens", data=np.asarray([n], dtype=np.int64))
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="directory with train.txt and heldout.txt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--time-budget", type=float, default=300.0, help="seconds of training the step count is fit to")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (default: fit to --time-budget)")
    ap.add_argument("--evals", type=int, default=10, help="held-out evaluations during training")
    ap.add_argument("--eval-windows", type=int, default=64, help="windows per evaluation during training")
    ap.add_argument("--layers", default="0,3,7", help="layers to export")
    ap.add_argument("--q-rows", type=int, default=256, help="query rows to export (the last of the window)")
    ap.add_argument("--attn", choices=("sdpa", "math"), default="sdpa")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="smoke test: 2 layers, 4 heads, CPU-sized")
    ap.add_argument("--no-verify", action="store_true", help="skip the corpus sha256 check")
    args = ap.parse_args()

    import numpy as np
    import torch
    import torch.nn.functional as F

    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    sums = dict(reversed(l.split()) for l in open(os.path.join(HERE, "corpus", "SHA256SUMS")))
    texts = {}
    for name in ("train.txt", "heldout.txt"):
        p = os.path.join(args.corpus, name)
        if not args.no_verify and sha256_file(p) != sums[name]:
            sys.exit("%s: sha256 differs from data/corpus/SHA256SUMS (pass --no-verify)" % p)
        with open(p, encoding="utf-8") as f:
            texts[name] = f.read().rstrip("\n").split(SEP)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(args.tokenizer)
    vocab = tok.get_vocab_size()
    train_ids, held_ids = encode(tok, texts["train.txt"]), encode(tok, texts["heldout.txt"])
    del texts
    log("tokens: train %d, held-out %d (%.1fs)" % (len(train_ids), len(held_ids), time.time() - t_start))

    # data parallel under torchrun: every rank draws its own windows, rank 0 evaluates the final
    # weights and exports
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    arch = dict(ARCH)
    if args.tiny:
        arch.update(layers=2, heads=4)
    if args.attn == "sdpa" and dev.type == "cuda":
        try:  # head dim 512: the memory-efficient backend, if this torch has one that takes it
            t = torch.randn(2, arch["heads"], 256, arch["head_dim"], device=dev, dtype=torch.bfloat16,
                            requires_grad=True)
            F.scaled_dot_product_attention(t, t, t, is_causal=True, scale=0.05).sum().backward()
        except RuntimeError as e:
            log("sdpa cannot run head dim %d (%s): using the math path" % (arch["head_dim"], str(e)[:200]))
            args.attn = "math"
    model = build_model(vocab, arch, args.attn).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    log("model %s: %d parameters, %s, attention %s" % (MODEL, nparams, arch, args.attn))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if dev.type == "cuda" else {}))
    fmodel = model
    if world > 1:
        fmodel = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    fmodel = torch.compile(fmodel, dynamic=False) if args.compile else fmodel
    seq = SEQ if not args.tiny else 256
    train_gpu = torch.from_numpy(train_ids.astype(np.int32)).to(dev)
    held = torch.from_numpy(held_ids.astype(np.int64))
    n_win = (len(held) - 1) // SEQ
    held_windows = torch.stack([held[i * SEQ: i * SEQ + SEQ + 1] for i in range(n_win)])
    rng = np.random.default_rng(args.seed)
    exp_idx = int(rng.choice(n_win))
    gen = torch.Generator(device=dev).manual_seed(args.seed + 1000003 * rank)
    ar = torch.arange(seq + 1, device=dev)

    def evaluate(nw, fp32=False, bs=16):
        model.eval()
        tot, cnt = 0.0, 0
        with torch.no_grad():
            for i in range(0, nw, bs):
                w = held_windows[i:min(nw, i + bs), :seq + 1].to(dev)
                x, y = w[:, :-1], w[:, 1:]
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=not fp32):
                    logits = model(x)
                tot += float(F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1), reduction="sum"))
                cnt += y.numel()
        model.train()
        return tot / cnt

    steps = args.steps or 10 ** 9
    lr_max, warmup = args.lr, args.warmup

    def lr_at(s):  # steps is fixed after the timed steps; warm-up covers them
        return cosine_lr(s, lr_max, warmup, steps)

    eval_w = min(n_win, args.eval_windows)
    curve = []
    best = (float("inf"), -1, None)
    acc, acc_n, tokens, step = torch.zeros((), device=dev), 0, 0, 0
    t_train = time.time()
    t_fit = None
    eval_every = None
    while True:
        if step == 20 and not args.steps:  # fit the step count to the budget from 10 timed steps
            if dev.type == "cuda":
                torch.cuda.synchronize()
            per = (time.time() - t_fit) / 10
            steps = max(warmup + 20, int((args.time_budget - (time.time() - t_train)) / per) + 20)
            if world > 1:  # every rank runs rank 0's count
                t = torch.tensor([steps], device=dev)
                dist.broadcast(t, 0)
                steps = int(t.item())
            log("%.3fs a step: training %d steps" % (per, steps))
        if step == 10:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_fit = time.time()
        if step >= 20 or args.steps:
            eval_every = max(1, steps // args.evals)
        if eval_every and (step % eval_every == 0 or step == steps):
            el = evaluate(eval_w)
            tl = float(acc / max(1, acc_n)) if acc_n else float("nan")
            curve.append(dict(step=step, tokens=tokens, seconds=round(time.time() - t_train, 2), lr=lr_at(step),
                              train_loss=tl, eval_loss=el))
            acc, acc_n = torch.zeros((), device=dev), 0
            if el < best[0]:
                best = (el, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            log("step %5d tokens %10d %6.1fs lr %.2e train %.4f eval %.4f%s" %
                (step, tokens, time.time() - t_train, lr_at(step), tl, el, " *" if best[1] == step else ""))
        if step == steps:
            break
        for g_ in opt.param_groups:
            g_["lr"] = lr_at(step)
        off = torch.randint(0, len(train_gpu) - seq - 1, (args.batch,), device=dev, generator=gen)
        w = train_gpu[off[:, None] + ar].long()
        x, y = w[:, :-1], w[:, 1:]
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = fmodel(x)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        acc += loss.detach()
        acc_n += 1
        tokens += x.numel() * world
        step += 1
    train_seconds = time.time() - t_train
    if world > 1:
        dist.barrier()
        if rank != 0:
            dist.destroy_process_group()
            return
    model.load_state_dict(best[2])
    eval_fp32 = evaluate(n_win, fp32=True)
    log("best: step %d, held-out loss %.4f (bf16, %d windows), %.4f (float32, all %d windows)" %
        (best[1], best[0], eval_w, eval_fp32, n_win))

    write_curve(os.path.join(args.out, "curve_%s.csv" % MODEL), curve)
    ids = held_windows[exp_idx, :seq]
    layers_qkv, _ = capture(model, ids)
    stats = []
    for l, (q, kv) in enumerate(layers_qkv):
        for name, t in (("q", q), ("kv", kv)):
            for h, st in enumerate(channel_stats(t)):
                stats.append(dict(layer=l, tensor=name, head=h, **st))
    layer_ids = [int(x) for x in args.layers.split(",") if int(x) < arch["layers"]]
    h5path = os.path.join(args.out, MODEL + ".h5")
    attrs = dict(schema="qattn-activations/1", model=MODEL,
                 source="trained by qattn data/train_mqa512.py (seed %d, step %d of %d)" % (args.seed, best[1], steps),
                 license="derived from Debian texts under GPL-2/GPL-2+, GFDL, PSF-2.0, PostgreSQL, BSD-style and "
                         "public-domain terms (see data/README.md)",
                 text_source="held-out split (2%%) of the qattn Debian-package corpus (heldout.txt sha256 %s), "
                             "tokenized with data/tokenizer.json; held-out window %d of %d tokens"
                             % (sums["heldout.txt"][:16], exp_idx, SEQ),
                 rope_applied=np.int64(1), causal=np.int64(1), softmax_scale=1.0 / math.sqrt(arch["head_dim"]),
                 eval_loss=eval_fp32, vocab_size=np.int64(vocab), rope_dim=np.int64(arch["rope_dim"]))
    export(h5path, layers_qkv, layer_ids, min(args.q_rows, seq), attrs)
    log("exported %s: %d bytes, layers %s" % (h5path, os.path.getsize(h5path), layer_ids))
    summ = dict(model=MODEL, arch=arch, parameters=nparams, seed=args.seed, steps=steps, batch=args.batch,
                ranks=world, seq=seq,
                lr=lr_max, warmup=warmup, weight_decay=args.weight_decay, attention=args.attn, compile=args.compile,
                tokens_trained=tokens, epochs=tokens / len(train_ids), eval_windows_training=eval_w,
                eval_windows=n_win, best_step=best[1], best_eval_loss_bf16=best[0], eval_loss_fp32=eval_fp32,
                train_seconds=train_seconds, total_seconds=time.time() - t_start, export_window=exp_idx,
                export_layers=layer_ids, export_q_rows=args.q_rows, torch=torch.__version__,
                device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", channel_stats=stats)
    with open(os.path.join(args.out, "summary_%s.json" % MODEL), "w") as f:
        json.dump(summ, f, indent=1)
    if world > 1:
        dist.destroy_process_group()
    log("\n== %s: %d parameters, %d steps, %d tokens (%.2f epochs), train %.0fs, total %.0fs; held-out loss "
        "%.4f (float32); log(vocab) %.4f ==" % (MODEL, nparams, steps, tokens, summ["epochs"], train_seconds,
                                              summ["total_seconds"], eval_fp32, math.log(vocab)))


if __name__ == "__main__":
    main()
