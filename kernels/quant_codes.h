/* Quantization, fast path: single values. fp16 / bf16 input decoded from
 * 16-byte vectors (values, largest magnitude, non-finite test), and codes
 * without a division per element, in two forms: a reciprocal per scale with
 * the exact quotient near a rounding boundary (qattn_qf_code8), and the
 * brackets of the reciprocal (qattn_qs_code8). The tiled, lean and
 * streamed kernels share them (quant_tiled.h, quant_lean.h,
 * quant_stream.h). */
#ifndef QATTN_KERNELS_QUANT_CODES_H
#define QATTN_KERNELS_QUANT_CODES_H

#include "hip_port.h"
#include "qattn/numerics.h"

/* element j (0..7) of 8 fp16 / bf16 values in a 16-byte vector */
template <int IN>
static __device__ __forceinline__ float qattn_qf_dec(const uint4 &v, int j)
{
    const unsigned w = j < 2 ? v.x : j < 4 ? v.y : j < 6 ? v.z : v.w;
    if (IN == QATTN_FMT_BF16)
        return qattn_num_u2f(j & 1 ? w & 0xffff0000u : w << 16);
    return qattn_port_f16_to_f32((unsigned short)(j & 1 ? w >> 16 : w & 0xffffu));
}

/* non-finite inputs among 8 fp16 / bf16 values: bit 15 or 31 set in the
 * result when a 16-bit exponent field is all ones (adding the field's lowest
 * bit carries into the sign bit only then); QATTN_QF_NONFIN_BITS picks them */
#define QATTN_QF_NONFIN_BITS 0x80008000u
template <int IN>
static __device__ __forceinline__ unsigned qattn_qf_nonfin(const uint4 &v)
{
    const unsigned emask = IN == QATTN_FMT_BF16 ? 0x7f807f80u : 0x7c007c00u;
    const unsigned elow = IN == QATTN_FMT_BF16 ? 0x00800080u : 0x04000400u;
    return ((v.x & emask) + elow) | ((v.y & emask) + elow) | ((v.z & emask) + elow) | ((v.w & emask) + elow);
}

/* the largest magnitude of 8 fp16 / bf16 values, from their 16-bit
 * magnitudes (exact as a float, no decode of each value); nonfin |= an Inf
 * or NaN among them */
template <int IN>
static __device__ __forceinline__ float qattn_qf_amax16(const uint4 &v, unsigned &nonfin)
{
    unsigned m = qattn_port_vmaxu2(qattn_port_vmaxu2(v.x & 0x7fff7fffu, v.y & 0x7fff7fffu),
                                   qattn_port_vmaxu2(v.z & 0x7fff7fffu, v.w & 0x7fff7fffu));
    m = (m >> 16) > (m & 0xffffu) ? m >> 16 : m & 0xffffu;
    nonfin |= m >= (IN == QATTN_FMT_BF16 ? 0x7f80u : 0x7c00u);
    return IN == QATTN_FMT_BF16 ? qattn_num_u2f(m << 16) : qattn_port_f16_to_f32((unsigned short)m);
}

/* rounded to nearest even and clamped to [-qmax, qmax], NaN -> 0: the
 * integer encoder of qattn/numerics.h (qattn_num_rne_int_clamp) */
static __device__ __forceinline__ int qattn_qf_int(float y, float qmax)
{
    if (y != y)
        return 0;
    y = y < -qmax ? -qmax : y;
    y = y > qmax ? qmax : y;
    return qattn_port_rint(y);
}

/* Codes without a division per element. r = qattn_qf_rcp(s) = fl(1 / s) is
 * one division per group; y = fl(v * r) is within 1.5 * 2^-23 |y| of the
 * quotient fl(v / s) that quant/ encodes (v / s rounded once directly, once
 * through r). |v| <= amax and s >= fl(amax / qmax), so |y| <= qmax (1 + 2^-22)
 * and the distance is below 2.3e-5 for qmax <= 127 (int) and 3 ulp of y
 * (e4m3). y and fl(v / s) get the same code unless a rounding boundary of the
 * code lies within that distance of y: then the exact quotient is encoded.
 * Sentinels keep the per-element test to one comparison: r = 0 for a zero
 * scale (int: y = 0, code 0; e4m3: y = 0 takes the exact path, which gives 0
 * for a zero scale), r = NaN (int) / 0 (e4m3) for scales below 2^-126
 * (where 1 / s would overflow): the exact path. */
static __device__ __forceinline__ float qattn_qf_rcp(int fmt, float s)
{
    if (!(s > 0.0f))
        return 0.0f;
    if (s < 0x1p-126f)
        return fmt == QATTN_FMT_E4M3 ? 0.0f : qattn_num_u2f(QATTN_NUM_QNAN);
    return 1.0f / s;
}

/* y = v * fl(1 / s) rounded to an integer n (RNE) by t = y + 1.5 * 2^23:
 * the bits of t, n in the low mantissa bits; near is set where the code of
 * fl(v / s) may differ: ties of the integers are at k + 0.5, so |y - n| must
 * stay below 0.5 - 2^-15 (a NaN y fails the test too); |n| <= qmax needs no
 * clamp (|y| < qmax + 0.5) */
static __device__ __forceinline__ unsigned qattn_qf_int_bits(float y, bool &near)
{
    const float t = y + 12582912.0f;
    near |= !(fabsf(y - (t - 12582912.0f)) < 0.49996948f);
    return qattn_num_f2u(t);
}
/* int8 / int4 code bits of v (low 8 / 4 bits): RNE(clamp(fl(v / s))) */
static __device__ __forceinline__ unsigned qattn_qf_int_rcp(float v, float s, float r, float qmax)
{
    bool near = false;
    const unsigned t = qattn_qf_int_bits(v * r, near);
    return near ? (unsigned)qattn_qf_int(s > 0.0f ? v / s : 0.0f, qmax) : t;
}

/* whether y = v * fl(1 / s) may have another e4m3 code than fl(v / s): y
 * within 4 ulp (fp32) of an e4m3 rounding boundary (low 20 mantissa bits
 * 0x80000 in the normal range) or below 2^-6 (e4m3 subnormals; also y = 0
 * from r = 0) */
static __device__ __forceinline__ bool qattn_qf_e4m3_near(float y)
{
    return fabsf(y) < 0x1p-6f || (qattn_num_f2u(y) & 0xFFFFFu) - 0x7FFFCu <= 8u;
}
/* a value with the e4m3 code of fl(v / s) */
static __device__ __forceinline__ float qattn_qf_div_e4m3(float v, float s, float r)
{
    const float y = v * r;
    return qattn_qf_e4m3_near(y) ? (s > 0.0f ? v / s : 0.0f) : y;
}

/* the 8-bit code of y (already divided by its scale); int4 in the low nibble */
static __device__ __forceinline__ unsigned qattn_qf_code(int fmt, float y)
{
    switch (fmt) {
    case QATTN_FMT_INT8: return (unsigned)qattn_qf_int(y, 127.0f) & 0xffu;
    case QATTN_FMT_INT4: return (unsigned)qattn_qf_int(y, 7.0f) & 0xfu;
    case QATTN_FMT_E4M3: return qattn_port_e4m3x2(y, 0.0f) & 0xffu;
    default: return qattn_num_e5m2_encode(y);
    }
}

/* code cj of value j (of 8) into its place: byte j of w (8-bit formats; .x
 * holds values 0..3, low byte first) or nibble j of w.x (int4) */
static __device__ __forceinline__ void qattn_qf_put8(uint2 &w, int fmt, int j, unsigned cj)
{
    if (fmt == QATTN_FMT_INT4)
        w.x |= cj << (4 * j);
    else if (j < 4)
        w.x |= cj << (8 * j);
    else
        w.y |= cj << (8 * (j - 4));
}

/* the codes of two values (smoothed) with their scales s and rcp
 * r = qattn_qf_rcp(fmt, s): c0 | c1 << 8 (8-bit formats), c0 | c1 << 4 (int4) */
static __device__ __forceinline__ unsigned qattn_qf_code2(int fmt, float v0, float s0, float r0, float v1, float s1,
                                                          float r1)
{
    if (fmt == QATTN_FMT_E4M3) /* both at once */
        return qattn_port_e4m3x2(qattn_qf_div_e4m3(v0, s0, r0), qattn_qf_div_e4m3(v1, s1, r1));
    if (fmt == QATTN_FMT_INT8)
        return (qattn_qf_int_rcp(v0, s0, r0, 127.0f) & 0xffu) | (qattn_qf_int_rcp(v1, s1, r1, 127.0f) & 0xffu) << 8;
    if (fmt == QATTN_FMT_INT4)
        return (qattn_qf_int_rcp(v0, s0, r0, 7.0f) & 0xfu) | (qattn_qf_int_rcp(v1, s1, r1, 7.0f) & 0xfu) << 4;
    const unsigned c0 = s0 > 0.0f ? qattn_qf_code(fmt, v0 / s0) : 0u;
    const unsigned c1 = s1 > 0.0f ? qattn_qf_code(fmt, v1 / s1) : 0u;
    return c0 | c1 << 8;
}

/* the codes of 8 values (smoothed) with their scales s and rcps r: bytes
 * (8-bit formats; .x: values 0..3, low byte first) or nibbles (int4: .x,
 * .y = 0). The usual case without a branch per value: int8 / int4 / e4m3
 * codes from y = v * r for all 8 (qattn_qf_int_rcp, qattn_qf_div_e4m3: the
 * same codes), and only when one of them lies near a rounding boundary (or
 * a sentinel rcp asks for it) the 8 again from the exact quotients v / s
 * (one branch per 8 values) */
static __device__ __forceinline__ uint2 qattn_qf_code8(int fmt, const float (&v)[8], const float (&s)[8],
                                                       const float (&r)[8])
{
    uint2 w = {0u, 0u};
    bool near = fmt != QATTN_FMT_INT8 && fmt != QATTN_FMT_INT4 && fmt != QATTN_FMT_E4M3;
    if (fmt == QATTN_FMT_INT8 || fmt == QATTN_FMT_INT4) {
        unsigned t[8];
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            t[j] = qattn_qf_int_bits(v[j] * r[j], near);
        if (fmt == QATTN_FMT_INT8) {
            w.x = (t[0] & 0xffu) | (t[1] & 0xffu) << 8 | (t[2] & 0xffu) << 16 | t[3] << 24;
            w.y = (t[4] & 0xffu) | (t[5] & 0xffu) << 8 | (t[6] & 0xffu) << 16 | t[7] << 24;
        } else {
            QATTN_UNROLL
            for (int j = 0; j < 8; j++)
                w.x |= (t[j] & 0xfu) << (4 * j);
        }
    } else if (fmt == QATTN_FMT_E4M3) {
        float y[8];
        QATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            y[j] = v[j] * r[j];
            near |= qattn_qf_e4m3_near(y[j]);
        }
        w.x = qattn_port_e4m3x2(y[0], y[1]) | (unsigned)qattn_port_e4m3x2(y[2], y[3]) << 16;
        w.y = qattn_port_e4m3x2(y[4], y[5]) | (unsigned)qattn_port_e4m3x2(y[6], y[7]) << 16;
    }
    if (near) { /* all 8 from the exact quotients (no per-value flags to keep) */
        w.x = w.y = 0u;
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            qattn_qf_put8(w, fmt, j, s[j] > 0.0f ? qattn_qf_code(fmt, v[j] / s[j]) : 0u);
    }
    return w;
}

/* Codes without a division, second form (qattn_qs_code8: the streamed
 * kernel, and the lean kernel's int8 / e4m3 codes; the first form,
 * qattn_qf_code8, serves the other formats): with r = fl(1 / s) and the
 * brackets lo, hi = r -+ 4 ulp (1 / s lies strictly inside, at more than
 * 3 * 2^-24 relative), v lo and v hi enclose fl(v / s) (1 rounding, at most
 * 2^-24 relative); the codes are monotonic in their argument, so when the
 * codes of the two brackets agree (int8 / int4: fma(v, lo|hi, 1.5 * 2^23)
 * rounds v * lo|hi once to the integer; e4m3: fl(v * lo|hi) and the
 * saturating conversion) that is the code of fl(v / s) (quant/'s). Otherwise
 * (an exact tie of the code's rounding, e.g. with a power-of-two scale: one
 * warp-row or warp-channel in five on the benchmark's V) the 8 codes come
 * from the exact quotients, by one correction step (qattn_qs_code1) or,
 * where that could underflow, the division. Zero scale: lo = 0, hi = -0
 * (int8 / int4: both code 0; e4m3: the products +-0 of the two brackets
 * disagree, and the exact path writes code 0 for -0 too, as quant/ writes +0
 * for a zero group); scales below 2^-126 (1 / s would overflow): lo = 0,
 * hi = NaN (always the exact path, by the division). qattn_qs_brk: the
 * brackets of 1 / s. */
static __device__ __forceinline__ void qattn_qs_brk(float s, float &lo, float &hi)
{
    if (!(s > 0.0f)) { /* int8 / int4: both codes 0; e4m3: +0 and -0 disagree (the exact path: +0, as quant/) */
        lo = 0.0f;
        hi = -0.0f;
    } else if (s < 0x1p-126f) {
        lo = 0.0f;
        hi = qattn_num_u2f(QATTN_NUM_QNAN);
    } else {
        const unsigned r = qattn_num_f2u(1.0f / s);
        lo = qattn_num_u2f(r - 4u);
        hi = qattn_num_u2f(r + 4u);
    }
}
/* fl(1 / s) from the lower bracket lo > 0 of qattn_qs_brk */
static __device__ __forceinline__ float qattn_qs_brk_rcp(float lo)
{
    return qattn_num_u2f(qattn_num_f2u(lo) + 4u);
}

/* the codes of 8 values v (smoothed) from the brackets lo, hi of their
 * scales: bytes (.x: values 0..3, low byte first) or int4 nibbles (.x);
 * diff != 0 when a bracket pair disagrees (then qattn_qs_code8_exact) */
template <int FMT>
static __device__ __forceinline__ uint2 qattn_qs_code8(const float (&v)[8], const float (&lo)[8], const float (&hi)[8],
                                                      unsigned &diff)
{
    uint2 w = {0u, 0u};
    diff = 0u;
    if (FMT == QATTN_FMT_INT8 || FMT == QATTN_FMT_INT4) {
        unsigned t[8];
        QATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            t[j] = qattn_num_f2u(qattn_port_fma(v[j], lo[j], 12582912.0f));
            diff |= t[j] ^ qattn_num_f2u(qattn_port_fma(v[j], hi[j], 12582912.0f));
        }
        if (FMT == QATTN_FMT_INT8) {
            w.x = qattn_port_byte_perm(qattn_port_byte_perm(t[0], t[1], 0x0040u), qattn_port_byte_perm(t[2], t[3], 0x0040u),
                                       0x5410u);
            w.y = qattn_port_byte_perm(qattn_port_byte_perm(t[4], t[5], 0x0040u), qattn_port_byte_perm(t[6], t[7], 0x0040u),
                                       0x5410u);
        } else {
            QATTN_UNROLL
            for (int j = 0; j < 8; j++)
                w.x |= (t[j] & 0xfu) << (4 * j);
        }
    } else { /* e4m3 */
        unsigned a[4];
        QATTN_UNROLL
        for (int j = 0; j < 4; j++) {
            a[j] = qattn_port_e4m3x2(v[2 * j] * lo[2 * j], v[2 * j + 1] * lo[2 * j + 1]);
            diff |= a[j] ^ qattn_port_e4m3x2(v[2 * j] * hi[2 * j], v[2 * j + 1] * hi[2 * j + 1]);
        }
        w.x = a[0] | a[1] << 16;
        w.y = a[2] | a[3] << 16;
    }
    return w;
}
/* the code of the exact quotient v / s by the division (out of line: rarely needed) */
template <int FMT>
static __device__ __noinline__ unsigned qattn_qs_code1_div(float v, float s)
{
    return s > 0.0f ? qattn_qf_code(FMT, v / s) : 0u;
}
/* the code of fl(v / s) from the bracket lo of 1 / s (qattn_qs_brk): with
 * r = fl(1 / s) = lo + 4 ulp and q = fl(v r), e = v - q s is exact (one
 * fma) and fl(q + e r) = fl(v / s) (Markstein's correction) while nothing
 * underflows: s >= 2^-126 (lo > 0) and |v| >= 2^-100; else (and for v = 0,
 * whose sign the correction loses) the division */
template <int FMT>
static __device__ __forceinline__ unsigned qattn_qs_code1(float v, float s, float lo)
{
    if (lo > 0.0f && fabsf(v) >= 0x1p-100f) {
        const float r = qattn_qs_brk_rcp(lo), q = v * r;
        return qattn_qf_code(FMT, qattn_port_fma(qattn_port_fma(-q, s, v), r, q));
    }
    return qattn_qs_code1_div<FMT>(v, s);
}
/* the 8 codes of qattn_qs_code8 from the exact quotients (scales s, brackets lo) */
template <int FMT>
static __device__ __forceinline__ uint2 qattn_qs_code8_exact(const float (&v)[8], const float (&s)[8],
                                                            const float (&lo)[8])
{
    uint2 w = {0u, 0u};
    QATTN_UNROLL
    for (int j = 0; j < 8; j++)
        qattn_qf_put8(w, FMT, j, qattn_qs_code1<FMT>(v[j], s[j], lo[j]));
    return w;
}

/* the codes of 8 values: int8 / int4 / e4m3 by the brackets r, h of their
 * scales (qattn_qs_code8; diff != 0: again by qattn_qs_code8_exact), the
 * other formats (FMT 0: fmt) by the first form with scales s and rcps r
 * (qattn_qf_code8, diff = 0) */
template <int FMT>
static __device__ __forceinline__ uint2 qattn_qf_code8_of(int fmt, const float (&v)[8], const float (&s)[8],
                                                         const float (&r)[8], const float (&h)[8], unsigned &diff)
{
    if (FMT == QATTN_FMT_INT8 || FMT == QATTN_FMT_INT4 || FMT == QATTN_FMT_E4M3)
        return qattn_qs_code8<FMT>(v, r, h, diff);
    diff = 0u;
    return qattn_qf_code8(fmt, v, s, r);
}

#endif
