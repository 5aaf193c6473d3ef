#!/usr/bin/env python3
"""Checks the fp8 tensor-core sum model against wgmma_fp8_sum.cu's output:
  kernels/probes/wgmma_fp8_sum.py probe.bin
The model of one e4m3 wgmma k-step (32 products into the f32 accumulator C),
found with this probe on an H100 (2026-11-26):
  E = max(exponent of C, max over nonzero products of ea + eb), ea / eb the
      exponent fields of the e4m3 factors (subnormals -6), not of the
      product's value (a product of mantissas >= 2 keeps one bit more);
  C and every product truncated toward zero to a multiple of 2^(E - 13);
  the sum exact, then cut to 13 mantissa bits (toward zero).
Prints the mismatches per case; exit status 1 if any."""
import math
import struct
import sys
from fractions import Fraction


def e4m3(c):
    s = -1 if c & 0x80 else 1
    e = (c >> 3) & 15
    m = c & 7
    return s * (Fraction(m, 8) * Fraction(1, 64) if e == 0 else (1 + Fraction(m, 8)) * Fraction(2) ** (e - 7))


def e4m3_exp(c):
    e = (c >> 3) & 15
    return -6 if e == 0 else e - 7


def cases(path):
    raw = open(path, 'rb').read()
    off = 0
    while off < len(raw):
        cs, nsteps = struct.unpack_from('<2i', raw, off)
        a = raw[off + 8:off + 4104]
        b = raw[off + 4104:off + 8200]
        c = struct.unpack_from('<4096f', raw, off + 8200)
        d = struct.unpack_from('<4096f', raw, off + 24584)
        off += 40968
        yield cs, nsteps, a, b, c, d


def floor_log2(x):
    e = math.floor(math.log2(abs(x)))
    while Fraction(2) ** e > abs(x):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    return e


def trunc(x, q):
    t = Fraction(math.floor(abs(x) / q)) * q
    return t if x >= 0 else -t


def kstep(c, pairs):
    """c: the accumulator in; pairs: (a code, b code) of the 32 products"""
    prods = [(e4m3(a) * e4m3(b), e4m3_exp(a) + e4m3_exp(b)) for a, b in pairs]
    exps = [e for p, e in prods if p != 0] + ([floor_log2(c)] if c != 0 else [])
    if not exps:
        return Fraction(0)
    q = Fraction(2) ** (max(exps) - 13)
    s = trunc(c, q) + sum(trunc(p, q) for p, e in prods if p != 0)
    return trunc(s, Fraction(2) ** (floor_log2(s) - 13)) if s != 0 else s


if __name__ == '__main__':
    bad = 0
    for cs, nsteps, a, b, c, d in cases(sys.argv[1]):
        nb = 0
        for m in range(64):
            for n in range(64):
                acc = Fraction(c[m * 64 + n])
                for st in range(nsteps):
                    acc = kstep(acc, [(a[m * 64 + k], b[n * 64 + k]) for k in range(32 * st, 32 * st + 32)])
                if acc != Fraction(d[m * 64 + n]):
                    nb += 1
        print(f'case {cs} ({nsteps} k-steps): {nb} of 4096 differ from the model')
        bad += nb
    sys.exit(1 if bad else 0)
