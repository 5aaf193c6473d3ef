/* Schemes: how each operand is stored and how products accumulate.
 *
 *   q=FMT[@GROUP] k=FMT[@GROUP] p=FMT[@static] v=FMT[@GROUP]
 *   smooth=none|q|k|v|q+k|q+k+v...  acc=fp32|fp16|fp22[+fp32:N]
 *   kblock=B  out=fp32|fp16|bf16  [qk=exact|fp22]  [rope=R]
 *
 * A string may start with a preset name, the keys after it override the
 * preset: "sage2-8b acc=fp22". Each key may be given once.
 *
 * Every size in a scheme (a group's B, S, W and ch:C, kblock, qblock, the
 * two-level chunk N) is at most QATTN_SCHEME_SIZE_MAX: GPU tiles are a few
 * hundred tokens at most, and a bound at parse time keeps the scales of a
 * per-thread group (S / W per block of B tokens, however few tokens a file
 * has) small. */
#ifndef QATTN_SCHEME_H
#define QATTN_SCHEME_H

#include <stddef.h>

#include "qattn/error.h"
#include "qattn/formats.h"
#include "qattn/group.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QATTN_SCHEME_SIZE_MAX 65536
/* The longest scheme string accepted (a normalized spec, every size at its
 * maximum, is about 220 characters). */
#define QATTN_SCHEME_LEN_MAX 255

typedef enum qattn_acc {
    QATTN_ACC_FP32 = 0,
    QATTN_ACC_FP16, /* f16 k-steps of 16 keys (qattn_num_f16_kstep), rescaled by qattn_num_rescale16 */
    QATTN_ACC_FP22  /* every add cut to fp22 (qattn_fp22_cut); rescale in fp32 */
} qattn_acc;

typedef struct qattn_operand {
    qattn_fmt fmt;     /* fp32, fp16, bf16: no scale; int8/int4/e4m3/e5m2: scaled */
    qattn_group group; /* meaningful only for scaled formats */
} qattn_operand;

enum {
    QATTN_SMOOTH_Q = 1,
    QATTN_SMOOTH_K = 2,
    QATTN_SMOOTH_V = 4
};

typedef struct qattn_scheme {
    qattn_operand q, k, v;
    qattn_fmt p;      /* storage of P = exp2(S - m) for the PV product */
    int p_static;     /* 1: P stored as P*qmax (scale 1/qmax); 0: plain cast */
    unsigned smooth;  /* QATTN_SMOOTH_* bits */
    qattn_acc acc;    /* PV accumulator kept in registers across key blocks */
    int acc_chunk;    /* 0: single level; N > 0: acc restarts from 0 every N
                       * keys and is added into an fp32 buffer (two-level) */
    int kblock;       /* keys per online-softmax step */
    int qblock;       /* Q smoothing block; 0 = the Q group's block, else 128 */
    int qk_fp22;      /* qk=fp22: e4m3 Q.K as the fp8 tensor core sums it, per channel group (k-steps of
                       * 32 from 0, qattn_num_fp8_kstep), times sq sk, added in fp32 in group order, the
                       * rope channels' product last; qk=exact (0): exact dot products rounded once
                       * (e4m3 with acc=fp22 and unsplit groups: the tensor core's sum either way) */
    int rope;         /* the last rope channels of Q, K and V kept in bf16, outside their
                       * formats and groups (DeepSeek-V4's 64 rope values); 0: none */
    qattn_fmt out;    /* fp32, fp16, bf16 */
} qattn_scheme;

/* Parse one operand, "fmt" or "fmt@group" (as in k=int8@token); messages
 * start with what=spec. */
int qattn_operand_parse(const char *what, const char *spec, qattn_operand *op, qattn_err *err);

/* Parse a scheme string or a preset name. Unknown keys, bad values and
 * unknown presets give QATTN_ERR_ARG with a message naming the word. */
int qattn_scheme_parse(const char *spec, qattn_scheme *s, qattn_err *err);
/* Canonical full spec string; returns buf (512 bytes is always enough). */
char *qattn_scheme_format(const qattn_scheme *s, char *buf, size_t len);

/* Presets, in the order `qattn schemes` lists them. */
size_t qattn_scheme_preset_count(void);
const char *qattn_scheme_preset_name(size_t i);
const char *qattn_scheme_preset_spec(size_t i);
/* spec of a preset by name, or NULL */
const char *qattn_scheme_preset_find(const char *name);

/* Q smoothing block actually used (qblock, else the Q group's B, else 128) */
int qattn_scheme_qblock(const qattn_scheme *s);

#ifdef __cplusplus
}
#endif
#endif
