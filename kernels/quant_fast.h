/* Quantization family, fast path (plain HIP, no inline assembly): the same
 * params, buffers and results as quant_portable.h, bit for bit, in at most
 * three launches per operand, each reading its input with 16-byte loads:
 *
 *   stats    (only for smoothing over a sequence, or scale groups that span
 *            all tokens: tensor, channel, tensor,ch:C) grid (nchunk, heads,
 *            nseq): per chunk of QATTN_KERNELS_QUANT_CHUNK tokens and per
 *            channel the double sum, the minimum and the maximum of x, into
 *            p.work;
 *   combine  grid (heads, nseq): per channel the chunk sums added in chunk
 *            order -> mean (double, rounded to fp32 as smooth.c does); the
 *            amax of x - mean per channel is max(fl(max - mean), fl(mean -
 *            min)) (rounding is monotonic, so this equals the max of
 *            |fl(x - mean)| exactly); group scales for token-uniform groups;
 *   encode   grid (tiles, heads, nseq), 512 threads: one tile of tt tokens
 *            (whole scale-group blocks and Q smoothing blocks) x all d
 *            channels; each thread holds 16 channels of a token per item
 *            (two 16-byte loads), subtracts the mean (Q block means computed
 *            in the tile, in token order, in double), reduces the group amax
 *            in shared memory (order-free bit max), and writes 16 codes with
 *            one 16-byte store (8 for int4) plus the group scales; or, for
 *            LAYOUT_TRANSPOSED, stages the codes as [d][tt] in shared memory
 *            and writes 16-byte runs along tokens (zero past the sequence).
 *
 * The mean equals the emulation's whenever the double sums are exact, which
 * they are for fp16 input whenever every partial sum stays below 2^29 in
 * magnitude (fp16 values are multiples of 2^-24), and for bf16 when the
 * values of a channel span less than 2^45 in magnitude; otherwise the order
 * of the double additions differs from the emulation's (token order) and the
 * fp32 mean may differ in its last bit.
 *
 * Anything else (fp32 input, unscaled formats, d not a multiple of 16, Q/K
 * groups split along channels, unaligned strides, Q block smoothing with
 * token-uniform groups, tiles that do not fit, no p.work where it is
 * needed) runs the portable kernels. */
#ifndef QATTN_KERNELS_QUANT_FAST_H
#define QATTN_KERNELS_QUANT_FAST_H

#include <stdlib.h>
#include <string.h>

#include "quant_portable.h"

#define QATTN_QF_THREADS 512
#define QATTN_QF_ITEMS 2 /* 16-channel items per thread at most (template NI: 1 or 2) */
#define QATTN_QF_TILE(ni) (QATTN_QF_THREADS * (ni) * 16) /* elements per tile */
#define QATTN_QF_MAXTT 256                                      /* tokens per tile at most */
#define QATTN_QF_MAXD 1024
#define QATTN_QF_STAT_THREADS 256
#define QATTN_QF_STAT_ILP 8 /* 16-byte loads in flight per thread in the statistics */
#define QATTN_QF_SMEM 49152 /* dynamic shared memory at most (no opt-in) */

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
 * bit carries into the sign bit only then) */
template <int IN>
static __device__ __forceinline__ unsigned qattn_qf_nonfin(const uint4 &v)
{
    const unsigned emask = IN == QATTN_FMT_BF16 ? 0x7f807f80u : 0x7c007c00u;
    const unsigned elow = IN == QATTN_FMT_BF16 ? 0x00800080u : 0x04000400u;
    return ((v.x & emask) + elow) | ((v.y & emask) + elow) | ((v.z & emask) + elow) | ((v.w & emask) + elow);
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

/* qattn_num_group_tok_index in 32-bit arithmetic (t < 2^31) */
static __device__ __forceinline__ int qattn_qf_tok_index(const qattn_group &g, int t)
{
    switch (g.tok) {
    case QATTN_TOK_TOKEN: return t;
    case QATTN_TOK_BLOCK:
    case QATTN_TOK_WARP: return t / g.b;
    case QATTN_TOK_THREAD: {
        const int blk = t / g.b, in = t - blk * g.b;
        return blk * (g.s / g.w) + (in % g.s) / g.w;
    }
    default: return 0;
    }
}

/* token-local groups g0 + g, g < ngt, of head and sequence hb: scale and
 * rcp (hi NULL) or the brackets rcp = lo, hi of 1 / s (qattn_qs_brk) from
 * the amax bits gmax[g] into shared memory, scales to p.scale */
static __device__ __forceinline__ void qattn_qf_group_scales(const qattn_kernels_quant_params &p, int fmt,
                                                             const unsigned *gmax, float *scale, float *rcp, int ngt,
                                                             int64_t g0, int64_t hb, int nthr, float *hi = NULL)
{
    for (int g = (int)threadIdx.x; g < ngt; g += nthr) {
        const float s = qattn_num_scale_for(fmt, qattn_num_u2f(gmax[g]), p.group.e8m0);
        scale[g] = s;
        if (hi)
            qattn_qs_brk(s, rcp[g], hi[g]);
        else
            rcp[g] = qattn_qf_rcp(fmt, s);
        if (g0 + g < p.ntok)
            p.scale[hb * p.ntok + g0 + g] = s;
    }
}

/* tokens of one block of token groups: the block of block / warp / thread
 * groups, 1 for the others */
static __host__ __device__ __forceinline__ int qattn_qf_period(qattn_group g)
{
    return g.tok == QATTN_TOK_BLOCK || g.tok == QATTN_TOK_WARP || g.tok == QATTN_TOK_THREAD ? g.b : 1;
}

/* groups whose scale is shared by all tokens of a sequence */
static __host__ __device__ __forceinline__ int qattn_qf_uniform(qattn_group g)
{
    return g.tok == QATTN_TOK_TENSOR || g.tok == QATTN_TOK_CHANNEL;
}

static __host__ __device__ __forceinline__ int64_t qattn_qf_nchunk(const qattn_kernels_quant_params &p)
{
    return ((int64_t)p.seqlen + QATTN_KERNELS_QUANT_CHUNK - 1) / QATTN_KERNELS_QUANT_CHUNK;
}

/* the first token of sequence b (which starts at token t0) in head h of p.x */
static __device__ __forceinline__ const uint16_t *qattn_qf_seq_x(const qattn_kernels_quant_params &p, int b, int64_t t0,
                                                                int h)
{
    return (const uint16_t *)p.x + (int64_t)b * p.x_stride_batch + t0 * p.x_stride_tok + (int64_t)h * p.x_stride_head;
}

/* bytes of the statistics scratch (qattn_qf_stats_body) */
static __host__ __device__ __forceinline__ size_t qattn_qf_stats_scratch(int d)
{
    return (size_t)(QATTN_QF_STAT_THREADS / (d / 8)) * (d / 8) * 9 * 16;
}

/* 16-byte unit `unit` of token row t (x: the sequence's first token of the
 * head, stride: p.x_stride_tok) */
static __device__ __forceinline__ uint4 qattn_qf_ld(const uint16_t *x, int64_t stride, int64_t t, int unit)
{
    return *(const uint4 *)(x + t * stride + unit * 8);
}

/* ---- stats of one chunk, by threads 0 .. QATTN_QF_STAT_THREADS - 1 of nthr:
 * thread (r, cc) sums 8 channels over tokens r, r + R, ... of the chunk
 * (row t of x, see qattn_qf_ld); shared scratch qf_ssum of R * d / 8 * 9 *
 * 16 bytes; the chunk's partials into p.work ---- */
template <int IN, int SUMS, int MINMAX> /* SUMS: smoothing over the sequence; MINMAX: uniform groups */
static __device__ __forceinline__ void qattn_qf_stats_body(const qattn_kernels_quant_params &p, int chunk, int h, int b,
                                                           int64_t n, const uint16_t *x, int64_t stride,
                                                           double *qf_ssum, int nthr)
{
    const int cols = p.d / 8, R = QATTN_QF_STAT_THREADS / cols;
    const int tid = (int)threadIdx.x, r = tid / cols, cc = tid % cols;
    const int P = cols * 9; /* scratch row pitch: channel 8 cc + j at 9 cc + j (no bank conflicts) */
    float *smn = (float *)(qf_ssum + (size_t)R * P), *smx = smn + (size_t)R * P;
    const int64_t c0 = (int64_t)chunk * QATTN_KERNELS_QUANT_CHUNK;
    const int64_t c1 = c0 + QATTN_KERNELS_QUANT_CHUNK < n ? c0 + QATTN_KERNELS_QUANT_CHUNK : n;
    double s[8];
    float mn[8], mx[8];
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        s[j] = 0.0;
        mn[j] = qattn_num_u2f(QATTN_NUM_INF);
        mx[j] = -qattn_num_u2f(QATTN_NUM_INF);
    }
    if (r < R) {
        int64_t t = c0 + r;
        for (; t + (QATTN_QF_STAT_ILP - 1) * (int64_t)R < c1; t += QATTN_QF_STAT_ILP * (int64_t)R) {
            uint4 v[QATTN_QF_STAT_ILP];
            QATTN_UNROLL
            for (int u = 0; u < QATTN_QF_STAT_ILP; u++)
                v[u] = qattn_qf_ld(x, stride, t + u * (int64_t)R, cc);
            QATTN_UNROLL
            for (int u = 0; u < QATTN_QF_STAT_ILP; u++)
                QATTN_UNROLL
                for (int j = 0; j < 8; j++) {
                    const float f = qattn_qf_dec<IN>(v[u], j);
                    if (SUMS)
                        s[j] += (double)f;
                    if (MINMAX) {
                        mn[j] = f < mn[j] ? f : mn[j];
                        mx[j] = f > mx[j] ? f : mx[j];
                    }
                }
        }
        for (; t < c1; t += R) {
            const uint4 v = qattn_qf_ld(x, stride, t, cc);
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                const float f = qattn_qf_dec<IN>(v, j);
                if (SUMS)
                    s[j] += (double)f;
                if (MINMAX) {
                    mn[j] = f < mn[j] ? f : mn[j];
                    mx[j] = f > mx[j] ? f : mx[j];
                }
            }
        }
        QATTN_UNROLL
        for (int j = 0; j < 8; j++) {
            qf_ssum[(size_t)r * P + cc * 9 + j] = s[j];
            smn[(size_t)r * P + cc * 9 + j] = mn[j];
            smx[(size_t)r * P + cc * 9 + j] = mx[j];
        }
    }
    __syncthreads();
    const int64_t nchunk = qattn_qf_nchunk(p);
    const int64_t o = (((int64_t)h * p.nseq + b) * nchunk + chunk) * p.d;
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * p.d;
    double *wsum = (double *)p.work;
    float *wmn = (float *)(wsum + all), *wmx = wmn + all;
    for (int c = tid; c < p.d; c += nthr) {
        double a = 0.0;
        float lo = qattn_num_u2f(QATTN_NUM_INF), hi = -lo;
        for (int k = 0; k < R; k++) { /* rows in order */
            const size_t e = (size_t)k * P + (c >> 3) * 9 + (c & 7);
            a += qf_ssum[e];
            lo = smn[e] < lo ? smn[e] : lo;
            hi = smx[e] > hi ? smx[e] : hi;
        }
        wsum[o + c] = a;
        wmn[o + c] = lo;
        wmx[o + c] = hi;
    }
}

template <int IN, int SUMS, int MINMAX>
__global__ void __launch_bounds__(QATTN_QF_STAT_THREADS) qattn_qf_stats_kernel(qattn_kernels_quant_params p)
{
    QATTN_DYNAMIC_SHARED(double, qf_ssum);
    const int chunk = (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const uint16_t *x = qattn_qf_seq_x(p, b, t0, h);
    qattn_qf_stats_body<IN, SUMS, MINMAX>(p, chunk, h, b, n, x, p.x_stride_tok, qf_ssum, QATTN_QF_STAT_THREADS);
}

/* ---- combine of one (head, sequence), threads over channels: means and
 * token-uniform scales into p.mean and p.scale; qf_cmax: p.nch words of
 * shared memory. The partials are read through L2 (volatile): other blocks
 * wrote them ---- */
static __device__ __forceinline__ void qattn_qf_combine_body(const qattn_kernels_quant_params &p, int h, int b,
                                                             int64_t n, unsigned *qf_cmax, int nthr)
{
    const int tid = (int)threadIdx.x;
    const int uniform = p.scale && qattn_qf_uniform(p.group);
    for (int g = tid; g < p.nch; g += nthr)
        qf_cmax[g] = 0u;
    __syncthreads();
    const int64_t nchunk = qattn_qf_nchunk(p);
    const int64_t all = (int64_t)p.heads * p.nseq * nchunk * p.d;
    const int64_t o = ((int64_t)h * p.nseq + b) * nchunk * p.d;
    const volatile double *wsum = (const volatile double *)p.work;
    const volatile float *wmn = (const volatile float *)(wsum + all), *wmx = wmn + all;
    for (int c = tid; c < p.d; c += nthr) {
        double a = 0.0;
        float lo = qattn_num_u2f(QATTN_NUM_INF), hi = -lo;
        const int sums = p.smooth == QATTN_KERNELS_SMOOTH_TOKENS;
        for (int64_t k0 = 0; k0 < nchunk; k0 += 4) { /* four chunks' loads in flight, added in order */
            double ps[4];
            float pn[4], px[4];
            QATTN_UNROLL
            for (int u = 0; u < 4; u++) {
                const int64_t e = o + (k0 + u < nchunk ? k0 + u : k0) * p.d + c;
                ps[u] = sums ? wsum[e] : 0.0;
                pn[u] = uniform ? wmn[e] : 0.0f;
                px[u] = uniform ? wmx[e] : 0.0f;
            }
            QATTN_UNROLL
            for (int u = 0; u < 4; u++)
                if (k0 + u < nchunk) {
                    a += ps[u];
                    lo = pn[u] < lo ? pn[u] : lo;
                    hi = px[u] > hi ? px[u] : hi;
                }
        }
        float m = 0.0f;
        if (p.smooth == QATTN_KERNELS_SMOOTH_TOKENS) {
            m = n > 0 ? (float)(a / (double)n) : 0.0f;
            p.mean[((int64_t)h * p.nseq + b) * p.d + c] = m;
        }
        if (uniform) {
            const float up = hi - m, down = m - lo;
            float am = up > down ? up : down;
            am = am > 0.0f ? am : 0.0f; /* also n == 0 (inf - inf is not reached: lo/hi are +-inf only then) */
            if (am > 0.0f)
                atomicMax(&qf_cmax[qattn_num_group_ch_index(p.group, c)], qattn_num_f2u(am));
        }
    }
    __syncthreads();
    if (uniform)
        for (int g = tid; g < p.nch; g += nthr)
            p.scale[((int64_t)h * p.nseq + b) * p.nch + g] =
                qattn_num_scale_for(p.fmt, qattn_num_u2f(qf_cmax[g]), p.group.e8m0);
}

template <int IN>
__global__ void __launch_bounds__(QATTN_QF_STAT_THREADS) qattn_qf_combine_kernel(qattn_kernels_quant_params p)
{
    __shared__ unsigned qf_cmax[QATTN_QF_MAXD];
    const int h = (int)blockIdx.x, b = (int)blockIdx.y;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    qattn_qf_combine_body(p, h, b, n, qf_cmax, QATTN_QF_STAT_THREADS);
}

/* shared memory of the encode: scale and rcp [max(d, QATTN_QF_MAXTT)]
 * (token-local groups: per group of the tile; uniform: per channel), mean
 * [d] (TOKENS smoothing); the per-channel arrays as [16][d / 16] (channel
 * 16 ch + j at j * d / 16 + ch: the lanes of a warp that read channel j of
 * their items ch, ch + 1, ... hit consecutive words, not one bank in 16), gmax [QATTN_QF_MAXTT] (group amax bits), dyn (the
 * dynamic part: BLOCKS: raw tile and block means; TRANSPOSED: codes) */
typedef struct qattn_qf_shared {
    float *scale, *rcp, *mean;
    unsigned *gmax;
    unsigned char *dyn;
} qattn_qf_shared;

/* the scales of token-uniform groups and the TOKENS means of (h, b) into
 * shared memory, read through L2 (volatile: another block wrote them) */
template <int SM, int UNI>
static __device__ __forceinline__ void qattn_qf_encode_prep(const qattn_kernels_quant_params &p, int64_t hb, int fmt,
                                                            const qattn_qf_shared &sh, int nthr)
{
    const int tid = (int)threadIdx.x;
    if (UNI)
        for (int c = tid; c < p.d; c += nthr) {
            const float sc = ((const volatile float *)p.scale)[hb * p.nch + qattn_num_group_ch_index(p.group, c)];
            sh.scale[(c & 15) * (p.d / 16) + (c >> 4)] = sc; /* [16][d / 16]: see qattn_qf_shared */
            sh.rcp[(c & 15) * (p.d / 16) + (c >> 4)] = qattn_qf_rcp(fmt, sc);
        }
    if (SM == QATTN_KERNELS_SMOOTH_TOKENS)
        for (int c = tid; c < p.d; c += nthr)
            sh.mean[(c & 15) * (p.d / 16) + (c >> 4)] = ((const volatile float *)p.mean)[hb * p.d + c];
}

/* ---- encode one tile of tt tokens (tile `tile` of sequence b, head h) by
 * QATTN_QF_THREADS threads, input rows from global memory (qattn_qf_ld) ---- */
template <int IN, int FMT, int SM, int UNI, int NI>
static __device__ __forceinline__ void qattn_qf_encode_tile(const qattn_kernels_quant_params &p, int tt, int tile,
                                                            int h, int b, int64_t t0, int64_t n, int64_t toff,
                                                            const qattn_qf_shared &sh)
{
    float *qf_scale = sh.scale, *qf_rcp = sh.rcp, *qf_mean = sh.mean;
    unsigned *qf_gmax = sh.gmax;
    unsigned char *qf_dyn = sh.dyn;
    const int tid = (int)threadIdx.x;
    const int d = p.d, cpr = d / 16, nitems = tt * cpr;
    const int uniform = UNI, fmt = FMT ? FMT : p.fmt;
    const int transposed = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    const int blocks = SM == QATTN_KERNELS_SMOOTH_BLOCKS;
    const int64_t tb = (int64_t)tile * tt; /* first token of the tile, in the sequence */
    const int64_t hb = (int64_t)h * p.nseq + b;
    /* token-local groups of this tile: [g0, g0 + ngt) (tb is a multiple of the group's block) */
    const int64_t g0 = uniform ? 0 : qattn_num_group_tok_index(p.group, tb);
    const int ngt = uniform ? 0 : (int)(qattn_num_group_tok_index(p.group, tb + tt - 1) - g0 + 1);
    if (!uniform)
        for (int g = tid; g < ngt; g += QATTN_QF_THREADS)
            qf_gmax[g] = 0u;

    /* item i: token tl, channels 16 * ch .. 16 * ch + 15; tokens run fastest
     * across lanes for the transposed store, channels otherwise */
    const uint16_t *x = qattn_qf_seq_x(p, b, t0, h);
    const int64_t stride = p.x_stride_tok;
    uint4 raw[NI][2];
    int tl[NI], ch[NI], ok[NI], gi[NI];
    QATTN_UNROLL
    for (int k = 0; k < NI; k++) {
        const int i = tid + k * QATTN_QF_THREADS;
        tl[k] = transposed ? i % tt : i / cpr;
        ch[k] = transposed ? i / tt : i % cpr;
        ok[k] = i < nitems && tb + tl[k] < n;
        gi[k] = uniform ? 0 : qattn_qf_tok_index(p.group, (int)tb + tl[k]) - (int)g0; /* group in the tile */
        if (ok[k]) {
            raw[k][0] = qattn_qf_ld(x, stride, tb + tl[k], 2 * ch[k]);
            raw[k][1] = qattn_qf_ld(x, stride, tb + tl[k], 2 * ch[k] + 1);
        } else {
            raw[k][0] = raw[k][1] = uint4{0u, 0u, 0u, 0u};
        }
    }
    float *bmean = (float *)0;
    if (blocks) { /* Q block means over the tile's blocks, each channel in token order */
        uint16_t *rt = (uint16_t *)qf_dyn;
        bmean = (float *)(qf_dyn + (size_t)tt * d * 2);
        QATTN_UNROLL
        for (int k = 0; k < NI; k++)
            if (tid + k * QATTN_QF_THREADS < nitems) {
                *(uint4 *)(rt + (size_t)tl[k] * d + ch[k] * 16) = raw[k][0];
                *(uint4 *)(rt + (size_t)tl[k] * d + ch[k] * 16 + 8) = raw[k][1];
            }
        __syncthreads();
        const int nbl = tt / p.mblock;
        for (int u = tid; u < nbl * d; u += QATTN_QF_THREADS) {
            const int bl = u / d, c = u % d;
            const int64_t mb = tb / p.mblock + bl, r0 = mb * p.mblock;
            const int64_t r1 = r0 + p.mblock < n ? r0 + p.mblock : n;
            double acc = 0.0;
            for (int64_t t = r0; t < r1; t++) {
                const uint16_t hv = rt[(size_t)(t - tb) * d + c];
                acc += (double)(IN == QATTN_FMT_BF16 ? qattn_num_u2f((uint32_t)hv << 16) : qattn_port_f16_to_f32(hv));
            }
            const float m = r1 > r0 ? (float)(acc / (double)(r1 - r0)) : 0.0f;
            bmean[u] = m;
            if (mb < p.nmean)
                p.mean[(hb * p.nmean + mb) * d + c] = m;
        }
    }
    __syncthreads();

    /* x - mean (computed again for the codes: fewer registers), the
     * non-finite check, the group amax */
#define QATTN_QF_VALUE(k, j, f, out)                                                        \
    do {                                                                                   \
        float m_ = 0.0f;                                                                   \
        if (SM == QATTN_KERNELS_SMOOTH_TOKENS)                                             \
            m_ = qf_mean[(j) * cpr + ch[k]];                                               \
        else if (blocks)                                                                   \
            m_ = bmean[mrow[k] + ch[k] * 16 + (j)];                                        \
        out = SM ? (f) - m_ : (f);                                                         \
    } while (0)
    unsigned nonfin = 0u;
    QATTN_UNROLL
    for (int k = 0; k < NI; k++)
        nonfin |= qattn_qf_nonfin<IN>(raw[k][0]) | qattn_qf_nonfin<IN>(raw[k][1]);
    const int bad = (nonfin & 0x80008000u) != 0u;
    int mrow[NI];
    QATTN_UNROLL
    for (int k = 0; k < NI; k++)
        mrow[k] = blocks ? tl[k] / p.mblock * d : 0;
    QATTN_UNROLL
    for (int k = 0; k < NI; k++) {
        float am = 0.0f;
        QATTN_UNROLL
        for (int j = 0; j < 16; j++) {
            const float f = qattn_qf_dec<IN>(raw[k][j >> 3], j & 7);
            float vj;
            QATTN_QF_VALUE(k, j, f, vj);
            am = fmaxf(am, fabsf(vj)); /* NaN input: flagged below */
        }
        if (!uniform && ok[k] && am > 0.0f)
            atomicMax(&qf_gmax[gi[k]], qattn_num_f2u(am));
    }
    if (bad && p.nonfinite)
        atomicOr(p.nonfinite, 1);
    if (!uniform) {
        __syncthreads();
        qattn_qf_group_scales(p, fmt, qf_gmax, qf_scale, qf_rcp, ngt, g0, hb, QATTN_QF_THREADS);
    }
    __syncthreads();

    /* codes */
    uint8_t *stage = (uint8_t *)qf_dyn; /* TRANSPOSED: [d][tt] */
    QATTN_UNROLL
    for (int k = 0; k < NI; k++) {
        const int i = tid + k * QATTN_QF_THREADS;
        if (i >= nitems)
            continue;
        unsigned w[4] = {0u, 0u, 0u, 0u};
        if (ok[k]) {
            const float sg = uniform ? 0.0f : qf_scale[gi[k]], rg = uniform ? 0.0f : qf_rcp[gi[k]];
            QATTN_UNROLL
            for (int j = 0; j < 16; j += 2) {
                const float s0 = uniform ? qf_scale[j * cpr + ch[k]] : sg;
                const float s1 = uniform ? qf_scale[(j + 1) * cpr + ch[k]] : sg;
                const float r0 = uniform ? qf_rcp[j * cpr + ch[k]] : rg;
                const float r1 = uniform ? qf_rcp[(j + 1) * cpr + ch[k]] : rg;
                float v0, v1;
                QATTN_QF_VALUE(k, j, qattn_qf_dec<IN>(raw[k][j >> 3], j & 7), v0);
                QATTN_QF_VALUE(k, j + 1, qattn_qf_dec<IN>(raw[k][j >> 3], (j + 1) & 7), v1);
                const unsigned pr = qattn_qf_code2(fmt, v0, s0, r0, v1, s1, r1);
                if (fmt == QATTN_FMT_INT4)
                    w[j >> 3] |= pr << ((j & 7) * 4);
                else
                    w[j >> 2] |= pr << ((j & 3) * 8);
            }
        }
        if (transposed) {
            QATTN_UNROLL
            for (int j = 0; j < 16; j++)
                stage[(size_t)(ch[k] * 16 + j) * tt + tl[k]] = (uint8_t)(w[j >> 2] >> ((j & 3) * 8));
        } else if (ok[k]) {
            uint8_t *dst = (uint8_t *)p.codes + ((int64_t)h * p.tokens + toff + tb + tl[k]) * p.row;
            if (fmt == QATTN_FMT_INT4)
                *(uint2 *)(dst + ch[k] * 8) = uint2{w[0], w[1]};
            else
                *(uint4 *)(dst + ch[k] * 16) = uint4{w[0], w[1], w[2], w[3]};
        }
    }
    if (transposed) {
        __syncthreads();
        const int segs = tt / 16;
        uint8_t *dst = (uint8_t *)p.codes + hb * d * p.npad + tb;
        for (int u = tid; u < d * segs; u += QATTN_QF_THREADS) {
            const int c = u / segs, sg = u % segs;
            *(uint4 *)(dst + (int64_t)c * p.npad + sg * 16) = *(const uint4 *)(stage + (size_t)c * tt + sg * 16);
        }
    }
}
#undef QATTN_QF_VALUE

/* ---- encode: grid (tiles, heads, nseq), QATTN_QF_THREADS threads; dynamic
 * shared memory: BLOCKS smoothing: the raw tile [tt][d] (16-bit) and the
 * block means [tt / mblock][d] (fp32); TRANSPOSED: codes [d][tt] ---- */
/* FMT 0: p.fmt at run time; SM: p.smooth; UNI: uniform groups; NI: items per
 * thread (1: tiles of 8192 elements, three blocks per multiprocessor, two
 * with Q block smoothing; 2: tiles of 16384 elements, two blocks) */
template <int IN, int FMT, int SM, int UNI, int NI>
__global__ void __launch_bounds__(QATTN_QF_THREADS, NI == 1 && SM != QATTN_KERNELS_SMOOTH_BLOCKS ? 3 : 2)
    qattn_qf_encode_kernel(qattn_kernels_quant_params p, int tt)
{
    QATTN_DYNAMIC_SHARED(uint4, qf_dyn4);
    __shared__ float qf_scale[QATTN_QF_MAXD];
    __shared__ float qf_rcp[QATTN_QF_MAXD];
    __shared__ float qf_mean[QATTN_QF_MAXD];
    __shared__ unsigned qf_gmax[QATTN_QF_MAXTT];
    const qattn_qf_shared sh = {qf_scale, qf_rcp, qf_mean, qf_gmax, (unsigned char *)qf_dyn4};
    /* blocks in the reverse order of the stats kernel's: the first to run
     * read what the statistics read last, still in L2 */
    const int tile = (int)(gridDim.x - 1 - blockIdx.x), h = (int)(gridDim.y - 1 - blockIdx.y);
    const int b = (int)(gridDim.z - 1 - blockIdx.z);
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    qattn_qf_encode_prep<SM, UNI>(p, (int64_t)h * p.nseq + b, FMT ? FMT : p.fmt, sh, QATTN_QF_THREADS);
    qattn_qf_encode_tile<IN, FMT, SM, UNI, NI>(p, tt, tile, h, b, t0, n, toff, sh);
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

/* Row maxima of the 8 rows a lane holds, over the L = 2^LC lanes of each
 * row (lane bits 0 .. LC - 1): a reduce-scatter, 4 + 2 + 1 shuffles that
 * halve the rows each step (and one more for L = 16), instead of 8 x LC.
 * Lane c ends with the maximum of row qattn_qs_rowmax_row<LC>(c) (for
 * L = 16, lanes c and c ^ 1 with the same row). */
template <int LC>
static __device__ __forceinline__ int qattn_qs_rowmax_row(int c)
{
    return ((c >> (LC - 1)) & 1) * 4 + ((c >> (LC - 2)) & 1) * 2 + ((c >> (LC - 3)) & 1);
}
template <int LC>
static __device__ __forceinline__ float qattn_qs_rowmax(const float (&am)[8], int c)
{
    const bool b2 = (c >> (LC - 1)) & 1, b1 = (c >> (LC - 2)) & 1, b0 = (c >> (LC - 3)) & 1;
    float a4[4], a2[2];
    QATTN_UNROLL
    for (int i = 0; i < 4; i++)
        a4[i] = fmaxf(b2 ? am[4 + i] : am[i], __shfl_xor(b2 ? am[i] : am[4 + i], 1 << (LC - 1)));
    QATTN_UNROLL
    for (int i = 0; i < 2; i++)
        a2[i] = fmaxf(b1 ? a4[2 + i] : a4[i], __shfl_xor(b1 ? a4[i] : a4[2 + i], 1 << (LC - 2)));
    float a1 = fmaxf(b0 ? a2[1] : a2[0], __shfl_xor(b0 ? a2[0] : a2[1], 1 << (LC - 3)));
    QATTN_UNROLL
    for (int o = 1; o < (1 << (LC - 3)); o <<= 1)
        a1 = fmaxf(a1, __shfl_xor(a1, o));
    return a1;
}

/* ---- lean encode, d = 8 << LC (64 or 128), no Q block smoothing: grid
 * (tiles of QATTN_QF_LTT tokens, heads, nseq), 16 << LC threads (d / 16
 * warps). Lane (k, c) of a warp (k = lane >> LC, c = lane & (2^LC - 1))
 * holds channels 8 c .. 8 c + 7 of the rows r0 + u, u = 0..7, r0 = warp * 8
 * * RPI + 8 k (RPI = 32 >> LC rows per load, so every warp load reads whole
 * rows): one 16-byte load per row, all eight in flight at once, and no
 * integer division (the rows' groups and the channel groups come from the
 * host, qattn_qf_lean_args).
 * The same codes, scales, means and flags as qattn_qf_encode_tile:
 *   TR 0 (rows layout): token-local groups (UNI 0: the rows' amax, on
 *        16-bit magnitudes when unsmoothed, reduced over their 2^LC lanes
 *        by the reduce-scatter butterfly qattn_qs_rowmax, one shared
 *        atomicMax per row) or
 *        token-uniform ones (UNI 1: a lane's 8 channel scales in
 *        registers); 8 codes of a row per lane in one 8-byte store (4 for
 *        int4); int8 / e4m3 codes by brackets (qattn_qs_code8), the other
 *        formats by qattn_qf_code8;
 *   TR 1 (LAYOUT_TRANSPOSED, UNI 1, 8-bit codes): a channel's codes of the
 *        lane's 8 rows packed along tokens into 8 bytes (zero past the
 *        sequence), staged [d][QATTN_QF_LTT] in shared memory in 8-byte
 *        slots swizzled by channel (slot ^ c: no bank conflicts at d = 128)
 *        and written in 16-byte runs along tokens. ---- */
#define QATTN_QF_LTT 128
/* what a lean encode block would otherwise derive with integer divisions
 * (qattn_qf_lean_args_of; the tiles start on group blocks) */
typedef struct qattn_qf_lean_args {
    int gpt;     /* token-local groups: group indices per tile (the tile's first row: tile * gpt) */
    int ngt;     /* token-local groups: the tile's rows touch groups [0, ngt) of it */
    int chshift; /* uniform groups: channel c in group c >> chshift (31: one group), -1: c / group.ch */
    unsigned char grp[QATTN_QF_LTT]; /* token-local groups: group of tile row r, in the tile */
} qattn_qf_lean_args;

/* A staged tile of V^T codes to global memory: stage holds D channels x
 * QATTN_QF_LTT tokens as 8-byte slots [D][SL] (SL = QATTN_QF_LTT / 8), the
 * slot of tokens 8s .. 8s + 7 of channel ch at s ^ (c & (SL - 1)) (c = ch >> 3);
 * so slots 2m, 2m + 1 of channel ch are the 16-byte unit m ^ (f >> 1)
 * (f = c & (SL - 1)), halves swapped when f is odd. Channel ch goes to
 * dst + ch * npad in 16-byte runs; ST_STREAM: with the streaming store hint. */
template <int D, int NT, int ST_STREAM>
static __device__ __forceinline__ void qattn_qf_vt_flush(const uint4 *stage, uint8_t *dst, int64_t npad, int tid)
{
    enum { SL = QATTN_QF_LTT / 8 };
    for (int q = tid; q < D * SL / 2; q += NT) {
        const int ch = q / (SL / 2), m = q % (SL / 2), f = (ch >> 3) & (SL - 1);
        const uint4 v = stage[ch * (SL / 2) + (m ^ (f >> 1))];
        uint4 *to = (uint4 *)(dst + (int64_t)ch * npad + 16 * m);
        const uint4 w = f & 1 ? uint4{v.z, v.w, v.x, v.y} : v;
        if (ST_STREAM)
            qattn_port_st_stream(to, w);
        else
            *to = w;
    }
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

/* V^T (the lean and the streamed kernel): a lane's codes of its 8 rows
 * (tokens) in its 8 channels, channel c * 8 + j's packed along tokens into
 * its 8-byte slot of the stage, zero past the sequence (nv rows inside), by
 * qattn_qf_code8_of (per channel: scale sc, rcp or lower bracket r, upper
 * bracket h); the rare channels whose brackets disagree again from the
 * exact quotients. e4m3: every value by the correction step
 * (qattn_num_quot), when all 8 scales allow it (qattn_num_quot_ok), else every
 * value by the exact path. On the benchmark's V and on the shipped
 * activations, 21% and 13% of the warps' rows had a bracket pair that
 * disagreed, which sent the whole warp through the exact path
 * (kernels/LOG.md, 2026-11-25). val(u, j): row u's smoothed value of channel j. */
template <int FMT, int SL, class VAL>
static __device__ __forceinline__ void qattn_qf_vt_codes(int fmt, uint2 *stage, int slot, int c, int nv,
                                                         const float (&sc)[8], const float (&r)[8],
                                                         const float (&h)[8], VAL val)
{
    enum { BRK = FMT == QATTN_FMT_INT8 || FMT == QATTN_FMT_INT4 || FMT == QATTN_FMT_E4M3 };
    const unsigned keep0 = nv >= 4 ? 0xffffffffu : nv > 0 ? 0xffffffffu >> (32 - 8 * nv) : 0u;
    const unsigned keep1 = nv >= 8 ? 0xffffffffu : nv > 4 ? 0xffffffffu >> (64 - 8 * nv) : 0u;
    uint2 *sp = stage + c * 8 * SL + slot; /* channel c * 8 + j's slot: sp[j * SL] */
    auto col = [&](int j, float (&v)[8], float (&s8)[8], float (&r8)[8]) { /* channel j: values, scale, r */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++) {
            v[u] = val(u, j);
            s8[u] = sc[j];
            r8[u] = r[j];
        }
    };
    auto put = [&](int j, uint2 w) { sp[j * SL] = uint2{w.x & keep0, w.y & keep1}; };
    auto exact = [&](int j) {
        float v[8], s8[8], r8[8];
        col(j, v, s8, r8);
        put(j, qattn_qs_code8_exact<FMT>(v, s8, r8));
    };
    if (FMT == QATTN_FMT_E4M3) { /* no brackets: every value by the correction step (qattn_num_quot) */
        bool mk = true;
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            mk = mk && qattn_num_quot_ok(sc[j]) != 0;
        if (mk) {
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                float v[8], s8[8], r8[8];
                col(j, v, s8, r8);
                const float rr = qattn_qs_brk_rcp(r[j]); /* r: the lower bracket */
                unsigned a[4];
                QATTN_UNROLL
                for (int u = 0; u < 4; u++)
                    a[u] = qattn_port_e4m3x2(qattn_num_quot(v[2 * u], sc[j], rr),
                                             qattn_num_quot(v[2 * u + 1], sc[j], rr));
                put(j, uint2{a[0] | a[1] << 16, a[2] | a[3] << 16});
            }
        } else { /* a scale out of range (zero, tiny, non-finite): every value by the exact path */
            QATTN_UNROLL
            for (int j = 0; j < 8; j++)
                exact(j);
        }
        return;
    }
    unsigned dm = 0u;
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        float v[8], s8[8], r8[8], h8[8];
        col(j, v, s8, r8);
        QATTN_UNROLL
        for (int u = 0; u < 8; u++)
            h8[u] = h[j];
        unsigned dd;
        put(j, qattn_qf_code8_of<FMT>(fmt, v, s8, r8, h8, dd));
        dm |= dd ? 1u << j : 0u;
    }
    if (BRK && dm)
        QATTN_UNROLL
        for (int j = 0; j < 8; j++)
            if (dm >> j & 1u)
                exact(j);
}

template <int IN, int FMT, int SM, int UNI, int TR, int LC>
__global__ void __launch_bounds__(16 << LC, 48 >> LC) /* 85 registers: 6 warps per scheduler */
    qattn_qf_lean_kernel(qattn_kernels_quant_params p, qattn_qf_lean_args la)
{
    enum {
        L = 1 << LC, RPI = 32 >> LC, NT = 16 << LC, D = 8 << LC, TT = QATTN_QF_LTT, SL = QATTN_QF_LTT / 8,
        BRK = FMT == QATTN_FMT_INT8 || FMT == QATTN_FMT_E4M3, /* codes by brackets (qattn_qs_code8) */
        M16 = !UNI && !SM                                     /* row maxima of the 16-bit magnitudes */
    };
    __shared__ float ls_scale[TT], ls_rcp[TT], ls_hi[BRK ? TT : 1]; /* BRK: ls_rcp, ls_hi the brackets */
    __shared__ unsigned ls_gmax[TT];
    __shared__ uint4 ls_stage[TR ? D * SL / 2 : 1]; /* TR: [D][SL] 8-byte slots */
    qattn_port_dependents_go(); /* a kernel launched to overlap this one may start its blocks */
    const int tid = (int)threadIdx.x, lane = tid & 31, c = lane & (L - 1), k = lane >> LC;
    const int r0 = (tid >> 5) * 8 * RPI + 8 * k;
    /* blocks in the reverse order of the stats kernel's: the first to run
     * read what the statistics read last, still in L2 */
    const int tile = (int)(gridDim.x - 1 - blockIdx.x), h = (int)(gridDim.y - 1 - blockIdx.y);
    const int b = (int)(gridDim.z - 1 - blockIdx.z);
    const int fmt = FMT ? FMT : p.fmt;
    int64_t t0, n, toff;
    qattn_quant_seq(p, b, &t0, &n, &toff);
    const int64_t hb = (int64_t)h * p.nseq + b, tb = (int64_t)tile * TT, left = n - tb - r0;
    const int nv = left < 0 ? 0 : left > 8 ? 8 : (int)left; /* the lane's rows inside the sequence */
    const uint16_t *x = qattn_qf_seq_x(p, b, t0, h) + (tb + r0) * p.x_stride_tok + c * 8;
    uint4 raw[8];
    QATTN_UNROLL
    for (int u = 0; u < 8; u++)
        raw[u] = u < nv ? *(const uint4 *)(x + u * p.x_stride_tok) : uint4{0u, 0u, 0u, 0u};
    /* per channel: mean, scale, and rcp (first form) or the brackets rc, hi (BRK) */
    float mean[8], sc[8], rc[8], hi[8];
    QATTN_UNROLL
    for (int j = 0; j < 8; j++) {
        mean[j] = SM == QATTN_KERNELS_SMOOTH_TOKENS ? p.mean[hb * D + c * 8 + j] : 0.0f;
        const int cg = la.chshift >= 0 ? (c * 8 + j) >> la.chshift : (c * 8 + j) / p.group.ch;
        sc[j] = UNI ? p.scale[hb * p.nch + cg] : 0.0f;
        rc[j] = hi[j] = 0.0f;
        if (UNI && BRK)
            qattn_qs_brk(sc[j], rc[j], hi[j]);
        else if (UNI)
            rc[j] = qattn_qf_rcp(fmt, sc[j]);
    }
    unsigned nonfin = 0u;
    if (!M16) { /* M16: from the row maxima below */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++)
            nonfin |= qattn_qf_nonfin<IN>(raw[u]) & 0x80008000u;
    }
#define QATTN_QF_LVAL(u, j) (SM ? qattn_qf_dec<IN>(raw[u], j) - mean[j] : qattn_qf_dec<IN>(raw[u], j))

    if (!UNI) { /* token-local groups: the tile starts on a group block (qattn_qf_lean_takes) */
        const int64_t g0 = (int64_t)tile * la.gpt;
        const int ngt = la.ngt;
        for (int g = tid; g < ngt; g += NT)
            ls_gmax[g] = 0u;
        __syncthreads();
        float am[8]; /* the lane's part of each row's amax */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++) {
            if (M16) { /* the largest 16-bit magnitude (exact as a float; Inf / NaN flagged) */
                am[u] = qattn_qf_amax16<IN>(raw[u], nonfin);
            } else {
                am[u] = 0.0f;
                QATTN_UNROLL
                for (int j = 0; j < 8; j++)
                    am[u] = fmaxf(am[u], fabsf(QATTN_QF_LVAL(u, j))); /* NaN input: flagged above */
            }
        }
        { /* row maxima over the row's lanes (reduce-scatter), one shared atomicMax per row */
            const float rm = qattn_qs_rowmax<LC>(am, c);
            const int rr = qattn_qs_rowmax_row<LC>(c);
            if ((LC == 3 || !(c & 1)) && rr < nv && rm > 0.0f)
                atomicMax(&ls_gmax[la.grp[r0 + rr]], qattn_num_f2u(rm));
        }
        __syncthreads();
        qattn_qf_group_scales(p, fmt, ls_gmax, ls_scale, ls_rcp, ngt, g0, hb, NT, BRK ? ls_hi : NULL);
        __syncthreads();
    }
    if (nonfin && p.nonfinite)
        atomicOr(p.nonfinite, 1);

    if (!TR) {
        const int rowb = QATTN_KERNELS_ROW(fmt, D); /* = p.row (qattn_qf_lean_takes): bytes of a code row */
        uint8_t *dst = (uint8_t *)p.codes + ((int64_t)h * p.tokens + toff + tb + r0) * rowb;
        /* row u's values, scales, and rcps or brackets */
        auto row8 = [&](int u, float (&v)[8], float (&sg)[8], float (&rg)[8], float (&hg)[8]) {
            const int gi = UNI ? 0 : la.grp[r0 + u];
            QATTN_UNROLL
            for (int j = 0; j < 8; j++) {
                v[j] = QATTN_QF_LVAL(u, j);
                sg[j] = UNI ? sc[j] : ls_scale[gi];
                rg[j] = UNI ? rc[j] : ls_rcp[gi];
                hg[j] = UNI ? hi[j] : BRK ? ls_hi[gi] : 0.0f;
            }
        };
        unsigned dm = 0u; /* BRK: rows whose brackets disagree */
        QATTN_UNROLL
        for (int u = 0; u < 8; u++) {
            if (u >= nv)
                continue;
            float v[8], sg[8], rg[8], hg[8];
            row8(u, v, sg, rg, hg);
            unsigned dd;
            const uint2 w = qattn_qf_code8_of<FMT>(fmt, v, sg, rg, hg, dd);
            dm |= dd ? 1u << u : 0u;
            if (fmt == QATTN_FMT_INT4)
                *(unsigned *)(dst + u * rowb + c * 4) = w.x;
            else
                *(uint2 *)(dst + u * rowb + c * 8) = w;
        }
        if (BRK && dm) /* the rare rows whose brackets disagree, again from the exact quotients */
            QATTN_UNROLL
            for (int u = 0; u < 8; u++)
                if (dm >> u & 1u) {
                    float v[8], sg[8], rg[8], hg[8];
                    row8(u, v, sg, rg, hg);
                    *(uint2 *)(dst + u * rowb + c * 8) = qattn_qs_code8_exact<FMT>(v, sg, rg);
                }
    } else {
        qattn_qf_vt_codes<FMT, SL>(fmt, (uint2 *)ls_stage, (r0 >> 3) ^ (c & (SL - 1)), c, nv, sc, rc, hi,
                                   [&](int u, int j) { return QATTN_QF_LVAL(u, j); });
        __syncthreads();
        qattn_qf_vt_flush<D, NT, 0>(ls_stage, (uint8_t *)p.codes + hb * D * p.npad + tb, p.npad, tid);
    }
#undef QATTN_QF_LVAL
}

/* bytes of the partial statistics at the start of p.work; the counters of
 * the streamed kernel follow: [2u] blocks of unit u arrived at its wait,
 * [2u + 1] blocks that left it (the kernel leaves both zero) */
static __host__ __device__ __forceinline__ size_t qattn_qf_stats_bytes(const qattn_kernels_quant_params &p)
{
    return (size_t)p.heads * p.nseq * (size_t)qattn_qf_nchunk(p) * p.d * 16;
}

/* the 2 heads nseq counters after the statistics in p.work cleared on st,
 * before a launch of the streamed kernel, unless p.counters_zero says they
 * are zero already */
static hipError_t qattn_qf_clear_counters(const qattn_kernels_quant_params &p, hipStream_t st)
{
    if (p.counters_zero)
        return hipSuccess;
    return hipMemsetAsync((unsigned char *)p.work + qattn_qf_stats_bytes(p), 0,
                          (size_t)(2 * (int64_t)p.heads * p.nseq) * sizeof(unsigned), st);
}

/* the encode kernel for p: int8 and e4m3 compiled for their format, the
 * others (int4, e5m2) with the format read at run time */
typedef void (*qattn_qf_encode_fn)(qattn_kernels_quant_params, int);
template <int IN, int FMT, int SM, int NI>
static qattn_qf_encode_fn qattn_qf_pick_uni(const qattn_kernels_quant_params &p)
{
    return qattn_qf_uniform(p.group) ? &qattn_qf_encode_kernel<IN, FMT, SM, 1, NI>
                                     : &qattn_qf_encode_kernel<IN, FMT, SM, 0, NI>;
}
template <int IN, int FMT, int NI>
static qattn_qf_encode_fn qattn_qf_pick_smooth(const qattn_kernels_quant_params &p)
{
    if (p.smooth == QATTN_KERNELS_SMOOTH_TOKENS)
        return qattn_qf_pick_uni<IN, FMT, QATTN_KERNELS_SMOOTH_TOKENS, NI>(p);
    if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS) /* token-local groups only (qattn_qf_plan) */
        return &qattn_qf_encode_kernel<IN, FMT, QATTN_KERNELS_SMOOTH_BLOCKS, 0, NI>;
    return qattn_qf_pick_uni<IN, FMT, QATTN_KERNELS_SMOOTH_NONE, NI>(p);
}
template <int IN, int NI>
static qattn_qf_encode_fn qattn_qf_pick_fmt(const qattn_kernels_quant_params &p)
{
    if (p.fmt == QATTN_FMT_INT8)
        return qattn_qf_pick_smooth<IN, QATTN_FMT_INT8, NI>(p);
    if (p.fmt == QATTN_FMT_E4M3)
        return qattn_qf_pick_smooth<IN, QATTN_FMT_E4M3, NI>(p);
    return qattn_qf_pick_smooth<IN, 0, NI>(p);
}

/* The ladder from p (head dim, V^T, group kind, smoothing, code format) to
 * one instance of a kernel family F whose kernels take template arguments
 * <IN, FMT, SM, UNI, TR, LC>: F::fn is their type, F::of<...>() an
 * instance, F::INT4 the FMT that int4 codes take (QATTN_FMT_INT4, or 0: the
 * format read at run time) */
template <class F, int IN, int FMT, int SM, int UNI, int TR>
static typename F::fn qattn_qf_ladder_lc(const qattn_kernels_quant_params &p)
{
    return p.d == 64 ? F::template of<IN, FMT, SM, UNI, TR, 3>() : F::template of<IN, FMT, SM, UNI, TR, 4>();
}
template <class F, int IN, int FMT, int SM>
static typename F::fn qattn_qf_ladder_kind(const qattn_kernels_quant_params &p)
{
    if (!qattn_qf_uniform(p.group))
        return qattn_qf_ladder_lc<F, IN, FMT, SM, 0, 0>(p);
    return p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ? qattn_qf_ladder_lc<F, IN, FMT, SM, 1, 1>(p)
                                                       : qattn_qf_ladder_lc<F, IN, FMT, SM, 1, 0>(p);
}
template <class F, int IN, int FMT>
static typename F::fn qattn_qf_ladder_smooth(const qattn_kernels_quant_params &p)
{
    return p.smooth == QATTN_KERNELS_SMOOTH_TOKENS ? qattn_qf_ladder_kind<F, IN, FMT, QATTN_KERNELS_SMOOTH_TOKENS>(p)
                                                   : qattn_qf_ladder_kind<F, IN, FMT, QATTN_KERNELS_SMOOTH_NONE>(p);
}
template <class F, int IN>
static typename F::fn qattn_qf_ladder(const qattn_kernels_quant_params &p)
{
    if (p.fmt == QATTN_FMT_INT8)
        return qattn_qf_ladder_smooth<F, IN, QATTN_FMT_INT8>(p);
    if (p.fmt == QATTN_FMT_E4M3)
        return qattn_qf_ladder_smooth<F, IN, QATTN_FMT_E4M3>(p);
    return qattn_qf_ladder_smooth<F, IN, F::INT4>(p);
}

/* the lean encode kernel of p (qattn_qf_lean_takes) */
typedef void (*qattn_qf_lean_fn)(qattn_kernels_quant_params, qattn_qf_lean_args);
struct qattn_qf_lean_family {
    typedef qattn_qf_lean_fn fn;
    enum { INT4 = 0 };
    template <int IN, int FMT, int SM, int UNI, int TR, int LC>
    static fn of()
    {
        return &qattn_qf_lean_kernel<IN, FMT, SM, UNI, TR, LC>;
    }
};

static int qattn_qf_gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* the tile (tokens) and dynamic shared memory of the encode kernel, or 0 if
 * the fast path does not take p */
static int qattn_qf_plan(const qattn_kernels_quant_params &p, int *tt, size_t *smem, int *ni)
{
    const int uniform = qattn_qf_uniform(p.group);
    const int transposed = p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED;
    if (!qattn_num_is_scaled(p.fmt) || !p.scale || p.d % 16 || p.d > QATTN_QF_MAXD)
        return 0;
    if ((p.in != QATTN_FMT_FP16 && p.in != QATTN_FMT_BF16) || ((uintptr_t)p.x & 15) || ((uintptr_t)p.codes & 15) ||
        (p.x_stride_tok | p.x_stride_head | p.x_stride_batch) & 7)
        return 0;
    if (!uniform && p.group.ch > 0) /* token-local groups split along channels */
        return 0;
    if (uniform && p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS)
        return 0;
    if ((uniform || p.smooth == QATTN_KERNELS_SMOOTH_TOKENS) && !p.work)
        return 0;
    if (transposed && (p.fmt == QATTN_FMT_INT4 || p.npad % 128))
        return 0;
    int period = qattn_qf_period(p.group);
    if (period <= 0)
        return 0;
    if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS)
        period = period / qattn_qf_gcd(period, p.mblock) * p.mblock;
    int t = 0, n_i = 1;
    for (; n_i <= QATTN_QF_ITEMS && !t; n_i++) { /* one item per thread if the tile allows */
        const int cap = QATTN_QF_TILE(n_i) / p.d < QATTN_QF_MAXTT ? QATTN_QF_TILE(n_i) / p.d : QATTN_QF_MAXTT;
        if (transposed) { /* a power of two that divides 128 (and so npad) */
            for (int c = 128; c >= 16 && !t; c /= 2)
                if (c <= cap && c % period == 0)
                    t = c;
        } else {
            t = period > cap ? 0 : cap / period * period;
        }
    }
    n_i--;
    if (t <= 0)
        return 0;
    size_t sm = 0;
    if (p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS)
        sm = (size_t)t * p.d * 2 + (size_t)(t / p.mblock) * p.d * 4;
    if (transposed)
        sm = (size_t)t * p.d > sm ? (size_t)t * p.d : sm;
    if (sm > QATTN_QF_SMEM)
        return 0;
    *tt = t;
    *smem = sm;
    *ni = n_i;
    return 1;
}

/* whether the lean encode kernel can run p, which qattn_qf_plan takes: d 64
 * or 128, no Q block smoothing, transposed codes only with token-uniform
 * groups, token-local groups whose blocks tile QATTN_QF_LTT tokens (at most
 * QATTN_QF_LTT groups per tile) */
static int qattn_qf_lean_takes(const qattn_kernels_quant_params &p)
{
    if ((p.d != 64 && p.d != 128) || p.smooth == QATTN_KERNELS_SMOOTH_BLOCKS ||
        p.row != QATTN_KERNELS_ROW(p.fmt, p.d)) /* the 8 rows of a lane at immediate offsets (p.row a constant) */
        return 0;
    const int uniform = qattn_qf_uniform(p.group);
    if (p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED || uniform)
        return uniform;
    const int period = qattn_qf_period(p.group); /* token-local here: token, block, warp, thread */
    return period > 0 && QATTN_QF_LTT % period == 0 && qattn_num_group_tok_index(p.group, QATTN_QF_LTT - 1) < QATTN_QF_LTT;
}

/* the lean kernel's arguments for p (qattn_qf_lean_takes(p)) */
static qattn_qf_lean_args qattn_qf_lean_args_of(const qattn_kernels_quant_params &p)
{
    qattn_qf_lean_args a;
    memset(&a, 0, sizeof a);
    if (!qattn_qf_uniform(p.group)) {
        a.gpt = (int)qattn_num_group_tok_index(p.group, QATTN_QF_LTT);
        a.ngt = (int)qattn_num_group_tok_index(p.group, QATTN_QF_LTT - 1) + 1;
        for (int r = 0; r < QATTN_QF_LTT; r++)
            a.grp[r] = (unsigned char)qattn_num_group_tok_index(p.group, r);
    }
    a.chshift = p.group.ch <= 0 ? 31 : -1;
    for (int k = 0; k < 31 && a.chshift < 0; k++)
        if (p.group.ch == 1 << k)
            a.chshift = k;
    return a;
}

#endif
