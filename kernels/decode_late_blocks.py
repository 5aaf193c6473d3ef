#!/usr/bin/env python3
"""Which split blocks end their loops late, over several decode timelines (qattn decode-bench --stamps
FILE.csv, kernels built with QATTN_DECODE_STAMPS=ON): per stamped call, each block's loop end (t4)
minus the call's median; grouped by multiprocessor, by tile (block index) and by cluster rank, with the
split-half correlation of the groups' means (near 1: the lateness follows the group, so a static rule
could even it; near 0: it is per call); the lateness against the wait's release and the setup; the
spread of the loop ends.

usage: kernels/decode_late_blocks.py STAMPS.csv [STAMPS.csv...]"""
import csv
import statistics
import sys
from collections import defaultdict

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__, file=sys.stdout if len(sys.argv) == 2 else sys.stderr)
    sys.exit(0 if len(sys.argv) == 2 else 2)


def corr(a, b):
    """Pearson's correlation of two equal-length lists (nan where either is constant)"""
    ma, mb = statistics.mean(a), statistics.mean(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va, vb = sum((x - ma) ** 2 for x in a), sum((y - mb) ** 2 for y in b)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else float('nan')


late_sm = defaultdict(list); late_tile = defaultdict(list); late_rank = defaultdict(list)
pairs = []
for f in sys.argv[1:]:
    calls = defaultdict(list)
    for r in csv.DictReader(open(f)):
        if not r['t4_ns'] or not r['t1_ns']: continue
        calls[(r['cache'], r['sk'], r['batch'], r['hkv'], r['replica'])].append(r)
    for k, rows in calls.items():
        ends = [int(r['t4_ns']) for r in rows]
        med = statistics.median(ends)
        wait = [int(r['t1_ns']) for r in rows]
        for r in rows:
            l = (int(r['t4_ns']) - med) / 1000.0
            key = (k[0], k[1], k[2], k[3])
            late_sm[(key, int(r['smid']))].append(l)
            late_tile[(key, int(r['block']))].append(l)
            late_rank[(key, int(r['rank']))].append(l)
            pairs.append((key, l, (int(r['t1_ns']) - min(wait)) / 1000.0, (int(r['t2_ns'] or 0) - int(r['t1_ns'])) / 1000.0))
def consistency(d, name):
    # split each group's samples in halves (even / odd sample) and correlate the halves' means
    byshape = defaultdict(list)
    for (key, g), v in d.items():
        if len(v) >= 2: byshape[key].append((statistics.mean(v[0::2]), statistics.mean(v[1::2]), g, statistics.mean(v)))
    for key, xs in byshape.items():
        c = corr([x[0] for x in xs], [x[1] for x in xs])
        xs.sort(key=lambda x: x[3])
        print(f"{key} by {name}: {len(xs)} groups, split-half correlation {c:.2f}; earliest {[(x[2], round(x[3],2)) for x in xs[:4]]} latest {[(x[2], round(x[3],2)) for x in xs[-4:]]}")
consistency(late_sm, 'smid'); consistency(late_tile, 'tile'); consistency(late_rank, 'rank')
# lateness against the wait's release and the setup
byk = defaultdict(list)
for key, l, w, s in pairs:
    byk[key].append((l, w, s))
for key, xs in byk.items():
    for j, nm in ((1, 'wait released after the first'), (2, 'setup')):
        print(f"{key}: lateness vs {nm}: corr {corr([x[0] for x in xs], [x[j] for x in xs]):.2f}")
    ls = sorted(x[0] for x in xs)
    print(f"{key}: loop ends about the median: p5 {ls[len(ls)//20]:.2f} p50 {ls[len(ls)//2]:.2f} p95 {ls[len(ls)*19//20]:.2f} max {ls[-1]:.2f} us")
