#!/usr/bin/env python3
"""Fill the matmul_tflops column of a `qattn sparse-bench` CSV: the bf16
matmul rate torch reaches on this GPU, timed in the same device call (the
issue's yardstick for the sparse prefill: a share of what the tensor cores
give a plain GEMM).

torch.matmul of two random bf16 [8192, 8192] matrices, 2 x 8192^3 FLOPs a
call; CUDA events around 10 calls back to back behind a spin kernel of about
1 ms (torch.cuda._sleep, as qattn's timing), median of --reps runs after
3 warm-up runs; the same rate fills every row.

  python3 kernels/bench_torch_matmul.py --in RAW.csv --out FILE.csv [--reps 20]

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
    ap.add_argument("--in", dest="inp", required=True, help="CSV written by qattn sparse-bench")
    ap.add_argument("--out", required=True, help="the CSV with matmul_tflops filled")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--n", type=int, default=8192, help="matrix size (default 8192)")
    a = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("bench_torch_matmul.py: no CUDA device", file=sys.stderr)
        return 2
    with open(a.inp, newline="") as f:
        rd = csv.DictReader(f)
        fields = rd.fieldnames
        rows = list(rd)
    if not fields or "matmul_tflops" not in fields:
        print("bench_torch_matmul.py: %s has no matmul_tflops column" % a.inp, file=sys.stderr)
        return 2
    n = a.n
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    calls = 10
    times = []
    for i in range(a.reps + 3):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(STALL_CYCLES)
        t0.record()
        for _ in range(calls):
            torch.matmul(x, y)
        t1.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(t0.elapsed_time(t1) / calls)
    ms = statistics.median(times)
    tflops = 2.0 * n ** 3 / (ms * 1e-3) * 1e-12
    print("bench_torch_matmul.py: %s, bf16 %d^3 matmul %.3f ms = %.1f TFLOPS" % (torch.cuda.get_device_name(), n, ms,
                                                                               tflops), file=sys.stderr)
    for r in rows:
        r["matmul_tflops"] = "%.1f" % tflops
    tmp = a.out + ".tmp"
    with open(tmp, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        wr.writeheader()
        wr.writerows(rows)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
