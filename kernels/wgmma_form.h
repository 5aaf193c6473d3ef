/* The wgmma path's block form for a problem (attn_fwd_wgmma.h: two or
 * three consumer warpgroups and a producer a block; attn_fwd_wgsolo.h:
 * blocks of one warpgroup, three a multiprocessor), and the way each form
 * converts its int32 scores, for the launch, the kernels, the dispatcher's
 * plan and the host tests. */
#ifndef QATTN_KERNELS_WGMMA_FORM_H
#define QATTN_KERNELS_WGMMA_FORM_H

#include "qattn/numerics.h" /* QATTN_NUM_FN, QATTN_FMT_*, QATTN_ACC_* */
#include "qattn_kernels.h"  /* qattn_mask, QATTN_WG_FORM_* */

/* constant expressions in the kernels' templates, plain functions in C */
#ifdef __cplusplus
#define QATTN_WG_FORM_FN static constexpr QATTN_HD
#else
#define QATTN_WG_FORM_FN QATTN_NUM_FN
#endif

/* consumer warpgroups of the producer form by default, chosen by measurement (kernels/LOG.md): three
 * (BM = 192, 160 registers each, the producer 24; 152 and 48 where the producer widens V) for the
 * 8-bit and int4 instances (1.03-1.22x two at N = 8192 on the H100; int4 and the CK presets
 * 1.12-1.24x on the H200, 2026-11-28), two for the 16-bit baselines (three, with 64-key stages:
 * 0.94-1.04x); every instance has both (QATTN_WG_NC in the environment picks one) */
QATTN_WG_FORM_FN int qattn_wg_nc(int qf)
{
    return qf == QATTN_FMT_INT8 || qf == QATTN_FMT_E4M3 || qf == QATTN_FMT_INT4 ? QATTN_WG_FORM_NC3 : QATTN_WG_FORM_NC2;
}

/* How the int32 scores become floats (both ways exact): PAIR by the add-subtract pair
 * (qattn_i2f_small), MIX half by cvt.rn.f32.s32 and half by the pair, CVT all by cvt. MIX where it
 * measured faster in the forms with a producer (sage2-8b-sm90 d = 128 +6%, the d = 64 64-key
 * instances +2-3%; the others lose 1-4%; all by cvt there: -4%); CVT for the 128-key int8 blocks
 * (sage2-8b-sm90) in blocks of one warpgroup: 1.005-1.023x MIX's TOPS at d = 128, 1.029-1.043x the
 * pair's at d = 64, N = 2048-16384, causal and not (two interleaved rounds, H200 2026-12-02,
 * kernels/logs/h200_solo_allcvt_ab.txt, h200_solo_d64_cvt_ab.txt; the 64-key ones there: sage2-8b
 * 1.00-1.01x, sage1-vb 0.98-0.995x, sage1-b 0.99-1.00x, so they keep theirs) */
enum { QATTN_WG_S2F_PAIR = 0, QATTN_WG_S2F_MIX = 1, QATTN_WG_S2F_CVT = 2 };
QATTN_WG_FORM_FN int qattn_wg_s2f(int d, int kb, int solo)
{
    return solo && kb == 128 ? QATTN_WG_S2F_CVT : (d == 64) == (kb == 64) ? QATTN_WG_S2F_MIX : QATTN_WG_S2F_PAIR;
}

/* the instances with both forms: int8 / e4m3 Q.K codes read as they are, e4m3 P.V on the fp8 MMA
 * (one level: e4m3 Q.K, d <= kb, P.V into O; two: int8 Q.K, d = 128 in halves of 64 channels),
 * int8 P.V exact per block (s8 MMA) or fp16 P.V into an f16 O (64-key blocks) after int8 Q.K; the
 * fp16 / bf16 baselines at d = 64 (at d = 128 their tiles allow two blocks a multiprocessor, 0.74-0.90x
 * the two-consumer form on the H200 with 64-key blocks, 2026-11-28) */
QATTN_WG_FORM_FN int qattn_wg_solo_can(int d, int kb, int qf, int pf, int acc)
{
    return ((qf == QATTN_FMT_INT8 || (qf == QATTN_FMT_E4M3 && d <= kb)) && pf == QATTN_FMT_E4M3 && acc == QATTN_ACC_FP22) ||
           (qf == QATTN_FMT_INT8 && pf == QATTN_FMT_INT8 && acc == QATTN_ACC_FP32) ||
           (qf == QATTN_FMT_INT8 && pf == QATTN_FMT_FP16 && acc == QATTN_ACC_FP16 && kb == 64) ||
           ((qf == QATTN_FMT_FP16 || qf == QATTN_FMT_BF16) && pf == qf && acc == QATTN_ACC_FP32 && d == 64);
}

/* the one-warpgroup form loads K and V^T by TMA where the lengths allow: 8-bit codes, V^T (not fp16
 * V rows nor the baselines' 16-bit rows) */
QATTN_WG_FORM_FN int qattn_wg_solo_tma(int qf, int pf)
{
    return (qf == QATTN_FMT_INT8 || qf == QATTN_FMT_E4M3) && pf != QATTN_FMT_FP16;
}

/* keys a query row sees on average (seqlen_k keys; causal masks about half; a window its width) */
QATTN_WG_FORM_FN long qattn_wg_row_keys(qattn_mask m, int seqlen_k)
{
    if (m.kind == QATTN_MASK_CAUSAL || m.kind == QATTN_MASK_CAUSAL_BR)
        return (seqlen_k + 1) / 2;
    if (m.kind == QATTN_MASK_WINDOW) {
        const long w = m.left + m.right + 1;
        return w < seqlen_k ? w : seqlen_k;
    }
    return seqlen_k;
}

/* The form a problem takes, by measurement (NVIDIA H200, 2026-11-28, kernels/LOG.md): blocks of
 * one warpgroup win where a query tile's key blocks are few, since three such blocks a
 * multiprocessor run one block's prologue and epilogue beside the others' key blocks (N = 1024:
 * 1.10-1.40x); with many, the three-consumer form's shared stages keep up or win for the int8 ones
 * at d = 128 and the 128-key ones at d = 64 (0.93-0.99x at N = 16384). With K and V^T loaded by
 * TMA (tma: no varlen, lengths of whole 16-row groups) in both forms (seventh session) e4m3 at
 * d = 128 (1.11-1.17x at N = 8192-16384), every d = 64 one (1.00-1.06x, causal 1.04-1.11x) and int8
 * P.V (sage1-vb, 1.06-1.16x) win at every length: -1, any; int8 Q.K with e4m3 P.V at d = 128 ran
 * 0.94-1.03x at N = 8192, 0.94-0.99x at 16384; with 128-key blocks (sage2-8b-sm90), both forms at
 * ptxas -O3 (fifteenth session), 1.05x / 1.02x at N = 8192 / 16384 (causal 1.14x / 1.06x), so it
 * takes the one-warpgroup form at every length with TMA too (64-key blocks, sage2-8b: 0.98-0.99x at
 * 8192-16384, up to 4096 as before). The f16
 * P.V instances (sage1-b; the baselines at d = 64), whose blocks wait for each P.V of twice the
 * k-steps: up to 1024 keys at d = 128 (sage1-b 1.04x there, 0.92x at 2048) and for sage1-b at d = 64
 * since its 128-key stages (1.08-1.09x at 1024 keys, 0.93x at 2048, 0.99x causal at 4096: H200,
 * 2026-11-30, kernels/logs/h200_sage1b_ks128_ab.txt), 2048 for the baselines at d = 64 (the 128-key
 * baselines 1.11-1.14x at N = 1024, 1.03-1.08x at 2048, 0.99-1.02x at 4096, 0.94-0.98x at 8192 on
 * the H200, 2026-11-30, kernels/logs/h200_baseline_d64_solo_ab.txt). */
QATTN_WG_FORM_FN long qattn_wg_solo_keys(int d, int kb, int qf, int pf, int tma)
{
    if (tma && qattn_wg_solo_tma(qf, pf) &&
        ((qf == QATTN_FMT_E4M3 && d == 128) || d == 64 || pf == QATTN_FMT_INT8 ||
         (d == 128 && kb == 128 && qf == QATTN_FMT_INT8 && pf == QATTN_FMT_E4M3)))
        return -1;
    if (pf == QATTN_FMT_FP16 || pf == QATTN_FMT_BF16)
        return d == 128 || qf != pf ? 1024 : 2048;
    return qf == QATTN_FMT_E4M3 && d == 128 ? 8192 : 4096;
}
/* persistent CTAs for the producer form (one CTA a multiprocessor taking tiles from a counter: the
 * next tile's Q and first key blocks load under a tile's last blocks and epilogue), by measurement
 * (NVIDIA H200, 2026-11-30, kernels/logs/h200_baseline_persist_ab.txt): the fp16 / bf16 baselines at
 * d = 64 (1.02-1.07x at N = 4096-16384; their 2048 keys and fewer go to blocks of one warpgroup),
 * where the tiles are of equal work (no mask, no varlen) and the key blocks load by TMA; at d = 128
 * (two stages) the same kernel ran 0.87-0.94x at N >= 4096. Not for a fused Q (its consumers write the Q tile). */
QATTN_WG_FORM_FN int qattn_wg_persist_can(int d, int qf, int pf, int acc)
{
    return d == 64 && (qf == QATTN_FMT_FP16 || qf == QATTN_FMT_BF16) && pf == qf && acc == QATTN_ACC_FP32;
}
QATTN_WG_FORM_FN int qattn_wg_persist(int d, int qf, int pf, int acc, int q_fuse, qattn_mask m, int varlen)
{
    return qattn_wg_persist_can(d, qf, pf, acc) && !q_fuse && m.kind == QATTN_MASK_NONE && !varlen;
}
/* ping-pong of the two consumer warpgroups (each issues its P.V and next Q.K in its turn, so that one's
 * softmax runs under the other's MMAs; compiled for the 16-bit stages of one key block), by measurement
 * (NVIDIA H200, 2026-11-30, kernels/logs/h200_baseline_pingpong_ab.txt): the fp16 / bf16 baselines at
 * d = 128 with three stages, no mask (1.01-1.05x at N = 4096-16384) and causal (1.02-1.08x at N =
 * 2048-16384; with two stages 0.97-1.01x); d = 64 in persistent CTAs 0.88-0.90x. Not measured with a
 * window: off there */
QATTN_WG_FORM_FN int qattn_wg_pingpong(int d, int qf, int pf, int acc, qattn_mask m)
{
    return d == 128 && (qf == QATTN_FMT_FP16 || qf == QATTN_FMT_BF16) && pf == qf && acc == QATTN_ACC_FP32 &&
           m.kind != QATTN_MASK_WINDOW;
}

/* the tensor maps of 16-bit K and V rows (the baselines; qattn_wg_maps_fill's mode 1) accept the
 * tensors: fixed lengths, every stride (elements: batch, head, token) positive and a multiple of 16
 * bytes under 2^40, both bases 16-byte aligned (cuTensorMapEncodeTiled's conditions) */
QATTN_WG_FORM_FN int qattn_wg_tma_rows16(unsigned long long k_at, unsigned long long v_at, long long k_sb, long long k_sh,
                                         long long k_st, long long v_sb, long long v_sh, long long v_st, int varlen)
{
    return !varlen && !((k_at | v_at) & 15u) && k_sb > 0 && k_sh > 0 && k_st > 0 && v_sb > 0 && v_sh > 0 && v_st > 0 &&
           !((k_sb | k_sh | k_st | v_sb | v_sh | v_st) & 7) &&
           (k_sb | k_sh | k_st | v_sb | v_sh | v_st) < (1ll << 39);
}

/* tma: K and V^T can be loaded by TMA (no varlen, seqlen_k a multiple of 16; the launch checks the
 * strides too, and loads by cp.async where they do not allow it) */
QATTN_WG_FORM_FN int qattn_wg_tma_lengths(int varlen, int seqlen_k) { return !varlen && seqlen_k % 16 == 0; }
/* the widened int4 form (wgmma_i4w.h: a pass widens the packed Q and K codes to int8 bytes, which the
 * kernel then reads as the 8-bit instances read theirs, K and smooth=q's dS rows by TMA) for int4 Q.K
 * with V read as it is (e4m3 P.V on the fp8 MMA; the CK int4 preset's producer widens V), where the
 * key blocks can go by TMA; else the producer unpacks the packed codes (wgmma_unpack.h) */
QATTN_WG_FORM_FN int qattn_wg_i4w_can(int qf, int pf, int acc)
{
    return qf == QATTN_FMT_INT4 && pf == QATTN_FMT_E4M3 && acc != QATTN_ACC_FP32;
}
/* bytes of the widened codes (params i4w): Q's [hq, nseq, seqlen_q, d], then K's [hkv, nseq, seqlen_k, d] */
QATTN_WG_FORM_FN long long qattn_wg_i4w_qbytes(int hq, int nseq, int seqlen_q, int d)
{
    return (long long)hq * nseq * seqlen_q * d;
}
QATTN_WG_FORM_FN long long qattn_wg_i4w_bytes(int hq, int hkv, int nseq, int seqlen_q, int seqlen_k, int d)
{
    return qattn_wg_i4w_qbytes(hq, nseq, seqlen_q, d) + qattn_wg_i4w_qbytes(hkv, nseq, seqlen_k, d);
}
QATTN_WG_FORM_FN int qattn_wg_i4w(int qf, int pf, int acc, int varlen, int seqlen_k)
{
    return qattn_wg_i4w_can(qf, pf, acc) && qattn_wg_tma_lengths(varlen, seqlen_k);
}
QATTN_WG_FORM_FN int qattn_wg_form(int d, int kb, int qf, int pf, int acc, qattn_mask m, int seqlen_k, int tma)
{
    if (!qattn_wg_solo_can(d, kb, qf, pf, acc))
        return qattn_wg_nc(qf);
    const long most = qattn_wg_solo_keys(d, kb, qf, pf, tma);
    return most < 0 || qattn_wg_row_keys(m, seqlen_k) <= most ? QATTN_WG_FORM_SOLO : qattn_wg_nc(qf);
}
/* three consumer warpgroups compiled: 8-bit codes, or 16-bit stages of 64-key blocks (16-bit 128-key
 * blocks with three, at 160 registers: S and P's fragments spill 160 bytes and serialize the wgmmas, C7512) */
QATTN_WG_FORM_FN int qattn_wg_three(int qf, int kb)
{
    return (qf != QATTN_FMT_FP16 && qf != QATTN_FMT_BF16) || kb == 64;
}
/* the blocks a launch runs when asked for form (QATTN_WG_FORM_*; 0: the rule's, qattn_wg_form): one
 * warpgroup where the instance has that form, three consumer warpgroups where they are compiled and
 * asked for or the instance's own (qattn_wg_nc), else two. The dispatcher's plan and the launch both
 * take it (a fused Q: two, wgmma_qfuse.h) */
QATTN_WG_FORM_FN int qattn_wg_form_run(int d, int kb, int qf, int pf, int acc, int form, qattn_mask m, int seqlen_k,
                                       int tma)
{
    if (form == QATTN_WG_FORM_RULE)
        form = qattn_wg_form(d, kb, qf, pf, acc, m, seqlen_k, tma);
    if (form == QATTN_WG_FORM_SOLO && qattn_wg_solo_can(d, kb, qf, pf, acc))
        return QATTN_WG_FORM_SOLO;
    if (qattn_wg_three(qf, kb) &&
        (form == QATTN_WG_FORM_NC3 || (form == QATTN_WG_FORM_SOLO && qattn_wg_nc(qf) == QATTN_WG_FORM_NC3)))
        return QATTN_WG_FORM_NC3;
    return QATTN_WG_FORM_NC2;
}

#endif
