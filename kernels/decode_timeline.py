#!/usr/bin/env python3
"""Summarize a decode timeline (qattn decode-bench --stamps FILE.csv): per cache, shape and
replica (consecutive decode calls), the span from the first block's entry to the last block's
end, the phases' medians over the blocks, the spread of the blocks' loop ends, and the gap
between one call's last block and the next call's first wait.

usage: kernels/decode_timeline.py STAMPS.csv"""
import csv
import statistics
import sys
from collections import defaultdict

PHASES = ["wait", "setup", "first", "stream", "merge", "end"]


def us(x):
    return x / 1000.0


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    rows = defaultdict(lambda: defaultdict(list))
    with open(sys.argv[1], newline="") as f:
        for r in csv.DictReader(f):
            key = (r["cache"], int(r["sk"]), int(r["batch"]), int(r["hkv"]), int(r["num_splits"]))
            t = [int(r[f"t{i}_ns"]) if r[f"t{i}_ns"] else None for i in range(7)]
            if t[0] is None:
                continue
            w = [int(v) for k, v in r.items() if k.startswith("warp") and v]
            rows[key][int(r["replica"])].append((t, w, int(r["smid"])))
    for key, reps in rows.items():
        cache, sk, batch, hkv, ns = key
        print(f"{cache} {sk}:{batch}:{hkv} splits {ns}: {len(reps)} consecutive calls")
        prev_end = None
        for rep in sorted(reps):
            blocks = reps[rep]
            t0 = min(b[0][0] for b in blocks)
            ends = [b[0][6] for b in blocks if b[0][6] is not None]
            waits = [b[0][1] for b in blocks if b[0][1] is not None]
            end = max(ends) if ends else None
            line = f"  call {rep}: entry {us(t0):8.2f} us"
            if waits:
                line += f", first wait done {us(min(waits) - t0):6.2f} after entry"
            if end is not None:
                line += f", span {us(end - t0):7.2f} us"
            if prev_end is not None and waits:
                line += f", previous call's end -> first wait done {us(min(waits) - prev_end):6.2f}"
            print(line)
            med = []
            for i, name in enumerate(PHASES):
                d = [b[0][i + 1] - b[0][i] for b in blocks if b[0][i] is not None and b[0][i + 1] is not None]
                med.append(f"{name} {us(statistics.median(d)):6.2f}" if d else f"{name}   -")
            print("    phase medians (us): " + ", ".join(med))
            l4 = sorted(b[0][4] - t0 for b in blocks if b[0][4] is not None)
            if l4:
                print(f"    loops done (us after entry): min {us(l4[0]):.2f} median {us(l4[len(l4)//2]):.2f} "
                      f"max {us(l4[-1]):.2f}")
            spreads = [max(b[1]) - min(b[1]) for b in blocks if len(b[1]) > 1]
            if spreads:
                print(f"    warps' loop ends within a block: median spread {us(statistics.median(spreads)):.2f} us, "
                      f"max {us(max(spreads)):.2f}")
            prev_end = end
    return 0


if __name__ == "__main__":
    sys.exit(main())
