/* What the attention kernels of every path share (portable, mma, wgmma,
 * mfma): where a sequence's tokens are. */
#ifndef QATTN_KERNELS_ATTN_COMMON_H
#define QATTN_KERNELS_ATTN_COMMON_H

#include <stdint.h>

#include "hip_port.h"
#include "qattn/numerics.h" /* QATTN_NUM_FN */

/* sequence b's first token and length, from cu (the [nseq + 1] offsets of
 * variable lengths) or, for cu == NULL, equal lengths n (the first token
 * then counted by the batch stride) */
QATTN_NUM_FN void qattn_kseq(const int *cu, int b, int n, int64_t *t0, int *len)
{
    *t0 = cu ? cu[b] : 0;
    *len = cu ? cu[b + 1] - cu[b] : n;
}

#endif
