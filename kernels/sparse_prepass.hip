/* Sparse family: the fp8 -> bf16 prepass and its launcher,
 * which the plan of the prepass variant runs before the bf16 kernel. */
#include "sparse_portable.h"

/* the prepass: one thread per 16 channels of a row, codes times the e8m0
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
    uint16_t *out = (uint16_t *)dst.val + r * d + c0;
    if (c0 >= dn) {
        const uint16_t *in = src.rope + r * rope + (c0 - dn);
        for (int c = 0; c < 16; c++)
            out[c] = in[c];
        return;
    }
    const float s = qattn_num_e8m0_decode(src.sc[r * (dn / CH) + c0 / CH]);
    const uint8_t *in = (const uint8_t *)src.val + r * dn + c0;
    for (int c = 0; c < 16; c++)
        out[c] = qattn_num_bf16_encode(qattn_num_e4m3_decode(in[c]) * s);
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
