/* Private: iterate over the packed sequences of a head. */
#ifndef QATTN_SEGMENTS_H
#define QATTN_SEGMENTS_H

#include "qattn/attn.h"

/* Check h's shapes and seqlens; fills *nseg (1 when no seqlens). */
int qattn_head_check(const qattn_head *h, size_t *nseg, qattn_err *err);
/* qattn_head_check, then BLAS ready and *scale <= 0 made 1/sqrt(d): the
 * start of a float64 pass over a head */
int qattn_head_begin(const qattn_head *h, double *scale, size_t *nseg, qattn_err *err);
/* offset and length of segment s (q and k share them when packed) */
void qattn_head_segment(const qattn_head *h, size_t s, size_t *off, size_t *sq, size_t *sk);

#endif
