/* Private: the emulation's P.V accumulation and O updates (emu_pv.c). */
#ifndef QATTN_EMU_PV_H
#define QATTN_EMU_PV_H

#include <stddef.h>

#include "qattn/scheme.h" /* qattn_acc */

/* P.V for keys [j0, j0 + n) into a [d] with acc's rounding (and into the
 * fp32 buffer ob [d] every chunk keys when two-level, else ob NULL and
 * chunk 0); v [n, ld] points at key j0's row, pq [n] the stored P; fp8tc:
 * P and V are e4m3 codes, so acc=fp22 sums them in the fp8 tensor core's
 * 32-key k-steps (else an fp22 cut after every key) */
void qattn_emu_pv_block(qattn_acc acc, int fp8tc, float *a, float *ob, const float *v, size_t ld, const float *pq,
                        size_t n, size_t j0, size_t chunk, size_t d);
/* o [d] += x [d] with the accumulator's rounding (one add per element) */
void qattn_emu_vec_add(qattn_acc acc, float *o, const float *x, size_t d);
/* o [d] *= alpha: fp16 registers by qattn_num_rescale16, fp32 / fp22 ones by an fp32 multiply */
void qattn_emu_vec_scale(qattn_acc acc, float *o, float alpha, size_t d);

#endif
