/* TMA maps of the wgmma attention kernels' key blocks (attn_fwd_wgsolo.h,
 * attn_fwd_wgmma.h): made on the host for a launch where the layout
 * allows, and the boxes of one stage issued by one thread. NVIDIA only. */
#ifndef QATTN_KERNELS_WGMMA_TMA_H
#define QATTN_KERNELS_WGMMA_TMA_H

#include <cuda.h>   /* CUtensorMap */

#include "wgmma_form.h"   /* qattn_wg_tma_rows16 */
#include "wgmma_nvidia.h" /* qattn_tma_load4 / 5 */

/* by the mode of an instance (qattn_wg_tma_mode): 0, 8-bit codes: K (5-D: channels, then rows e, i,
 * u, 16-row groups with strides 1, 4, 2, 16 rows, so that a box lands in the sigma order) and V^T
 * (4-D: keys, channels, sequences, heads); 1, 16-bit rows (the baselines): K and V (4-D: channels,
 * rows, sequences, heads; a box is 64 channels, one column slab of the tile) */
struct qattn_wg_maps {
    CUtensorMap k, v;
    int k_seq, k_head; /* mode 0: K's rows a sequence and a head apart (no division in the kernel) */
    CUtensorMap ds;    /* the widened int4 form with smooth=q: the dS plane's rows (qattn_wg_map_ds) */
};

/* the producer form's instances whose key blocks TMA can load (8-bit K and V^T codes read as they
 * are; the baselines' 16-bit rows); not the unpacking producer's, nor sage1-b's (its int8 K and fp16
 * V rows in the sigma order by TMA ran 0.995-1.018x its cp.async, H200 2026-11-28) */
static constexpr QATTN_HD bool qattn_wg_tma_can(int qf, int pf, int acc)
{
    return ((qf == QATTN_FMT_INT8 || qf == QATTN_FMT_E4M3) &&
            ((pf == QATTN_FMT_E4M3 && acc != QATTN_ACC_FP32) || pf == QATTN_FMT_INT8)) ||
           ((qf == QATTN_FMT_FP16 || qf == QATTN_FMT_BF16) && pf == qf);
}
static constexpr QATTN_HD int qattn_wg_tma_mode(int qf) { return qf == QATTN_FMT_FP16 || qf == QATTN_FMT_BF16; }

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

/* 8-bit K rows in the sigma order: a 5-D map (channels, then rows e, i, u and 16-row groups with
 * strides 1, 4, 2, 16 rows: smem row 16h + 8u + 2i + e holds key 16h + 4i + 2u + e) over the array
 * [heads, rows], boxes of D channels x KS rows; 0 where a head (and a sequence) does not start on a
 * 16-row group of one array (of fewer than 2^31 rows) */
template <int D, int KS>
static int qattn_wg_map_sigma(CUtensorMap *m, const qattn_kernels_attn_params &p)
{
    const qattn_tmap_encode_fn enc = qattn_tmap_encoder();
    const int64_t st = p.k_st, sb = p.k_sb, sh = p.k_sh, rows16 = 16 * st;
    if (!enc || p.cu_k || st < D || st % 16 || sh <= 0 || sh % rows16 || (p.nseq > 1 && (sb <= 0 || sb % rows16)) ||
        (int64_t)(p.nseq - 1) * sb + (int64_t)p.seqlen_k * st > sh || (int64_t)p.hkv * (sh / st) >= ((int64_t)1 << 31) ||
        (uintptr_t)p.k % 16)
        return 0;
    const cuuint64_t dim[5] = {(cuuint64_t)D, 2, 4, 2, (cuuint64_t)(p.hkv * (sh / st) / 16)};
    const cuuint64_t str[4] = {(cuuint64_t)st, (cuuint64_t)(4 * st), (cuuint64_t)(2 * st), (cuuint64_t)rows16};
    const cuuint32_t box[5] = {(cuuint32_t)D, 2, 4, 2, (cuuint32_t)(KS / 16)}, one[5] = {1, 1, 1, 1, 1};
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 5, (void *)p.k, dim, str, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
               D == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* the TMA maps of p's key blocks (KS keys) for mode MODE (qattn_wg_tma_mode) where the layout allows,
 * else 0 (the cp.async loads run): no varlen; 0: K's heads (and sequences) start on 16-row groups of
 * one array [hkv, T, D] (rows past a sequence's end in its last key block are read, codes whose
 * scores the masks drop), V^T [hkv, nseq, D, npad]; 1: 16-bit rows, every stride positive, rows past
 * a sequence's end read as zeros */
template <int D, int KS, int MODE>
static int qattn_wg_maps_fill(const qattn_kernels_attn_params &p, qattn_wg_maps *m)
{
    const qattn_tmap_encode_fn enc = qattn_tmap_encoder();
    if (!enc || p.cu_k)
        return 0;
    if constexpr (MODE == 1) {
        if (!qattn_wg_tma_rows16((uintptr_t)p.k, (uintptr_t)p.v, p.k_sb, p.k_sh, p.k_st, p.v_sb, p.v_sh, p.v_st, 0))
            return 0;
        const cuuint32_t box[4] = {64, (cuuint32_t)KS, 1, 1}, one[4] = {1, 1, 1, 1};
        const cuuint64_t dim[4] = {(cuuint64_t)D, (cuuint64_t)p.seqlen_k, (cuuint64_t)p.nseq, (cuuint64_t)p.hkv};
        const cuuint64_t kstr[3] = {(cuuint64_t)p.k_st * 2, (cuuint64_t)p.k_sb * 2, (cuuint64_t)p.k_sh * 2};
        const cuuint64_t vstr[3] = {(cuuint64_t)p.v_st * 2, (cuuint64_t)p.v_sb * 2, (cuuint64_t)p.v_sh * 2};
        return enc(&m->k, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)p.k, dim, kstr, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS &&
               enc(&m->v, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)p.v, dim, vstr, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    } else {
        if (!qattn_wg_map_sigma<D, KS>(&m->k, p))
            return 0;
        m->k_seq = (int)(p.k_sb / p.k_st), m->k_head = (int)(p.k_sh / p.k_st);
        if (p.v_sb <= 0 || p.v_sh <= 0 || p.v_st % 16 || p.v_sb % 16 || p.v_sh % 16 || (uintptr_t)p.v % 16)
            return 0;
        const CUtensorMapSwizzle swv = KS == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
        const cuuint64_t vdim[4] = {(cuuint64_t)p.v_st, (cuuint64_t)D, (cuuint64_t)p.nseq, (cuuint64_t)p.hkv};
        const cuuint64_t vstr[3] = {(cuuint64_t)p.v_st, (cuuint64_t)p.v_sb, (cuuint64_t)p.v_sh};
        const cuuint32_t vbox[4] = {(cuuint32_t)KS, (cuuint32_t)D, 1, 1}, one[4] = {1, 1, 1, 1};
        return enc(&m->v, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, (void *)p.v, vdim, vstr, vbox, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   swv, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    }
}

/* smooth=q's dS plane (params ds: [hq, nseq, nqb, ds_ld] floats) as a 2-D map of rows, boxes of KS keys x
 * rows (a tile's Q blocks: qattn_wg_dsrows; rows past the plane read as zeros); 0 where it cannot */
template <int KS>
static int qattn_wg_map_ds(CUtensorMap *m, const qattn_kernels_attn_params &p, int rows_box)
{
    const qattn_tmap_encode_fn enc = qattn_tmap_encoder();
    const int64_t rows = (int64_t)p.hq * p.nseq * p.nqb;
    if (!enc || !p.ds || (uintptr_t)p.ds % 16 || p.ds_ld % 4 || rows >= ((int64_t)1 << 31))
        return 0;
    const cuuint64_t dim[2] = {(cuuint64_t)p.ds_ld, (cuuint64_t)rows}, str[1] = {(cuuint64_t)p.ds_ld * 4};
    const cuuint32_t box[2] = {(cuuint32_t)KS, (cuuint32_t)rows_box}, one[2] = {1, 1};
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p.ds, dim, str, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) ==
           CUDA_SUCCESS;
}

/* one thread: key block j0 (KS keys) of sequence b, kv head hk into the stage at shared address dst
 * (K, then the V tile at dst + KS D ES), on mbarrier bar, for mode MODE: 0: K's box at 16-row group
 * j0 / 16 of the sequence's rows in its map and V^T's box; 1: D / 64 boxes of K and of V, one a
 * column slab of KS rows of 128 bytes */
template <int D, int KS, int MODE>
static __device__ __forceinline__ void qattn_wg_tma_stage(uint32_t dst, const qattn_wg_maps &m, uint32_t bar, int j0,
                                                          int b, int hk)
{
    if constexpr (MODE == 1) {
#pragma unroll
        for (int x = 0; x < D / 64; x++) {
            qattn_tma_load4(dst + (uint32_t)(x * KS * 128), &m.k, bar, 64 * x, j0, b, hk);
            qattn_tma_load4(dst + (uint32_t)(KS * D * 2 + x * KS * 128), &m.v, bar, 64 * x, j0, b, hk);
        }
    } else {
        qattn_tma_load5(dst, &m.k, bar, 0, 0, 0, 0, ((b * m.k_seq + hk * m.k_head) >> 4) + (j0 >> 4));
        qattn_tma_load4(dst + KS * D, &m.v, bar, j0, 0, b, hk);
    }
}

#endif
