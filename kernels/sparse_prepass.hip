/* Sparse family: the fp8 -> bf16 prepass and its launcher,
 * which the plan of the prepass variant runs before the bf16 kernel. */
#include "sparse_portable.h"

/* the prepass: one thread per 16 channels of a row (16-byte loads, 32-byte
 * stores: consecutive threads, consecutive pieces), codes times the e8m0
 * scale rounded to bf16 (exact in bf16's range), the rope part copied */
static __global__ void __launch_bounds__(256) qattn_sparse_prepass_kernel(qattn_kernels_kvrows src, qattn_kernels_kvrows dst,
                                                                    int64_t rows, int d, int rope)
{
    const int CH = QATTN_KERNELS_SPARSE_SCALE_CH, dn = d - rope, pieces = d / 16;
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= rows * pieces)
        return;
    const int64_t r = x / pieces;
    const int c0 = (int)(x % pieces) * 16;
    uint4 *out = (uint4 *)((uint16_t *)dst.val + r * d + c0);
    if (c0 >= dn) {
        const uint4 *in = (const uint4 *)(src.rope + r * rope + (c0 - dn));
        out[0] = in[0], out[1] = in[1];
        return;
    }
    const float s = qattn_num_e8m0_decode(src.sc[r * QATTN_KERNELS_SPARSE_SC_ROW(dn) + c0 / CH]);
    const uint4 w = *(const uint4 *)((const uint8_t *)src.val + r * dn + c0);
    const uint32_t in[4] = {w.x, w.y, w.z, w.w};
    uint32_t o[8];
    for (int k = 0; k < 8; k++) {
        const uint32_t b = in[k / 2] >> (16 * (k & 1));
        o[k] = (uint32_t)qattn_num_bf16_encode(qattn_num_e4m3_decode((uint8_t)(b & 0xffu)) * s) |
               (uint32_t)qattn_num_bf16_encode(qattn_num_e4m3_decode((uint8_t)((b >> 8) & 0xffu)) * s) << 16;
    }
    const uint4 v0 = {o[0], o[1], o[2], o[3]}, v1 = {o[4], o[5], o[6], o[7]};
    out[0] = v0, out[1] = v1;
}

static int prepass_part(const qattn_kernels_kvrows &src, const qattn_kernels_kvrows &dst, int hkv, int d, int rope,
                        hipStream_t stream, qattn_err *err)
{
    const int64_t rows = src.rows * hkv, threads = rows * (d / 16);
    if (threads == 0)
        return QATTN_OK;
    const unsigned blocks = (unsigned)((threads + 255) / 256);
    hipLaunchKernelGGL(qattn_sparse_prepass_kernel, dim3(blocks), dim3(256), 0, stream, src, dst, rows, d, rope);
    QATTN_DECODE_CHECK(hipGetLastError(), "sparse prepass launch");
    return QATTN_OK;
}

extern "C" int qattn_kernels_sparse_prepass(const qattn_kernels_sparse_kv *src, const qattn_kernels_sparse_kv *dst,
                                            void *stream, qattn_err *err)
{
    if (!src->fp8 || dst->fp8 || src->d != dst->d || src->hkv != dst->hkv || src->pool.rows != dst->pool.rows ||
        src->ext.rows != dst->ext.rows || src->d % 16)
        return qattn_err_set(err, QATTN_ERR_ARG, "sparse prepass: fp8 rows into bf16 rows of the same shape");
    int rc = prepass_part(src->pool, dst->pool, src->hkv, src->d, src->rope, (hipStream_t)stream, err);
    if (!rc)
        rc = prepass_part(src->ext, dst->ext, src->hkv, src->d, src->rope, (hipStream_t)stream, err);
    return rc;
}
