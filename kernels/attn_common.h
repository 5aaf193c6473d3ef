/* What the attention kernels of every path share (portable, mma, wgmma,
 * mfma): where a sequence's tokens are. */
#ifndef QATTN_KERNELS_ATTN_COMMON_H
#define QATTN_KERNELS_ATTN_COMMON_H

#include <stdint.h>

#include "hip_port.h"
#include "qattn/error.h"    /* qattn_err_set */
#include "qattn/numerics.h" /* QATTN_NUM_FN */

/* sequence b's first token and length, from cu (the [nseq + 1] offsets of
 * variable lengths) or, for cu == NULL, equal lengths n (the first token
 * then counted by the batch stride) */
QATTN_NUM_FN void qattn_kseq(const int *cu, int b, int n, int64_t *t0, int *len)
{
    *t0 = cu ? cu[b] : 0;
    *len = cu ? cu[b + 1] - cu[b] : n;
}

/* what every attention launcher checks first: the instance's head dim d_inst,
 * and heads (hq a multiple of hkv) and a batch the grid's y and z take;
 * what = the path, for the message */
static inline int qattn_attn_check_grid(int d_inst, int d, int hq, int hkv, int nseq, const char *what, qattn_err *err)
{
    if (d != d_inst)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: instance for head dim %d called with d = %d", what, d_inst, d);
    if (hkv <= 0 || hq % hkv || hq > 65535 || nseq <= 0 || nseq > 65535)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: bad heads %d / %d or batch %d", what, hq, hkv, nseq);
    return QATTN_OK;
}

#endif
