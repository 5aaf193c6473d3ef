/* Quantization family, fast path (plain HIP, no inline assembly): the same
 * params, buffers and results as quant_portable.h, bit for bit, in at most
 * three launches per operand, each reading its input with 16-byte loads:
 *
 *   stats    (quant_stats.h; only for smoothing over a sequence, or scale
 *            groups that span all tokens: tensor, channel, tensor,ch:C)
 *            grid (nchunk, heads, nseq): per chunk of
 *            QATTN_KERNELS_QUANT_CHUNK tokens and per channel the double
 *            sum, the minimum and the maximum of x, into p.work;
 *   combine  (quant_stats.h) grid (heads, nseq): per channel the chunk sums
 *            added in chunk order -> mean (double, rounded to fp32 as
 *            smooth.c does); the amax of x - mean per channel is
 *            max(fl(max - mean), fl(mean - min)) (rounding is monotonic, so
 *            this equals the max of |fl(x - mean)| exactly); group scales
 *            for token-uniform groups;
 *   encode   (quant_tiled.h) grid (tiles, heads, nseq), 512 threads: one
 *            tile of tt tokens (whole scale-group blocks and Q smoothing
 *            blocks) x all d channels; each thread holds 16 channels of a
 *            token per item (two 16-byte loads), subtracts the mean (Q block
 *            means computed in the tile, in token order, in double), reduces
 *            the group amax in shared memory (order-free bit max), and
 *            writes 16 codes with one 16-byte store (8 for int4) plus the
 *            group scales; or, for LAYOUT_TRANSPOSED, stages the codes as
 *            [d][tt] in shared memory and writes 16-byte runs along tokens
 *            (zero past the sequence).
 *
 * The mean equals the emulation's whenever the double sums are exact, which
 * they are for fp16 input whenever every partial sum stays below 2^29 in
 * magnitude (fp16 values are multiples of 2^-24), and for bf16 when the
 * values of a channel span less than 2^45 in magnitude; otherwise the order
 * of the double additions differs from the emulation's (token order) and the
 * fp32 mean may differ in its last bit.
 *
 * Anything else (fp32 input, unscaled formats, d not a multiple of 16, Q/K
 * groups split along channels, unaligned strides, Q block smoothing with
 * token-uniform groups, tiles that do not fit, no p.work where it is
 * needed) runs the portable kernels.
 *
 * The lean encode kernel (quant_lean.h) and the streamed kernel
 * (quant_stream.h) take the cases they can. This header gathers the parts
 * and holds the ladder from params to an instance. */
#ifndef QATTN_KERNELS_QUANT_FAST_H
#define QATTN_KERNELS_QUANT_FAST_H

#include <stdlib.h>
#include <string.h>

#include "quant_portable.h" /* what the fast path does not take */
#include "quant_codes.h"    /* single values: input decode, codes without a division */
#include "quant_groups.h"   /* scale groups and sequences as the kernels see them */
#include "quant_stats.h"    /* the statistics and combine kernels, p.work's layout */
#include "quant_tiled.h"    /* the tiled encode kernel, the fast path's plan */
#include "quant_lean.h"     /* the lean encode kernel, the V^T stage */

/* The ladder from p (head dim, V^T, group kind, smoothing, code format) to
 * one instance of a kernel family F whose kernels take template arguments
 * <IN, FMT, SM, UNI, TR, LC>: F::fn is their type, F::of<...>() an
 * instance, F::INT4 the FMT that int4 codes take (QATTN_FMT_INT4, or 0: the
 * format read at run time) */
template <class F, int IN, int FMT, int SM, int UNI, int TR>
static typename F::fn qattn_qf_ladder_lc(const qattn_kernels_quant_params &p)
{
    return p.d == 64 ? F::template of<IN, FMT, SM, UNI, TR, 3>() : F::template of<IN, FMT, SM, UNI, TR, 4>();
}
template <class F, int IN, int FMT, int SM>
static typename F::fn qattn_qf_ladder_kind(const qattn_kernels_quant_params &p)
{
    if (!qattn_qf_uniform(p.group))
        return qattn_qf_ladder_lc<F, IN, FMT, SM, 0, 0>(p);
    return p.layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ? qattn_qf_ladder_lc<F, IN, FMT, SM, 1, 1>(p)
                                                       : qattn_qf_ladder_lc<F, IN, FMT, SM, 1, 0>(p);
}
template <class F, int IN, int FMT>
static typename F::fn qattn_qf_ladder_smooth(const qattn_kernels_quant_params &p)
{
    return p.smooth == QATTN_KERNELS_SMOOTH_TOKENS ? qattn_qf_ladder_kind<F, IN, FMT, QATTN_KERNELS_SMOOTH_TOKENS>(p)
                                                   : qattn_qf_ladder_kind<F, IN, FMT, QATTN_KERNELS_SMOOTH_NONE>(p);
}
template <class F, int IN>
static typename F::fn qattn_qf_ladder(const qattn_kernels_quant_params &p)
{
    if (p.fmt == QATTN_FMT_INT8)
        return qattn_qf_ladder_smooth<F, IN, QATTN_FMT_INT8>(p);
    if (p.fmt == QATTN_FMT_E4M3)
        return qattn_qf_ladder_smooth<F, IN, QATTN_FMT_E4M3>(p);
    return qattn_qf_ladder_smooth<F, IN, F::INT4>(p);
}

#endif
