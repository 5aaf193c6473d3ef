#!/usr/bin/env python3
"""Fill the torch columns of a `qattn bench` CSV: torch SDPA (flash and cuDNN
backends) on the same shapes, timed in the same device call.

For every distinct (head_dim, causal, n, batch, heads) of the input CSV:
fp16 Q, K, V [batch, heads, n, head_dim] (torch.randn, never zeros),
torch.nn.functional.scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION)
and sdpa_kernel(CUDNN_ATTENTION); CUDA events around each call, each behind a
spin kernel of about 1 ms (torch.cuda._sleep, as qattn's timing: the call's
launch is enqueued before the start event fires), median of --reps runs after
3 warm-up calls; TOPS = 4 B H N^2 d / t (half with causal),
the count `qattn bench` uses. A backend that refuses a shape leaves its column
empty and says so on stderr.

  python3 kernels/bench_torch.py --in RAW.csv --out FILE.csv [--reps 20]

The output is written to a temporary file and renamed. Also prints one line
per qattn row: kernel-only and end-to-end speed-up over torch flash.
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
    ap.add_argument("--in", dest="inp", required=True, help="CSV written by qattn bench")
    ap.add_argument("--out", required=True, help="the CSV with the torch columns filled")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("bench_torch.py: no CUDA device", file=sys.stderr)
        return 2
    with open(a.inp, newline="") as f:
        rows = list(csv.DictReader(f))
        if not rows:
            print(f"bench_torch.py: {a.inp}: no rows", file=sys.stderr)
            return 2
        fields = list(rows[0].keys())
    for col in ("head_dim", "causal", "n", "batch", "heads", "tops_torch_flash", "tops_torch_cudnn"):
        if col not in fields:
            print(f"bench_torch.py: {a.inp}: no column {col}", file=sys.stderr)
            return 2

    def time_sdpa(backend, q, k, v, causal):
        try:
            with sdpa_kernel(backend):
                for _ in range(3):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.cuda.synchronize()
                ts = []
                for _ in range(a.reps):
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    torch.cuda._sleep(STALL_CYCLES)
                    e0.record()
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    e1.record()
                    e1.synchronize()
                    ts.append(e0.elapsed_time(e1))
            return statistics.median(ts)
        except RuntimeError as e:
            print(f"bench_torch.py: {backend}: {str(e).splitlines()[0]}", file=sys.stderr)
            return None

    shapes = sorted({(int(r["head_dim"]), int(r["causal"]), int(r["n"]), int(r["batch"]), int(r["heads"])) for r in rows})
    res = {}
    torch.manual_seed(0)
    for i, (d, causal, n, b, h) in enumerate(shapes):
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
        out = {}
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            ms = time_sdpa(be, q, k, v, bool(causal))
            out[name] = None if ms is None else flops / (ms * 1e-3) * 1e-12
        res[(d, causal, n, b, h)] = out
        print(f"bench_torch.py: [{i + 1}/{len(shapes)}] d={d} causal={causal} N={n} B={b} H={h}: "
              f"flash {out['flash'] or float('nan'):.1f} cudnn {out['cudnn'] or float('nan'):.1f} TOPS",
              file=sys.stderr)
        del q, k, v
        torch.cuda.empty_cache()

    for r in rows:
        t = res[(int(r["head_dim"]), int(r["causal"]), int(r["n"]), int(r["batch"]), int(r["heads"]))]
        r["tops_torch_flash"] = "" if t["flash"] is None else f"{t['flash']:.3f}"
        r["tops_torch_cudnn"] = "" if t["cudnn"] is None else f"{t['cudnn']:.3f}"
    tmp = a.out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, a.out)
    print(f"{'kernel':48s} {'scheme':14s} {'d':>4s} {'c':>2s} {'N':>6s} {'kernel':>8s} {'e2e':>8s} "
          f"{'flash':>8s} {'cudnn':>8s} {'k/flash':>8s} {'e2e/flash':>9s}")
    for r in rows:
        fl = float(r["tops_torch_flash"]) if r["tops_torch_flash"] else float("nan")
        tk, te = float(r["tops_kernel"]), float(r["tops_e2e"])
        print(f"{r['kernel']:48s} {r['scheme']:14s} {r['head_dim']:>4s} {r['causal']:>2s} {r['n']:>6s} "
              f"{tk:8.1f} {te:8.1f} {fl:8.1f} {r['tops_torch_cudnn'] or 'nan':>8s} {tk / fl:8.3f} {te / fl:9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
