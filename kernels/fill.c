/* The params structs filled from a scheme, a problem and the buffers:
 * one operand's quantization (sizes, fill, scratch, code layout) and the
 * attention forward's (from the quantized operands, or with Q quantized by
 * the attention instance itself). Host C; the dispatcher (dispatch.c)
 * chooses the instances and routes. */
#include <math.h>
#include <string.h>

#include "qattn_kernels.h"
#include "wgmma_form.h" /* qattn_wg_i4w_can, qattn_wg_i4w_bytes */

/* ---- quant family: sizes and fill ---- */

static size_t stored_size(qattn_fmt f)
{
    return f == QATTN_FMT_FP16 || f == QATTN_FMT_BF16 ? 2 : f == QATTN_FMT_FP32 ? 4 : 1;
}

void qattn_kernels_quant_sizes(const qattn_operand *op, int heads, int nseq, int seqlen, int64_t tokens, int d,
                               int smooth, int mblock, size_t *codes, size_t *scale, size_t *mean)
{
    *codes = (size_t)heads * (size_t)tokens * (size_t)QATTN_KERNELS_ROW(op->fmt, d) * stored_size(op->fmt);
    *scale = qattn_fmt_is_scaled(op->fmt) ? (size_t)heads * (size_t)nseq *
                                                qattn_group_ntok(&op->group, (size_t)seqlen) *
                                                qattn_group_nch(&op->group, (size_t)d) * sizeof(float)
                                          : 0;
    size_t nmean = smooth == QATTN_KERNELS_SMOOTH_BLOCKS && mblock > 0 ? ((size_t)seqlen + (size_t)mblock - 1) / (size_t)mblock
                   : smooth ? 1
                            : 0;
    *mean = (size_t)heads * (size_t)nseq * nmean * (size_t)d * sizeof(float);
}

int qattn_kernels_quant_fill(qattn_kernels_quant_params *p, const qattn_kernels_problem *pb, const void *x,
                             int64_t stride_batch, int64_t stride_head, int64_t stride_tok, int heads, int seqlen,
                             int64_t tokens, const int *cu_seqlens, const qattn_operand *op, int smooth, int mblock,
                             void *codes, float *scale, float *mean, int *nonfinite, qattn_err *err)
{
    memset(p, 0, sizeof *p);
    if (pb->in != QATTN_FMT_FP16 && pb->in != QATTN_FMT_BF16 && pb->in != QATTN_FMT_FP32)
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "quant: input dtype %s (fp16, bf16 or fp32)",
                             qattn_fmt_name(pb->in));
    if (op->fmt == QATTN_FMT_E8M0 || op->fmt >= QATTN_FMT_COUNT)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: cannot store an operand as %s", qattn_fmt_name(op->fmt));
    if (smooth == QATTN_KERNELS_SMOOTH_BLOCKS && mblock <= 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: block smoothing needs a positive block");
    if (heads <= 0 || pb->nseq <= 0 || pb->d <= 0 || seqlen < 0 || tokens < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: bad shape");
    int scaled = qattn_fmt_is_scaled(op->fmt);
    if (scaled && !scale)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: %s needs a scale buffer", qattn_fmt_name(op->fmt));
    if (smooth && !mean)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: smoothing needs a mean buffer");
    p->x = x;
    p->in = pb->in;
    p->x_stride_batch = stride_batch;
    p->x_stride_head = stride_head;
    p->x_stride_tok = stride_tok;
    p->heads = heads;
    p->d = pb->d;
    p->nseq = pb->nseq;
    p->seqlen = seqlen;
    p->cu_seqlens = cu_seqlens;
    p->tokens = tokens;
    p->fmt = op->fmt;
    p->group = op->group;
    if (!scaled)
        memset(&p->group, 0, sizeof p->group);
    p->ntok = scaled ? (int)qattn_group_ntok(&op->group, (size_t)seqlen) : 0;
    p->nch = scaled ? (int)qattn_group_nch(&op->group, (size_t)pb->d) : 0;
    p->smooth = smooth;
    p->mblock = smooth == QATTN_KERNELS_SMOOTH_BLOCKS ? mblock : 0;
    p->nmean = smooth == QATTN_KERNELS_SMOOTH_BLOCKS ? (seqlen + mblock - 1) / mblock : smooth ? 1 : 0;
    p->codes = codes;
    p->row = QATTN_KERNELS_ROW(op->fmt, pb->d);
    p->scale = scaled ? scale : NULL;
    p->mean = smooth ? mean : NULL;
    p->nonfinite = nonfinite;
    return QATTN_OK;
}

size_t qattn_kernels_quant_work_size(const qattn_kernels_quant_params *p)
{
    int uniform = p->scale && (p->group.tok == QATTN_TOK_TENSOR || p->group.tok == QATTN_TOK_CHANNEL);
    if (!uniform && p->smooth != QATTN_KERNELS_SMOOTH_TOKENS)
        return 0;
    size_t nchunk = ((size_t)p->seqlen + QATTN_KERNELS_QUANT_CHUNK - 1) / QATTN_KERNELS_QUANT_CHUNK;
    return (size_t)p->heads * (size_t)p->nseq * nchunk * (size_t)p->d * (sizeof(double) + 2 * sizeof(float)) +
           2 * (size_t)p->heads * (size_t)p->nseq * sizeof(unsigned);
}

int qattn_kernels_quant_set_layout(qattn_kernels_quant_params *p, qattn_kernels_layout layout, qattn_err *err)
{
    if (layout == QATTN_KERNELS_LAYOUT_ROWS) {
        p->layout = layout;
        p->npad = 0;
        return QATTN_OK;
    }
    if (layout != QATTN_KERNELS_LAYOUT_TRANSPOSED)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: unknown code layout %d", (int)layout);
    if (p->fmt != QATTN_FMT_INT8 && p->fmt != QATTN_FMT_E4M3 && p->fmt != QATTN_FMT_E5M2)
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "quant: transposed codes need an 8-bit format, not %s",
                             qattn_fmt_name(p->fmt));
    p->layout = layout;
    p->npad = ((int64_t)p->seqlen + 127) / 128 * 128;
    return QATTN_OK;
}

/* ---- attention family: fill ---- */

float qattn_kernels_softmax_c2(double scale, int d)
{
    return (float)((scale > 0.0 ? scale : 1.0 / sqrt((double)d)) * 1.4426950408889634074);
}

void qattn_kernels_tensor_strides(const qattn_kernels_tensor *t, int64_t *sb, int64_t *sh, int64_t *st)
{
    *sb = t->stride_batch;
    *sh = t->stride_head;
    *st = t->stride_tok;
}

/* strides of codes written by a quant kernel: [heads, T, row] */
static void code_strides(const qattn_kernels_quant_params *qp, int64_t *sb, int64_t *sh, int64_t *st)
{
    *st = qp->row;
    *sh = qp->tokens * qp->row;
    *sb = qp->cu_seqlens ? 0 : (int64_t)qp->seqlen * qp->row;
}

int qattn_kernels_attn_fill(qattn_kernels_attn_params *p, const qattn_scheme *s, const qattn_kernels_problem *pb,
                            const qattn_kernels_quant_params *qp_q, const qattn_kernels_quant_params *qp_k,
                            const qattn_kernels_quant_params *qp_v, const qattn_kernels_tensor *q,
                            const qattn_kernels_tensor *k, const qattn_kernels_tensor *v,
                            const qattn_kernels_tensor *o, float *lse, int64_t tokens_q, const int *cu_q,
                            const int *cu_k, qattn_err *err)
{
    memset(p, 0, sizeof *p);
    if (pb->hkv <= 0 || pb->hq % pb->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: q heads %d are not a multiple of kv heads %d", pb->hq, pb->hkv);
    if (s->out != QATTN_FMT_FP16 && s->out != QATTN_FMT_BF16 && s->out != QATTN_FMT_FP32)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: output %s", qattn_fmt_name(s->out));
    if (!qp_q && s->q.fmt != pb->in)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: q=%s must be quantized from %s input", qattn_fmt_name(s->q.fmt),
                             qattn_fmt_name(pb->in));
    if (!qp_k && s->k.fmt != pb->in)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: k=%s must be quantized from %s input", qattn_fmt_name(s->k.fmt),
                             qattn_fmt_name(pb->in));
    if (!qp_v && s->v.fmt != pb->in)
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: v=%s must be quantized from %s input", qattn_fmt_name(s->v.fmt),
                             qattn_fmt_name(pb->in));
    if ((s->smooth & QATTN_SMOOTH_Q) && (!qp_q || !qp_q->mean || !k))
        return qattn_err_set(err, QATTN_ERR_ARG, "attn: smooth=q needs the Q block means and the input K");
    if (qp_q) {
        p->q = qp_q->codes;
        code_strides(qp_q, &p->q_sb, &p->q_sh, &p->q_st);
        p->q_scale = qp_q->scale;
        p->q_group = qp_q->group;
        p->q_ntok = qp_q->ntok;
        if (s->smooth & QATTN_SMOOTH_Q) {
            p->q_mean = qp_q->mean;
            p->qblock = qp_q->mblock;
            p->nqb = qp_q->nmean;
        }
    } else {
        p->q = q->data;
        qattn_kernels_tensor_strides(q, &p->q_sb, &p->q_sh, &p->q_st);
    }
    if (qp_k) {
        p->k = qp_k->codes;
        code_strides(qp_k, &p->k_sb, &p->k_sh, &p->k_st);
        p->k_scale = qp_k->scale;
        p->k_group = qp_k->group;
        p->k_ntok = qp_k->ntok;
        if (s->smooth & QATTN_SMOOTH_K)
            p->k_mean = qp_k->mean;
    } else {
        p->k = k->data;
        qattn_kernels_tensor_strides(k, &p->k_sb, &p->k_sh, &p->k_st);
    }
    if (s->smooth & QATTN_SMOOTH_Q) {
        p->ds_ld = ((int64_t)pb->seqlen_k + QATTN_KERNELS_DS_KEYS - 1) / QATTN_KERNELS_DS_KEYS * QATTN_KERNELS_DS_KEYS;
        p->k_in = k->data;
        p->k_in_fmt = pb->in;
        qattn_kernels_tensor_strides(k, &p->kin_sb, &p->kin_sh, &p->kin_st);
    }
    if (qp_v) {
        p->v = qp_v->codes;
        code_strides(qp_v, &p->v_sb, &p->v_sh, &p->v_st);
        if (qp_v->layout == QATTN_KERNELS_LAYOUT_TRANSPOSED) { /* [hkv, nseq, d, npad]: v_st is the channel stride */
            p->v_st = qp_v->npad;
            p->v_sb = (int64_t)qp_v->d * qp_v->npad;
            p->v_sh = (int64_t)qp_v->nseq * qp_v->d * qp_v->npad;
        }
        p->v_scale = qp_v->scale;
        p->v_ch = qp_v->scale ? qp_v->group.ch : 0;
        p->v_nch = qp_v->scale ? qp_v->nch : 0;
        if (s->smooth & QATTN_SMOOTH_V)
            p->v_mean = qp_v->mean;
    } else {
        p->v = v->data;
        qattn_kernels_tensor_strides(v, &p->v_sb, &p->v_sh, &p->v_st);
    }
    p->o = o->data;
    qattn_kernels_tensor_strides(o, &p->o_sb, &p->o_sh, &p->o_st);
    p->out = s->out;
    p->lse = lse;
    p->lse_sh = tokens_q;
    p->cu_q = cu_q;
    p->cu_k = cu_k;
    p->nseq = pb->nseq;
    p->hq = pb->hq;
    p->hkv = pb->hkv;
    p->d = pb->d;
    p->seqlen_q = pb->seqlen_q;
    p->seqlen_k = pb->seqlen_k;
    p->mask = pb->mask;
    p->c2 = qattn_kernels_softmax_c2(pb->scale, pb->d);
    p->pmul = s->p_static ? qattn_fmt_qmax(s->p) : 1.0f;
    p->kblock = s->kblock;
    p->acc_chunk = s->acc_chunk;
    p->smooth = s->smooth;
    p->wg_form = pb->wg_form;
    return QATTN_OK;
}

void qattn_kernels_attn_fuse_q(qattn_kernels_attn_params *p, const qattn_scheme *s, const qattn_kernels_problem *pb,
                               const qattn_kernels_tensor *q)
{
    p->q_fuse = 1;
    p->q_fuse_in = pb->in;
    p->q = q->data;
    qattn_kernels_tensor_strides(q, &p->q_sb, &p->q_sh, &p->q_st);
    p->q_scale = NULL;
    p->q_group = s->q.group;
    p->q_ntok = (int)qattn_group_ntok(&s->q.group, (size_t)pb->seqlen_q);
}

size_t qattn_kernels_attn_ds_bytes(const qattn_kernels_sig *g, const qattn_kernels_attn_params *p)
{
    if (!g->ds_plane || !p->q_mean)
        return 0;
    return (size_t)p->hq * (size_t)p->nseq * (size_t)p->nqb * (size_t)p->ds_ld * sizeof(float);
}

size_t qattn_kernels_attn_i4w_bytes(const qattn_kernels_sig *g, const qattn_kernels_attn_params *p)
{
    if (g->family != QATTN_KERNELS_FAMILY_ATTN_FWD || g->path != QATTN_KERNELS_PATH_WGMMA ||
        !qattn_wg_i4w_can(g->q, g->p, g->acc) || p->wg_i4w <= 0)
        return 0;
    return (size_t)qattn_wg_i4w_bytes(p->hq, p->hkv, p->nseq, p->seqlen_q, p->seqlen_k, p->d);
}
