/* Attention forward, AMD MFMA path (gfx942; gfx90a through instruction
 * pairs, mfma_amd.h): int8 or e4m3 Q.K (16x16x32) and e4m3 P.V (16x16x32)
 * with an fp32 accumulator. One template per head dim and Q/K format;
 * kernels/gen_instances.sh writes the instances. Built by the AMD backend
 * (compiled, never run: no AMD GPU was available) and by the host
 * simulation, where the matrix instructions are emulated (mfma_amd.h) and
 * the kernel runs on the CPU against the emulation.
 *
 * The scheme it computes (the CK presets ck-i8fp8bf16 and ck-fp8bf16, and
 * their variants):
 *   q, k = int8 | e4m3 @ any token pattern (no ,ch:)  p = e4m3[@static]
 *   v = e4m3@channel|tensor[,ch:C]  smooth = k[+v]  acc = fp32  kblock = 64
 * as the CPU emulation (quant/src/emulate.c) defines it, except for the order
 * in which sums are formed: the row sum l (per lane, then across the 4 lanes
 * of a row), P.V (the matrix instruction's fp32 adds instead of key by key)
 * and, for e4m3 Q.K, the dot product (fp32 adds instead of one rounding of
 * the exact sum). Int8 Q.K is exact, so S, the row maxima and P are the
 * emulation's bits in the simulation (whose exp2 is the emulation's).
 *
 * Tiling: a block of NW = 4 waves owns BM = 16 NW = 64 query rows of one
 * (sequence, head), the longest causal tiles first; wave w owns rows
 * 16w..16w+15 and lane l = 16 g + r holds row r: the kernel computes
 * S^T = K Q^T and O^T = V^T P^T, so that the query is the column of every
 * accumulator (the 16x16 D layout gives lane l column r) and each lane keeps
 * one row's softmax state, shared by the 4 lanes r, r + 16, r + 32, r + 48.
 *   Q.K  Q^T is the B operand, in registers for the whole loop: lane l holds
 *        Q[row r][32 s + 8 g .. + 7] for k-step s. Keys go in blocks of
 *        KB = 64 (the scheme's kblock, aligned at key 0) through LDS: K as
 *        stored [KB][D + 8] (the A operand: K[16 t + r][32 s + 8 g ..]), V^T
 *        [D][KB + 8], the K scale of every key. S^T tile t (keys 16t..16t+15):
 *        lane l holds keys 16 t + 4 g + v, v = 0..3, of row r;
 *        S = float(acc) * (sq sk) * c2 (int8: acc exact, |acc| < 2^24).
 *   softmax  base 2 per block: the lane's 16 scores, then the lanes r + 16 m
 *        (2 shuffles), P = 2^(S - m) as e4m3 of P * pmul, l and O rescaled
 *        by 2^(m_old - m_new).
 *   P.V  P^T is the B operand of key step u (keys 32u..32u+31): lane l holds
 *        the P of keys 32 u + 4 g + v (tile 2u) then 32 u + 16 + 4 g + v
 *        (tile 2u + 1), exactly what its S^T tiles hold; the A operand V^T
 *        (channel 16 c + r) takes the same keys from LDS. O^T tile c: lane l
 *        holds channels 16 c + 4 g + v of row r.
 *   out  O * unit / l / pmul * v_scale[c] (+ V mean), rounded to fp16 /
 *        bf16 / fp32; LSE in natural log; rows without a visible key give 0
 *        and -inf.
 * Masks none / causal / causal-br / window (per-row key ranges, blocks
 * outside the tile's range skipped), tails (K rows past the end zero-filled,
 * their scores -inf), GQA, varlen (cu_q / cu_k). V must be TRANSPOSED:
 * [hkv, nseq, d, npad] with zeros past each sequence's end. */
#ifndef QATTN_KERNELS_ATTN_FWD_MFMA_H
#define QATTN_KERNELS_ATTN_FWD_MFMA_H

#include "attn_fwd_portable.h" /* QATTN_EXP2, qattn_attn_put_out, QATTN_ATTN_CHECK */
#include "hip_port.h"
#include "mfma_amd.h"
#include "attn_common.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"

#define QATTN_MFMA_KB 64   /* keys per block (= the scheme's kblock) */
#define QATTN_MFMA_WAVES 4 /* waves per block, 16 query rows each */

/* Q.K on the matrix instruction of the Q / K format: int8 into int32,
 * e4m3 into fp32 (in units of 1 / qattn_mfma_e4m3_unit()) */
static __device__ __forceinline__ void qattn_attn_mfma_qk(int (&d)[4], uint64_t a, uint64_t b)
{
    qattn_mfma_16x16x32_i8(d, a, b);
}
static __device__ __forceinline__ void qattn_attn_mfma_qk(float (&d)[4], uint64_t a, uint64_t b)
{
    qattn_mfma_16x16x32_e4m3(d, a, b);
}
template <int QF>
struct qattn_attn_mfma_acc {
    typedef int type;
};
template <>
struct qattn_attn_mfma_acc<QATTN_FMT_E4M3> {
    typedef float type;
};

/* LDS bytes: K [KB][D + 8], V^T [D][KB + 8], KB K scales, 2 BM row ranges */
static inline int qattn_attn_mfma_smem_bytes(int d)
{
    return QATTN_MFMA_KB * (d + 8) + d * (QATTN_MFMA_KB + 8) + 4 * QATTN_MFMA_KB + 8 * 16 * QATTN_MFMA_WAVES;
}

/* 4 bytes of e4m3 P codes: P * pmul of 4 scores against base */
static __device__ __forceinline__ uint32_t qattn_mfma_p4(const float (&s)[4], float base, float pmul, float &sum)
{
    float p[4];
    QATTN_UNROLL
    for (int v = 0; v < 4; v++) {
        p[v] = QATTN_EXP2(s[v] - base);
        sum = sum + p[v];
    }
    return (uint32_t)qattn_port_e4m3x2(p[0] * pmul, p[1] * pmul) |
           (uint32_t)qattn_port_e4m3x2(p[2] * pmul, p[3] * pmul) << 16;
}

template <int D, int QF>
__global__ void __launch_bounds__(64 * QATTN_MFMA_WAVES) qattn_attn_fwd_mfma_kernel(qattn_kernels_attn_params p)
{
    constexpr int KB = QATTN_MFMA_KB, NW = QATTN_MFMA_WAVES, BM = 16 * NW, NTH = 64 * NW;
    constexpr int KS = D + 8, VS = KB + 8; /* LDS row strides in bytes */
    constexpr int NKT = KB / 16;           /* 16-key tiles of S^T */
    constexpr int NS = D / 32;             /* 32-channel k-steps of Q.K */
    constexpr int NU = KB / 32;            /* 32-key k-steps of P.V */
    constexpr int NC = D / 16;             /* 16-channel tiles of O^T */
    constexpr int E4 = QF == QATTN_FMT_E4M3;
    QATTN_DYNAMIC_SHARED(uint8_t, smem);
    uint8_t *sK = smem;                        /* [KB][KS] K codes */
    uint8_t *sV = sK + KB * KS;                /* [D][VS] V^T codes */
    float *sKs = (float *)(sV + D * VS);       /* [KB] K scale of each key */
    int *sRange = (int *)(sKs + KB);           /* [BM][2] visible keys of each row */

    const int tid = (int)threadIdx.x, lane = tid & 63, wave = tid >> 6, r = lane & 15, g = lane >> 4;
    const int b = (int)blockIdx.z, h = (int)blockIdx.y;
    const int i0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * BM; /* longest causal rows first */
    int64_t tq0, tk0;
    int sq, sk;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &tq0, &sq);
    qattn_kseq(p.cu_k, b, p.seqlen_k, &tk0, &sk);
    if (i0 >= sq)
        return; /* the whole block */
    const int hk = h / (p.hq / p.hkv);
    const uint8_t *kg = (const uint8_t *)p.k + (int64_t)b * p.k_sb + tk0 * p.k_st + (int64_t)hk * p.k_sh;
    const uint8_t *vg = (const uint8_t *)p.v + (int64_t)b * p.v_sb + (int64_t)hk * p.v_sh; /* V^T: key j at column j */
    const float *ksc = p.k_scale ? p.k_scale + ((int64_t)hk * p.nseq + b) * p.k_ntok : (const float *)0;
    const float *qsc = p.q_scale ? p.q_scale + ((int64_t)h * p.nseq + b) * p.q_ntok : (const float *)0;

    /* ---- this lane's row: visible keys, Q scale ---- */
    const int row = i0 + 16 * wave + r;
    int lo = 0, hi = 0;
    if (row < sq) {
        int64_t lo64 = 0, hi64 = 0;
        qattn_num_mask_range(p.mask, row, sq, sk, &lo64, &hi64);
        lo = (int)lo64, hi = (int)hi64;
    }
    const float qs = row < sq ? (qsc ? qsc[qattn_num_group_tok_index(p.q_group, row)] : 1.0f) : 0.0f;
    if (g == 0)
        sRange[2 * (16 * wave + r)] = lo, sRange[2 * (16 * wave + r) + 1] = hi;
    __syncthreads();
    /* the key blocks any row of the block sees: [J0, J1) */
    int J0 = 0x7fffffff, J1 = 0;
    for (int rr = 0; rr < BM; rr++)
        if (sRange[2 * rr] < sRange[2 * rr + 1]) {
            J0 = sRange[2 * rr] < J0 ? sRange[2 * rr] : J0;
            J1 = sRange[2 * rr + 1] > J1 ? sRange[2 * rr + 1] : J1;
        }
    if (J0 < J1)
        J0 = J0 / KB * KB, J1 = (J1 + KB - 1) / KB * KB;
    else
        J0 = J1 = 0;

    /* ---- Q^T fragments (registers, whole loop) ---- */
    uint64_t qf[NS];
    {
        const uint8_t *qrow = (const uint8_t *)p.q + (int64_t)b * p.q_sb + (tq0 + (row < sq ? row : 0)) * p.q_st +
                              (int64_t)h * p.q_sh;
        QATTN_UNROLL
        for (int s = 0; s < NS; s++) {
            uint64_t x = 0;
            if (row < sq)
                memcpy(&x, qrow + 32 * s + 8 * g, 8);
            qf[s] = E4 ? qattn_mfma_e4m3_fix64(x) : x;
        }
    }

    float o[NC][4]; /* O^T in the accumulator's unit */
    QATTN_UNROLL
    for (int c = 0; c < NC; c++)
        o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const float c2 = p.c2, pmul = p.pmul, unit = E4 ? qattn_mfma_e4m3_unit() : 1.0f;
    const int64_t kst = p.k_st, vst = p.v_st;

    for (int j0 = J0; j0 < J1; j0 += KB) {
        __syncthreads(); /* the previous block is consumed */
        /* ---- K, V^T and the K scales of keys [j0, j0 + KB) into LDS ---- */
        for (int e = tid; e < KB * (D / 8); e += NTH) {
            const int rr = e / (D / 8), ch = e % (D / 8), j = j0 + rr;
            uint64_t x = 0;
            if (j < sk)
                memcpy(&x, kg + j * kst + 8 * ch, 8);
            x = E4 ? qattn_mfma_e4m3_fix64(x) : x;
            memcpy(sK + rr * KS + 8 * ch, &x, 8);
        }
        for (int e = tid; e < D * (KB / 8); e += NTH) {
            const int c = e / (KB / 8), ch = e % (KB / 8);
            uint64_t x;
            memcpy(&x, vg + c * vst + j0 + 8 * ch, 8); /* npad % 128 == 0: inside the row */
            x = qattn_mfma_e4m3_fix64(x);
            memcpy(sV + c * VS + 8 * ch, &x, 8);
        }
        if (tid < KB) {
            const int j = j0 + tid;
            sKs[tid] = j < sk ? (ksc ? ksc[qattn_num_group_tok_index(p.k_group, j)] : 1.0f) : 0.0f;
        }
        __syncthreads();

        /* ---- S^T = K Q^T ---- */
        float s[NKT][4];
        QATTN_UNROLL
        for (int t = 0; t < NKT; t++) {
            const uint8_t *ka = sK + (16 * t + r) * KS + 8 * g;
            typename qattn_attn_mfma_acc<QF>::type acc[4] = {0, 0, 0, 0};
            QATTN_UNROLL
            for (int st = 0; st < NS; st++)
                qattn_attn_mfma_qk(acc, *(const uint64_t *)(ka + 32 * st), qf[st]); /* 8-byte aligned */
            /* the exact int8 sum, or the e4m3 sum back in its unit (a power of 2) */
            QATTN_UNROLL
            for (int v = 0; v < 4; v++)
                s[t][v] = (E4 ? (float)acc[v] * unit : (float)acc[v]) * (qs * sKs[16 * t + 4 * g + v]) * c2;
            QATTN_UNROLL
            for (int v = 0; v < 4; v++) {
                const int j = j0 + 16 * t + 4 * g + v;
                if (j < lo || j >= hi)
                    s[t][v] = -INFINITY;
            }
        }
        /* ---- online softmax ---- */
        float mx = m;
        QATTN_UNROLL
        for (int t = 0; t < NKT; t++)
            QATTN_UNROLL
            for (int v = 0; v < 4; v++)
                mx = s[t][v] > mx ? s[t][v] : mx;
        {
            const float m16 = __shfl_xor(mx, 16, 64);
            mx = m16 > mx ? m16 : mx;
            const float m32 = __shfl_xor(mx, 32, 64);
            mx = m32 > mx ? m32 : mx;
        }
        /* rows with no visible key yet keep m = -inf, P = 0, alpha = 1 */
        const float base = mx == -INFINITY ? 0.0f : mx;
        const float al = m == -INFINITY ? 1.0f : QATTN_EXP2(m - base);
        m = mx;
        float ls = 0.0f;
        uint64_t pf[NU]; /* P^T (B operand) of key step u */
        QATTN_UNROLL
        for (int u = 0; u < NU; u++)
            pf[u] = (uint64_t)qattn_mfma_p4(s[2 * u], base, pmul, ls) |
                    (uint64_t)qattn_mfma_p4(s[2 * u + 1], base, pmul, ls) << 32;
        ls = ls + __shfl_xor(ls, 16, 64);
        ls = ls + __shfl_xor(ls, 32, 64);
        l = l * al + ls;

        /* ---- O^T = O^T * alpha + V^T P^T ---- */
        QATTN_UNROLL
        for (int c = 0; c < NC; c++) {
            if (al != 1.0f)
                QATTN_UNROLL
                for (int v = 0; v < 4; v++)
                    o[c][v] = o[c][v] * al;
            const uint8_t *va = sV + (16 * c + r) * VS + 4 * g; /* 4-byte aligned: typed loads, not bytes */
            QATTN_UNROLL
            for (int u = 0; u < NU; u++) {
                const uint32_t a0 = *(const uint32_t *)(va + 32 * u), a1 = *(const uint32_t *)(va + 32 * u + 16);
                qattn_mfma_16x16x32_e4m3(o[c], (uint64_t)a0 | (uint64_t)a1 << 32, pf[u]);
            }
        }
    }

    /* ---- O / l, scales, V mean, rounding; LSE ---- */
    if (row >= sq)
        return;
    const int empty = lo >= hi;
    if (g == 0 && p.lse) {
        const int64_t t = (p.cu_q ? tq0 : (int64_t)b * p.seqlen_q) + row;
        p.lse[(int64_t)h * p.lse_sh + t] =
            empty ? -INFINITY : (float)(((double)m + log2((double)l)) * 0.69314718055994530942);
    }
    const float ounit = qattn_mfma_e4m3_unit(); /* P.V: e4m3 products */
    const float *vsc = p.v_scale ? p.v_scale + ((int64_t)hk * p.nseq + b) * p.v_nch : (const float *)0;
    const float *vmean = p.v_mean ? p.v_mean + ((int64_t)hk * p.nseq + b) * D : (const float *)0;
    const int64_t obase = (int64_t)b * p.o_sb + (tq0 + row) * p.o_st + (int64_t)h * p.o_sh;
    QATTN_UNROLL
    for (int c = 0; c < NC; c++)
        QATTN_UNROLL
        for (int v = 0; v < 4; v++) {
            const int ch = 16 * c + 4 * g + v;
            qattn_attn_put_out(p, obase + ch, ch, o[c][v] * ounit, l, vsc, vmean, empty);
        }
}

template <int D, int QF>
static int qattn_attn_fwd_mfma_launch(const qattn_kernels_attn_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_attn_params p = *pp;
    const char *qk = QF == QATTN_FMT_E4M3 ? "e4m3" : "int8";
    int rc = qattn_attn_check_grid(D, p.d, p.hq, p.hkv, p.nseq, "attn mfma", err);
    if (rc)
        return rc;
    if (p.q_fuse)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mfma: this instance reads stored Q codes (no fused Q)");
    if (p.kblock != QATTN_MFMA_KB || p.acc_chunk != 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mfma: needs kblock=%d and acc=fp32 (got kblock %d, chunk %d)",
                             QATTN_MFMA_KB, p.kblock, p.acc_chunk);
    /* V is read transposed (the sig's v_layout): v_st is the channel stride npad */
    if (p.v_st <= 0 || p.v_st % 128 || p.v_st < p.seqlen_k)
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "attn mfma: needs V transposed, [hkv, nseq, d, npad] with npad %% 128 == 0 (v_st %lld)",
                             (long long)p.v_st);
    if (p.q_group.ch != 0 || p.k_group.ch != 0 || p.q_mean)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mfma: %s Q/K scales must not split channels, no Q smoothing",
                             qk);
    if (p.q_st % 8 || p.k_st % 8 || p.q_sb % 8 || p.q_sh % 8 || p.k_sb % 8 || p.k_sh % 8)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn mfma: Q/K rows must start at multiples of 8 bytes");
    if (p.seqlen_q <= 0)
        return QATTN_OK;
#if defined(QATTN_HIP_SIM)
    qattn_mfma_sim_target();
#endif
    const size_t smem = (size_t)qattn_attn_mfma_smem_bytes(D);
    void (*k)(qattn_kernels_attn_params) = &qattn_attn_fwd_mfma_kernel<D, QF>;
    const int bm = 16 * QATTN_MFMA_WAVES;
    const dim3 grid((unsigned)((p.seqlen_q + bm - 1) / bm), (unsigned)p.hq, (unsigned)p.nseq);
    hipLaunchKernelGGL(k, grid, dim3(64 * QATTN_MFMA_WAVES), smem, (hipStream_t)stream, p);
    QATTN_ATTN_CHECK(hipGetLastError(), "attn mfma kernel launch");
    return QATTN_OK;
}

/* one instance: extern "C" launch function NAME for head dim D and Q / K
 * codes QF (QATTN_FMT_INT8 or QATTN_FMT_E4M3) */
#define QATTN_ATTN_FWD_MFMA_INSTANCE(D, QF, NAME)                                          \
    extern "C" int NAME(const qattn_kernels_attn_params *p, void *stream, qattn_err *err) \
    {                                                                                      \
        return qattn_attn_fwd_mfma_launch<D, QF>(p, stream, err);                         \
    }

#endif
