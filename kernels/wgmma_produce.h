/* The copying producer warpgroup of the wgmma instances (attn_fwd_wgmma.h):
 * the Q tile and the key blocks by its threads' cp.async, each thread's
 * copies arriving on the barrier as they land (the form where TMA is not
 * taken: varlen, sage1-b's V rows in the sigma order, QATTN_WG_TMA=0).
 * NVIDIA only (sm_90a). */
#ifndef QATTN_KERNELS_WGMMA_PRODUCE_H
#define QATTN_KERNELS_WGMMA_PRODUCE_H

#include "mma_nvidia.h"    /* cp.async */
#include "wgmma_nvidia.h"  /* mbarriers */
#include "qattn_kernels.h" /* qattn_kernels_attn_params */
#include "wgmma_keys.h"    /* sigma */
#include "wgmma_tile.h"    /* the swizzled tiles */

/* Q rows i0 .. i0 + BM - 1 of (b, h) into the tile sQ (rows of D ES bytes, zeros past sq) by thread wt
 * of NT, whose copies arrive on qbar as they land */
template <int D, int ES, int BM, int NT>
static __device__ __forceinline__ void qattn_wgmma_copy_q(const qattn_kernels_attn_params &p, uint8_t *sQ, uint32_t qbar,
                                                          int b, int h, int i0, int sq, int64_t tq0, int wt)
{
    constexpr int RB = D * ES, CH = RB / 16;
    const uint8_t *qg = (const uint8_t *)p.q + ((int64_t)b * p.q_sb + tq0 * p.q_st + (int64_t)h * p.q_sh) * ES;
    const int qst = (int)p.q_st * ES;
#pragma unroll 4
    for (int e = wt; e < BM * CH; e += NT) {
        const int r = e / CH, ch = e % CH, ok = i0 + r < sq;
        qattn_cp_async16(sQ + qattn_wg_off<RB, BM>(r, ch), qg + (ok ? (int64_t)(i0 + r) * qst + ch * 16 : 0), ok ? 16 : 0);
    }
    qattn_cp_async_mbar_arrive(qbar);
}

/* Key blocks J0, J0 + KS, .. < J1 of (b, hk) into the S stages of STAGE bytes at sStage (K tile of KS rows of
 * D ES bytes, then V), block it of the CTA in stage it % S, once its consumers released it (its "empty"
 * barrier, qattn_wgmma_bar_empty from the kernel's first barrier bar0); thread wt's copies arrive on the
 * stage's "full" barrier. Q8 (8-bit K): K row r holds key sigma(r) of its 32-key chunk; V16: V as rows of
 * keys (P16: in the sigma order), else V^T rows of KS keys */
template <int D, int KS, int S, int STAGE, int ES, int Q8, int V16, int P16>
static __device__ __forceinline__ void qattn_wgmma_copy_blocks(const qattn_kernels_attn_params &p, uint8_t *sStage,
                                                               uint32_t bar0, int &it, int J0, int J1, int b, int hk,
                                                               int sk, int64_t tk0, int wt)
{
    constexpr int RB = D * ES, CH = RB / 16, RP = 128 / CH; /* K rows the 128 threads copy per pass */
    constexpr int VRB = V16 ? 2 * D : KS, VROWS = V16 ? KS : D, VCH = VRB / 16, VR = 128 / VCH;
    constexpr int KBYTES = KS * RB;
    constexpr int KSTEP = RP * (RB < 128 ? RB : 128), VSTEP = VR * (VRB < 128 ? VRB : 128);
    /* this thread's 16-byte chunk ch of K rows r0 + RP x (x < KS / RP); 8-bit: K row r0 + RP x holds key
     * RP x + sigma(r0) of the block (sigma(c) = 16h + 4i + 2u + e for c = 16h + 8u + 2i + e, within 32
     * keys), 16-bit: key r0 + RP x; and chunk vch of the V tile's rows v0 + VR x (x < VROWS / VR) */
    const int r0 = wt / CH, ch = wt % CH, v0 = wt / VCH, vch = wt % VCH;
    const int kperm = Q8 ? qattn_wg_sigma(r0) : r0;
    const int kst = (int)p.k_st * ES, vst = (int)p.v_st * (V16 ? 2 : 1);
    const uint8_t *kg = (const uint8_t *)p.k + ((int64_t)b * p.k_sb + tk0 * p.k_st + (int64_t)hk * p.k_sh) * ES +
                        (int64_t)kperm * kst + ch * 16;
    /* 8-bit: V^T row (channel) v0, keys from the sequence's first; 16-bit: V row (key) v0
     * (P16: the row of key sigma(v0 + VR x), found in the loop) */
    const uint8_t *vg = (const uint8_t *)p.v +
                        ((int64_t)b * p.v_sb + (V16 ? tk0 * p.v_st : 0) + (int64_t)hk * p.v_sh) * (V16 ? 2 : 1) +
                        (int64_t)(P16 ? 0 : v0) * vst + vch * 16;
    const int soff = qattn_wg_off<RB, KS>(r0, ch), voff = qattn_wg_off<VRB, VROWS>(v0, vch);
    for (int j0 = J0; j0 < J1; j0 += KS, it++) {
        const int stage = it % S;
        if (it >= S) /* the consumers' release of this stage's previous block: completion it / S - 1 */
            qattn_mbar_wait(qattn_wgmma_bar_empty<S>(bar0, stage), (uint32_t)((it / S - 1) & 1));
        uint8_t *sK = sStage + stage * STAGE + soff, *sV = sStage + stage * STAGE + KBYTES + voff;
        const uint8_t *kp = kg + (int64_t)j0 * kst;
        const uint8_t *vp = vg + (V16 ? (int64_t)j0 * vst : (int64_t)j0);
        /* few registers here (setmaxnreg): pointers stepped, not precomputed */
#pragma unroll 1
        for (int x = 0; x < (KS / RP > VROWS / VR ? KS / RP : VROWS / VR); x++, kp += RP * kst) {
            if (x < KS / RP) {
                const int ok = j0 + RP * x + kperm < sk;
                qattn_cp_async16(sK + KSTEP * x, ok ? kp : kg, ok ? 16 : 0);
            }
            if (x < VROWS / VR) {
                /* 16-bit V rows past the sequence's end are zero (P is 0 there, V may not be finite) */
                const int vk = P16 ? qattn_wg_sigma64(VR * x + v0) : VR * x + v0;
                const int ok = !V16 || j0 + vk < sk;
                qattn_cp_async16(sV + VSTEP * x, ok ? (P16 ? vp + (int64_t)vk * vst : vp) : vg, ok ? 16 : 0);
                if (!P16)
                    vp += VR * vst;
            }
        }
        qattn_cp_async_mbar_arrive(qattn_wgmma_bar_full<S>(bar0, stage));
    }
}

#endif
