/* TMA maps of the wgmma attention kernels' key blocks (attn_fwd_wgsolo.h,
 * attn_fwd_wgmma.h): made on the host for a launch where the layout
 * allows, and the boxes of one stage issued by one thread. NVIDIA only. */
#ifndef QATTN_KERNELS_WGMMA_TMA_H
#define QATTN_KERNELS_WGMMA_TMA_H

#include <cuda.h> /* CUtensorMap */

#include "mma_nvidia.h" /* qattn_tma_load4 / 5 */

/* 8-bit codes: K (5-D: channels, then rows e, i, u, 16-row groups with strides 1, 4, 2, 16 rows, so
 * that a box lands in the sigma order) and V^T (4-D: keys, channels, sequences, heads); 16-bit rows
 * (the baselines): K and V (4-D: channels, rows, sequences, heads; a box is 64 channels, one column
 * slab of the tile) */
struct qattn_wg_maps {
    CUtensorMap k, v;
};

/* the producer form's instances whose key blocks TMA can load (8-bit K and V^T codes read as they
 * are; the baselines' 16-bit rows); not the unpacking producer's, nor sage1-b's fp16 V rows in the
 * sigma order */
static constexpr QATTN_HD bool qattn_wg_tma_can(int qf, int pf, int acc)
{
    return ((qf == QATTN_FMT_INT8 || qf == QATTN_FMT_E4M3) &&
            ((pf == QATTN_FMT_E4M3 && acc != QATTN_ACC_FP32) || pf == QATTN_FMT_INT8)) ||
           ((qf == QATTN_FMT_FP16 || qf == QATTN_FMT_BF16) && pf == qf);
}

/* cuTensorMapEncodeTiled through the runtime (no link to the driver library); NULL where missing */
typedef CUresult (*qattn_tmap_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                         const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                         CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static qattn_tmap_encode_fn qattn_tmap_encoder(void)
{
    static qattn_tmap_encode_fn fn = NULL;
    static int tried = 0;
    if (!tried) {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (qattn_tmap_encode_fn)f;
        tried = 1;
    }
    return fn;
}

/* the TMA maps of p's 8-bit K and V^T codes where the layout allows: K's
 * heads (and sequences) start on 16-row groups of one array [hkv, T, D] (T % 16 == 0, no varlen),
 * V^T [hkv, nseq, D, npad]; 0 when it does not (the cp.async form runs) */
template <int D, int KB>
static int qattn_wg_maps_fill8(const qattn_kernels_attn_params &p, qattn_wg_maps *m)
{
    const qattn_tmap_encode_fn enc = qattn_tmap_encoder();
    const int64_t kst = p.k_st, rows16 = 16 * kst;
    if (!enc || p.cu_k || kst < D || p.k_sh <= 0 || p.k_sh % rows16 || (p.nseq > 1 && (p.k_sb <= 0 || p.k_sb % rows16)) ||
        (int64_t)(p.nseq - 1) * p.k_sb + (int64_t)p.seqlen_k * kst > p.k_sh || p.v_sb <= 0 || p.v_sh <= 0 ||
        p.v_st % 16 || p.v_sb % 16 || p.v_sh % 16 || (uintptr_t)p.k % 16 || (uintptr_t)p.v % 16)
        return 0;
    const CUtensorMapSwizzle swk = D == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
    const CUtensorMapSwizzle swv = KB == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
    /* K: channels, row e (1 row), i (4 rows), u (2 rows), 16-row group: smem row 16h + 8u + 2i + e
     * holds key 16h + 4i + 2u + e, the sigma order */
    const cuuint64_t kdim[5] = {(cuuint64_t)D, 2, 4, 2, (cuuint64_t)(p.hkv * (p.k_sh / kst) / 16)};
    const cuuint64_t kstr[4] = {(cuuint64_t)kst, (cuuint64_t)(4 * kst), (cuuint64_t)(2 * kst), (cuuint64_t)rows16};
    const cuuint32_t kbox[5] = {(cuuint32_t)D, 2, 4, 2, (cuuint32_t)(KB / 16)}, one[5] = {1, 1, 1, 1, 1};
    const cuuint64_t vdim[4] = {(cuuint64_t)p.v_st, (cuuint64_t)D, (cuuint64_t)p.nseq, (cuuint64_t)p.hkv};
    const cuuint64_t vstr[3] = {(cuuint64_t)p.v_st, (cuuint64_t)p.v_sb, (cuuint64_t)p.v_sh};
    const cuuint32_t vbox[4] = {(cuuint32_t)KB, (cuuint32_t)D, 1, 1};
    return enc(&m->k, CU_TENSOR_MAP_DATA_TYPE_UINT8, 5, (void *)p.k, kdim, kstr, kbox, one, CU_TENSOR_MAP_INTERLEAVE_NONE, swk,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS &&
           enc(&m->v, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, (void *)p.v, vdim, vstr, vbox, one, CU_TENSOR_MAP_INTERLEAVE_NONE, swv,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* 16-bit K and V rows (the baselines) where the layout allows: no varlen, rows of 16-byte strides
 * (the 16-bit checks), every stride positive; rows past a sequence's end read as zeros */
template <int D, int KS>
static int qattn_wg_maps_fill16(const qattn_kernels_attn_params &p, qattn_wg_maps *m)
{
    const qattn_tmap_encode_fn enc = qattn_tmap_encoder();
    if (!enc || p.cu_k || p.k_sb <= 0 || p.k_sh <= 0 || p.v_sb <= 0 || p.v_sh <= 0)
        return 0;
    const cuuint32_t box[4] = {64, (cuuint32_t)KS, 1, 1}, one[4] = {1, 1, 1, 1};
    const cuuint64_t dim[4] = {(cuuint64_t)D, (cuuint64_t)p.seqlen_k, (cuuint64_t)p.nseq, (cuuint64_t)p.hkv};
    const cuuint64_t kstr[3] = {(cuuint64_t)p.k_st * 2, (cuuint64_t)p.k_sb * 2, (cuuint64_t)p.k_sh * 2};
    const cuuint64_t vstr[3] = {(cuuint64_t)p.v_st * 2, (cuuint64_t)p.v_sb * 2, (cuuint64_t)p.v_sh * 2};
    return enc(&m->k, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)p.k, dim, kstr, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS &&
           enc(&m->v, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)p.v, dim, vstr, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* one thread: key block j0 (KS keys) of sequence b, kv head hk into the stage at shared address dst
 * (K, then the V tile at dst + KS D ES), on mbarrier bar; 8-bit (Q8): K's box at 16-row group kgrp0 +
 * j0 / 16 of the map (the head's first: qattn_wg_maps_fill8) and V^T's; 16-bit: D / 64 boxes each,
 * one a column slab of KS rows of 128 bytes */
template <int D, int KS, bool Q8>
static __device__ __forceinline__ void qattn_wg_tma_stage(uint32_t dst, const qattn_wg_maps &m, uint32_t bar, int j0,
                                                          int kgrp0, int b, int hk)
{
    if constexpr (Q8) {
        qattn_tma_load5(dst, &m.k, bar, 0, 0, 0, 0, kgrp0 + (j0 >> 4));
        qattn_tma_load4(dst + KS * D, &m.v, bar, j0, 0, b, hk);
    } else {
        (void)kgrp0;
#pragma unroll
        for (int x = 0; x < D / 64; x++) {
            qattn_tma_load4(dst + (uint32_t)(x * KS * 128), &m.k, bar, 64 * x, j0, b, hk);
            qattn_tma_load4(dst + (uint32_t)(KS * D * 2 + x * KS * 128), &m.v, bar, 64 * x, j0, b, hk);
        }
    }
}

#endif
