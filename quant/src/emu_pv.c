/* The emulation's P.V accumulation (emulate.c, step 5): O += P V over the
 * keys of one online-softmax block with the accumulator's rounding after
 * every add (fp32, fp22 cut) or k-step (the f16 tensor core's, the fp8 one's
 * for fp22 on e4m3 codes), one- or two-level, and the O adds and rescales
 * between blocks. */
#include <stdint.h>
#include <string.h>

#include "emu_pv.h"
#include "qattn/numerics.h"

#define PV_CB 16 /* channels per register block */

/* One channel block of P.V over the keys of one online-softmax block:
 * a[c] += pq[j] * v[j][c] with the accumulator's rounding after each add,
 * keys in order. Two-level (chunk > 0): every time key j0 + j + 1 reaches a
 * multiple of chunk, a is added into the fp32 buffer ob and restarts at 0.
 * The block of CB accumulators stays in registers across the keys. */
#define PV_BLOCK_BODY(CB, ROUND)                                                \
    do {                                                                        \
        float a_[PV_CB], ob_[PV_CB];                                            \
        for (size_t c = 0; c < CB; c++) {                                       \
            a_[c] = a[c];                                                       \
            ob_[c] = ob ? ob[c] : 0.0f;                                         \
        }                                                                       \
        size_t next = chunk ? chunk - (j0 % chunk) : (size_t)-1;               \
        for (size_t j = 0; j < n; j++) {                                        \
            const float *vr = v + j * ld;                                       \
            float pj = pq[j];                                                   \
            for (size_t c = 0; c < CB; c++)                                     \
                a_[c] = ROUND(a_[c] + pj * vr[c]);                              \
            if (j + 1 == next) {                                                \
                for (size_t c = 0; c < CB; c++) {                               \
                    ob_[c] = ob_[c] + a_[c];                                    \
                    a_[c] = 0.0f;                                               \
                }                                                               \
                next += chunk;                                                  \
            }                                                                   \
        }                                                                       \
        for (size_t c = 0; c < CB; c++) {                                       \
            a[c] = a_[c];                                                       \
            if (ob)                                                             \
                ob[c] = ob_[c];                                                 \
        }                                                                       \
    } while (0)

static inline float round32(float x) { return x; }

/* Full blocks of 16 channels with GCC vector extensions (one zmm or two ymm
 * registers); the rounding is the same bit operation as the scalar path. */
typedef qattn_num_v16f qattn_vf; /* numerics.h's host vectors */
typedef qattn_num_v16u qattn_vu;

static inline qattn_vf vload(const float *p)
{
    qattn_vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, qattn_vf v) { memcpy(p, &v, sizeof v); }

static inline qattn_vf vround32(qattn_vf x) { return x; }

static inline qattn_vf vcut22(qattn_vf x)
{
    qattn_vu u = (qattn_vu)x;
    return (qattn_vf)QATTN_NUM_CUT22_SUM_BITS(u);
}

/* NV independent 16-channel accumulators per key: the adds of one block
 * form a dependent chain, so several blocks in flight hide its latency. */
#define PV_VBODY(VROUND, NV)                                                 \
    do {                                                                     \
        qattn_vf a_[NV], ob_[NV];                                            \
        for (int b = 0; b < NV; b++) {                                       \
            a_[b] = vload(a + 16 * b);                                       \
            ob_[b] = ob ? vload(ob + 16 * b) : (qattn_vf){0};                \
        }                                                                    \
        size_t next = chunk ? chunk - (j0 % chunk) : (size_t)-1;            \
        for (size_t j = 0; j < n; j++) {                                     \
            const float *vr = v + j * ld;                                    \
            float pj = pq[j];                                                \
            for (int b = 0; b < NV; b++)                                     \
                a_[b] = VROUND(a_[b] + pj * vload(vr + 16 * b));             \
            if (j + 1 == next) {                                             \
                for (int b = 0; b < NV; b++) {                               \
                    ob_[b] = ob_[b] + a_[b];                                 \
                    a_[b] = (qattn_vf){0};                                   \
                }                                                            \
                next += chunk;                                               \
            }                                                                \
        }                                                                    \
        for (int b = 0; b < NV; b++) {                                       \
            vstore(a + 16 * b, a_[b]);                                       \
            if (ob)                                                          \
                vstore(ob + 16 * b, ob_[b]);                                 \
        }                                                                    \
    } while (0)

#define PV_BLOCK_FN(NAME, ROUND, VROUND)                                                      \
    static void NAME##_x8(float *a, float *ob, const float *v, size_t ld, const float *pq,   \
                          size_t n, size_t j0, size_t chunk)                              \
    {                                                                                     \
        PV_VBODY(VROUND, 8);                                                              \
    }                                                                                     \
    static void NAME##_x4(float *a, float *ob, const float *v, size_t ld, const float *pq,   \
                          size_t n, size_t j0, size_t chunk)                              \
    {                                                                                     \
        PV_VBODY(VROUND, 4);                                                              \
    }                                                                                     \
    static void NAME##_x1(float *a, float *ob, const float *v, size_t ld, const float *pq,   \
                          size_t n, size_t j0, size_t chunk)                              \
    {                                                                                     \
        PV_VBODY(VROUND, 1);                                                              \
    }                                                                                     \
    static void NAME##_tail(float *a, float *ob, const float *v, size_t ld, const float *pq, \
                            size_t n, size_t j0, size_t chunk, size_t cb)                 \
    {                                                                                     \
        PV_BLOCK_BODY(cb, ROUND);                                                         \
    }

PV_BLOCK_FN(pv32, round32, vround32)
PV_BLOCK_FN(pv22, qattn_num_cut22_sum, vcut22)

typedef void (*pv_fn)(float *, float *, const float *, size_t, const float *, size_t, size_t, size_t);
typedef void (*pv_tail_fn)(float *, float *, const float *, size_t, const float *, size_t, size_t, size_t, size_t);

/* the tensor core's k-steps of ks keys from the block's first key on, a step cut short where a
 * two-level chunk ends (acc=fp16: qattn_num_f16_ksteps, 16 keys; acc=fp22 on e4m3 P and V codes:
 * qattn_num_fp8_ksteps, 32); arguments as qattn_emu_pv_block's */
typedef void (*pv_kstep_fn)(float *acc, int nc, const float *a, const float *b, int bstride, int n);
static void pv_ksteps_block(pv_kstep_fn kstep, size_t ks, float *a, float *ob, const float *v, size_t ld,
                            const float *pq, size_t n, size_t j0, size_t chunk, size_t d)
{
    size_t next = chunk ? chunk - (j0 % chunk) : (size_t)-1;
    for (size_t j = 0; j < n;) {
        size_t end = (j / ks + 1) * ks;
        end = end < n ? end : n;
        end = end < next ? end : next;
        kstep(a, (int)d, pq + j, v + j * ld, (int)ld, (int)(end - j));
        j = end;
        if (j == next) {
            for (size_t c = 0; c < d; c++) {
                ob[c] = ob[c] + a[c];
                a[c] = 0.0f;
            }
            next += chunk;
        }
    }
}

/* P.V for keys [j0, j0 + n) into a [d] (and the fp32 buffer ob [d] when
 * two-level, else NULL); v points at key j0's row, rows ld apart. */
void qattn_emu_pv_block(qattn_acc acc, int fp8tc, float *a, float *ob, const float *v, size_t ld, const float *pq,
                        size_t n, size_t j0, size_t chunk, size_t d)
{
    if (acc == QATTN_ACC_FP16) {
        pv_ksteps_block(qattn_num_f16_ksteps, 16, a, ob, v, ld, pq, n, j0, chunk, d);
        return;
    }
    if (acc == QATTN_ACC_FP22 && fp8tc) {
        pv_ksteps_block(qattn_num_fp8_ksteps, 32, a, ob, v, ld, pq, n, j0, chunk, d);
        return;
    }
    pv_fn x8 = acc == QATTN_ACC_FP32 ? pv32_x8 : pv22_x8;
    pv_fn x4 = acc == QATTN_ACC_FP32 ? pv32_x4 : pv22_x4;
    pv_fn x1 = acc == QATTN_ACC_FP32 ? pv32_x1 : pv22_x1;
    pv_tail_fn tail = acc == QATTN_ACC_FP32 ? pv32_tail : pv22_tail;
    size_t c0 = 0;
    for (; c0 + 128 <= d; c0 += 128)
        x8(a + c0, ob ? ob + c0 : NULL, v + c0, ld, pq, n, j0, chunk);
    for (; c0 + 64 <= d; c0 += 64)
        x4(a + c0, ob ? ob + c0 : NULL, v + c0, ld, pq, n, j0, chunk);
    for (; c0 + 16 <= d; c0 += 16)
        x1(a + c0, ob ? ob + c0 : NULL, v + c0, ld, pq, n, j0, chunk);
    if (c0 < d)
        tail(a + c0, ob ? ob + c0 : NULL, v + c0, ld, pq, n, j0, chunk, d - c0);
}

/* O[c] += x[c] with the accumulator's rounding (one add per element) */
void qattn_emu_vec_add(qattn_acc acc, float *o, const float *x, size_t d)
{
    switch (acc) {
    case QATTN_ACC_FP32:
        for (size_t c = 0; c < d; c++)
            o[c] = o[c] + x[c];
        break;
    case QATTN_ACC_FP22:
        for (size_t c = 0; c < d; c++)
            o[c] = qattn_num_cut22_sum(o[c] + x[c]);
        break;
    case QATTN_ACC_FP16:
        for (size_t c = 0; c < d; c++)
            o[c] = qattn_num_round16(o[c] + x[c]);
        break;
    }
}

/* rescale by alpha: fp16 registers by alpha rounded to fp16 and one f16
 * multiply (qattn_num_rescale16), fp32/fp22 ones by an fp32 multiply */
void qattn_emu_vec_scale(qattn_acc acc, float *o, float alpha, size_t d)
{
    if (alpha == 1.0f)
        return;
    if (acc == QATTN_ACC_FP16)
        for (size_t c = 0; c < d; c++)
            o[c] = qattn_num_rescale16(o[c], alpha);
    else
        for (size_t c = 0; c < d; c++)
            o[c] = o[c] * alpha;
}
