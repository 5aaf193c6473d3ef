/* The 8-bit wgmma tile's key order and the K scale groups it can index
 * (attn_fwd_wgmma.h), for the kernel and for the dispatcher's check. */
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

#endif
