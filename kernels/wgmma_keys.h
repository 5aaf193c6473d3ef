/* The 8-bit wgmma tile's key order, the K scale groups it can index and
 * the int4 codes' unpacking (attn_fwd_wgmma.h), for the kernel, the
 * dispatcher's check and the host tests. */
#ifndef QATTN_KERNELS_WGMMA_KEYS_H
#define QATTN_KERNELS_WGMMA_KEYS_H

#include "qattn/numerics.h" /* QATTN_NUM_FN, qattn_group, qattn_num_group_tok_index */

/* sigma: the key (within its 32-key chunk) that column c of the S
 * accumulator holds, c = 16h + 8u + 2i + e -> 16h + 4i + 2u + e: K row c of
 * a chunk is loaded with key sigma(c), so that the P registers are the P.V
 * A fragment of the keys in natural order */
QATTN_NUM_FN int qattn_wg_sigma(int c)
{
    return 16 * ((c >> 4) & 1) + 4 * ((c >> 1) & 3) + 2 * ((c >> 3) & 1) + (c & 1);
}
/* sigma on a block's row c of any size (the 32-key chunk kept) */
QATTN_NUM_FN int qattn_wg_sigma64(int c) { return (c & ~31) + qattn_wg_sigma(c & 31); }

/* the key (offset in its block) of element e of n-tile t of the S
 * accumulator in the lane with quad index qi (columns 8t + 2qi + (e & 1)) */
QATTN_NUM_FN int qattn_wg_key(int t, int qi, int e)
{
    return 32 * (t >> 2) + qattn_wg_sigma(8 * (t & 3) + 2 * qi + (e & 1));
}

/* 1 when K groups g suit key blocks of kb keys: in every key block, the keys
 * a lane holds in n-tiles of one parity share one group (the tile reads two
 * K scales a block: qattn_wg_key(0 or 1, qi, 0)'s). E.g. tensor, block:B
 * with B % kb == 0, thread:kb/8/2 (sage2), thread:kb/16/4 (CK); not token,
 * not ,ch:C. */
QATTN_NUM_FN int qattn_wg_kgroup_ok(qattn_group g, int kb)
{
    if (g.ch != 0 || g.tok == QATTN_TOK_TOKEN || g.tok == QATTN_TOK_CHANNEL || kb <= 0 || kb % 32)
        return 0;
    int64_t period = kb; /* the group pattern repeats every lcm(B, kb) keys */
    if (g.tok == QATTN_TOK_BLOCK || g.tok == QATTN_TOK_WARP || g.tok == QATTN_TOK_THREAD) {
        if (g.b <= 0 || (g.tok == QATTN_TOK_THREAD && (g.s <= 0 || g.w <= 0)))
            return 0;
        int64_t x = g.b, y = kb;
        while (y) {
            const int64_t r = x % y;
            x = y, y = r;
        }
        period = (int64_t)g.b / x * kb;
        if (period > 65536)
            return 0;
    }
    for (int64_t j0 = 0; j0 < period; j0 += kb)
        for (int qi = 0; qi < 4; qi++)
            for (int par = 0; par < 2; par++) {
                const int64_t want = qattn_num_group_tok_index(g, j0 + qattn_wg_key(par, qi, 0));
                for (int t = par; t < kb / 8; t += 2)
                    for (int e = 0; e < 2; e++)
                        if (qattn_num_group_tok_index(g, j0 + qattn_wg_key(t, qi, e)) != want)
                            return 0;
            }
    return 1;
}

/* 1 when Q groups g lie inside the 128-row tile of a block (the fused Q
 * quantization, wgmma_qfuse.h): token, or block / warp / thread groups of
 * B | 128 rows, not split along channels, at most one group a row */
QATTN_NUM_FN int qattn_wg_qfuse_group_ok(qattn_group g)
{
    if (g.ch != 0)
        return 0;
    if (g.tok == QATTN_TOK_TOKEN)
        return 1;
    if ((g.tok != QATTN_TOK_BLOCK && g.tok != QATTN_TOK_WARP && g.tok != QATTN_TOK_THREAD) || g.b <= 0 || 128 % g.b ||
        (g.tok == QATTN_TOK_THREAD && (g.s <= 0 || g.w <= 0)))
        return 0;
    return qattn_num_group_tok_index(g, 127) - qattn_num_group_tok_index(g, 0) + 1 <= 128;
}

/* 1 when the int4 wgmma instances can take smooth=q's dS: Q blocks of a
 * multiple of 16 rows (one block a warp's rows, at most BM / 16 a tile) and
 * fp16 input K (the dS pass's f16 mma B, wgmma_dsq.h) */
QATTN_NUM_FN int qattn_wg_dsq_ok(int qblock, qattn_fmt k_in)
{
    return qblock > 0 && qblock % 16 == 0 && k_in == QATTN_FMT_FP16;
}

/* 8 int4 codes (a word, channel k in bits 4k..4k+3, two's complement) as
 * 8 int8 values 16 x code: channels 0..3 in *lo, 4..7 in *hi, low byte
 * first. A nibble moved to the high half of a byte is its code times 16
 * with the sign in place, so no sign extension is needed; the Q.K sums are
 * 256 x the codes' (|.| <= 2^21 at d = 128) and the kernel scales by 2^-8. */
QATTN_NUM_FN void qattn_wg_unpack_i4(uint32_t w, uint32_t *lo, uint32_t *hi)
{
    const uint32_t e = (w << 4) & 0xf0f0f0f0u, o = w & 0xf0f0f0f0u; /* channels 0, 2, 4, 6 / 1, 3, 5, 7 */
    *lo = (e & 0xffu) | (o & 0xffu) << 8 | (e & 0xff00u) << 8 | (o & 0xff00u) << 16;
    *hi = (e >> 16 & 0xffu) | (o >> 16 & 0xffu) << 8 | (e >> 8 & 0xff0000u) | (o & 0xff000000u);
}

#endif
