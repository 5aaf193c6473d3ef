#!/usr/bin/python3
"""Per-layer channel statistics of a qattn activation file (numpy + h5py only).

For each layer and tensor (Q, K, V), per head h and channel c over all tokens:
mean m_c and standard deviation s_c.  Printed per layer, maximum over heads:
  mos   = max over channels of |m_c| / s_c
  amax  = max over channels of max_t |x| / median over channels of max_t |x|
and the attention-sink mass: mean over query rows t >= 16 of the attention
probability on each sequence's first token (causal softmax with the file's
softmax_scale, per /seqlens segment), mean and max over query heads.

Usage: /usr/bin/python3 data/activation_stats.py FILE.h5 [--markdown]
"""
import argparse
import math

import h5py
import numpy as np


def head_stats(x):
    """x [H, N, d] -> (mos [H], amax_ratio [H])"""
    x = x.astype(np.float64)
    m = x.mean(axis=1)
    s = x.std(axis=1)
    mos = (np.abs(m) / np.maximum(s, 1e-30)).max(axis=1)
    amax = np.abs(x).max(axis=1)
    ratio = amax.max(axis=1) / np.median(amax, axis=1)
    return mos, ratio


def sink(q, k, seqlens, scale, skip=16):
    hq, hkv = q.shape[0], k.shape[0]
    g = hq // hkv
    res = np.zeros(hq)
    s0 = 0
    for L in seqlens:
        qs = q[:, s0:s0 + L].astype(np.float64)
        ks = k[:, s0:s0 + L].astype(np.float64)
        mask = np.triu(np.ones((L, L), dtype=bool), 1)
        for h in range(hq):
            s = qs[h] @ ks[h // g].T * scale
            s[mask] = -np.inf
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            res[h] += p[skip:, 0].mean()
        s0 += L
    return res / len(seqlens)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    with h5py.File(args.file, "r") as f:
        layers = sorted(k for k in f if k.startswith("layer_"))
        seqlens = [int(x) for x in f["seqlens"][()]] if "seqlens" in f else [f[layers[0]]["q"].shape[1]]
        d = f[layers[0]]["q"].shape[2]
        scale = float(f.attrs["softmax_scale"]) if "softmax_scale" in f.attrs else 1.0 / math.sqrt(d)
        hdr = ("layer", "K mos", "Q mos", "V mos", "K amax", "Q amax", "V amax", "sink mean", "sink max")
        if args.markdown:
            print("| " + " | ".join(hdr) + " |")
            print("|" + "---|" * len(hdr))
        else:
            print("%-6s" % hdr[0] + "".join("%10s" % h for h in hdr[1:]))
        rows = []
        for i, l in enumerate(layers):
            q, k, v = f[l]["q"][()], f[l]["k"][()], f[l]["v"][()]
            (qm, qa), (km, ka), (vm, va) = head_stats(q), head_stats(k), head_stats(v)
            sm = sink(q, k, seqlens, scale)
            row = (i, km.max(), qm.max(), vm.max(), ka.max(), qa.max(), va.max(), sm.mean(), sm.max())
            rows.append(row)
            if args.markdown:
                print("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f |" % row)
            else:
                print("%-6d" % i + "".join("%10.3f" % x for x in row[1:]))
        mean = [sum(r[j] for r in rows) / len(rows) for j in range(1, 9)]
        if args.markdown:
            print("| mean | " + " | ".join("%.2f" % x if j < 6 else "%.3f" % x for j, x in enumerate(mean)) + " |")
        else:
            print("%-6s" % "mean" + "".join("%10.3f" % x for x in mean))


if __name__ == "__main__":
    main()
