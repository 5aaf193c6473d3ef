/* Attention forward, Hopper (sm_90a): the wgmma instances of 8-bit Q.K and
 * e4m3, int8 or fp16 P.V (sage2-8b-sm90, fa3-fp8, sage2-8b, sage1-vb,
 * sage1-b) and the fp16 / bf16 baselines at d = 64 (qattn_wg_solo_can in
 * wgmma_form.h) in blocks of one warpgroup and no producer: 64 query
 * rows a block, three blocks a multiprocessor (four at d = 64 where the
 * shared memory allows: qattn_wgsolo_blocks), so that one block's
 * prologue and epilogue run
 * beside the others' key blocks and the blocks never wait for each other
 * (the structure of SageAttention2's sm90 kernel). Key blocks are loaded
 * two stages ahead (block j + 2 into the stage block j leaves, once the
 * four warps are done with it): by one thread's TMA where the layout allows
 * (KT), K rows in the sigma order of attn_fwd_wgmma.h by the box's strides,
 * else by the warpgroup's cp.async.
 *
 * The steps of a key block are those of the three-consumer form of
 * attn_fwd_wgmma.h (SER): Q.K, the softmax (qattn_wgmma_softmax), P.V
 * waited and added into O (two levels: in S's registers, or in halves at
 * d = 128) before the next Q.K. Same params, scheme, checks and epilogue.
 * sage1-b: V in fp16 rows of keys in the sigma order, P.V into an f16 O;
 * the baselines: Q.K from shared memory (m64nKBk16), K and V rows in key
 * order, qattn_wgmma_softmax16 and the f16 / bf16 P.V into the fp32 O. */
#ifndef QATTN_KERNELS_ATTN_FWD_WGSOLO_H
#define QATTN_KERNELS_ATTN_FWD_WGSOLO_H

#include "attn_fwd_mma.h" /* the checks, key-block range, masks and epilogue of the mma path */
#include "quant_groups.h" /* qattn_qf_tok_index */
#include "wgmma_keys.h"   /* the sigma key order */
#include "wgmma_steps.h"  /* the softmax and O updates */
#include "wgmma_form.h"   /* qattn_wg_solo_can */
#include "wgmma_tile.h"   /* swizzled tiles, descriptors */
#include "wgmma_tma.h"    /* the TMA maps of K and V */

/* stages; bytes a Q / K element; V in 16-bit rows
 * of keys (else 8-bit V^T); the shared memory (Q, the stages, 1 KB to align) */
#define QATTN_WGSOLO_STAGES 2
static constexpr QATTN_HD int qattn_wgsolo_smem(int d, int kb, int qf, int pf)
{
    return 64 * d * QATTN_WGMMA_ES(qf, pf) + QATTN_WGSOLO_STAGES * kb * d * (QATTN_WGMMA_ES(qf, pf) + (QATTN_WGMMA_V16(qf, pf) ? 2 : 1)) +
           1024;
}
/* blocks a multiprocessor: four at d = 64 where the shared memory allows (128 registers a thread), else three */
static constexpr QATTN_HD int qattn_wgsolo_blocks(int d, int kb, int qf, int pf)
{
    return d == 64 && (qattn_wgsolo_smem(d, kb, qf, pf) + 1024) * 4 <= 232448 ? 4 : 3;
}

/* KT: K and V^T loaded by TMA (one thread; K's heads start on 16-row groups, no varlen), else by the
 * warpgroup's cp.async */
template <int D, int KB, int QF, int PF, int ACC, int NB, bool KT>
__global__ void __launch_bounds__(128, NB)
    qattn_attn_fwd_wgsolo_kernel(qattn_kernels_attn_params p, const __grid_constant__ qattn_wg_maps maps)
{
    static_assert(qattn_wg_solo_can(D, KB, QF, PF, ACC),
                  "8-bit Q.K, e4m3 P.V (acc=fp22), int8 P.V (fp32) or fp16 P.V (fp16); the 16-bit baselines");
    static_assert(D == 128 || D == 64, "head dims 64 and 128 (swizzled rows)");
    static_assert(!KT || qattn_wg_solo_tma(QF, PF), "TMA loads of 8-bit K and V^T");
    static_assert((qattn_wgsolo_smem(D, KB, QF, PF) + 1024) * NB <= 232448,
                  "shared memory over sm_90's 227 KB for the blocks a multiprocessor");
#if QATTN_WGMMA
    /* Q8: 8-bit Q / K codes (else the 16-bit baseline, BF: bf16); P16: fp16 P.V into the f16 O
     * (sage1-b); V16: V in 16-bit rows of keys (P16: in the sigma order) */
    constexpr int Q8 = QATTN_WGMMA_8BIT(QF), BF = QF == QATTN_FMT_BF16, P16 = Q8 && PF == QATTN_FMT_FP16;
    constexpr int V16 = QATTN_WGMMA_V16(QF, PF), ES = QATTN_WGMMA_ES(QF, PF); /* V as P.V reads it: PF (no widening) */
    /* TWO: each block's P.V from 0, added into O (int8 Q.K: acc=fp22+fp32:KB, or int8 P.V exact per block) */
    constexpr int TWO = QF == QATTN_FMT_INT8 && !P16;
    /* HALF (two levels, d = 128): P.V in two halves of 64 channels (qattn_wgmma_pv_halves): S's
     * registers holding a whole P.V, P beside them and O are more than 168 registers (ptxas spilled
     * 56 bytes with the cp.async loads, 40 with TMA; in halves with TMA: none, and as fast) */
    constexpr bool HALF = TWO && D == 128, PIN = Q8 && !TWO && !P16;
    constexpr int S = QATTN_WGSOLO_STAGES, BM = 64;
    constexpr int NT = KB / 8, NO = D / 8;
    constexpr int RB = D * ES, CH = RB / 16, RP = 128 / CH; /* Q / K rows: bytes, 16-byte chunks, rows a pass */
    /* the V tile: V^T (D rows of KB bytes) or 16-bit rows (KB rows of 2 D bytes); chunks, rows a pass */
    constexpr int VRB = V16 ? 2 * D : KB, VROWS = V16 ? KB : D, VCH = VRB / 16, VR = 128 / VCH;
    constexpr int KBYTES = KB * RB, STAGE = KBYTES + VROWS * VRB;
    constexpr int KSTEP = RP * (RB < 128 ? RB : 128), VSTEP = VR * (VRB < 128 ? VRB : 128);
    constexpr int S2F = qattn_wg_s2f(D, KB, true);
    /* the row maxima on the int32 scores at d = 64 (1.018-1.026x at N = 1024-16384; at d = 128 ptxas spilled
     * 24 bytes and the kernel ran 0.97-0.99x: H200, 2026-12-03, kernels/logs/h200_solo_imax_ab.txt) */
    constexpr bool IMAX = D == 64;
    QATTN_DYNAMIC_SHARED(uint8_t, smem_raw);
    uint8_t *smem = smem_raw + ((1024 - (qattn_wgmma_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *sQ = smem;               /* [64 rows][RB] swizzled */
    uint8_t *sStage = smem + BM * RB; /* stage s at s * STAGE: K [KB][RB], V [VROWS][VRB] */
    /* full[S]: a stage landed (the threads' cp.async: 128 arrivals; TMA: one and its bytes), Q (128) */
    __shared__ __align__(8) uint64_t s_bar[S + 1];
    const uint32_t bar0 = qattn_wgmma_smem_addr(s_bar);

    const int tid = (int)threadIdx.x, lane = tid & 31, wv = tid >> 5, g = lane >> 2, qi = lane & 3;
    const int b = (int)blockIdx.z, h = (int)blockIdx.y;
    const int i0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * BM; /* longest causal rows first */
    int64_t tq0, tk0;
    int sq, sk;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &tq0, &sq);
    qattn_kseq(p.cu_k, b, p.seqlen_k, &tk0, &sk);
    if (i0 >= sq)
        return;
    const int hk = h / (p.hq / p.hkv);
    const int rA = i0 + 16 * wv + g, rB = rA + 8;
    int loA = 0, hiA = 0, loB = 0, hiB = 0;
    qattn_mma_row_ranges(p.mask, rA, rB, sq, sk, &loA, &hiA, &loB, &hiB);
    const uint32_t qbar = bar0 + 8u * S;
    if (tid == 0) {
        for (int s = 0; s < S; s++)
            qattn_mbar_init(bar0 + 8u * (uint32_t)s, KT ? 1 : 128);
        qattn_mbar_init(qbar, 128);
    }
    __shared__ int s_range[2];
    int J0, J1;
    qattn_mma_key_blocks(loA, hiA, loB, hiB, KB, s_range, &J0, &J1); /* its barriers publish the inits */

    /* ---- a key block into a stage: TMA (one thread), or this thread's copies: chunk ch of K rows
     * r0 + RP x (key RP x + sigma(r0) of the block), chunk vch of V^T rows v0 + VR x ---- */
    const int64_t khead = b * p.k_sb + tk0 * p.k_st + hk * p.k_sh;
    auto load_block = [&](int j0, int stage) {
        if constexpr (KT) {
            if (tid == 0) {
                const uint32_t bar = bar0 + 8u * (uint32_t)stage, dst = qattn_wgmma_smem_addr(sStage + stage * STAGE);
                qattn_mbar_arrive_expect_tx(bar, STAGE);
                qattn_wg_tma_stage<D, KB, 0>(dst, maps, bar, j0, b, hk);
            }
            return;
        }
        const int t = (int)threadIdx.x, r0 = t / CH, ch = t % CH, v0 = t / VCH, vch = t % VCH;
        const int kperm = Q8 ? qattn_wg_sigma(r0) : r0;
        const int64_t kst = p.k_st * ES;
        const uint8_t *kg = (const uint8_t *)p.k + khead * ES + kperm * kst + ch * 16;
        uint8_t *sK = sStage + stage * STAGE + qattn_wg_off<RB, KB>(r0, ch);
        uint8_t *sV = sStage + stage * STAGE + KBYTES + qattn_wg_off<VRB, VROWS>(v0, vch);
        const uint8_t *kp = kg + j0 * kst;
        if (j0 + KB <= sk) { /* every key of the block (a uniform branch) */
#pragma unroll
            for (int x = 0; x < KB / RP; x++)
                qattn_cp_async16(sK + KSTEP * x, kp + RP * x * kst, 16);
        } else {
#pragma unroll
            for (int x = 0; x < KB / RP; x++) {
                const int ok = j0 + RP * x + kperm < sk;
                qattn_cp_async16(sK + KSTEP * x, ok ? kp + RP * x * kst : kg, ok ? 16 : 0);
            }
        }
        if constexpr (V16) { /* rows past the sequence's end zero (P is 0 there, V may not be finite) */
            const int64_t vst = p.v_st * 2;
            const uint8_t *vg = (const uint8_t *)p.v + (b * p.v_sb + tk0 * p.v_st + hk * p.v_sh) * 2 + vch * 16;
#pragma unroll
            for (int x = 0; x < VROWS / VR; x++) {
                const int vk = P16 ? qattn_wg_sigma64(VR * x + v0) : VR * x + v0, ok = j0 + vk < sk;
                qattn_cp_async16(sV + VSTEP * x, ok ? vg + (j0 + vk) * vst : vg, ok ? 16 : 0);
            }
        } else {
            const int64_t vst = p.v_st;
            const uint8_t *vp = (const uint8_t *)p.v + (b * p.v_sb + hk * p.v_sh) + v0 * vst + vch * 16 + j0;
#pragma unroll
            for (int x = 0; x < D / VR; x++)
                qattn_cp_async16(sV + VSTEP * x, vp + VR * x * vst, 16);
        }
        qattn_cp_async_mbar_arrive(bar0 + 8u * (uint32_t)stage);
    };
    if (J0 < J1) {
        const uint8_t *qg = (const uint8_t *)p.q + (b * p.q_sb + tq0 * p.q_st + h * p.q_sh) * ES;
#pragma unroll
        for (int e = tid; e < BM * CH; e += 128) {
            const int r = e / CH, c = e % CH, ok = i0 + r < sq;
            qattn_cp_async16(sQ + qattn_wg_off<RB, BM>(r, c), qg + (ok ? (i0 + r) * p.q_st * ES + c * 16 : 0), ok ? 16 : 0);
        }
        qattn_cp_async_mbar_arrive(qbar);
        load_block(J0, 0);
        if (J0 + KB < J1)
            load_block(J0 + KB, 1);
    }

    /* the scales (8-bit codes; the baselines have none: K's group read as the tensor's) */
    const float *ksc = Q8 ? p.k_scale + ((int64_t)hk * p.nseq + b) * p.k_ntok : p.k_scale;
    const float *qsc = Q8 ? p.q_scale + ((int64_t)h * p.nseq + b) * p.q_ntok : p.q_scale;
    const float qsA = Q8 && rA < sq ? qsc[qattn_num_group_tok_index(p.q_group, rA)] : 0.0f;
    const float qsB = Q8 && rB < sq ? qsc[qattn_num_group_tok_index(p.q_group, rB)] : 0.0f;
    qattn_group kgrp = p.k_group;
    if (!Q8)
        kgrp.tok = QATTN_TOK_TENSOR;
    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    const float c2 = p.c2, pmul = p.pmul, lpmul = log2f(pmul);
    typedef typename qattn_cond<QF == QATTN_FMT_INT8, int, float>::type s_t;
    typedef typename qattn_cond<PF == QATTN_FMT_INT8, int, float>::type pv_t; /* P.V's accumulator (s8: exact) */
    s_t acc[NT * 4]; /* S, then (two levels) the block's P.V */
    uint32_t oh[P16 ? NO * 2 : 1]; /* P16: O in the f16 accumulator (the fp32 layout's pairs) */
#pragma unroll
    for (int x = 0; x < (P16 ? NO * 2 : 1); x++)
        oh[x] = 0u;
    const uint32_t aStg0 = qattn_wgmma_smem_addr(sStage);
    const uint64_t dq0 = qattn_wg_desc_k<RB, BM>(qattn_wgmma_smem_addr(sQ), 16 * 0, 0);
    const uint64_t dk0 = qattn_wg_desc_k<RB, KB>(aStg0, 0, 0), dv0 = qattn_wg_desc_k<KB, D>(aStg0 + KBYTES, 0, 0);
    qattn_wg_kscales<KB> ks(kgrp, ksc, J0, qi); /* the K scales of the thread's keys */

    int stage = 0;
    uint32_t phase = 0, so = 0u; /* parity of the full barriers' current completion; stage * STAGE */
    if (J0 < J1)
        qattn_mbar_wait(qbar, 0);
    for (int j0 = J0; j0 < J1; j0 += KB) {
        qattn_mbar_wait(bar0 + 8u * (uint32_t)stage, phase);
        qattn_fence_proxy_async_smem(); /* cp.async (generic proxy) data read by wgmma (async proxy) */
#pragma unroll
        for (int x = 0; x < NT * 4; x++)
            qattn_wgmma_fence_reg(acc[x]);
        qattn_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < RB / 32; kk++) {
            if constexpr (Q8) /* k-steps of 32 channels */
                qattn_wgmma_qk<KB>(acc, dq0 + 2u * kk, dk0 + ((so >> 4) + 2u * kk), kk > 0);
            else /* of 16 channels (32 bytes; Q's A fragments by ldmatrix for the register form gave wrong
                  * scores at d = 64, H200 2026-11-28: both operands from shared memory) */
                qattn_wgmma_m64k16_ss<KB, BF>(reinterpret_cast<float *>(acc), dq0 + (qattn_wg_slab_off<BM>(32 * kk) >> 4),
                                              dk0 + ((so + qattn_wg_slab_off<KB>(32 * kk)) >> 4), kk > 0);
        }
        qattn_wgmma_commit();
        const float ks0 = Q8 ? ks.cur[ks.in0] : 1.0f, ks1 = Q8 ? ks.cur[ks.in1] : 1.0f;
        qattn_wgmma_wait<0>();
#pragma unroll
        for (int x = 0; x < NT * 4; x++)
            qattn_wgmma_fence_reg(acc[x]);
        float alA, alB;
        const uint32_t aV = aStg0 + so + KBYTES;
        if constexpr (!Q8) { /* the baseline: P rounded to the 16-bit type, P.V into O rescaled */
            float (&sf)[NT * 4] = *reinterpret_cast<float (*)[NT * 4]>(&acc[0]);
            uint32_t pf[KB / 16][4];
            qattn_wgmma_softmax16<KB>(sf, j0, loA, hiA, loB, hiB, c2, mA, mB, lA, lB, alA, alB);
            qattn_wgmma_pack16<KB, BF>(sf, pf);
            qattn_wgmma_pv16_issue<D, KB, KB, BF>(o, alA, alB, pf, aV, 0);
            qattn_wgmma_commit();
            qattn_wgmma_wait<0>();
#pragma unroll
            for (int n = 0; n < NO; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    qattn_wgmma_fence_reg(o[n][e]);
        } else {
            uint32_t pf[KB / (P16 ? 16 : 32)][4];
            const float2 none[1] = {make_float2(0.0f, 0.0f)};
            qattn_wgmma_softmax<KB, PF, false, false, S2F, true, PIN, IMAX>(
                acc, none, j0, loA, hiA, loB, hiB, qsA * ks0 * c2, qsA * ks1 * c2, qsB * ks0 * c2, qsB * ks1 * c2, lpmul, mA,
                mB, lA, lB, alA, alB, pf, [] {});
            /* P.V: two levels from 0 (into S's registers, or in halves), else into O rescaled */
            if constexpr (P16) { /* O (f16) rescaled, then P.V into it by the f16 MMA, V rows in the sigma order */
                qattn_wgmma_pvh_issue<D, KB, KB>(oh, alA, alB, pf, aV);
                qattn_wgmma_commit();
                qattn_wgmma_wait<0>();
#pragma unroll
                for (int x = 0; x < NO * 2; x++)
                    qattn_wgmma_fence_reg(oh[x]);
            } else if constexpr (HALF) {
                pv_t pvb[NO * 2];
                qattn_wgmma_pv_halves<D, KB>(o, pvb, pf, dv0 + (so >> 4), alA, alB);
            } else {
                pv_t *pv = TWO ? reinterpret_cast<pv_t *>(&acc[0]) : reinterpret_cast<pv_t *>(&o[0][0]);
                qattn_wgmma_pv_issue<D, KB, TWO, PIN>(pv, o, alA, alB, acc, pf, dv0, so);
                qattn_wgmma_commit();
                qattn_wgmma_pv_finish<NO, TWO>(o, pv, alA, alB);
            }
        }
        /* block j0 + 2 KB into this stage once every warp's MMAs are done with it */
        if (j0 + 2 * KB < J1) {
            qattn_bar_sync<1, 128>();
            load_block(j0 + 2 * KB, stage);
        }
        ks.next();
        stage ^= 1;
        phase ^= stage == 0 ? 1u : 0u;
        so = so == 0u ? (uint32_t)STAGE : 0u;
    }
    lA = lA / pmul, lB = lB / pmul; /* l summed P * pmul (qattn_wgmma_softmax) */
    qattn_wgmma_wait<0>();           /* said for ptxas (C7517) */
    qattn_cp_async_wait<0>();
    if constexpr (P16)
        qattn_wgmma_oh_unpack<NO>(oh, o);
    qattn_mma_epilogue<D, D == 128>(p, o, lA, lB, mA, mB, rA, rB, loA, hiA, loB, hiB, sq, tq0, b, h, hk);
#elif defined(__CUDA_ARCH__)
    (void)p;
    __trap(); /* built without sm_90a: never launched (the host checks), trap if it is */
#else
    (void)p;
#endif
}

template <int D, int KB, int QF, int PF, int ACC>
static int qattn_attn_fwd_wgsolo_launch(const qattn_kernels_attn_params &p, void *stream, qattn_err *err)
{
    const size_t smem = qattn_wgsolo_smem(D, KB, QF, PF);
    constexpr int NB = qattn_wgsolo_blocks(D, KB, QF, PF);
    qattn_wg_maps maps;
    memset(&maps, 0, sizeof maps);
    void (*k)(qattn_kernels_attn_params, const qattn_wg_maps) =
        &qattn_attn_fwd_wgsolo_kernel<D, KB, QF, PF, ACC, NB, false>;
    if constexpr (qattn_wg_solo_tma(QF, PF)) {
        if (p.wg_tma >= 0 && qattn_wg_maps_fill<D, KB, 0>(p, &maps))
            k = &qattn_attn_fwd_wgsolo_kernel<D, KB, QF, PF, ACC, NB, true>;
    }
    QATTN_MMA_CHECK(cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                    "attn wgmma: raising the shared-memory limit");
    const dim3 grid((unsigned)((p.seqlen_q + 63) / 64), (unsigned)p.hq, (unsigned)p.nseq);
    k<<<grid, dim3(128), smem, (cudaStream_t)stream>>>(p, maps);
    QATTN_MMA_CHECK(cudaGetLastError(), "attn wgmma kernel launch");
    return QATTN_OK;
}

#endif
