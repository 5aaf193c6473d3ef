/* The widened int4 form of the wgmma attention instances (attn_fwd_wgmma.h,
 * params wg_i4w): a pass widens the packed int4 Q and K codes to int8 bytes
 * (16 x the codes, as the unpacking producer writes them) into the plan's
 * scratch i4w, and the kernel then reads them as int8 codes, K by TMA like
 * the 8-bit instances, with smooth=q's dS rows by TMA too. NVIDIA only. */
#ifndef QATTN_KERNELS_WGMMA_I4W_H
#define QATTN_KERNELS_WGMMA_I4W_H

#include "attn_fwd_mma.h"  /* QATTN_MMA_CHECK */
#include "qattn_kernels.h" /* qattn_kernels_attn_params */
#include "wgmma_form.h"    /* qattn_wg_i4w_qbytes */
#include "wgmma_keys.h"    /* qattn_wg_unpack_i4 */

/* rows of packed codes (D / 2 bytes at src + b sb + h sh + t st) to rows of D bytes at dst, [heads,
 * nseq, seqlen, D]; a thread 16 packed bytes a step */
template <int D>
__global__ void __launch_bounds__(256) qattn_wg_i4w_kernel(const uint8_t *src, int64_t sb, int64_t sh, int64_t st,
                                                           uint8_t *dst, int heads, int nseq, int seqlen)
{
    constexpr int per = D / 32, d = D; /* 16-byte packed chunks a row */
    const int64_t n = (int64_t)heads * nseq * seqlen * per;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / per, hb = r / seqlen;
        const int c = (int)(e % per), t = (int)(r % seqlen), b = (int)(hb % nseq), h = (int)(hb / nseq);
        const uint4 w = *(const uint4 *)(src + b * sb + h * sh + t * st + 16 * c);
        uint4 a, z;
        qattn_wg_unpack_i4(w.x, &a.x, &a.y);
        qattn_wg_unpack_i4(w.y, &a.z, &a.w);
        qattn_wg_unpack_i4(w.z, &z.x, &z.y);
        qattn_wg_unpack_i4(w.w, &z.z, &z.w);
        uint4 *out = (uint4 *)(dst + r * d + 32 * c);
        out[0] = a;
        out[1] = z;
    }
}

/* where the widened form can take p's packed codes: equal lengths, d a multiple of 32, 16-byte
 * aligned rows (strides in bytes, every one positive) */
static inline int qattn_wg_i4w_takes(const qattn_kernels_attn_params &p)
{
    auto rows_ok = [](const void *x, int64_t sb, int64_t sh, int64_t st, int nseq) {
        return !((uintptr_t)x % 16) && st > 0 && sh > 0 && (nseq == 1 || sb > 0) && !((sb | sh | st) % 16);
    };
    return p.i4w && !p.cu_q && !p.cu_k && p.d % 32 == 0 && rows_ok(p.q, p.q_sb, p.q_sh, p.q_st, p.nseq) &&
           rows_ok(p.k, p.k_sb, p.k_sh, p.k_st, p.nseq);
}

/* w = p reading the widened codes (int8 code strides of [heads, nseq, seqlen, d]) in p.i4w
 * (qattn_wg_i4w_bytes' layout, wgmma_form.h) */
static inline void qattn_wg_i4w_params(const qattn_kernels_attn_params &p, qattn_kernels_attn_params *w)
{
    *w = p;
    uint8_t *wq = (uint8_t *)p.i4w, *wk = wq + qattn_wg_i4w_qbytes(p.hq, p.nseq, p.seqlen_q, p.d);
    w->q = wq, w->q_st = p.d, w->q_sb = (int64_t)p.seqlen_q * p.d, w->q_sh = (int64_t)p.nseq * w->q_sb;
    w->k = wk, w->k_st = p.d, w->k_sb = (int64_t)p.seqlen_k * p.d, w->k_sh = (int64_t)p.nseq * w->k_sb;
}

/* p's packed Q and K codes (head dim D) widened into p.i4w on stream (qattn_wg_i4w_params' layout) */
template <int D>
static int qattn_wg_i4w_widen(const qattn_kernels_attn_params &p, void *stream, qattn_err *err)
{
    qattn_kernels_attn_params w;
    qattn_wg_i4w_params(p, &w);
    const struct {
        const void *src;
        int64_t sb, sh, st;
        const void *dst;
        int heads, seqlen;
    } ops[2] = {{p.q, p.q_sb, p.q_sh, p.q_st, w.q, p.hq, p.seqlen_q}, {p.k, p.k_sb, p.k_sh, p.k_st, w.k, p.hkv, p.seqlen_k}};
    for (int i = 0; i < 2; i++) {
        const int64_t n = (int64_t)ops[i].heads * p.nseq * ops[i].seqlen * (D / 32);
        if (n > 0) {
            const int64_t blocks = (n + 255) / 256;
            qattn_wg_i4w_kernel<D><<<(unsigned)(blocks < (1 << 20) ? blocks : (1 << 20)), 256, 0, (cudaStream_t)stream>>>(
                (const uint8_t *)ops[i].src, ops[i].sb, ops[i].sh, ops[i].st, (uint8_t *)ops[i].dst, ops[i].heads, p.nseq,
                ops[i].seqlen);
            QATTN_MMA_CHECK(cudaGetLastError(), "attn wgmma: the int4 codes' widening pass");
        }
    }
    return QATTN_OK;
}

#endif
