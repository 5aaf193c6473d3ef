#!/usr/bin/env python3
"""Fits models of the f16 tensor-core sum to wgmma_f16_sum.cu's output:
  kernels/probes/wgmma_f16_sum.py probe16.bin
A model of one k-step (16 products of fp16 values into the accumulator C):
  E = max(exponent of C, max over nonzero products of ea + eb) (exponent
      fields of the factors, subnormals -14), every term (C and the exact
      products) cut toward zero to a multiple of 2^(E - F), summed exactly,
      then rounded to the accumulator (fp16 or fp32: toward zero or to
      nearest even);
F = None: no alignment cut (the exact sum, rounded once). Prints, per
accumulator, the models that match every sum, or the best ones."""
import math
import struct
import sys
from fractions import Fraction

from wgmma_fp8_sum import floor_log2 as flog2, trunc as cut  # exact log2 floor, cut toward zero


def f16(h):
    s = -1 if h & 0x8000 else 1
    e = (h >> 10) & 31
    m = h & 1023
    return s * (Fraction(m, 1024) * Fraction(2) ** -14 if e == 0 else (1 + Fraction(m, 1024)) * Fraction(2) ** (e - 15))


def f16_exp(h):
    e = (h >> 10) & 31
    return -14 if e == 0 else e - 15


def cases(path):
    raw = open(path, 'rb').read()
    off = 0
    while off < len(raw):
        cs, nsteps, f16acc = struct.unpack_from('<3i', raw, off)
        a = struct.unpack_from('<2048H', raw, off + 12)
        b = struct.unpack_from('<2048H', raw, off + 12 + 4096)
        c = struct.unpack_from('<4096f', raw, off + 12 + 8192)
        d = struct.unpack_from('<4096f', raw, off + 12 + 8192 + 16384)
        off += 12 + 8192 + 32768
        yield cs, nsteps, f16acc, a, b, c, d


def rnd(x, mant, emin, mode):
    """x rounded to a float with mant fraction bits, smallest normal exponent emin"""
    if x == 0:
        return x
    q = Fraction(2) ** (max(flog2(x), emin) - mant)
    if mode == 'rz':
        return cut(x, q)
    y = abs(x) / q
    n = math.floor(y)
    r = y - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    return (n * q) if x > 0 else -(n * q)


def kstep(c, pairs, F, mode, f16acc):
    prods = [(f16(x) * f16(y), f16_exp(x) + f16_exp(y)) for x, y in pairs]
    exps = [e for p, e in prods if p != 0] + ([flog2(c)] if c != 0 else [])
    if not exps:
        return Fraction(0)
    if F is None:
        s = c + sum(p for p, e in prods)
    else:
        q = Fraction(2) ** (max(exps) - F)
        s = cut(c, q) + sum(cut(p, q) for p, e in prods if p != 0)
    return rnd(s, 10, -14, mode) if f16acc else rnd(s, 23, -126, mode)


if __name__ == '__main__':
    data = list(cases(sys.argv[1]))
    for acc in (1, 0):
        models = [(F, mode) for F in [None] + list(range(10, 31)) for mode in ('rz', 'rn')]
        score = {m: 0 for m in models}
        total = 0
        for cs, nsteps, f16acc, a, b, c, d in data:
            if f16acc != acc:
                continue
            for m in range(0, 64, 3):  # a third of the rows keeps it quick
                for n in range(64):
                    total += 1
                    for F, mode in models:
                        v = Fraction(c[m * 64 + n])
                        for st in range(nsteps):
                            v = kstep(v, [(a[m * 32 + k], b[n * 32 + k]) for k in range(16 * st, 16 * st + 16)], F,
                                      mode, acc)
                        if v != Fraction(d[m * 64 + n]):
                            score[(F, mode)] += 1
        best = sorted(models, key=lambda m: score[m])[:6]
        print(f"{'f16' if acc else 'f32'} accumulator, {total} sums: " +
              ', '.join(f"F={F} {mode}: {score[(F, mode)]} differ" for F, mode in best))
