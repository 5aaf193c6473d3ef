/* smooth=q's dS pass (wgmma_dsq.h) in its own translation unit: compiled once a head dim at ptxas
 * -O3 (the int4 instances that launch it stay at -O1; the pass at -O3 takes 0.93x its time there,
 * H200 2026-12-02, kernels/logs/h200_dsq_forms.txt) */
#include "wgmma_dsq.h"

template <int D>
static int dsq_launch(const qattn_kernels_attn_params &p, void *stream, qattn_err *err)
{
    constexpr size_t smem = 2 * QATTN_DSQ_KEYS * QATTN_DSQ_ROWB(D);
    void (*k)(qattn_kernels_attn_params) = &qattn_dsq_kernel<D>;
    QATTN_MMA_CHECK(cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                    "attn wgmma: the dS pass's shared-memory limit");
    const int qgroups = (p.nqb + QATTN_DSQ_QB - 1) / QATTN_DSQ_QB;
    const dim3 grid((unsigned)(qgroups * qattn_dsq_ranges(p.ds_ld)), (unsigned)p.hq, (unsigned)p.nseq);
    k<<<grid, dim3(128), smem, (cudaStream_t)stream>>>(p);
    QATTN_MMA_CHECK(cudaGetLastError(), "attn wgmma: the dS pass");
    return QATTN_OK;
}

int qattn_dsq_run(const qattn_kernels_attn_params *p, int d, void *stream, qattn_err *err)
{
#if QATTN_KERNELS_WITH_D128
    if (d == 128)
        return dsq_launch<128>(*p, stream, err);
#endif
#if QATTN_KERNELS_WITH_D64
    if (d == 64)
        return dsq_launch<64>(*p, stream, err);
#endif
    return qattn_err_set(err, QATTN_ERR_ARG, "attn wgmma: no dS pass for d = %d in this build", d);
}
