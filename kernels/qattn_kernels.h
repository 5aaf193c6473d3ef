/* qattn GPU kernels: the C host API.
 *
 * Two kernel families, each with one params struct filled by one host
 * function and passed by value to its kernels:
 *
 *   quant     smoothing means + quantization of one operand (Q, K or V) to
 *             int8 / int4 / e4m3 / e5m2 codes and fp32 scales laid out by its
 *             scale group, or a plain cast to fp16 / bf16 / fp32
 *             (qattn_kernels_quant_params, qattn_kernels_quant_fill);
 *   attn-fwd  attention forward on stored operands: quantized (int8 / int4 /
 *             e4m3 Q.K, e4m3 or fp16 P.V) or the fp16 / bf16 flash-attention
 *             baseline, through one template (qattn_kernels_attn_params,
 *             qattn_kernels_attn_fill).
 *
 * Every instance describes itself in the registry (qattn_kernels_count /
 * qattn_kernels_get); qattn_kernels_find picks the instances for a scheme and
 * a problem, or says which property no instance supports. A plan
 * (qattn_kernels_plan_init) holds the device buffers and the filled params of
 * the whole pipeline (quantize Q, K, V; attention) for one problem.
 *
 * Layouts (all row-major, strides in elements of the stored type; for int4
 * codes the element is a byte holding two values, channel 2i in the low
 * nibble):
 *   user tensors  element (b, h, t, c) at data[b*stride_batch + (t0 + t)*stride_tok
 *                 + h*stride_head + c], t0 = cu_seqlens[b] for varlen, else 0;
 *                 [B, N, H, d] and [H, B*N, d] (the activation files) both fit;
 *   codes         [heads, T, row]: T tokens of all sequences (T = cu_seqlens[nseq]
 *                 or nseq * seqlen), sequence b at token cu_seqlens[b] or b * seqlen;
 *   scales        [heads, nseq, ntok, nch] fp32, ntok = token groups of the longest
 *                 sequence, groups counted from each sequence's first token;
 *   means         [heads, nseq, nmean, d] fp32 (nmean 1, or Q blocks per sequence);
 *   lse           [hq, Tq] fp32, natural log.
 *
 * Every function returns 0 or a negative code (QATTN_ERR_* or
 * QATTN_KERNELS_ERR_*) with a one-line message in err. Device API calls and
 * kernel launches are all checked (the last error after each launch). */
#ifndef QATTN_KERNELS_H
#define QATTN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/attn.h"
#include "qattn/error.h"
#include "qattn/scheme.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x / d for 0 <= x < 2^31 as a multiply-high and a shift (Granlund and
 * Montgomery: mul = ceil(2^(31 + l) / d), l = ceil(log2 d)), so that the
 * kernels divide by heads, splits and page sizes in two instructions
 * (device side: qattn_fastdiv); mul 0 means d = 1 */
typedef struct qattn_kernels_fastdiv {
    uint32_t d, mul, shift;
} qattn_kernels_fastdiv;
void qattn_kernels_fastdiv_init(qattn_kernels_fastdiv *f, uint32_t d); /* d >= 1 */

enum qattn_kernels_status {
    QATTN_KERNELS_ERR_DEVICE = -16,     /* a HIP/CUDA call or a launch failed */
    QATTN_KERNELS_ERR_UNSUPPORTED = -17 /* no instance for the scheme/problem */
};

typedef enum qattn_kernels_family {
    QATTN_KERNELS_FAMILY_QUANT = 0, /* smoothing + quantization of one operand */
    QATTN_KERNELS_FAMILY_ATTN_FWD,  /* attention forward (quantized or baseline) */
    QATTN_KERNELS_FAMILY_DECODE,    /* split-KV attention over a paged KV cache, and its combine
                                     * (qattn_kernels_decode.h) */
    QATTN_KERNELS_FAMILY_SPARSE     /* sparse prefill over per-query key lists (qattn_kernels_sparse.h) */
} qattn_kernels_family;

/* The code path of an instance, in the dispatcher's order of preference
 * (highest last): it takes the most preferred path among the instances that
 * fit the scheme, the problem and the device. */
typedef enum qattn_kernels_path {
    QATTN_KERNELS_PATH_PORTABLE = 0, /* plain HIP, no inline assembly */
    QATTN_KERNELS_PATH_MMA,          /* NVIDIA mma.sync (sm_89+) */
    QATTN_KERNELS_PATH_MFMA,         /* AMD MFMA */
    QATTN_KERNELS_PATH_WGMMA,        /* NVIDIA warpgroup MMA (sm_90a) */
    QATTN_KERNELS_PATH_COUNT
} qattn_kernels_path;

/* "portable", "mma", "mfma", "wgmma" */
const char *qattn_kernels_path_name(qattn_kernels_path p);

/* How stored codes of an operand are laid out in memory. */
typedef enum qattn_kernels_layout {
    QATTN_KERNELS_LAYOUT_ROWS = 0,  /* codes [heads, T, row]: one row per token (see above) */
    QATTN_KERNELS_LAYOUT_TRANSPOSED /* codes [heads, nseq, d, npad]: per sequence the d x npad
                                     * transpose (channel-major, key j of the sequence at
                                     * column j), npad = longest sequence rounded up to 128,
                                     * columns past a sequence's length hold code 0; for the
                                     * k-major B operand of NVIDIA mma (V in P.V) */
} qattn_kernels_layout;

/* How the fast quantization instances run one operand (params route). The
 * dispatcher chooses among the routes an instance can take for the params
 * (sig quant_routes; qattn_kernels_quant_choose), a plan records it, and
 * `qattn bench` / `gpu-check --verbose` print it. */
typedef enum qattn_kernels_qroute {
    QATTN_KERNELS_QROUTE_AUTO = 0, /* the launcher asks the dispatcher (params filled by hand) */
    QATTN_KERNELS_QROUTE_PORTABLE, /* the portable kernels */
    QATTN_KERNELS_QROUTE_TILED,    /* statistics + combine where needed, then the tiled encode kernel */
    QATTN_KERNELS_QROUTE_LEAN,     /* statistics + combine where needed, then the lean encode kernel */
    QATTN_KERNELS_QROUTE_STREAMED, /* one persistent streamed kernel (the input read from DRAM once) */
    QATTN_KERNELS_QROUTE_CAST,     /* the unscaled casts: 16-byte pieces, one kernel */
    QATTN_KERNELS_QROUTE_COUNT
} qattn_kernels_qroute;

/* How K and V run together (params kv, the same in both) */
typedef enum qattn_kernels_kvmode {
    QATTN_KERNELS_KV_AUTO = 0,  /* the launcher asks the dispatcher */
    QATTN_KERNELS_KV_SERIAL,    /* K, then V, each by its route */
    QATTN_KERNELS_KV_ONE_GRID,  /* both streamed, in one grid (half of the block slots each) */
    QATTN_KERNELS_KV_STREAMS,   /* both streamed, side by side on two streams */
    QATTN_KERNELS_KV_COUNT
} qattn_kernels_kvmode;

typedef struct qattn_kernels_quant_params qattn_kernels_quant_params;
typedef struct qattn_kernels_attn_params qattn_kernels_attn_params;
typedef struct qattn_kernels_decode_params qattn_kernels_decode_params;
typedef struct qattn_kernels_sparse_params qattn_kernels_sparse_params;

/* decode: the scale groups of a quantized cache an instance reads (bits) */
enum {
    QATTN_KERNELS_CACHE_TOKEN = 1,   /* one scale per token (group token) */
    QATTN_KERNELS_CACHE_BLOCK = 2,   /* one scale per G tokens (block:G, warp:G), open group in fp32 */
    QATTN_KERNELS_CACHE_CHANNELS = 4 /* scales split along channels (ch:C) */
};

/* An instance's signature. Bit sets are (1u << enum value). */
typedef struct qattn_kernels_sig {
    const char *name;
    qattn_kernels_family family;
    qattn_kernels_path path;
    int head_dim;         /* 0: any d <= 1024 (quant) */
    qattn_fmt q, k;       /* attn: Q and K storage (fp16/bf16: the baseline) */
    qattn_fmt p, v;       /* attn: P and V storage */
    qattn_acc acc;        /* attn: P.V accumulator */
    int two_level;        /* attn: acc=ACC+fp32:N accepted */
    int p_static;         /* attn: bit 0: plain P cast accepted, bit 1: @static */
    const char *qk_groups;    /* Q/K scale groups accepted, in words */
    const char *v_groups;     /* V scale groups accepted, in words */
    unsigned smooth;      /* QATTN_SMOOTH_* bits accepted */
    unsigned masks;       /* bits of qattn_mask_kind */
    int varlen, gqa, lse; /* 1: supported */
    int kblock_max;       /* attn: kblock 1..kblock_max */
    unsigned in_fmts;     /* quant: input dtypes; attn: baseline input dtypes */
    unsigned out_fmts;    /* quant: storage formats written; attn: output dtypes */
    const char *arch;     /* targets compiled, e.g. "sm_80 sm_89 sm_90a" */
    int cc_min, cc_max;   /* NVIDIA compute capability (major * 10 + minor) the code needs, e.g. 89, 0
                           * (sm_89 and newer) or 90, 90 (sm_90a only); 0, 0: any device */
    qattn_kernels_layout v_layout; /* attn: layout of the V codes it reads */
    unsigned layouts;     /* quant: bit set (1u << layout) of the code layouts it writes (0: rows) */
    int (*launch_quant)(const qattn_kernels_quant_params *p, void *stream, qattn_err *err);
    /* quant: K (k) and V (v) at once where the instance can (one grid, or
     * with QATTN_QUANT_KV=streams side by side), else one after the other;
     * NULL: launch_quant twice */
    int (*launch_quant_kv)(const qattn_kernels_quant_params *k, const qattn_kernels_quant_params *v, void *stream,
                           qattn_err *err);
    int (*launch_attn)(const qattn_kernels_attn_params *p, void *stream, qattn_err *err);
    /* attn: 1 when smooth=q's dS goes through a plane in device memory (params ds, bytes
     * qattn_kernels_attn_ds_bytes) that the launch writes before the attention kernel */
    int ds_plane;
    /* attn: input dtypes (bits 1u << qattn_fmt) from which the instance quantizes Q itself (params
     * q_fuse; qattn_kernels_fuse_q_ok says for which schemes); 0: none */
    unsigned fuse_q;
    /* decode: cache formats K and V may have (bits 1u << qattn_fmt), QATTN_KERNELS_CACHE_* bits,
     * 1 when a 16-bit cache must have the query's dtype; the split kernel (and the combine after
     * it when num_splits > 1) */
    unsigned cache_fmts, cache_groups;
    int cache_is_in;
    int blocks_per_sm;    /* decode: blocks of the split kernel a multiprocessor holds (the split rule) */
    int keys_per_round;   /* decode: keys a split kernel's block takes in one round of its warps (the split
                           * rule evens the rounds); 0: not used */
    int (*launch_decode)(const qattn_kernels_decode_params *p, void *stream, qattn_err *err);
    /* sparse: the variants it runs (1u << qattn_kernels_sparse_variant; prepass: by the bf16 kernel
     * after the plan's dequantization); head_dim 0: any d up to QATTN_KERNELS_SPARSE_D_MAX */
    unsigned sparse_variants;
    int (*launch_sparse)(const qattn_kernels_sparse_params *p, void *stream, qattn_err *err);
    /* quant: the routes (bit set, 1u << qattn_kernels_qroute) the instance can take for p, and the K, V
     * modes (1u << qattn_kernels_kvmode) for the pair k, v; NULL: portable only, one after the other */
    unsigned (*quant_routes)(const qattn_kernels_quant_params *p);
    unsigned (*quant_kv_modes)(const qattn_kernels_quant_params *k, const qattn_kernels_quant_params *v);
} qattn_kernels_sig;

/* How close an attention instance must come to the emulation of its scheme
 * (qattn gpu-check, test_kernels_mma): cos(O, O_emu) >= TOL_COS, max |O -
 * O_emu| <= TOL_ERR max |O_emu|, |LSE - LSE_emu| <= TOL_LSE. */
#define QATTN_KERNELS_TOL_COS 0.99999
#define QATTN_KERNELS_TOL_ERR 0.02
#define QATTN_KERNELS_TOL_LSE 1e-4

/* ---- registry ---- */
size_t qattn_kernels_count(void);
const qattn_kernels_sig *qattn_kernels_get(size_t i);
/* "nvidia", "amd" or "host-sim", with the targets */
const char *qattn_kernels_backend(void);
/* one line describing sig (formats, groups, masks, ...); returns buf */
char *qattn_kernels_describe(const qattn_kernels_sig *sig, char *buf, size_t len);

/* the wgmma path's blocks for the instances with both forms (kernels/wgmma_form.h) */
enum {
    QATTN_WG_FORM_RULE = 0, /* by the rule there */
    QATTN_WG_FORM_SOLO = 1, /* one warpgroup a block, three blocks a multiprocessor (attn_fwd_wgsolo.h) */
    QATTN_WG_FORM_NC2 = 2,  /* two consumer warpgroups and a producer a block (attn_fwd_wgmma.h) */
    QATTN_WG_FORM_NC3 = 3   /* three consumer warpgroups and a producer a block (attn_fwd_wgmma.h) */
};

/* ---- a problem ---- */
typedef struct qattn_kernels_problem {
    int nseq;              /* sequences (batch) */
    int hq, hkv, d;        /* heads of Q and of K/V (hq % hkv == 0), head dim */
    int seqlen_q, seqlen_k; /* equal lengths; with varlen, the longest */
    int varlen;            /* 1: lengths from cu_seqlens */
    qattn_mask mask;
    int lse;               /* 1: LSE wanted */
    qattn_fmt in;          /* dtype of the q, k, v inputs: fp16, bf16 or fp32 */
    double scale;          /* softmax scale; <= 0: 1/sqrt(d) */
    int cc;                /* the device's NVIDIA compute capability (major * 10 + minor); 0: the
                            * dispatcher asks the current device (qattn_kernels_dev_cc); -1: no
                            * device check */
    unsigned paths;        /* bit set (1u << qattn_kernels_path) of the paths the dispatcher may take;
                            * 0: all (QATTN_MMA_SYNC=1 in the environment then leaves out wgmma) */
    int fuse_q;            /* 1: Q quantized by the attention instance itself where it can
                            * (qattn_kernels_fuse_q_ok; QATTN_FUSE_Q=1 in the environment does the same);
                            * 0: by its own kernel, the default (on the H100 the fused form did not pay:
                            * kernels/DESIGN.md) */
    int wg_form;           /* the wgmma path's blocks (QATTN_WG_FORM_*) for the instances that have both
                            * forms; 0: by the rule (qattn_kernels_wg_form) */
} qattn_kernels_problem;

/* The instances that run scheme s on problem pb: *attn (attention forward)
 * and *quant (the quantization kernels for pb->in). On failure the message
 * names the property no instance supports, e.g. "head dim 96 (instances: 64,
 * 128)". quant may be NULL when not wanted. Among the attention instances
 * that fit, the most preferred path (qattn_kernels_path) that the device can
 * run wins: an sm_80 GPU falls back from mma to portable, sm_90 takes wgmma
 * where an instance exists. */
int qattn_kernels_find(const qattn_scheme *s, const qattn_kernels_problem *pb, const qattn_kernels_sig **attn,
                       const qattn_kernels_sig **quant, qattn_err *err);

/* ---- quant family ---- */
enum {
    QATTN_KERNELS_SMOOTH_NONE = 0,
    QATTN_KERNELS_SMOOTH_TOKENS = 1, /* minus the mean over all tokens of a sequence (K, V) */
    QATTN_KERNELS_SMOOTH_BLOCKS = 2  /* minus the mean over blocks of mblock tokens (Q) */
};

/* elements of one stored row of d values in format f (the codes of
 * qattn_kernels_quant_params, [heads, tokens, row]): two int4 codes per
 * byte, an odd d padding the last; one element each otherwise. A macro, so
 * that kernels can take it as a constant expression. */
#define QATTN_KERNELS_ROW(f, d) ((f) == QATTN_FMT_INT4 ? ((d) + 1) / 2 : (d))

struct qattn_kernels_quant_params {
    const void *x;          /* input, dtype in; element (b, h, t, c) as for user tensors */
    qattn_fmt in;           /* fp16, bf16, fp32 */
    int64_t x_stride_batch, x_stride_head, x_stride_tok;
    int heads, d, nseq, seqlen; /* seqlen: equal length, or the longest (varlen) */
    const int *cu_seqlens;  /* [nseq + 1] device, or NULL */
    int64_t tokens;         /* T: tokens of all sequences */
    qattn_fmt fmt;          /* storage: int8, int4, e4m3, e5m2 (scaled); fp16, bf16, fp32 */
    qattn_group group;      /* scale group (scaled formats) */
    int ntok, nch;          /* token groups per sequence (of seqlen tokens), channel groups */
    int smooth, mblock, nmean; /* QATTN_KERNELS_SMOOTH_*, block (BLOCKS), mean rows per sequence */
    void *codes;            /* [heads, T, row] int8_t / uint8_t (int4: pairs, e4m3, e5m2) / uint16_t / float */
    int64_t row;            /* elements per token: QATTN_KERNELS_ROW(fmt, d) */
    qattn_kernels_layout layout; /* how codes are written (TRANSPOSED: V for mma P.V; 8-bit formats);
                                  * set by qattn_kernels_quant_set_layout */
    int64_t npad;           /* TRANSPOSED: columns per (head, sequence), a multiple of 128 */
    void *work;             /* scratch of qattn_kernels_quant_work_size bytes for the fast path's
                             * per-channel statistics: [heads, nseq, nchunk, d] double sums, then
                             * float minima, then float maxima (nchunk = seqlen / CHUNK rounded up),
                             * then 2 * heads * nseq unsigned counters (the streamed kernel, which
                             * leaves them zero);
                             * NULL: the instances fall back to the portable kernels where needed */
    float *scale;           /* [heads, nseq, ntok, nch]: amax while running, then the scales; NULL if unscaled */
    float *mean;            /* [heads, nseq, nmean, d] or NULL (no smoothing) */
    int *nonfinite;         /* [1] device: set to 1 when an input is NaN or Inf; may be NULL */
    int share;              /* the fast path's persistent (streamed) kernel takes 1 / share of the
                             * device's block slots (0, 1: all of them; launch_quant_kv sets 2 to run
                             * K and V at once) */
    int counters_zero;      /* 1: the counters in work are zero before a launch (the plan zeroes work
                             * once, and the streamed kernels leave them zero): no clearing before it */
    int overlap;            /* 1: the kernel may start while the previous kernel in the stream ends
                             * (programmatic dependent launch, sm_90): it reads nothing that one writes */
    qattn_kernels_qroute route; /* the fast instances: how this operand runs (qattn_kernels_quant_choose) */
    qattn_kernels_kvmode kv;    /* launch_quant_kv: how K and V run together */
    int stream_tpr;         /* streamed route: tiles (of 128 tokens) per slice aimed for; 0: the default */
};

/* ---- the quantization routes (dispatcher) ---- */
const char *qattn_kernels_qroute_name(qattn_kernels_qroute r); /* "auto", "portable", "tiled", "lean", "streamed", "cast" */
const char *qattn_kernels_kvmode_name(qattn_kernels_kvmode m); /* "auto", "serial", "one-grid", "streams" */
/* The route for p among routes (a bit set the instance can take): streamed
 * for operands with statistics (smoothing over the sequence, token-uniform
 * groups: three launches would read the input twice), else lean, tiled,
 * portable. Overrides for experiments, in the environment:
 * QATTN_QUANT_STREAM=0 (never streamed) or =1 (streamed without statistics
 * too), QATTN_QUANT_LEAN=0 (neither lean nor streamed). */
qattn_kernels_qroute qattn_kernels_quant_route(unsigned routes, const qattn_kernels_quant_params *p);
/* The K, V mode among modes (a bit set) for operands routed kr, vr: one grid
 * when both are streamed and the instance can; QATTN_QUANT_KV=streams: side
 * by side instead, =0: one after the other. */
qattn_kernels_kvmode qattn_kernels_quant_kv_mode(unsigned modes, qattn_kernels_qroute kr, qattn_kernels_qroute vr);
/* QATTN_QUANT_STREAM_TPR (tuning and tests): tiles per slice, or 0 */
int qattn_kernels_quant_tpr_override(void);
/* p->route (and p->stream_tpr when 0) for instance g; for a pair, also
 * k->kv = v->kv. Returns 0, or an error when g cannot quantize p. */
int qattn_kernels_quant_choose(const qattn_kernels_sig *g, qattn_kernels_quant_params *p, qattn_err *err);
int qattn_kernels_quant_choose_kv(const qattn_kernels_sig *g, qattn_kernels_quant_params *k,
                                  qattn_kernels_quant_params *v, qattn_err *err);

/* Fill p for quantizing one operand of pb: x (device, dtype pb->in, strides in
 * elements), heads and seqlen of that operand, fmt/group, smoothing (mblock
 * for SMOOTH_BLOCKS), cu_seqlens (device, or NULL), outputs (device buffers
 * sized by qattn_kernels_quant_sizes). */
int qattn_kernels_quant_fill(qattn_kernels_quant_params *p, const qattn_kernels_problem *pb, const void *x,
                             int64_t stride_batch, int64_t stride_head, int64_t stride_tok, int heads, int seqlen,
                             int64_t tokens, const int *cu_seqlens, const qattn_operand *op, int smooth, int mblock,
                             void *codes, float *scale, float *mean, int *nonfinite, qattn_err *err);
/* tokens per partial-statistics chunk of the fast quant path (see work) */
#define QATTN_KERNELS_QUANT_CHUNK 256
/* bytes of the scratch p->work (0 when no kernel needs it) for a filled p */
size_t qattn_kernels_quant_work_size(const qattn_kernels_quant_params *p);
/* write the codes of a filled p in layout (TRANSPOSED: [heads, nseq, d, npad]
 * codes, npad = p->seqlen rounded up to 128; int8 / e4m3 / e5m2 only; the
 * codes buffer must hold heads * nseq * d * npad bytes) */
int qattn_kernels_quant_set_layout(qattn_kernels_quant_params *p, qattn_kernels_layout layout, qattn_err *err);
/* bytes of the codes, scale and mean buffers for one operand */
void qattn_kernels_quant_sizes(const qattn_operand *op, int heads, int nseq, int seqlen, int64_t tokens, int d,
                               int smooth, int mblock, size_t *codes, size_t *scale, size_t *mean);

/* ---- attention forward family ---- */
struct qattn_kernels_attn_params {
    const void *q, *k, *v;  /* stored operands (codes, or fp16/bf16 user tensors for the baseline) */
    int64_t q_sb, q_sh, q_st; /* strides (batch, head, token) in stored elements */
    int64_t k_sb, k_sh, k_st;
    int64_t v_sb, v_sh, v_st; /* V codes in LAYOUT_TRANSPOSED (the instance's v_layout): element
                               * (b, h, key j, channel c) at v[b*v_sb + h*v_sh + c*v_st + j], j counted
                               * from the sequence's first key (v_st = npad, v_sb = d*npad) */
    int q_fuse;             /* 1: q is the user's Q (dtype q_fuse_in, strides in its elements), quantized
                             * by the attention kernel itself to the scheme's codes and q_group's scales
                             * (sig fuse_q; qattn_kernels_attn_fuse_q) */
    qattn_fmt q_fuse_in;
    const float *q_scale;   /* [hq, nseq, q_ntok] or NULL (unscaled, or q_fuse) */
    const float *k_scale;   /* [hkv, nseq, k_ntok] or NULL */
    const float *v_scale;   /* [hkv, nseq, v_nch] or NULL (unscaled) */
    qattn_group q_group, k_group;
    int q_ntok, k_ntok, v_ch, v_nch; /* v_ch: channels per V scale group (0: all) */
    const float *q_mean;    /* [hq, nseq, nqb, d] Q block means (smooth=q) or NULL */
    int qblock, nqb;
    const void *k_in;       /* [.., hkv, Nk, d] unquantized K, dtype k_in_fmt (smooth=q: dS) or NULL */
    qattn_fmt k_in_fmt;
    int64_t kin_sb, kin_sh, kin_st;
    const float *k_mean;    /* [hkv, nseq, d] K channel means (smooth=k) or NULL */
    float *ds;              /* [hq, nseq, nqb, ds_ld] scratch for smooth=q's dS c2 on instances with sig
                             * ds_plane (their launch writes it, then reads it; qattn_kernels_attn_ds_bytes), or NULL */
    int64_t ds_ld;          /* keys a row of ds: seqlen_k rounded up to QATTN_KERNELS_DS_KEYS (smooth=q) */
    unsigned *work;         /* [2] zero: the persistent wgmma kernel's tile counter and its CTAs done (the last CTA
                             * out zeroes both again; a plan whose problem runs persistent holds one, so its launches
                             * must be stream-ordered); NULL: a CTA a tile */
    const float *v_mean;    /* [hkv, nseq, d] V channel means added to O (smooth=v) or NULL */
    void *o;                /* dtype out; element (b, h, t, c) as for user tensors */
    int64_t o_sb, o_sh, o_st;
    qattn_fmt out;          /* fp16, bf16, fp32 */
    float *lse;             /* [hq, Tq] natural log, or NULL: (b, h, t) at h*lse_sh + t0(b) + t,
                             * t0(b) = cu_q[b] or b * seqlen_q */
    int64_t lse_sh;         /* Tq */
    const int *cu_q, *cu_k; /* [nseq + 1] device, or NULL (equal lengths) */
    int nseq, hq, hkv, d, seqlen_q, seqlen_k;
    qattn_mask mask;
    float c2;               /* softmax scale * log2(e) */
    float pmul;             /* P stored as P * pmul: qmax(p) for @static, else 1 */
    int kblock, acc_chunk;  /* keys per online-softmax step; two-level chunk or 0 */
    unsigned smooth;        /* QATTN_SMOOTH_* of the scheme */
    /* wgmma, the plan's choices (the dispatcher's, with the environment's comparison switches; a launch
     * reads no switch): */
    int wg_form;            /* the blocks (qattn_kernels_wg_form; 0: by the rule at launch) */
    int wg_pingpong;        /* 1 / -1: the consumer warpgroups in ping-pong or not (qattn_kernels_wg_pingpong);
                             * 0: by the rule at launch */
    int wg_tma;             /* -1: the key blocks by cp.async (QATTN_WG_TMA=0); 0: by TMA where the layout allows */
    int wg_i4w;             /* int4 Q.K: 1: the codes widened to int8 into i4w by a pass of the launch, then read as
                             * int8 codes (by TMA); 0: unpacked by the producer (qattn_kernels_wg_i4w) */
    void *i4w;              /* [hq Tq + hkv Tk, d] bytes: scratch for the widened Q then K codes (wg_i4w;
                             * qattn_kernels_attn_i4w_bytes), or NULL */
};

/* Fill p for running scheme s on pb from the quantized operands (qp_*: the
 * Q, K, V quant params as filled, or NULL for an operand read directly from
 * its user tensor), the output o, lse ([hq, tokens_q] or NULL) and the
 * device cu_seqlens (or NULL). */
typedef struct qattn_kernels_tensor {
    void *data; /* device */
    int64_t stride_batch, stride_head, stride_tok; /* elements */
} qattn_kernels_tensor;

/* t's strides into *sb, *sh, *st (the params fills) */
void qattn_kernels_tensor_strides(const qattn_kernels_tensor *t, int64_t *sb, int64_t *sh, int64_t *st);
/* the dS plane's rows (params ds_ld) are a multiple of this many keys (the dS pass's tile) */
#define QATTN_KERNELS_DS_KEYS 128
/* bytes of the dS plane (params ds) that instance g needs for the filled p; 0: none */
size_t qattn_kernels_attn_ds_bytes(const qattn_kernels_sig *g, const qattn_kernels_attn_params *p);
/* bytes of the widened int4 codes (params i4w) that instance g needs for the filled p (its wg_i4w set);
 * 0: none */
size_t qattn_kernels_attn_i4w_bytes(const qattn_kernels_sig *g, const qattn_kernels_attn_params *p);
/* the kernels' softmax factor c2 = scale * log2(e), scale <= 0 meaning 1 / sqrt(d) (params c2 of the
 * attention and decode families) */
float qattn_kernels_softmax_c2(double scale, int d);

int qattn_kernels_attn_fill(qattn_kernels_attn_params *p, const qattn_scheme *s, const qattn_kernels_problem *pb,
                            const qattn_kernels_quant_params *qp_q, const qattn_kernels_quant_params *qp_k,
                            const qattn_kernels_quant_params *qp_v, const qattn_kernels_tensor *q,
                            const qattn_kernels_tensor *k, const qattn_kernels_tensor *v,
                            const qattn_kernels_tensor *o, float *lse, int64_t tokens_q, const int *cu_q,
                            const int *cu_k, qattn_err *err);

/* Whether instance g quantizes Q of scheme s on pb itself (fused): g's
 * fuse_q holds pb->in, Q is int8 with token-local scale groups of a
 * 128-row tile (token, block / warp / thread groups of B | 128 tokens, not
 * split along channels), no smooth=q; and pb->fuse_q or QATTN_FUSE_Q=1 in
 * the environment asks for it. 0 or 1. */
int qattn_kernels_fuse_q_ok(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb);
/* the wgmma blocks instance g runs pb in (QATTN_WG_FORM_SOLO, _NC2, _NC3: qattn_wg_form_run, kernels/wgmma_form.h,
 * of the form asked for by QATTN_WG_NC=1 / 2 / 3 in the environment, else pb->wg_form, else the rule's; two
 * consumer warpgroups where fused_q, g quantizing Q itself); 0 for other paths */
int qattn_kernels_wg_form(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q);
/* 0 where QATTN_WG_TMA=0 in the environment asks the wgmma path for cp.async loads (for comparison), else 1 */
int qattn_kernels_wg_tma_wanted(void);
/* 1 where instance g (int4 Q.K) runs pb on int4 codes widened to int8 by a pass before the attention
 * kernel, which then loads them as int8 codes by TMA (qattn_wg_i4w, kernels/wgmma_form.h; QATTN_WG_I4W=0 in
 * the environment or QATTN_WG_TMA=0: never), else 0 (the producer unpacks the packed codes) */
int qattn_kernels_wg_i4w(const qattn_kernels_sig *g, const qattn_kernels_problem *pb);
/* the plan's wgmma choices into ap (wg_form, wg_pingpong, wg_tma, wg_i4w: qattn_kernels_wg_form, _pingpong,
 * _tma_wanted, _i4w), so that the launch follows them; nothing for other paths */
void qattn_kernels_wg_choose(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q,
                             qattn_kernels_attn_params *ap);
/* 1 where instance g runs pb in persistent CTAs (a CTA a multiprocessor taking tiles from the plan's counter,
 * params work: qattn_wg_persist, kernels/wgmma_form.h, in the form with a producer, the key blocks by TMA;
 * QATTN_WG_PERSIST=0 in the environment: never), else 0. ap: the filled params, whose K and V the tensor
 * maps must accept (qattn_wg_tma_rows16; QATTN_WG_TMA=0: never), as the launch checks; NULL: the rule alone */
int qattn_kernels_wg_persist(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q,
                             const qattn_kernels_attn_params *ap);
/* 1 where instance g runs pb with its consumer warpgroups in ping-pong (the 16-bit baselines in the form with
 * a producer: qattn_wg_pingpong, kernels/wgmma_form.h; QATTN_WG_PINGPONG=0 / 1 in the environment: never /
 * always), else 0 */
int qattn_kernels_wg_pingpong(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q);
/* "one warpgroup", "two consumer warpgroups", "three consumer warpgroups" for a form (QATTN_WG_FORM_*; "" else) */
const char *qattn_kernels_wg_form_name(int form);
/* the form with a producer that instance g has beside the one-warpgroup form (QATTN_WG_FORM_NC2 or _NC3) */
int qattn_kernels_wg_multi(const qattn_kernels_sig *g);
/* the most keys a row sees on average for which g takes blocks of one warpgroup by the rule (0: never;
 * -1: any), tma: with lengths that let K and V^T load by TMA (kernels/wgmma_form.h) */
long qattn_kernels_wg_solo_keys(const qattn_kernels_sig *g, int tma);
/* 1 when pb's lengths let the one-warpgroup form load K and V^T by TMA (no varlen, whole 16-row groups) */
int qattn_kernels_wg_tma_lengths(const qattn_kernels_problem *pb);
/* the same without the request: whether g could quantize Q of s on pb itself */
int qattn_kernels_fuse_q_can(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb);
/* p (filled for s on pb) switched to the fused form: q = the user's Q
 * tensor (dtype pb->in), q_group and q_ntok of s's Q, no stored scales */
void qattn_kernels_attn_fuse_q(qattn_kernels_attn_params *p, const qattn_scheme *s, const qattn_kernels_problem *pb,
                               const qattn_kernels_tensor *q);

/* ---- the whole pipeline for one problem ---- */
typedef struct qattn_kernels_io {
    qattn_kernels_tensor q, k, v; /* inputs, dtype pb->in */
    qattn_kernels_tensor o;       /* output, dtype s->out */
    float *lse;                   /* [hq, Tq] device, or NULL */
    const int *cu_seqlens_q;      /* [nseq + 1] host, or NULL (equal lengths) */
    const int *cu_seqlens_k;      /* [nseq + 1] host, or NULL */
    /* caller-owned memory (PyTorch): with ws_mode the plan allocates nothing and copies nothing;
     * its buffers are carved from workspace (ws_bytes from qattn_kernels_plan_workspace), varlen
     * offsets are read on the device (cu_*_dev) with tokens_q / tokens_k given, and the
     * quantization scratch is cleared on the stream at each run */
    int ws_mode;
    void *workspace;              /* device, 256-byte aligned */
    size_t ws_bytes;
    const int *cu_seqlens_q_dev, *cu_seqlens_k_dev; /* [nseq + 1] device (varlen, ws_mode) */
    int64_t tokens_q, tokens_k;   /* ws_mode, varlen: cu_seqlens_*[nseq] */
} qattn_kernels_io;

typedef struct qattn_kernels_plan {
    qattn_scheme scheme;
    qattn_kernels_problem pb;
    const qattn_kernels_sig *attn_sig, *quant_sig;
    int quantize[3];                 /* Q, K, V: 1 when a quant kernel runs */
    int fuse_q;                      /* 1: the attention kernel quantizes Q (qp[0]: the check of its
                                      * input for NaN / Inf, run when asked) */
    qattn_kernels_quant_params qp[3];
    qattn_kernels_attn_params ap;
    void *dev[20];                   /* device buffers owned by the plan */
    int ndev;
    int *cu_q, *cu_k;                /* [nseq + 1] device copies, or NULL */
    int *nonfinite;                  /* [3] device: Q's, K's and V's NaN flags */
    int ws_mode;                     /* buffers in the caller's workspace (qattn_kernels_io) */
    size_t ws_used;                  /* bytes of it in use (measured: what it needs) */
    void *ws_base;
    size_t ws_cap;
} qattn_kernels_plan;

int qattn_kernels_plan_init(qattn_kernels_plan *pl, const qattn_scheme *s, const qattn_kernels_problem *pb,
                            const qattn_kernels_io *io, qattn_err *err);
/* a workspace plan pl (made for its io) moved onto io's tensors and workspace (the same shapes,
 * strides and dtypes; io->workspace at least pl->ws_used bytes): every pointer of its params
 * refilled, nothing else redone (a cached plan's call costs no dispatch) */
int qattn_kernels_plan_rebase(qattn_kernels_plan *pl, const qattn_kernels_io *old_io, const qattn_kernels_io *io,
                              qattn_err *err);
/* the workspace (bytes) the plan of s on pb needs in ws_mode; io's tensors may be NULL here */
int qattn_kernels_plan_workspace(const qattn_scheme *s, const qattn_kernels_problem *pb, const qattn_kernels_io *io,
                                 size_t *bytes, qattn_err *err);
/* quantization of Q, K, V (NaN/Inf input: QATTN_ERR_NAN after a sync when
 * check_finite is 1) */
int qattn_kernels_plan_quantize(const qattn_kernels_plan *pl, void *stream, int check_finite, qattn_err *err);
/* attention forward on the quantized operands */
int qattn_kernels_plan_attend(const qattn_kernels_plan *pl, void *stream, qattn_err *err);
void qattn_kernels_plan_free(qattn_kernels_plan *pl);
/* The i-th thing (from 0) the tensor cores of compute capability cc (89,
 * 90, ...) cannot do for scheme s exactly, in one sentence, or NULL past
 * the last: fp32 accumulation of fp8 P.V on sm_89 / sm_90 (the fp8 MMA
 * keeps about 22 bits of its sum; sm_90 widens e4m3 to fp16), int4 Q.K on
 * sm_90 (no int4 MMA; int4 codes are int8 values). */
const char *qattn_kernels_hw_limit(const qattn_scheme *s, int cc, int i);

/* one line: the attention instance and its path, each operand's
 * quantization route and the K, V mode, e.g. "attn_fwd_wgmma_d128_... (wgmma);
 * q lean; k streamed; v streamed; k+v one-grid"; returns buf */
char *qattn_kernels_plan_describe(const qattn_kernels_plan *pl, char *buf, size_t len);

/* ---- device helpers for C callers (no HIP headers needed) ---- */
int qattn_kernels_dev_count(int *n, qattn_err *err);
int qattn_kernels_dev_name(char *buf, size_t len, qattn_err *err);
/* the current device's NVIDIA compute capability (major * 10 + minor); 0 on
 * AMD, in the host simulation or without a device */
int qattn_kernels_dev_cc(void);
int qattn_kernels_dev_alloc(void **p, size_t bytes, qattn_err *err);
void qattn_kernels_dev_free(void *p);
int qattn_kernels_dev_to(void *dst, const void *src, size_t bytes, qattn_err *err);   /* host -> device */
int qattn_kernels_dev_from(void *dst, const void *src, size_t bytes, qattn_err *err); /* device -> host */
int qattn_kernels_dev_fill(void *p, int byte, size_t bytes, qattn_err *err);          /* poison */
int qattn_kernels_dev_sync(qattn_err *err);
/* a non-blocking stream of the current device (void * to C callers), and its release */
int qattn_kernels_stream_create(void **stream, qattn_err *err);
void qattn_kernels_stream_free(void *stream);
int qattn_kernels_dev_copy(void *dst, const void *src, size_t bytes, qattn_err *err); /* device -> device, async */
/* Time fn(ctx) (which launches work on the default stream): warmup untimed
 * runs, then reps runs, each between two device events and each behind a
 * kernel that keeps the GPU busy for about 1 ms while the host enqueues it
 * (so that no launch latency falls between the events); the median and the
 * minimum in milliseconds (host clock in the host simulation). */
typedef int (*qattn_kernels_timed_fn)(void *ctx, qattn_err *err);
int qattn_kernels_dev_time(qattn_kernels_timed_fn fn, void *ctx, int warmup, int reps, double *median_ms,
                           double *min_ms, qattn_err *err);

#ifdef __cplusplus
}
#endif

#include "qattn_kernels_decode.h"
#endif
