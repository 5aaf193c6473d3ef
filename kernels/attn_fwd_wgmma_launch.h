/* The launches of the wgmma attention instances (attn_fwd_wgmma.h): the
 * checks of the 16-bit baselines, the block form and the grid (a CTA a tile,
 * or persistent CTAs: wgmma_form.h), the TMA maps, and the instance macro
 * the generated files use. */
#ifndef QATTN_KERNELS_ATTN_FWD_WGMMA_LAUNCH_H
#define QATTN_KERNELS_ATTN_FWD_WGMMA_LAUNCH_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attn_fwd_wgmma.h" /* the kernel, the one-warpgroup form's launch */
#include "wgmma_i4w.h"      /* the widened int4 form's pass */

/* what the 16-bit (baseline) instances need of p: unscaled fp16 / bf16 Q, K,
 * V read from the user's tensors in rows (16-byte aligned), one key block
 * of KB keys per online-softmax step, an fp32 accumulator */
template <int D, int KB>
static int qattn_attn_fwd_wgmma16_check(const qattn_kernels_attn_params &p, qattn_err *err)
{
    int rc = qattn_attn_check_grid(D, p.d, p.hq, p.hkv, p.nseq, "attn wgmma", err);
    if (rc)
        return rc;
    if (p.kblock != KB || p.acc_chunk != 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn wgmma: needs kblock=%d and acc=fp32 (got %d, %d)", KB,
                             p.kblock, p.acc_chunk);
    if (p.q_fuse || p.q_scale || p.k_scale || p.v_scale || p.q_mean || p.k_mean || p.pmul != 1.0f)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn wgmma: the fp16 / bf16 instances take unscaled Q, K, V");
    if (!qattn_rows16_ok(p.q, p.q_sb, p.q_sh, p.q_st, 2) || !qattn_rows16_ok(p.k, p.k_sb, p.k_sh, p.k_st, 2) ||
        !qattn_rows16_ok(p.v, p.v_sb, p.v_sh, p.v_st, 2))
        return qattn_err_set(err, QATTN_ERR_ARG,
                             "attn wgmma: Q, K, V rows must be 16-byte aligned (strides multiples of 8 elements)");
    if ((int64_t)p.seqlen_k * p.k_st * 2 >= ((int64_t)1 << 31) || (int64_t)p.seqlen_k * p.v_st * 2 >= ((int64_t)1 << 31) ||
        (int64_t)p.seqlen_q * p.q_st * 2 >= ((int64_t)1 << 31))
        return qattn_err_set(err, QATTN_ERR_ARG, "attn wgmma: one head's Q, K or V is over 2 GiB");
    return QATTN_OK;
}

/* the launch of a wgmma instance (head dim D, key blocks of KB keys, Q / K
 * int8 codes or fp16 / bf16 values): the checks of its kind; sm_90 and a
 * build with sm_90a (sig cc 90..90). I4W: the widened int4 form, p reading
 * the widened codes (qattn_wg_i4w_params) of packed (the plan's params):
 * the pass, then the kernel; 1 (nothing launched) where the maps cannot be
 * made */
template <int D, int KB, int QF, int PF, int ACC, int NC, int I4W = 0>
static int qattn_attn_fwd_wgmma_launch_nc(const qattn_kernels_attn_params &p, void *stream, qattn_err *err,
                                          const qattn_kernels_attn_params *packed = nullptr)
{
    const size_t smem =
        I4W == 2 ? QATTN_WGMMA_SMEM_I4W(D, KB, QATTN_WGMMA_BMN(NC))
            : QATTN_WGMMA_SMEM(D, QF, QATTN_WGMMA_VF(QF, PF, ACC), KB, QATTN_WGMMA_WIDEN(QF, PF, ACC), QATTN_WGMMA_BMN(NC));
    const int bm = QATTN_WGMMA_BMN(NC);
    dim3 grid((unsigned)((p.seqlen_q + bm - 1) / bm), (unsigned)p.hq, (unsigned)p.nseq);
    void (*k)(qattn_kernels_attn_params, const qattn_wg_maps, int, int) =
        &qattn_attn_fwd_wgmma_kernel<D, KB, QF, PF, ACC, NC, false, I4W>;
    /* the key blocks by TMA where the instance and the layout allow (p.wg_tma -1: cp.async) */
    qattn_wg_maps maps;
    memset(&maps, 0, sizeof maps);
    int tma = 0;
    if constexpr (I4W) { /* K, V^T and smooth=q's dS rows by TMA, or not this form */
        constexpr int KS = KB;
        if (!qattn_wg_maps_fill<D, KS, 0>(p, &maps) ||
            (I4W == 2 && !qattn_wg_map_ds<KS>(&maps.ds, p, qattn_wg_dsrows(QATTN_WGMMA_BMN(NC), p.qblock))))
            return 1;
        tma = 1;
        int rc = qattn_wg_i4w_widen<D>(*packed, stream, err);
        if (rc)
            return rc;
    } else if constexpr (qattn_wg_tma_can(QF, PF, ACC)) {
        constexpr int KS = QATTN_WGMMA_KS(D, QF, QATTN_WGMMA_VF(QF, PF, ACC), QATTN_WGMMA_WIDEN(QF, PF, ACC), KB, QATTN_WGMMA_BMN(NC));
        if (p.wg_tma >= 0)
            tma = qattn_wg_maps_fill<D, KS, qattn_wg_tma_mode(QF)>(p, &maps);
    }
    /* persistent, a CTA a multiprocessor, with the plan's tile counter p.work (a plan holds one where the
     * dispatcher takes the form: qattn_kernels_wg_persist) where the rule allows it (wgmma_form.h) and
     * the loads go by TMA (QATTN_WG_PERSIST_CTAS=n: at most n CTAs, so that the tests' small problems loop) */
    if constexpr (qattn_wg_persist_can(D, QF, PF, ACC)) {
        const int64_t ntiles = (int64_t)grid.x * grid.y * grid.z;
        if (qattn_wg_persist(D, QF, PF, ACC, p.q_fuse, p.mask, p.cu_q != 0 || p.cu_k != 0) && tma && p.work &&
            p.seqlen_k > 0 && ntiles <= INT_MAX) {
            int dev = 0, sms = 0;
            QATTN_MMA_CHECK(cudaGetDevice(&dev), "attn wgmma: the current device");
            QATTN_MMA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
                            "attn wgmma: the multiprocessor count");
            static const char *const cenv = getenv("QATTN_WG_PERSIST_CTAS");
            const int ctas = cenv ? atoi(cenv) : 0;
            if (ctas > 0 && ctas < sms)
                sms = ctas;
            grid = dim3((unsigned)(sms > 0 && sms < ntiles ? sms : ntiles));
            k = &qattn_attn_fwd_wgmma_kernel<D, KB, QF, PF, ACC, NC, true>;
        }
    }
    QATTN_MMA_CHECK(cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                    "attn wgmma: raising the shared-memory limit");
    /* ping-pong of the consumer warpgroups as the plan chose (qattn_kernels_wg_pingpong), or where
     * p.wg_pingpong is 0 as the rule takes it (wgmma_form.h) */
    const int pingpong = NC == 2 && (p.wg_pingpong ? p.wg_pingpong > 0 : qattn_wg_pingpong(D, QF, PF, ACC, p.mask));
    k<<<grid, dim3(QATTN_WGMMA_THREADSN(NC)), smem, (cudaStream_t)stream>>>(p, maps, tma, pingpong);
    QATTN_MMA_CHECK(cudaGetLastError(), "attn wgmma kernel launch");
    return QATTN_OK;
}

template <int D, int KB, int QF, int PF, int ACC>
static int qattn_attn_fwd_wgmma_launch(const qattn_kernels_attn_params *pp, void *stream, qattn_err *err)
{
    const qattn_kernels_attn_params p = *pp;
    int rc = QATTN_WGMMA_8BIT(QF) ? qattn_attn_fwd_mma_check<D, QF, KB, 1, PF, ACC>(p, err)
                                  : qattn_attn_fwd_wgmma16_check<D, KB>(p, err);
    if (rc || p.seqlen_q <= 0)
        return rc;
    const int cc = qattn_kernels_dev_cc();
    if (cc != 90 || !strstr(QATTN_KERNELS_ARCHS, "sm_90a"))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "attn wgmma: needs an sm_90 GPU and a build for sm_90a (GPU sm_%d, built for %s)", cc,
                             QATTN_KERNELS_ARCHS);
    if constexpr (QF == QATTN_FMT_INT4) {
        if (p.q_mean) { /* smooth=q: the dS plane first (wgmma_dsq.h) */
            if (!p.ds || p.ds_ld % QATTN_DSQ_KEYS || p.ds_ld < p.seqlen_k ||
                p.nqb < (p.seqlen_q + p.qblock - 1) / p.qblock)
                return qattn_err_set(err, QATTN_ERR_ARG,
                                     "attn wgmma: smooth=q needs the dS plane (params ds, qattn_kernels_attn_ds_bytes; "
                                     "ds_ld %lld for %d keys)",
                                     (long long)p.ds_ld, p.seqlen_k);
            if ((rc = qattn_dsq_run(&p, D, stream, err)))
                return rc;
        }
    }
    /* the block form: p.wg_form (the plan's: qattn_kernels_wg_form), or where it is 0 the rule
     * (wgmma_form.h) for instances with the one-warpgroup form, else the instance's consumer warpgroups
     * (qattn_wg_nc); two for a fused Q (wgmma_qfuse.h: groups inside a 128-row tile) */
    if (!p.q_fuse) {
        const int form = qattn_wg_form_run(D, KB, QF, PF, ACC, p.wg_form, p.mask, p.seqlen_k,
                                           qattn_wg_tma_lengths(p.cu_k != 0, p.seqlen_k));
        if constexpr (qattn_wg_solo_can(D, KB, QF, PF, ACC))
            if (form == QATTN_WG_FORM_SOLO)
                return qattn_attn_fwd_wgsolo_launch<D, KB, QF, PF, ACC>(p, stream, err);
        if constexpr (qattn_wg_three(QF, KB)) {
            /* the widened int4 form (three consumer warpgroups) where the plan chose it (p.wg_i4w) and the
             * codes' layout and the maps allow, else the unpacking producer */
            if constexpr (qattn_wg_i4w_can(QF, PF, ACC)) {
                if (form == QATTN_WG_FORM_NC3 && p.wg_i4w > 0 && p.wg_tma >= 0 && qattn_wg_i4w_takes(p) &&
                    qattn_wg_tma_lengths(p.cu_k != 0, p.seqlen_k)) {
                    qattn_kernels_attn_params w;
                    qattn_wg_i4w_params(p, &w);
                    rc = p.q_mean ? qattn_attn_fwd_wgmma_launch_nc<D, KB, QF, PF, ACC, 3, 2>(w, stream, err, &p)
                                  : qattn_attn_fwd_wgmma_launch_nc<D, KB, QF, PF, ACC, 3, 1>(w, stream, err, &p);
                    if (rc <= 0)
                        return rc;
                }
            }
            if (form == QATTN_WG_FORM_NC3)
                return qattn_attn_fwd_wgmma_launch_nc<D, KB, QF, PF, ACC, 3>(p, stream, err);
        }
    }
    return qattn_attn_fwd_wgmma_launch_nc<D, KB, QF, PF, ACC, 2>(p, stream, err);
}

/* one instance: extern "C" launch function NAME for head dim D, key blocks
 * of KB keys, Q / K format QF (QATTN_FMT_INT8, INT4, E4M3: the quantized
 * schemes; FP16 / BF16: the baseline), P / V format PF (E4M3, INT8 or FP16
 * after 8-bit Q.K; QF for the baseline) and accumulator ACC (QATTN_ACC_*) */
#define QATTN_ATTN_FWD_WGMMA_INSTANCE(D, KB, QF, PF, ACC, NAME)                            \
    extern "C" int NAME(const qattn_kernels_attn_params *p, void *stream, qattn_err *err) \
    {                                                                                      \
        return qattn_attn_fwd_wgmma_launch<D, KB, QF, PF, ACC>(p, stream, err);           \
    }

#endif
