#!/usr/bin/env python3
"""Fill the us_torch column of a `qattn decode-bench` CSV: torch SDPA on the
same decode shapes, timed in the same device call.

For every distinct (sk, batch, hq, hkv) of the input CSV: bf16 q [batch, hq, 1,
128], k and v [batch, hkv, sk, 128] (torch.randn, contiguous: torch reads no
pages), scaled_dot_product_attention(..., enable_gqa=True) under each of the
flash, cuDNN, efficient and math backends; CUDA events around S calls back
to back on R replicas of k and v in turn (R = 192 MB / their bytes + 1, at
most 64; S = the larger of R and --steps: qattn decode-bench's rule), each
run behind a spin kernel of about 1 ms (torch.cuda._sleep, as qattn's timing:
the first calls are enqueued before the start event fires), median
of --reps runs after 2 warm-up runs, per call; the fastest backend that accepts
the shape goes in us_torch (the per-backend times on stderr). The same torch
time fills every qattn row of the shape (its cache format included: torch has
no quantized cache).

  python3 kernels/bench_torch_decode.py --in RAW.csv --out FILE.csv [--reps 30] [--steps 8]

The output is written to a temporary file and renamed.
"""
import argparse
import csv
import os
import statistics
import sys

# clocks of the spin kernel before each timed run (about 1 ms; qattn's QATTN_TIMING_STALL_CYCLES)
STALL_CYCLES = 2000000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="inp", required=True, help="CSV written by qattn decode-bench")
    ap.add_argument("--out", required=True, help="the CSV with us_torch filled")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--steps", type=int, default=8, help="calls a timed run, at least (as qattn decode-bench)")
    a = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("bench_torch_decode.py: no CUDA device", file=sys.stderr)
        return 2
    with open(a.inp, newline="") as f:
        rd = csv.DictReader(f)
        fields = rd.fieldnames
        rows = list(rd)
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)]
    best = {}
    for r in rows:
        key = (int(r["sk"]), int(r["batch"]), int(r["hq"]), int(r["hkv"]))
        if key in best:
            continue
        sk, b, hq, hkv = key
        d = 128
        kvb = 2.0 * b * hkv * sk * d * 2
        nrep = min(64, int(192e6 / kvb) + 1)
        steps = max(nrep, a.steps)
        q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
        ks = [torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(nrep)]
        vs = [torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(nrep)]
        times = {}
        for name, be in backends:
            if name == "math" and b * hq * sk > (1 << 26):
                continue  # the math backend materializes the scores
            try:
                with sdpa_kernel(be):
                    for _ in range(2):
                        for k, v in zip(ks, vs):
                            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    torch.cuda.synchronize()
                    ts = []
                    for _ in range(a.reps):
                        e0 = torch.cuda.Event(enable_timing=True)
                        e1 = torch.cuda.Event(enable_timing=True)
                        torch.cuda._sleep(STALL_CYCLES)
                        e0.record()
                        for i in range(steps):
                            F.scaled_dot_product_attention(q, ks[i % nrep], vs[i % nrep], enable_gqa=True)
                        e1.record()
                        e1.synchronize()
                        ts.append(e0.elapsed_time(e1) * 1e3 / steps)
                times[name] = statistics.median(ts)
            except RuntimeError as ex:
                msg = str(ex).splitlines()[0][:100] if str(ex) else type(ex).__name__
                print(f"torch {name} sk={sk} batch={b} hq={hq} hkv={hkv}: refused ({msg})", file=sys.stderr)
        del q, ks, vs
        torch.cuda.empty_cache()
        if times:
            name = min(times, key=times.get)
            best[key] = times[name]
            kv = kvb
            print(f"torch sk={sk} batch={b} hq={hq} hkv={hkv}: " +
                  ", ".join(f"{n} {t:.1f} us ({kv / t * 1e-3:.0f} GB/s)" for n, t in times.items()) +
                  f"; best {name}", file=sys.stderr)
    tmp = a.out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in rows:
            key = (int(r["sk"]), int(r["batch"]), int(r["hq"]), int(r["hkv"]))
            r["us_torch"] = f"{best[key]:.2f}" if key in best else ""
            w.writerow(r)
    os.replace(tmp, a.out)
    for r in rows:
        if r["us_torch"]:
            print(f"{r['cache']:<12} sk={r['sk']:>6} batch={r['batch']:>2} hkv={r['hkv']} splits={r['num_splits']:>3}: "
                  f"{float(r['us']):8.1f} us, {float(r['kv_gbs']) / float(r['copy_gbs']):.2f} of the copy, "
                  f"{float(r['us_torch']) / float(r['us']):.2f}x torch" +
                  (f", combine {float(r['us_combine']) / float(r['us']) * 100:.0f}%" if r.get("us_combine") else "") +
                  (f" alone, {(1 - float(r['us_split']) / float(r['us'])) * 100:.0f}% added" if r.get("us_split") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
