/* smooth=q's dS plane for the int4 wgmma instances (attn_fwd_wgmma.h): for
 * every Q block l and key j of a sequence, dS c2 = (mean of Q block l) .
 * (K_j - kmean) x c2, written by one pass before the attention kernel, so
 * that the attention producer copies a few rows of floats a key block
 * instead of the block's fp16 input K (4x the packed K's bytes) and an mma.
 * NVIDIA only (mma.sync f16, sm_80+). */
#ifndef QATTN_KERNELS_WGMMA_DSQ_H
#define QATTN_KERNELS_WGMMA_DSQ_H

#include <cuda_fp16.h>

#include "attn_common.h"   /* qattn_kseq */
#include "attn_fwd_mma.h"  /* QATTN_MMA_CHECK */
#include "mma_nvidia.h"    /* cp.async, ldmatrix, mma.sync */
#include "qattn_kernels.h" /* qattn_kernels_attn_params */

#define QATTN_DSQ_KEYS 128 /* keys a block (and the plane's row multiple, params ds_ld) */

/* Block (key tile, head h, sequence b), 4 warps: the tile's fp16 input K
 * rows (zero past the sequence) in shared memory once, then Q blocks 8 a
 * warp, 32 a step. A warp's m16n8k16 A tile: row l = the fp16 high part of
 * block l's mean times 2^(14 - e) (e: the exponent of the block's largest
 * |mean|, so |.| < 2^14), row l + 8 the low part (hi + lo: about 22 bits),
 * built in registers (lane 4g + i holds channels 16kk + 2i, +1, +8, +9 of
 * block g); B = the K rows; fp32 accumulation. Lane 4g + i adds rows g and
 * g + 8, subtracts C_g = (hi + lo) . kmean and scales by c2 2^(e - 14). */
template <int D>
__global__ void __launch_bounds__(128) qattn_dsq_kernel(qattn_kernels_attn_params p)
{
#if QATTN_MMA_SM80
    constexpr int KP = 2 * D + 16, ICH = D / 8, KK = D / 16, NT = QATTN_DSQ_KEYS / 8;
    __shared__ __align__(16) uint8_t sK[QATTN_DSQ_KEYS * KP]; /* [keys][KP bytes] fp16 rows, padded */
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qi = lane & 3;
    const int j0 = (int)blockIdx.x * QATTN_DSQ_KEYS, h = (int)blockIdx.y, b = (int)blockIdx.z;
    const int hk = h / (p.hq / p.hkv);
    int64_t tq0, tk0;
    int sq, sk;
    qattn_kseq(p.cu_q, b, p.seqlen_q, &tq0, &sq);
    qattn_kseq(p.cu_k, b, p.seqlen_k, &tk0, &sk);
    (void)tq0;
    const int nqb = (sq + p.qblock - 1) / p.qblock; /* this sequence's Q blocks (the plane has p.nqb rows) */
    const uint16_t *kg = (const uint16_t *)p.k_in + (int64_t)b * p.kin_sb + tk0 * p.kin_st + (int64_t)hk * p.kin_sh;
#pragma unroll 4
    for (int e = tid; e < QATTN_DSQ_KEYS * ICH; e += 128) {
        const int r = e / ICH, ch = e % ICH, ok = j0 + r < sk;
        qattn_cp_async16(sK + r * KP + ch * 16, ok ? kg + (int64_t)(j0 + r) * p.kin_st + ch * 8 : kg, ok ? 16 : 0);
    }
    qattn_cp_async_commit();
    qattn_cp_async_wait<0>();
    __syncthreads();

    const float *qm0 = p.q_mean + ((int64_t)h * p.nseq + b) * p.nqb * D;
    const float *km = p.k_mean ? p.k_mean + ((int64_t)hk * p.nseq + b) * D : (const float *)0;
    float *ds0 = p.ds + ((int64_t)h * p.nseq + b) * p.nqb * p.ds_ld + j0;
    for (int l0 = 8 * warp; l0 < p.nqb; l0 += 32) {
        const int l = l0 + g, live = l < nqb; /* past the sequence's Q blocks: mean 0 */
        const float *qm = qm0 + (int64_t)(live ? l : 0) * D;
        float mx = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KK; kk++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
                const int c = 16 * kk + 2 * qi + (x & 1) + 8 * (x >> 1);
                mx = fmaxf(mx, live ? fabsf(qm[c]) : 0.0f);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        int ex = 0;
        (void)frexpf(mx, &ex);
        const float sc = ldexpf(1.0f, 14 - ex);
        uint32_t af[KK][4];
        float cl = 0.0f; /* C_l in the A tile's units */
#pragma unroll
        for (int kk = 0; kk < KK; kk++)
#pragma unroll
            for (int x = 0; x < 4; x += 2) { /* channels c, c + 1 */
                const int c = 16 * kk + 2 * qi + 8 * (x >> 1);
                const float m0 = live ? qm[c] * sc : 0.0f, m1 = live ? qm[c + 1] * sc : 0.0f;
                const __half h0 = __float2half_rn(m0), h1 = __float2half_rn(m1);
                const __half o0 = __float2half_rn(m0 - __half2float(h0)), o1 = __float2half_rn(m1 - __half2float(h1));
                af[kk][x] = (uint32_t)__half_as_ushort(h0) | (uint32_t)__half_as_ushort(h1) << 16;     /* row g */
                af[kk][x + 1] = (uint32_t)__half_as_ushort(o0) | (uint32_t)__half_as_ushort(o1) << 16; /* row g + 8 */
                if (km)
                    cl += (__half2float(h0) + __half2float(o0)) * km[c] + (__half2float(h1) + __half2float(o1)) * km[c + 1];
            }
        cl += __shfl_xor_sync(0xffffffffu, cl, 1);
        cl += __shfl_xor_sync(0xffffffffu, cl, 2);
        const float dk = ldexpf(p.c2, ex - 14);
        float acc[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
            acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KK; kk++)
#pragma unroll
            for (int n = 0; n < NT; n += 2) { /* matrices: n-tile n (channels 16kk.., 16kk + 8..), n-tile n + 1 */
                uint32_t bf[4];
                const int key = 8 * n + 8 * (lane >> 4) + (lane & 7);
                qattn_ldmatrix_x4(bf, sK + key * KP + (2 * kk + ((lane >> 3) & 1)) * 16);
                qattn_mma_m16n8k16_f16_f32(acc[n], af[kk], bf, acc[n]);
                qattn_mma_m16n8k16_f16_f32(acc[n + 1], af[kk], bf + 2, acc[n + 1]);
            }
        if (l < p.nqb) {
            float *d = ds0 + (int64_t)l * p.ds_ld + 2 * qi;
#pragma unroll
            for (int n = 0; n < NT; n++)
                *(float2 *)(d + 8 * n) =
                    make_float2(((acc[n][0] + acc[n][2]) - cl) * dk, ((acc[n][1] + acc[n][3]) - cl) * dk);
        }
    }
#else
    (void)p;
#endif
}

/* the plane of p (params ds, ds_ld), written on stream */
template <int D>
static int qattn_dsq_launch(const qattn_kernels_attn_params &p, void *stream, qattn_err *err)
{
    const dim3 grid((unsigned)(p.ds_ld / QATTN_DSQ_KEYS), (unsigned)p.hq, (unsigned)p.nseq);
    qattn_dsq_kernel<D><<<grid, dim3(128), 0, (cudaStream_t)stream>>>(p);
    QATTN_MMA_CHECK(cudaGetLastError(), "attn wgmma: the dS pass");
    return QATTN_OK;
}

#endif
