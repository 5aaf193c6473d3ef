/* Attention forward, portable path (plain HIP, no inline assembly): the
 * template every quantized instance and the fp16 / bf16 baseline are made
 * from (kernels/gen_instances.sh writes one file per head dim and dtype
 * combination).
 *
 * It follows the CPU emulation (quant/src/emulate.c) step by step, so that it
 * computes the same numbers:
 *   S    exact dot products of the stored values (integers in fp32, fp8 /
 *        fp16 / bf16 in double; e4m3 with acc=fp22: the fp8 tensor core's
 *        k-step sum, qattn_num_fp8_kstep), rounded once to fp32, times sq[i] * sk[j],
 *        plus dS = mean(Q block) . K_smoothed for smooth=q, times
 *        softmax_scale * log2(e); masked keys -inf;
 *   softmax  base 2, online over blocks of kblock keys aligned at key 0 of
 *        the sequence, each query row walking only the blocks its mask
 *        touches; P = exp2(S - m) stored per p= against the running max; the
 *        row sum l from the unquantized P, summed in key order;
 *   P.V  key by key in order, each add rounded as the accumulator rounds
 *        (fp32, fp22 cut; fp16: a 16-key tile at once, qattn_num_f16_kstep; fp22 on e4m3
 *        codes: a 32-key tile at once, qattn_num_fp8_ksteps), two-level: added into an fp32 buffer after
 *        every key whose index + 1 is a multiple of acc_chunk; rescaled by
 *        exp2(m_old - m_new) at each block (skipped when 1);
 *   out  O / l / pmul * V scale + V mean, rounded to the output type; LSE in
 *        natural log; a fully masked row gives 0 and -inf.
 * Only exp2 differs (exp2f here, a polynomial there: a few ulp).
 *
 * Tiling (what a fast path replaces): a block of 128 threads owns BM = 16
 * query rows of one head and one sequence. Per key block: K in tiles of KT
 * keys through shared memory, one thread per (row, key) dot product into
 * S[BM][kblock]; one thread per row for the max and the sum (key order), one
 * thread per (row, key) for P; then V in tiles of KT keys, each thread
 * accumulating D/8 channels of one row in registers. No warp-level
 * primitive is used, so the same source runs with 32- and 64-wide waves. */
#ifndef QATTN_KERNELS_ATTN_FWD_PORTABLE_H
#define QATTN_KERNELS_ATTN_FWD_PORTABLE_H

#include "hip_port.h"
#include "attn_common.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"

#define QATTN_ATTN_BM 16      /* query rows per block */
#define QATTN_ATTN_KT 16      /* keys per shared-memory tile */
#define QATTN_ATTN_THREADS 128
#define QATTN_ATTN_KBMAX 128  /* largest kblock */

#if defined(QATTN_HIP_SIM) && defined(QATTN_SIM_EMU_EXP2)
#define QATTN_EXP2(x) qattn_emu_exp2(x) /* the emulation's own 2^x: bit-exact checks on the host */
#else
#define QATTN_EXP2(x) exp2f(x)
#endif

/* P.V in the fp8 tensor core's 32-key k-steps (acc=fp22 on e4m3 codes, qattn_num_fp8_ksteps) */
static inline QATTN_HD int qattn_attn_portable_fp8tc(int pv, int acc)
{
    return acc == QATTN_ACC_FP22 && pv == QATTN_FMT_E4M3;
}
/* keys per V tile: one k-step of the tensor core the P.V follows (fp8: 32), else a K tile's */
static inline QATTN_HD int qattn_attn_portable_vt(int pv, int acc)
{
    return qattn_attn_portable_fp8tc(pv, acc) ? 32 : QATTN_ATTN_KT;
}

/* shared memory in floats: sQ, sQm (smooth=q), sS, sP, the K/V tile union
 * (V tiles of vt keys), row state */
static inline QATTN_HD int qattn_attn_portable_smem_floats(int d, int smooth_q, int vt)
{
    const int bm = QATTN_ATTN_BM, kt = QATTN_ATTN_KT, sp = QATTN_ATTN_KBMAX + 1;
    int tile = kt * (d + 1) + (smooth_q ? kt * d : 0) + kt;
    int vtile = vt * d;
    return bm * (d + 1) + (smooth_q ? bm * d : 0) + 2 * bm * sp + (tile > vtile ? tile : vtile) + 8 * bm;
}

/* element c of a stored row starting at element `row` (int4: byte index) */
template <int F>
static __device__ __forceinline__ float qattn_attn_ld(const void *x, int64_t row, int c)
{
    if (F == QATTN_FMT_INT8)
        return (float)((const int8_t *)x)[row + c];
    if (F == QATTN_FMT_INT4) {
        unsigned byte = ((const uint8_t *)x)[row + (c >> 1)];
        unsigned nib = (c & 1) ? byte >> 4 : byte & 0xfu;
        return (float)((int)(nib ^ 8u) - 8);
    }
    if (F == QATTN_FMT_E4M3)
        return qattn_num_e4m3_decode(((const uint8_t *)x)[row + c]);
    if (F == QATTN_FMT_E5M2)
        return qattn_num_e5m2_decode(((const uint8_t *)x)[row + c]);
    if (F == QATTN_FMT_FP16)
        return qattn_num_fp16_decode(((const uint16_t *)x)[row + c]);
    if (F == QATTN_FMT_BF16)
        return qattn_num_bf16_decode(((const uint16_t *)x)[row + c]);
    return ((const float *)x)[row + c];
}

static __device__ __forceinline__ float qattn_attn_ld_rt(int f, const void *x, int64_t row, int c)
{
    if (f == QATTN_FMT_FP16)
        return qattn_num_fp16_decode(((const uint16_t *)x)[row + c]);
    if (f == QATTN_FMT_BF16)
        return qattn_num_bf16_decode(((const uint16_t *)x)[row + c]);
    return ((const float *)x)[row + c];
}

/* dot products: integers are exact in fp32 (|sum| < 2^24 for d <= 1024),
 * fp8 products need double to stay exact */
template <int F>
struct qattn_attn_dot {
    typedef double type;
};
template <>
struct qattn_attn_dot<QATTN_FMT_INT8> {
    typedef float type;
};
template <>
struct qattn_attn_dot<QATTN_FMT_INT4> {
    typedef float type;
};

template <int ACC>
static __device__ __forceinline__ float qattn_attn_acc_round(float x)
{
    if (ACC == QATTN_ACC_FP22) /* x is a sum */
        return qattn_num_cut22_sum(x);
    if (ACC == QATTN_ACC_FP16)
        return qattn_num_round16(x);
    return x;
}

/* one output element as the emulation forms it, O / l / pmul * V scale +
 * V mean (0 for a row without a visible key), rounded to p.out and stored
 * at element at of p.o; vsc, vmean: the head's V scales and means or NULL */
static __device__ __forceinline__ void qattn_attn_put_out(const qattn_kernels_attn_params &p, int64_t at, int c,
                                                          float acc, float l, const float *vsc, const float *vmean,
                                                          int empty)
{
    float x = 0.0f;
    if (!empty) {
        x = acc / l;
        if (p.pmul != 1.0f)
            x = x / p.pmul;
        if (vsc)
            x = x * vsc[p.v_ch > 0 ? c / p.v_ch : 0];
        if (vmean)
            x = x + vmean[c];
    }
    if (p.out == QATTN_FMT_FP16)
        ((uint16_t *)p.o)[at] = qattn_num_fp16_encode(x);
    else if (p.out == QATTN_FMT_BF16)
        ((uint16_t *)p.o)[at] = qattn_num_bf16_encode(x);
    else
        ((float *)p.o)[at] = x;
}

template <int D, int QK, int PV, int ACC>
__global__ void __launch_bounds__(QATTN_ATTN_THREADS) qattn_attn_fwd_portable_kernel(qattn_kernels_attn_params p)
{
    const int BM = QATTN_ATTN_BM, KT = QATTN_ATTN_KT, NT = QATTN_ATTN_THREADS, KB = QATTN_ATTN_KBMAX;
    const int VT = qattn_attn_portable_vt(PV, ACC);                  /* keys per V tile */
    const int FP8TC = qattn_attn_portable_fp8tc(PV, ACC);            /* P.V in the fp8 tensor core's k-steps */
    const int DP = D + 1, SP = KB + 1;
    const int TPR = NT / BM; /* threads per row in P.V */
    const int NC = D / TPR;  /* channels per thread */
    typedef typename qattn_attn_dot<QK>::type dot_t;
    QATTN_DYNAMIC_SHARED(float, smem);

    const int smooth_q = p.q_mean != 0;
    float *sQ = smem;                             /* [BM][DP] Q values */
    float *sQm = sQ + BM * DP;                    /* [BM][D] mean of each row's Q block */
    float *sS = sQm + (smooth_q ? BM * D : 0);    /* [BM][SP] S, then unquantized P */
    float *sP = sS + BM * SP;                     /* [BM][SP] P as stored */
    float *sU = sP + BM * SP;                     /* K tile, or V tile */
    float *sK = sU;                               /* [KT][DP] K values */
    float *sKsm = sK + KT * DP;                   /* [KT][D] smoothed unquantized K (smooth=q) */
    float *sKs = sKsm + (smooth_q ? KT * D : 0);  /* [KT] K scales */
    float *sV = sU;                               /* [VT][D] V values */
    float *sRow = sKs + KT > sV + VT * D ? sKs + KT : sV + VT * D;
    float *sM = sRow, *sL = sRow + BM, *sAl = sRow + 2 * BM, *sQs = sRow + 3 * BM;
    int *sLo = (int *)(sRow + 4 * BM), *sHi = sLo + BM, *sJ0 = sHi + BM, *sJ1 = sJ0 + BM;

    const int tid = (int)threadIdx.x;
    const int b = (int)blockIdx.z, h = (int)blockIdx.y, i0 = (int)blockIdx.x * BM;
    int64_t tq0, tk0;
    int sq, sk;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &tq0, &sq);
    qattn_kseq(p.cu_k, b, p.seqlen_k, &tk0, &sk);
    if (i0 >= sq)
        return; /* the whole block */
    const int hk = h / (p.hq / p.hkv);
    const int kb = p.kblock;
    const int64_t qbase = (int64_t)b * p.q_sb + tq0 * p.q_st + (int64_t)h * p.q_sh;
    const int64_t kbase = (int64_t)b * p.k_sb + tk0 * p.k_st + (int64_t)hk * p.k_sh;
    const int64_t vbase = (int64_t)b * p.v_sb + tk0 * p.v_st + (int64_t)hk * p.v_sh;
    const int64_t kinbase = (int64_t)b * p.kin_sb + tk0 * p.kin_st + (int64_t)hk * p.kin_sh;
    const float *qsc = p.q_scale ? p.q_scale + ((int64_t)h * p.nseq + b) * p.q_ntok : (const float *)0;
    const float *ksc = p.k_scale ? p.k_scale + ((int64_t)hk * p.nseq + b) * p.k_ntok : (const float *)0;
    const float *vsc = p.v_scale ? p.v_scale + ((int64_t)hk * p.nseq + b) * p.v_nch : (const float *)0;
    const float *qmean = p.q_mean ? p.q_mean + ((int64_t)h * p.nseq + b) * p.nqb * D : (const float *)0;
    const float *kmean = p.k_mean ? p.k_mean + ((int64_t)hk * p.nseq + b) * D : (const float *)0;
    const float *vmean = p.v_mean ? p.v_mean + ((int64_t)hk * p.nseq + b) * D : (const float *)0;

    /* ---- Q tile and per-row state ---- */
    for (int e = tid; e < BM * D; e += NT) {
        const int r = e / D, c = e % D, i = i0 + r;
        float x = 0.0f, m = 0.0f;
        if (i < sq) {
            x = qattn_attn_ld<QK>(p.q, qbase + (int64_t)i * p.q_st, c);
            if (qmean)
                m = qmean[(int64_t)(i / p.qblock) * D + c];
        }
        sQ[r * DP + c] = x;
        if (smooth_q)
            sQm[r * D + c] = m;
    }
    if (tid < BM) {
        const int r = tid, i = i0 + r;
        int64_t lo = 0, hi = 0;
        if (i < sq)
            qattn_num_mask_range(p.mask, i, sq, sk, &lo, &hi);
        sLo[r] = (int)lo;
        sHi[r] = (int)hi;
        if (lo < hi) {
            const int64_t j1 = (hi + kb - 1) / kb * kb;
            sJ0[r] = (int)(lo / kb * kb);
            sJ1[r] = (int)(j1 < sk ? j1 : sk);
        } else {
            sJ0[r] = sJ1[r] = 0; /* empty: no block is ever active */
        }
        sM[r] = -INFINITY;
        sL[r] = 0.0f;
        sAl[r] = 1.0f;
        sQs[r] = i < sq && qsc ? qsc[qattn_num_group_tok_index(p.q_group, i)] : 1.0f;
    }
    __syncthreads();
    int J0 = 0x7fffffff, J1 = 0; /* key blocks any row of this block touches */
    for (int r = 0; r < BM; r++)
        if (sJ0[r] < sJ1[r]) {
            J0 = sJ0[r] < J0 ? sJ0[r] : J0;
            J1 = sJ1[r] > J1 ? sJ1[r] : J1;
        }

    const int pr = tid / TPR, pc = tid % TPR; /* P.V: row pr, channels pc + TPR * k */
    const int two = p.acc_chunk > 0;
    float acc[NC], ob[NC];
    for (int k = 0; k < NC; k++)
        acc[k] = ob[k] = 0.0f;

    for (int j0 = J0; j0 < J1; j0 += kb) {
        const int n = kb < sk - j0 ? kb : sk - j0;
        /* ---- S = Q.K for the keys [j0, j0 + n) ---- */
        for (int jt = 0; jt < n; jt += KT) {
            const int nt = KT < n - jt ? KT : n - jt;
            __syncthreads(); /* the tile union and sS are free */
            for (int e = tid; e < KT * D; e += NT) {
                const int jj = e / D, c = e % D, j = j0 + jt + jj;
                float x = 0.0f, y = 0.0f;
                if (jj < nt) {
                    x = qattn_attn_ld<QK>(p.k, kbase + (int64_t)j * p.k_st, c);
                    if (smooth_q) {
                        y = qattn_attn_ld_rt(p.k_in_fmt, p.k_in, kinbase + (int64_t)j * p.kin_st, c);
                        if (kmean)
                            y = y - kmean[c];
                    }
                }
                sK[jj * DP + c] = x;
                if (smooth_q)
                    sKsm[jj * D + c] = y;
            }
            if (tid < KT)
                sKs[tid] = tid < nt && ksc ? ksc[qattn_num_group_tok_index(p.k_group, j0 + jt + tid)] : 1.0f;
            __syncthreads();
            for (int e = tid; e < BM * KT; e += NT) {
                const int r = e / KT, jj = e % KT, j = j0 + jt + jj;
                if (jj >= nt || j0 < sJ0[r] || j0 >= sJ1[r])
                    continue;
                float dotf;
                if (QK == QATTN_FMT_E4M3 && ACC == QATTN_ACC_FP22) { /* the fp8 tensor core's sum */
                    dotf = 0.0f;
                    for (int c0 = 0; c0 < D; c0 += 32)
                        dotf = qattn_num_fp8_kstep(dotf, sQ + r * DP + c0, sK + jj * DP + c0, D - c0 < 32 ? D - c0 : 32);
                } else {
                    dot_t dot = 0;
                    for (int c = 0; c < D; c++)
                        dot += (dot_t)sQ[r * DP + c] * (dot_t)sK[jj * DP + c];
                    dotf = (float)dot;
                }
                float s = dotf * (sQs[r] * sKs[jj]);
                if (smooth_q) {
                    double ds = 0.0;
                    for (int c = 0; c < D; c++)
                        ds += (double)sQm[r * D + c] * (double)sKsm[jj * D + c];
                    s = s + (float)ds;
                }
                s = s * p.c2;
                if (j < sLo[r] || j >= sHi[r])
                    s = -INFINITY;
                sS[r * SP + jt + jj] = s;
            }
        }
        __syncthreads();
        /* ---- row max, rescale factor ---- */
        if (tid < BM && j0 >= sJ0[tid] && j0 < sJ1[tid]) {
            const int r = tid;
            float mb = -INFINITY;
            for (int j = 0; j < n; j++) {
                const float s = sS[r * SP + j];
                mb = s > mb ? s : mb;
            }
            const float mold = sM[r], mnew = mb > mold ? mb : mold;
            sAl[r] = QATTN_EXP2(mold - mnew);
            sM[r] = mnew;
        }
        __syncthreads();
        /* ---- P = exp2(S - m), stored per p= ---- */
        for (int e = tid; e < BM * KB; e += NT) {
            const int r = e / KB, j = e % KB;
            if (j >= n || j0 < sJ0[r] || j0 >= sJ1[r])
                continue;
            const float pj = QATTN_EXP2(sS[r * SP + j] - sM[r]);
            sS[r * SP + j] = pj;
            sP[r * SP + j] = qattn_num_round(PV, pj * p.pmul);
        }
        __syncthreads();
        /* ---- row sum in key order ---- */
        if (tid < BM && j0 >= sJ0[tid] && j0 < sJ1[tid]) {
            const int r = tid;
            float sum = 0.0f;
            for (int j = 0; j < n; j++)
                sum = sum + sS[r * SP + j];
            sL[r] = sL[r] * sAl[r] + sum;
        }
        /* ---- O = O * alpha + P.V ---- */
        const int act = j0 >= sJ0[pr] && j0 < sJ1[pr];
        if (act) {
            const float al = sAl[pr];
            if (al != 1.0f)
                for (int k = 0; k < NC; k++) {
                    if (two)
                        ob[k] = ob[k] * al;
                    acc[k] = ACC == QATTN_ACC_FP16 ? qattn_num_rescale16(acc[k], al) : acc[k] * al;
                }
        }
        for (int jt = 0; jt < n; jt += VT) {
            const int nt = VT < n - jt ? VT : n - jt;
            __syncthreads(); /* the K tile (or the last V tile) is consumed */
            for (int e = tid; e < VT * D; e += NT) {
                const int jj = e / D, c = e % D;
                sV[jj * D + c] = jj < nt ? qattn_attn_ld<PV>(p.v, vbase + (int64_t)(j0 + jt + jj) * p.v_st, c) : 0.0f;
            }
            __syncthreads();
            if (act && (ACC == QATTN_ACC_FP16 || FP8TC)) {
                /* the tile is one k-step (16 keys; fp8: 32), cut where a two-level chunk ends */
                for (int js = 0; js < nt;) {
                    int je = nt;
                    if (two) {
                        const int left = p.acc_chunk - (j0 + jt + js) % p.acc_chunk;
                        je = js + left < nt ? js + left : nt;
                    }
                    for (int k = 0; k < NC; k++) {
                        if (FP8TC)
                            qattn_num_fp8_ksteps(&acc[k], 1, sP + pr * SP + jt + js, sV + js * D + pc + TPR * k, D,
                                                 je - js);
                        else
                            acc[k] = qattn_num_f16_kstep(acc[k], sP + pr * SP + jt + js, sV + js * D + pc + TPR * k,
                                                         D, je - js);
                    }
                    if (two && (j0 + jt + je) % p.acc_chunk == 0)
                        for (int k = 0; k < NC; k++) {
                            ob[k] = ob[k] + acc[k];
                            acc[k] = 0.0f;
                        }
                    js = je;
                }
            } else if (act)
                for (int jj = 0; jj < nt; jj++) {
                    const float pj = sP[pr * SP + jt + jj];
                    for (int k = 0; k < NC; k++)
                        acc[k] = qattn_attn_acc_round<ACC>(acc[k] + pj * sV[jj * D + pc + TPR * k]);
                    if (two && (j0 + jt + jj + 1) % p.acc_chunk == 0)
                        for (int k = 0; k < NC; k++) {
                            ob[k] = ob[k] + acc[k];
                            acc[k] = 0.0f;
                        }
                }
        }
    }
    __syncthreads(); /* the row sums are complete */

    /* ---- O / l, scales, V mean, rounding; LSE ---- */
    const int i = i0 + pr;
    if (i < sq) {
        const int empty = sJ0[pr] >= sJ1[pr];
        const float l = sL[pr];
        const int64_t obase = (int64_t)b * p.o_sb + (tq0 + i) * p.o_st + (int64_t)h * p.o_sh;
        for (int k = 0; k < NC; k++) {
            const int c = pc + TPR * k;
            qattn_attn_put_out(p, obase + c, c, two ? ob[k] + acc[k] : acc[k], l, vsc, vmean, empty);
        }
        if (pc == 0 && p.lse) {
            const int64_t t = (p.cu_q ? tq0 : (int64_t)b * p.seqlen_q) + i;
            p.lse[(int64_t)h * p.lse_sh + t] =
                empty ? -INFINITY : (float)(((double)sM[pr] + log2((double)l)) * 0.69314718055994530942);
        }
    }
}

#define QATTN_ATTN_CHECK(call, what)                                                                            \
    do {                                                                                                        \
        hipError_t e_ = (call);                                                                                 \
        if (e_ != hipSuccess)                                                                                   \
            return qattn_err_set(err, QATTN_KERNELS_ERR_DEVICE, "%s: %s (%s:%d)", what, hipGetErrorString(e_), \
                                 __FILE__, __LINE__);                                                           \
    } while (0)

template <int D, int QK, int PV, int ACC>
static int qattn_attn_fwd_portable_launch(const qattn_kernels_attn_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_attn_params p = *pp;
    int rc = qattn_attn_check_grid(D, p.d, p.hq, p.hkv, p.nseq, "attn", err);
    if (rc)
        return rc;
    if (p.q_fuse)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: this instance reads stored Q codes (no fused Q)");
    if (p.kblock < 1 || p.kblock > QATTN_ATTN_KBMAX)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: kblock %d outside 1..%d", p.kblock, QATTN_ATTN_KBMAX);
    if (p.q_mean && (p.qblock <= 0 || !p.k_in))
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: smooth=q needs qblock and the unquantized K");
    if (p.seqlen_q <= 0)
        return QATTN_OK;
    const size_t smem =
        (size_t)qattn_attn_portable_smem_floats(D, p.q_mean != 0, qattn_attn_portable_vt(PV, ACC)) * sizeof(float);
    void (*k)(qattn_kernels_attn_params) = &qattn_attn_fwd_portable_kernel<D, QK, PV, ACC>;
    if (smem > 48 * 1024)
        QATTN_ATTN_CHECK(hipFuncSetAttribute((const void *)k, hipFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                         "attn: raising the shared-memory limit");
    const dim3 grid((unsigned)((p.seqlen_q + QATTN_ATTN_BM - 1) / QATTN_ATTN_BM), (unsigned)p.hq, (unsigned)p.nseq);
    hipLaunchKernelGGL(k, grid, dim3(QATTN_ATTN_THREADS), smem, (hipStream_t)stream, p);
    QATTN_ATTN_CHECK(hipGetLastError(), "attn kernel launch");
    return QATTN_OK;
}

/* one instance: extern "C" launch function NAME */
#define QATTN_ATTN_FWD_PORTABLE_INSTANCE(D, QK, PV, ACC, NAME)                                 \
    extern "C" int NAME(const qattn_kernels_attn_params *p, void *stream, qattn_err *err)     \
    {                                                                                          \
        return qattn_attn_fwd_portable_launch<D, QK, PV, ACC>(p, stream, err);                \
    }

#endif
