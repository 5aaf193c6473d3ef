/* Attention forward, NVIDIA mma.sync path (sm_89 / sm_90a): int8 Q.K
 * (m16n8k32 s8) or int4 Q.K (m16n8k64 s4, template QF: the same fragments,
 * rows of d / 2 bytes; d = 128 only) with
 * per-thread scale groups, e4m3 P and V multiplied exactly (as fp16) with an
 * f32 tensor-core accumulator that starts at 0 for each key block and is
 * added into the fp32 O after it. One template per head dim;
 * kernels/gen_instances.sh writes the instances. Built by the NVIDIA backend
 * only (inline PTX through mma_nvidia.h).
 *
 * The scheme it computes (sage2-8b-sm90 and its variants):
 *   q=int8|int4@<any token pattern, no ,ch:>  k=(the same)@thread:128/8/2  p=e4m3[@static]
 *   v=e4m3@channel|tensor[,ch:C]  smooth=k[+v]  acc=fp22+fp32:128  kblock=128
 * as the CPU emulation (quant/src/emulate.c) defines it, except for exp2
 * (ex2.approx.ftz here), the order in which sums are formed (the tensor
 * core's; the row sum l per thread, then across the 4 lanes of a row) and the
 * inner accumulator: the emulation sums 32-key fp8 k-steps in fp22 (as the
 * wgmma kernels do), this tensor core 16-key steps in f32 (sm_90 has no native
 * e4m3 mma.sync: ptxas turns the e4m3 instruction into the same f16 HMMA, see
 * mma_nvidia.h).
 *
 * Tiling: a block of NW = 8 warps owns BM = 16 NW = 128 query rows of one
 * (sequence, head), the longest causal tiles first; warp w owns rows
 * 16w..16w+15, lane 4g+i holds rows g and g+8 (the mma accumulator layout). Keys go in blocks of KB = 128 (the scheme's kblock,
 * aligned at key 0 of the sequence) through shared memory, cp.async double
 * buffered: K [128][D+16] bytes and V^T [D][128+16] bytes as stored (16-byte
 * padding: ldmatrix without bank conflicts); V^T is converted once per block
 * to fp16 [D][128+8] (exact), shared by the warps.
 *
 *   Q.K  Q fragments stay in registers for the whole loop; K fragments by
 *        ldmatrix; m16n8k32 s8 into int32; S = float(acc) * (sq sk c2), one
 *        multiply by a register-held product: lane 4g+i holds keys 8t+2i,
 *        8t+2i+1 of n-tile t, one K group of thread:128/8/2 per block, and
 *        rows g, g+8 (one Q scale each). int32 -> float exactly on the FMA
 *        pipe (|acc| < 2^22), leaving the quarter-rate pipe to ex2.
 *   softmax  base 2 per block: row max over the thread's 32 values and the 4
 *        lanes of its group (2 shuffles), P = 2^(S - m), row sum of the
 *        unquantized P kept per thread (lanes summed at the end), O and the
 *        sum rescaled by 2^(m_old - m_new).
 *   P.V  P * 448 rounded to e4m3 (cvt.rn.satfinite.e4m3x2), then to f16x2
 *        (exact): the accumulators of n-tiles 2s, 2s+1 are the A fragment of
 *        keys 16s..16s+15 of m16n8k16; V^T f16 rows by ldmatrix are the B
 *        fragments; f32 accumulate into a per-block accumulator, added into
 *        the fp32 O (the +fp32:128 level).
 *   out  O / l / 448 * v_scale[c] (+ V mean), rounded to fp16 / bf16 / fp32;
 *        LSE in natural log; rows without a visible key give 0 and -inf.
 * Masks none / causal / causal-br / window (per-row key ranges, blocks
 * outside the tile's range skipped), tails (K rows past the end zero-filled,
 * their scores -inf), GQA, varlen (cu_q / cu_k). V must be TRANSPOSED:
 * [hkv, nseq, d, npad] with zeros past each sequence's end. */
#ifndef QATTN_KERNELS_ATTN_FWD_MMA_H
#define QATTN_KERNELS_ATTN_FWD_MMA_H

#include <stdlib.h>
#include <string.h>

#include "hip_port.h"
#include "mma_nvidia.h"
#include "attn_common.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"
#include "wgmma_keys.h" /* the K groups of the wgmma tile (the check below) */

#define QATTN_MMA_KB 128     /* keys per block (= the scheme's kblock) */
#define QATTN_MMA_WARPS 8    /* warps per block, 16 query rows each (H100: 8 beat 4, kernels/LOG.md) */
#define QATTN_MMA_VS (QATTN_MMA_KB + 16) /* V^T (e4m3) row stride in bytes */
#define QATTN_MMA_VH (QATTN_MMA_KB + 8)  /* V^T (f16) row stride in halves */

/* bytes of one stored Q / K row: d (int8) or d / 2 (int4, QF) */
#define QATTN_MMA_QB(d, qf) ((qf) == QATTN_FMT_INT4 ? (d) / 2 : (d))

/* bytes of shared memory of one pipeline stage (K rows of qb bytes) */
static inline int qattn_attn_mma_stage_bytes(int d, int qb)
{
    return QATTN_MMA_KB * (qb + 16) + d * QATTN_MMA_VS;
}

/* all the dynamic shared memory: two stages and the f16 V^T */
static inline int qattn_attn_mma_smem_bytes(int d, int qb)
{
    return 2 * qattn_attn_mma_stage_bytes(d, qb) + d * QATTN_MMA_VH * 2;
}

/* a / b rounded to nearest for normal operands without the slow path of
 * div.rn (reciprocal, one Newton correction of the quotient) */
static __device__ __forceinline__ float qattn_mma_div(float a, float b)
{
    const float r = __frcp_rn(b);
    const float q = __fmul_rn(a, r);
    return __fmaf_rn(__fmaf_rn(-q, b, a), r, q);
}

/* ---- shared by the mma.sync and wgmma kernels ----
 * Each thread owns rows rA and rB = rA + 8 of the tile (the m16n8 / wgmma
 * accumulator layout); [loX, hiX) are their visible keys. */

/* the visible keys [*loX, *hiX) of rows rA and rB (empty for rows past sq) */
static __device__ __forceinline__ void qattn_mma_row_ranges(qattn_mask mask, int rA, int rB, int sq, int sk, int *loA,
                                                            int *hiA, int *loB, int *hiB)
{
    int64_t lo = 0, hi = 0;
    if (rA < sq)
        qattn_num_mask_range(mask, rA, sq, sk, &lo, &hi);
    *loA = (int)lo, *hiA = (int)hi;
    lo = hi = 0;
    if (rB < sq)
        qattn_num_mask_range(mask, rB, sq, sk, &lo, &hi);
    *loB = (int)lo, *hiB = (int)hi;
}

/* -inf into the scores of an accumulator fragment whose keys are not visible:
 * s[0], s[1] row A, keys j, j + 1; s[2], s[3] row B, keys j, j + 1 */
static __device__ __forceinline__ void qattn_mma_mask_frag(float *s, int j, int loA, int hiA, int loB, int hiB)
{
    if (j < loA || j >= hiA)
        s[0] = -INFINITY;
    if (j + 1 < loA || j + 1 >= hiA)
        s[1] = -INFINITY;
    if (j < loB || j >= hiB)
        s[2] = -INFINITY;
    if (j + 1 < loB || j + 1 >= hiB)
        s[3] = -INFINITY;
}

/* the key blocks of KB keys any row of the block sees: [*J0, *J1); s_range
 * is two ints of shared memory; a barrier for the whole block */
static __device__ __forceinline__ void qattn_mma_key_blocks(int loA, int hiA, int loB, int hiB, int KB, int *s_range,
                                                            int *J0, int *J1)
{
    const int tid = (int)threadIdx.x, lane = tid & 31;
    int lo = 0x7fffffff, hi = 0;
    if (loA < hiA)
        lo = loA < lo ? loA : lo, hi = hiA > hi ? hiA : hi;
    if (loB < hiB)
        lo = loB < lo ? loB : lo, hi = hiB > hi ? hiB : hi;
    for (int o = 16; o > 0; o >>= 1) {
        const int l2 = __shfl_xor_sync(0xffffffffu, lo, o), h2 = __shfl_xor_sync(0xffffffffu, hi, o);
        lo = l2 < lo ? l2 : lo;
        hi = h2 > hi ? h2 : hi;
    }
    if (tid == 0)
        s_range[0] = 0x7fffffff, s_range[1] = 0;
    __syncthreads();
    if (lane == 0) {
        atomicMin(&s_range[0], lo);
        atomicMax(&s_range[1], hi);
    }
    __syncthreads();
    *J0 = s_range[0] < s_range[1] ? s_range[0] / KB * KB : 0;
    *J1 = s_range[0] < s_range[1] ? (s_range[1] + KB - 1) / KB * KB : 0;
}

/* lane qi of a quad holds a[j] = its piece of n-tile j (j < 4); *v gets piece j of n-tile qi from
 * lane j: the 4 x 4 transpose in two exchange steps (distance 1, then 2), one shuffle a pair of
 * pieces a step */
static __device__ __forceinline__ void qattn_mma_quad_transpose(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                                int qi, uint4 *v)
{
    uint32_t m[4] = {a0, a1, a2, a3};
#pragma unroll
    for (int s = 2; s >= 1; s >>= 1) {
        const bool hi = (qi & s) != 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if (j & s)
                continue; /* the pair (j, j + s) */
            const uint32_t send = hi ? m[j] : m[j + s];
            const uint32_t recv = __shfl_xor_sync(0xffffffffu, send, s);
            if (hi)
                m[j] = recv;
            else
                m[j + s] = recv;
        }
    }
    *v = make_uint4(m[0], m[1], m[2], m[3]);
}

/* O / l / pmul * v_scale (+ V mean) rounded to p.out for rows rA, rB and the
 * thread's columns 8n + 2i, 8n + 2i + 1 (o[n][0..1] row rA, o[n][2..3] row
 * rB); l and the LSE summed over the 4 lanes of a row first; VEC: 16-bit rows stored 16 bytes a
 * lane (below) */
template <int D, bool VEC = false>
static __device__ __forceinline__ void qattn_mma_epilogue(const qattn_kernels_attn_params &p, const float (&o)[D / 8][4],
                                                          float lA, float lB, float mA, float mB, int rA, int rB,
                                                          int loA, int hiA, int loB, int hiB, int sq, int64_t tq0,
                                                          int b, int h, int hk)
{
    constexpr int NO = D / 8;
    const int qi = (int)threadIdx.x & 3;
    const float pmul = p.pmul;
    lA = lA + __shfl_xor_sync(0xffffffffu, lA, 1);
    lB = lB + __shfl_xor_sync(0xffffffffu, lB, 1);
    lA = lA + __shfl_xor_sync(0xffffffffu, lA, 2);
    lB = lB + __shfl_xor_sync(0xffffffffu, lB, 2);
    if (qi == 0 && p.lse) {
        const int64_t t0 = p.cu_q ? tq0 : (int64_t)b * p.seqlen_q;
#pragma unroll 1
        for (int half = 0; half < 2; half++) {
            const int r = half ? rB : rA;
            const int empty = half ? loB >= hiB : loA >= hiA;
            const float m = half ? mB : mA, l = half ? lB : lA;
            if (r < sq)
                p.lse[(int64_t)h * p.lse_sh + t0 + r] =
                    empty ? -INFINITY : (float)(((double)m + log2((double)l)) * 0.69314718055994530942);
        }
    }
    const float *vsc = p.v_scale ? p.v_scale + ((int64_t)hk * p.nseq + b) * p.v_nch : (const float *)0;
    const int vch = p.v_ch;
    const float *vmean = p.v_mean ? p.v_mean + ((int64_t)hk * p.nseq + b) * D : (const float *)0;
    /* the V scale and mean of the thread's columns, once for both rows; the cases branched once, not
     * per column (per column, the group's division and the branches around each load had made this
     * about 1200 instructions a warp, ncu H200 2026-11-30) */
    float vs[NO][2], vm[NO][2];
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            vs[n][e] = 1.0f, vm[n][e] = 0.0f;
    if (vsc && vch == 1 && (uintptr_t)vsc % 8 == 0) { /* a scale a channel, pairs in 8 bytes */
#pragma unroll
        for (int n = 0; n < NO; n++) {
            const float2 x = *(const float2 *)(vsc + 8 * n + 2 * qi);
            vs[n][0] = x.x, vs[n][1] = x.y;
        }
    } else if (vsc) { /* a scale a group of vch channels (0: one for all) */
#pragma unroll
        for (int n = 0; n < NO; n++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                vs[n][e] = vsc[vch > 0 ? (8 * n + 2 * qi + e) / vch : 0];
    }
    if (vmean) {
        const bool v2 = (uintptr_t)vmean % 8 == 0;
#pragma unroll
        for (int n = 0; n < NO; n++) {
            const float *m = vmean + 8 * n + 2 * qi;
            const float2 x = v2 ? *(const float2 *)m : make_float2(m[0], m[1]);
            vm[n][0] = x.x, vm[n][1] = x.y;
        }
    }
    /* VEC, 16-bit output in rows of 16-byte aligned chunks: each lane stores 16 bytes (8 columns)
     * gathered from its quad, a quarter of the store instructions (the lanes' 4-byte pieces make 8
     * rows x 16 bytes an instruction). H200, 2026-11-28: +1.5-2.7% for the d = 128 instances of
     * three consumer warpgroups, -1 to -2% at d = 64 and for the 16-bit baselines' two */
    const bool o16 = VEC && p.out != QATTN_FMT_FP32 && (uintptr_t)p.o % 16 == 0 && p.o_sb % 8 == 0 && p.o_st % 8 == 0 &&
                     p.o_sh % 8 == 0;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = half ? rB : rA;
        /* the quad's lanes share the row; the quad transpose needs every lane of the warp */
        if (r >= sq && !o16)
            continue;
        const int empty = half ? loB >= hiB : loA >= hiA;
        const float l = half ? lB : lA;
        /* 1 / (l pmul) once per row: y = O f differs from O / l / pmul by a
         * few fp32 ulp at most (far inside the checks' tolerance) */
        float f = 0.0f;
        if (!empty) {
            f = qattn_mma_div(1.0f, l);
            if (pmul != 1.0f)
                f = qattn_mma_div(f, pmul);
        }
        uint8_t *orow = (uint8_t *)p.o;
        const int64_t obase = (int64_t)b * p.o_sb + (tq0 + r) * p.o_st + (int64_t)h * p.o_sh;
        uint32_t w[NO]; /* 16-bit output: columns 8n + 2qi, + 1 packed */
#pragma unroll
        for (int n = 0; n < NO; n++) {
            float x[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float y = __fmul_rn(__fmul_rn(o[n][2 * half + e], f), vs[n][e]);
                if (vmean)
                    y = __fadd_rn(y, vm[n][e]);
                x[e] = empty ? 0.0f : y;
            }
            const int64_t at = obase + 8 * n + 2 * qi;
            if (p.out == QATTN_FMT_BF16)
                w[n] = qattn_cvt_bf16x2_f32(x[0], x[1]);
            else if (p.out == QATTN_FMT_FP16)
                w[n] = qattn_cvt_f16x2_f32(x[0], x[1]);
            else
                *(float2 *)(orow + 4 * at) = make_float2(x[0], x[1]);
        }
        if (p.out == QATTN_FMT_FP32)
            continue;
        if (o16) { /* 16 bytes a lane: n-tile 4k + qi of the row, gathered from the quad */
#pragma unroll
            for (int k = 0; k < NO / 4; k++) {
                uint4 v;
                qattn_mma_quad_transpose(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3], qi, &v);
                if (r < sq)
                    *(uint4 *)(orow + 2 * (obase + 8 * (4 * k + qi))) = v;
            }
        } else {
#pragma unroll
            for (int n = 0; n < NO; n++)
                *(uint32_t *)(orow + 2 * (obase + 8 * n + 2 * qi)) = w[n];
        }
    }
}

template <int D, int NW, int QF>
__global__ void __launch_bounds__(32 * NW, 8 / NW) qattn_attn_fwd_mma_kernel(qattn_kernels_attn_params p)
{
#if QATTN_MMA_FP8
    constexpr int KB = QATTN_MMA_KB, BM = 16 * NW, NTH = 32 * NW;
    constexpr int QB = QATTN_MMA_QB(D, QF); /* bytes of a Q / K row */
    constexpr int KS = QB + 16, VS = QATTN_MMA_VS, VH = QATTN_MMA_VH;
    constexpr int NT = KB / 8;  /* n-tiles of S */
    constexpr int KK = QB / 32; /* 32-byte k-steps of Q.K (m16n8k32 s8 or m16n8k64 s4) */
    constexpr int NO = D / 8;   /* n-tiles of O */
    constexpr int STAGE = KB * KS + D * VS;
    QATTN_DYNAMIC_SHARED(uint8_t, smem);

    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, qi = lane & 3;
    const int b = (int)blockIdx.z, h = (int)blockIdx.y;
    const int i0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * BM; /* longest causal rows first */
    int64_t tq0, tk0;
    int sq, sk;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &tq0, &sq);
    qattn_kseq(p.cu_k, b, p.seqlen_k, &tk0, &sk);
    if (i0 >= sq)
        return;
    const int hk = h / (p.hq / p.hkv);
    const uint8_t *kg = (const uint8_t *)p.k + (int64_t)b * p.k_sb + tk0 * p.k_st + (int64_t)hk * p.k_sh;
    const uint8_t *vg = (const uint8_t *)p.v + (int64_t)b * p.v_sb + (int64_t)hk * p.v_sh; /* V^T: key j at column j */
    const float *ksc = p.k_scale + ((int64_t)hk * p.nseq + b) * p.k_ntok;

    /* ---- this thread's two rows: mask ranges, Q scales ---- */
    const int rA = i0 + 16 * warp + g, rB = rA + 8;
    int loA, hiA, loB, hiB;
    qattn_mma_row_ranges(p.mask, rA, rB, sq, sk, &loA, &hiA, &loB, &hiB);
    const float *qsc = p.q_scale + ((int64_t)h * p.nseq + b) * p.q_ntok;
    const float qsA = rA < sq ? qsc[qattn_num_group_tok_index(p.q_group, rA)] : 0.0f;
    const float qsB = rB < sq ? qsc[qattn_num_group_tok_index(p.q_group, rB)] : 0.0f;

    /* ---- key blocks the tile touches ---- */
    __shared__ int s_range[2];
    int J0, J1;
    qattn_mma_key_blocks(loA, hiA, loB, hiB, KB, s_range, &J0, &J1);

    /* ---- Q fragments (registers, whole loop) ---- */
    uint32_t qf[KK][4];
    {
        const uint8_t *qg = (const uint8_t *)p.q + (int64_t)b * p.q_sb + tq0 * p.q_st + (int64_t)h * p.q_sh;
        const uint8_t *qa = qg + (int64_t)rA * p.q_st, *qb = qg + (int64_t)rB * p.q_st;
#pragma unroll
        for (int kk = 0; kk < KK; kk++) {
            const int c0 = 32 * kk + 4 * qi;
            qf[kk][0] = rA < sq ? *(const uint32_t *)(qa + c0) : 0u;
            qf[kk][1] = rB < sq ? *(const uint32_t *)(qb + c0) : 0u;
            qf[kk][2] = rA < sq ? *(const uint32_t *)(qa + c0 + 16) : 0u;
            qf[kk][3] = rB < sq ? *(const uint32_t *)(qb + c0 + 16) : 0u;
        }
    }

    /* ---- async loads of one key block into a stage (32-bit offsets: a
     * sequence's K rows and V^T of one head are far below 2^31 bytes) ---- */
    const int kst = (int)p.k_st, vst = (int)p.v_st;
    auto load_block = [&](int j0, int stage) {
        uint8_t *sK = smem + stage * STAGE, *sV = sK + KB * KS;
        constexpr int KCH = QB / 16; /* 16-byte chunks per K row */
#pragma unroll
        for (int e = tid; e < KB * KCH; e += NTH) {
            const int r = e / KCH, ch = e % KCH, j = j0 + r;
            const int ok = j < sk;
            qattn_cp_async16(sK + r * KS + ch * 16, kg + (ok ? j * kst + ch * 16 : 0), ok ? 16 : 0);
        }
#pragma unroll
        for (int e = tid; e < D * (KB / 16); e += NTH) {
            const int c = e / (KB / 16), ch = e % (KB / 16);
            qattn_cp_async16(sV + c * VS + ch * 16, vg + (c * vst + j0 + ch * 16), 16);
        }
    };

    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    const float c2 = p.c2, pmul = p.pmul;

    if (J0 < J1)
        load_block(J0, 0);
    qattn_cp_async_commit();
    int stage = 0;
    for (int j0 = J0; j0 < J1; j0 += KB, stage ^= 1) {
        if (j0 + KB < J1)
            load_block(j0 + KB, stage ^ 1);
        qattn_cp_async_commit();
        qattn_cp_async_wait<1>();
        __syncthreads();
        const uint8_t *sK = smem + stage * STAGE, *sV = sK + KB * KS;
        uint16_t *sVh = (uint16_t *)(smem + 2 * STAGE);

        /* ---- V^T e4m3 -> f16 (exact), once for all warps ---- */
#pragma unroll
        for (int e = tid; e < D * (KB / 16); e += NTH) {
            const int c = e / (KB / 16), ch = e % (KB / 16);
            const uint4 w = *(const uint4 *)(sV + c * VS + ch * 16);
            uint4 h0, h1;
            h0.x = qattn_cvt_f16x2_e4m3x2(w.x & 0xffffu), h0.y = qattn_cvt_f16x2_e4m3x2(w.x >> 16);
            h0.z = qattn_cvt_f16x2_e4m3x2(w.y & 0xffffu), h0.w = qattn_cvt_f16x2_e4m3x2(w.y >> 16);
            h1.x = qattn_cvt_f16x2_e4m3x2(w.z & 0xffffu), h1.y = qattn_cvt_f16x2_e4m3x2(w.z >> 16);
            h1.z = qattn_cvt_f16x2_e4m3x2(w.w & 0xffffu), h1.w = qattn_cvt_f16x2_e4m3x2(w.w >> 16);
            *(uint4 *)(sVh + c * VH + ch * 16) = h0;
            *(uint4 *)(sVh + c * VH + ch * 16 + 8) = h1;
        }

        /* K scale of this block: the thread's keys 8t + 2i, 8t + 2i + 1 share one group */
        /* thread:128/8/2 (checked at launch): key j0 + 8t + 2i -> group (j0 / 128) * 4 + i */
        const int kj = j0 + 2 * qi;
        const float ks = kj < sk ? ksc[(j0 >> 7) * 4 + qi] : 0.0f;
        const float fA = qsA * ks * c2, fB = qsB * ks * c2;

        /* ---- S = Q.K ---- */
        float s[NT][4];
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int acc[4] = {0, 0, 0, 0};
#pragma unroll
            for (int hh = 0; hh < QB / 64; hh++) {
                uint32_t kf[4];
                qattn_ldmatrix_x4(kf, sK + (8 * t + (lane & 7)) * KS + 64 * hh + 16 * (lane >> 3));
                if (QF == QATTN_FMT_INT4) {
                    qattn_mma_m16n8k64_s4(acc, qf[2 * hh], kf, acc);
                    qattn_mma_m16n8k64_s4(acc, qf[2 * hh + 1], kf + 2, acc);
                } else {
                    qattn_mma_m16n8k32_s8(acc, qf[2 * hh], kf, acc);
                    qattn_mma_m16n8k32_s8(acc, qf[2 * hh + 1], kf + 2, acc);
                }
            }
            s[t][0] = qattn_i2f_small(acc[0]) * fA; /* |acc| <= 127^2 d < 2^22 */
            s[t][1] = qattn_i2f_small(acc[1]) * fA;
            s[t][2] = qattn_i2f_small(acc[2]) * fB;
            s[t][3] = qattn_i2f_small(acc[3]) * fB;
        }
        /* masked keys and keys past the end */
        if (j0 < loA || j0 + KB > hiA || j0 < loB || j0 + KB > hiB) {
#pragma unroll
            for (int t = 0; t < NT; t++)
                qattn_mma_mask_frag(s[t], j0 + 8 * t + 2 * qi, loA, hiA, loB, hiB);
        }
        /* ---- online softmax ---- */
        float mxA, mxB;
        { /* tree-shaped: short dependency chains */
            float ma[NT / 2], mb[NT / 2];
#pragma unroll
            for (int t = 0; t < NT / 2; t++) {
                ma[t] = fmaxf(fmaxf(s[2 * t][0], s[2 * t][1]), fmaxf(s[2 * t + 1][0], s[2 * t + 1][1]));
                mb[t] = fmaxf(fmaxf(s[2 * t][2], s[2 * t][3]), fmaxf(s[2 * t + 1][2], s[2 * t + 1][3]));
            }
#pragma unroll
            for (int w = NT / 4; w > 0; w >>= 1)
#pragma unroll
                for (int t = 0; t < w; t++) {
                    ma[t] = fmaxf(ma[t], ma[t + w]);
                    mb[t] = fmaxf(mb[t], mb[t + w]);
                }
            mxA = fmaxf(mA, ma[0]);
            mxB = fmaxf(mB, mb[0]);
        }
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
        const float baseA = mxA == -INFINITY ? 0.0f : mxA, baseB = mxB == -INFINITY ? 0.0f : mxB;
        const float alA = qattn_ex2_approx(mA - baseA), alB = qattn_ex2_approx(mB - baseB);
        mA = mxA;
        mB = mxB;
        float sa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sb[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* 4 partial sums per row */
        uint32_t pf[KB / 16][4]; /* A fragments (f16x2) of keys 16s..16s+15 */
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float p0 = qattn_ex2_approx(s[t][0] - baseA), p1 = qattn_ex2_approx(s[t][1] - baseA);
            const float p2 = qattn_ex2_approx(s[t][2] - baseB), p3 = qattn_ex2_approx(s[t][3] - baseB);
            sa[t & 3] = sa[t & 3] + (p0 + p1);
            sb[t & 3] = sb[t & 3] + (p2 + p3);
            pf[t >> 1][2 * (t & 1)] = qattn_cvt_f16x2_e4m3x2(qattn_cvt_e4m3x2_f32(p0 * pmul, p1 * pmul));
            pf[t >> 1][2 * (t & 1) + 1] = qattn_cvt_f16x2_e4m3x2(qattn_cvt_e4m3x2_f32(p2 * pmul, p3 * pmul));
        }
        lA = lA * alA + ((sa[0] + sa[1]) + (sa[2] + sa[3]));
        lB = lB * alB + ((sb[0] + sb[1]) + (sb[2] + sb[3]));
        __syncthreads(); /* the f16 V^T is complete */
        /* ---- O = O * alpha + P.V (a block accumulator from 0, then fp32) ---- */
#pragma unroll
        for (int n = 0; n < NO; n++) {
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int q = 0; q < KB / 32; q++) {
                uint32_t vf[4];
                qattn_ldmatrix_x4(vf, sVh + (8 * n + (lane & 7)) * VH + 32 * q + 8 * (lane >> 3));
                qattn_mma_m16n8k16_f16_f32(acc, pf[2 * q], vf, acc);
                qattn_mma_m16n8k16_f16_f32(acc, pf[2 * q + 1], vf + 2, acc);
            }
            o[n][0] = __fmaf_rn(o[n][0], alA, acc[0]);
            o[n][1] = __fmaf_rn(o[n][1], alA, acc[1]);
            o[n][2] = __fmaf_rn(o[n][2], alB, acc[2]);
            o[n][3] = __fmaf_rn(o[n][3], alB, acc[3]);
        }
        __syncthreads(); /* this stage is refilled by the next iteration */
    }
    qattn_cp_async_wait<0>();

    qattn_mma_epilogue<D>(p, o, lA, lB, mA, mB, rA, rB, loA, hiA, loB, hiB, sq, tq0, b, h, hk);
#else
    (void)p;
#endif
}

#define QATTN_MMA_CHECK(call, what)                                                                             \
    do {                                                                                                        \
        cudaError_t e_ = (call);                                                                                \
        if (e_ != cudaSuccess)                                                                                  \
            return qattn_err_set(err, QATTN_KERNELS_ERR_DEVICE, "%s: %s (%s:%d)", what, cudaGetErrorString(e_), \
                                 __FILE__, __LINE__);                                                           \
    } while (0)

template <int D, int NW, int QF>
static int qattn_attn_fwd_mma_run(const qattn_kernels_attn_params &p, void *stream, qattn_err *err)
{
    const size_t smem = (size_t)qattn_attn_mma_smem_bytes(D, QATTN_MMA_QB(D, QF));
    void (*k)(qattn_kernels_attn_params) = &qattn_attn_fwd_mma_kernel<D, NW, QF>;
    QATTN_MMA_CHECK(cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                    "attn mma: raising the shared-memory limit");
    const dim3 grid((unsigned)((p.seqlen_q + 16 * NW - 1) / (16 * NW)), (unsigned)p.hq, (unsigned)p.nseq);
    k<<<grid, dim3(32 * NW), smem, (cudaStream_t)stream>>>(p);
    QATTN_MMA_CHECK(cudaGetLastError(), "attn mma kernel launch");
    return QATTN_OK;
}

/* 1 when the rows of an operand at ptr (strides sb, sh, st in elements of
 * esize bytes) start on 16-byte boundaries */
static inline int qattn_rows16_ok(const void *ptr, int64_t sb, int64_t sh, int64_t st, int esize)
{
    return (uintptr_t)ptr % 16 == 0 && (sb * esize) % 16 == 0 && (sh * esize) % 16 == 0 && (st * esize) % 16 == 0;
}

/* what the mma.sync and the 8-bit wgmma kernels (WG = 1) need of p (head
 * dim D, Q / K codes QF, key blocks of KB keys, each one fp22 chunk; wgmma
 * e4m3: acc=fp22 in one level; wgmma P/V format PF fp16: acc=fp16 in one
 * level, V unscaled in 16-byte aligned rows; e4m3 with ACC fp32: V's codes
 * in 16-byte aligned rows, widened) */
template <int D, int QF, int KB = QATTN_MMA_KB, int WG = 0, int PF = QATTN_FMT_E4M3, int ACC = QATTN_ACC_FP22>
static int qattn_attn_fwd_mma_check(const qattn_kernels_attn_params &p, qattn_err *err)
{
    const char *qfn = QF == QATTN_FMT_INT4 ? "int4" : QF == QATTN_FMT_E4M3 ? "e4m3" : "int8";
    /* V in rows of keys (fp16 P.V, or e4m3 widened) rather than V^T */
    constexpr int VROWS = WG && (PF == QATTN_FMT_FP16 || (PF == QATTN_FMT_E4M3 && ACC == QATTN_ACC_FP32));
    constexpr int VES = PF == QATTN_FMT_FP16 ? 2 : 1; /* bytes a V element */
    int rc = qattn_attn_check_grid(D, p.d, p.hq, p.hkv, p.nseq, "attn mma", err);
    if (rc)
        return rc;
    if (VROWS) {
        if (p.kblock != KB || p.acc_chunk != 0)
            return qattn_err_set(err, QATTN_ERR_ARG, "attn wgmma: needs kblock=%d and acc=%s in one level (got %d, %d)",
                                 KB, PF == QATTN_FMT_FP16 ? "fp16" : "fp32", p.kblock, p.acc_chunk);
        if (!qattn_rows16_ok(p.v, p.v_sb, p.v_sh, p.v_st, VES) || p.v_st < D || (PF == QATTN_FMT_FP16 && p.v_scale))
            return qattn_err_set(err, QATTN_ERR_ARG,
                                 "attn wgmma: %s P.V needs %s V in 16-byte aligned rows (v_st %lld)",
                                 PF == QATTN_FMT_FP16 ? "fp16" : "widened e4m3",
                                 PF == QATTN_FMT_FP16 ? "unscaled fp16" : "e4m3", (long long)p.v_st);
    } else if (WG && QF == QATTN_FMT_E4M3) {
        if (p.kblock != KB || p.acc_chunk != 0)
            return qattn_err_set(err, QATTN_ERR_ARG, "attn mma: needs kblock=%d and acc=fp22 (got %d, %d)", KB,
                                 p.kblock, p.acc_chunk);
    } else if (p.kblock != KB || (p.acc_chunk != 0 && p.acc_chunk % KB != 0)) {
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mma: needs kblock=%d and acc=fp22+fp32:%d (got %d, %d)", KB,
                             KB, p.kblock, p.acc_chunk);
    }
    /* V is read transposed (the sig's v_layout): v_st is the channel stride npad */
    if (!VROWS && (p.v_st <= 0 || p.v_st % KB || p.v_st < p.seqlen_k))
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "attn mma: needs V transposed, [hkv, nseq, d, npad] with npad %% %d == 0 (v_st %lld)", KB,
                             (long long)p.v_st);
    if (WG && !qattn_wg_kgroup_ok(p.k_group, KB))
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "attn wgmma: K scales must be one group on a thread's keys of each n-tile parity "
                             "in a key block of %d (e.g. tensor, thread:%d/8/2)",
                             KB, KB);
    if (!WG && (p.k_group.tok != QATTN_TOK_THREAD || p.k_group.b != KB || p.k_group.s != 8 || p.k_group.w != 2 ||
                p.k_group.ch != 0))
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mma: K scales must be thread:%d/8/2", KB);
    /* Q quantized by the wgmma kernel itself (int8, token-local groups of its 128-row tile) */
    if (p.q_fuse) {
        if (!WG || QF != QATTN_FMT_INT8 || (p.q_fuse_in != QATTN_FMT_FP16 && p.q_fuse_in != QATTN_FMT_BF16))
            return qattn_err_set(err, QATTN_ERR_ARG, "attn mma: this instance cannot quantize %s Q itself", qfn);
        if (!qattn_rows16_ok(p.q, p.q_sb, p.q_sh, p.q_st, 2) || p.q_mean || !qattn_wg_qfuse_group_ok(p.q_group))
            return qattn_err_set(err, QATTN_ERR_ARG,
                                 "attn wgmma: a fused Q needs 16-byte aligned fp16 / bf16 rows and token-local "
                                 "scale groups of a 128-row tile, no smooth=q");
    }
    /* smooth=q: the int4 wgmma kernels' dS pass reads the fp16 input K (wgmma_dsq.h) */
    if ((!p.q_scale && !p.q_fuse) || !p.k_scale || (p.q_mean && !(WG && QF == QATTN_FMT_INT4)))
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mma: needs scaled %s Q/K and no Q smoothing", qfn);
    if (p.q_mean && (!qattn_wg_dsq_ok(p.qblock, p.k_in_fmt) || !p.k_in || (uintptr_t)p.k_in % 16 ||
                     p.kin_sb % 8 || p.kin_sh % 8 || p.kin_st % 8))
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "attn wgmma: smooth=q needs Q blocks of a multiple of 16 rows and fp16 input K in "
                             "16-byte aligned rows (qblock %d, input %s)",
                             p.qblock, qattn_fmt_name(p.k_in_fmt));
    if ((int64_t)p.seqlen_k * p.k_st >= ((int64_t)1 << 31) ||
        (VROWS ? (int64_t)p.seqlen_k * p.v_st * VES : (int64_t)p.d * p.v_st) >= ((int64_t)1 << 31))
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mma: one head's K or V^T is over 2 GiB");
    return QATTN_OK;
}

template <int D, int QF>
static int qattn_attn_fwd_mma_launch(const qattn_kernels_attn_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_attn_params p = *pp;
    int rc = qattn_attn_fwd_mma_check<D, QF>(p, err);
    if (rc || p.seqlen_q <= 0)
        return rc;
    /* the dispatcher chose this instance for the device (sig cc_min 89); a
     * direct call on an older GPU is refused here */
    const int cc = qattn_kernels_dev_cc();
    if (cc < 89)
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "attn mma: e4m3 mma needs sm_89 or newer (this GPU is sm_%d)", cc);
    return qattn_attn_fwd_mma_run<D, QATTN_MMA_WARPS, QF>(p, stream, err);
}

/* one instance: extern "C" launch function NAME for head dim D and Q / K
 * codes QF (QATTN_FMT_INT8 or QATTN_FMT_INT4) */
#define QATTN_ATTN_FWD_MMA_INSTANCE(D, QF, NAME)                                           \
    extern "C" int NAME(const qattn_kernels_attn_params *p, void *stream, qattn_err *err) \
    {                                                                                      \
        return qattn_attn_fwd_mma_launch<D, QF>(p, stream, err);                          \
    }

#endif
