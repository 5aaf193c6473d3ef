/* Registry access and the dispatcher (the params fills: fill.c; the routes and
 * block forms the launches take: routes.c): host C, no device API calls of its
 * own (kernels/host.hip has those, among them the device's compute
 * capability). The table itself is generated: kernels/generated/registry.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn_kernels.h"
#include "qattn_kernels_sparse.h"
#include "registry.h"
#include "wgmma_form.h"
#include "wgmma_keys.h"

#ifndef QATTN_KERNELS_BACKEND_DESC
#define QATTN_KERNELS_BACKEND_DESC "unknown"
#endif

size_t qattn_kernels_count(void)
{
    return qattn_kernels_table_len;
}

const qattn_kernels_sig *qattn_kernels_get(size_t i)
{
    return i < qattn_kernels_table_len ? &qattn_kernels_table[i] : NULL;
}

const char *qattn_kernels_backend(void)
{
    return QATTN_KERNELS_BACKEND_DESC;
}

/* "a, b, c" of the formats in bit set */
static void fmt_set(unsigned bits, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int f = 0; f < (int)QATTN_FMT_COUNT; f++)
        if (bits & (1u << f)) {
            int w = snprintf(buf + n, len - n, "%s%s", n ? "/" : "", qattn_fmt_name((qattn_fmt)f));
            if (w < 0 || (size_t)w >= len - n)
                return;
            n += (size_t)w;
        }
}

static const char *acc_name(qattn_acc a)
{
    return a == QATTN_ACC_FP16 ? "fp16" : a == QATTN_ACC_FP22 ? "fp22" : "fp32";
}

static void mask_set(unsigned bits, char *buf, size_t len)
{
    static const char *names[] = {"none", "causal", "causal-br", "window"};
    size_t n = 0;
    buf[0] = '\0';
    for (int m = 0; m < 4; m++)
        if (bits & (1u << m)) {
            int w = snprintf(buf + n, len - n, "%s%s", n ? "/" : "", names[m]);
            if (w < 0 || (size_t)w >= len - n)
                return;
            n += (size_t)w;
        }
}

const char *qattn_kernels_path_name(qattn_kernels_path p)
{
    static const char *const names[QATTN_KERNELS_PATH_COUNT] = {"portable", "mma", "mfma", "wgmma"};
    return (unsigned)p < QATTN_KERNELS_PATH_COUNT ? names[p] : "?";
}

/* "sm_89+", "sm_90 only", or "" (any device) */
static void cc_text(const qattn_kernels_sig *g, char *buf, size_t len)
{
    if (!g->cc_min && !g->cc_max)
        snprintf(buf, len, "any device");
    else if (g->cc_min == g->cc_max)
        snprintf(buf, len, "sm_%d only", g->cc_min);
    else if (!g->cc_max)
        snprintf(buf, len, "sm_%d and newer", g->cc_min);
    else
        snprintf(buf, len, "sm_%d to sm_%d", g->cc_min, g->cc_max);
}

char *qattn_kernels_describe(const qattn_kernels_sig *g, char *buf, size_t len)
{
    char in[64], out[64], masks[64], cc[32], fuse[32];
    cc_text(g, cc, sizeof cc);
    fmt_set(g->fuse_q, fuse, sizeof fuse);
    fmt_set(g->in_fmts, in, sizeof in);
    fmt_set(g->out_fmts, out, sizeof out);
    mask_set(g->masks, masks, sizeof masks);
    if (g->family == QATTN_KERNELS_FAMILY_QUANT) {
        snprintf(buf, len, "quant %s: in %s -> %s; groups %s; smooth %s%s%s; varlen %s; routes %s; [%s]",
                 qattn_kernels_path_name(g->path), in, out, g->qk_groups, g->smooth & QATTN_SMOOTH_Q ? "q-blocks " : "",
                 g->smooth & QATTN_SMOOTH_K ? "k " : "", g->smooth & QATTN_SMOOTH_V ? "v" : "", g->varlen ? "yes" : "no",
                 g->quant_routes ? "portable, tiled, lean, streamed, cast per operand; K+V serial, one-grid, streams"
                                 : "portable",
                 g->arch);
        return buf;
    }
    if (g->family == QATTN_KERNELS_FAMILY_DECODE) {
        char cf[96];
        fmt_set(g->cache_fmts, cf, sizeof cf);
        snprintf(buf, len, "decode %s: d=%d; q %s -> out %s; cache %s%s; %s; masks %s; split-KV + combine; %s; [%s]",
                 qattn_kernels_path_name(g->path), g->head_dim, in, out, cf,
                 g->cache_is_in ? " (16-bit: the query's dtype)" : "", g->qk_groups, masks, cc, g->arch);
        return buf;
    }
    if (g->family == QATTN_KERNELS_FAMILY_SPARSE) {
        char d[16];
        snprintf(d, sizeof d, g->head_dim ? "d=%d" : "d<=%d", g->head_dim ? g->head_dim : QATTN_KERNELS_SPARSE_D_MAX);
        snprintf(buf, len, "sparse %s: %s; q %s -> out %s; variants %s%s%s; %s; per-query lists, paged prefix + "
                 "extend, sinks, gqa, lse; %s; [%s]",
                 qattn_kernels_path_name(g->path), d, in, out,
                 (g->sparse_variants >> QATTN_KERNELS_SPARSE_BF16) & 1u ? "bf16 prepass" : "",
                 g->sparse_variants == ((1u << QATTN_KERNELS_SPARSE_BF16) | (1u << QATTN_KERNELS_SPARSE_FUSED)) ? " " : "",
                 (g->sparse_variants >> QATTN_KERNELS_SPARSE_FUSED) & 1u ? "fused" : "", g->qk_groups, cc, g->arch);
        return buf;
    }
    char solo[256] = "", tma[96] = "", most[64] = "at any length";
    if (qattn_registry_wg_both(g)) {
        const long k0 = qattn_kernels_wg_solo_keys(g, 0), k1 = qattn_kernels_wg_solo_keys(g, 1);
        if (k0 > 0)
            snprintf(most, sizeof most, "where a row sees <= %ld keys on average", k0);
        if (qattn_wg_solo_tma(g->q, g->p) && k1 > 0)
            snprintf(tma, sizeof tma, " (up to %ld with whole 16-row groups, no varlen: K, V by TMA)", k1);
        else if (qattn_wg_solo_tma(g->q, g->p))
            snprintf(tma, sizeof tma, " (at any length with whole 16-row groups, no varlen: K, V by TMA)");
        snprintf(solo, sizeof solo, "; blocks of one warpgroup %s%s, else of %s", most, tma,
                 qattn_kernels_wg_form_name(qattn_wg_nc(g->q)));
    }
    snprintf(buf, len,
             "attn-fwd %s: d=%d q=%s k=%s p=%s%s v=%s acc=%s%s; qk groups %s; v groups %s; kblock<=%d; masks %s; "
             "varlen %s; gqa %s; lse %s; out %s; %s%s%s%s%s%s%s; [%s]",
             qattn_kernels_path_name(g->path), g->head_dim, qattn_fmt_name(g->q), qattn_fmt_name(g->k), qattn_fmt_name(g->p),
             g->p_static == 3 ? "[@static]" : g->p_static == 2 ? "@static" : "", qattn_fmt_name(g->v), acc_name(g->acc),
             g->two_level ? "[+fp32:N]" : "", g->qk_groups, g->v_groups, g->kblock_max, masks,
             g->varlen ? "yes" : "no", g->gqa ? "yes" : "no", g->lse ? "yes" : "no", out, cc,
             g->fuse_q ? "; quantizes Q itself from " : "", g->fuse_q ? fuse : "",
             g->fuse_q ? " (token-local groups of a 128-row tile)" : "",
             g->ds_plane ? "; smooth=q's dS through a plane (4 bytes a head, Q block and key) written first" : "",
             qattn_registry_wg_attn(g) && qattn_wg_i4w_can(g->q, g->p, g->acc)
                 ? "; int4 codes widened to int8 by a pass first where the key blocks go by TMA (no varlen, "
                   "lengths of whole 16-row groups), else unpacked by the producer"
                 : "",
             solo, g->arch);
    return buf;
}

const qattn_kernels_sig *qattn_kernels_pick(qattn_kernels_family fam, qattn_kernels_misfit_fn misfit, const void *pb,
                                            int cc, unsigned paths, const char *none_built, const char **why)
{
    if (cc == 0)
        cc = qattn_kernels_dev_cc();
    if (paths == 0)
        paths = (1u << QATTN_KERNELS_PATH_COUNT) - 1u;
    *why = none_built;
    const qattn_kernels_sig *best = NULL;
    for (size_t i = 0; i < qattn_kernels_table_len; i++) {
        const qattn_kernels_sig *g = &qattn_kernels_table[i];
        if (g->family != fam)
            continue;
        const char *m = misfit(g, pb, cc, paths);
        if (m)
            *why = m;
        else if (!best || g->path > best->path)
            best = g;
    }
    return best;
}

/* ---- dispatcher ---- */

#define MAXC 256

typedef struct cand {
    const qattn_kernels_sig *s[MAXC];
    size_t n;
} cand;

/* append the distinct texts of what the candidates offer */
typedef void (*offer_fn)(const qattn_kernels_sig *g, char *buf, size_t len);

static void offers(const cand *c, offer_fn f, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < c->n; i++) {
        char one[256];
        f(c->s[i], one, sizeof one);
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            char prev[256];
            f(c->s[j], prev, sizeof prev);
            seen = !strcmp(prev, one);
        }
        if (seen)
            continue;
        int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", one);
        if (w < 0 || (size_t)w >= len - n)
            return;
        n += (size_t)w;
    }
}

typedef int (*keep_fn)(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb);

/* keep the candidates k accepts; 0 if some remain, else an error naming
 * `what` and what the previous candidates offered */
static int narrow(cand *c, keep_fn k, offer_fn f, const qattn_scheme *s, const qattn_kernels_problem *pb,
                  const char *what, qattn_err *err)
{
    cand next;
    next.n = 0;
    for (size_t i = 0; i < c->n; i++)
        if (k(c->s[i], s, pb))
            next.s[next.n++] = c->s[i];
    if (next.n == 0) {
        char avail[512];
        offers(c, f, avail, sizeof avail);
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "no GPU kernel supports %s (instances offer: %s)",
                             what, avail[0] ? avail : "nothing");
    }
    *c = next;
    return QATTN_OK;
}

static int k_attn(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    (void)pb;
    return g->family == QATTN_KERNELS_FAMILY_ATTN_FWD && g->launch_attn;
}
static void o_attn(const qattn_kernels_sig *g, char *b, size_t n) { snprintf(b, n, "%s", g->name); }

static int k_dim(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    return g->head_dim == pb->d;
}
static void o_dim(const qattn_kernels_sig *g, char *b, size_t n) { snprintf(b, n, "d=%d", g->head_dim); }

static int k_qk(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    return g->q == s->q.fmt && g->k == s->k.fmt;
}
static void o_qk(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "q=%s k=%s", qattn_fmt_name(g->q), qattn_fmt_name(g->k));
}

static int k_pv(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    return g->p == s->p && g->v == s->v.fmt;
}
static void o_pv(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "p=%s v=%s", qattn_fmt_name(g->p), qattn_fmt_name(g->v));
}

static int k_pstatic(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    return (g->p_static >> (s->p_static ? 1 : 0)) & 1;
}
static void o_pstatic(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "p=%s%s", qattn_fmt_name(g->p),
             g->p_static == 3 ? " or p=@static" : g->p_static == 2 ? "@static" : " (plain cast)");
}

static int k_acc(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    return g->acc == s->acc && (s->acc_chunk == 0 || g->two_level);
}
static void o_acc(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "acc=%s%s", acc_name(g->acc), g->two_level ? "[+fp32:N]" : "");
}

/* Q/K: the portable path takes any token pattern, with one scale per token
 * group (no ,ch:); V: one scale per channel group over all tokens */
static int qk_group_ok(const qattn_operand *op)
{
    return !qattn_fmt_is_scaled(op->fmt) || op->group.ch == 0;
}
static int v_group_ok(const qattn_operand *op)
{
    return !qattn_fmt_is_scaled(op->fmt) || qattn_group_token_uniform(&op->group);
}
/* the mma.sync and wgmma paths (attn_fwd_mma.h, attn_fwd_wgmma.h): Q any
 * token pattern without ,ch: (one scale per row); K, for key blocks of KB
 * keys: mma.sync exactly thread:KB/8/2, wgmma any group that is one scale
 * on the keys a lane holds in the even / odd n-tiles of a block
 * (qattn_wg_kgroup_ok); V token-uniform */
static int mma_groups_ok(const qattn_scheme *s, int kb, int wgmma)
{
    const qattn_group *k = &s->k.group;
    const int k_ok = wgmma ? qattn_wg_kgroup_ok(*k, kb)
                           : k->tok == QATTN_TOK_THREAD && k->b == kb && k->s == 8 && k->w == 2 && k->ch == 0;
    return qattn_fmt_is_scaled(s->q.fmt) && qattn_fmt_is_scaled(s->k.fmt) && s->q.group.ch == 0 && k_ok &&
           v_group_ok(&s->v);
}
static int k_groups(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    /* the quantized mma.sync and wgmma instances (the 16-bit wgmma baselines take unscaled operands) */
    if ((g->path == QATTN_KERNELS_PATH_MMA || g->path == QATTN_KERNELS_PATH_WGMMA) && qattn_fmt_is_scaled(g->q))
        return mma_groups_ok(s, g->kblock_max, g->path == QATTN_KERNELS_PATH_WGMMA);
    /* the portable and the MFMA path (attn_fwd_mfma.h: a scale per key
     * staged with the key block, one per row held by its lane) */
    return qk_group_ok(&s->q) && qk_group_ok(&s->k) && v_group_ok(&s->v);
}
static void o_groups(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "Q/K %s, V %s", g->qk_groups, g->v_groups);
}

static int k_smooth(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    /* the wgmma path's dS (int4 producer) */
    if (g->path == QATTN_KERNELS_PATH_WGMMA && (s->smooth & QATTN_SMOOTH_Q) &&
        !qattn_wg_dsq_ok(qattn_scheme_qblock(s), pb->in))
        return 0;
    return (g->smooth & s->smooth) == s->smooth;
}
static void o_smooth(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "smooth=%s%s%s%s", g->smooth & QATTN_SMOOTH_Q ? "q" : "", g->smooth & QATTN_SMOOTH_K ? "k" : "",
             g->smooth & QATTN_SMOOTH_V ? "v" : "",
             g->path == QATTN_KERNELS_PATH_WGMMA && (g->smooth & QATTN_SMOOTH_Q)
                 ? " (q: fp16 input, qblock a multiple of 16)"
                 : "");
}

static int k_kblock(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    if (g->path == QATTN_KERNELS_PATH_MMA || g->path == QATTN_KERNELS_PATH_WGMMA) /* one key block = one fp22 chunk */
        return s->kblock == g->kblock_max && s->acc_chunk == (g->two_level ? g->kblock_max : 0);
    if (g->path == QATTN_KERNELS_PATH_MFMA) /* one key block of kblock_max keys */
        return s->kblock == g->kblock_max;
    return s->kblock >= 1 && s->kblock <= g->kblock_max;
}
static void o_kblock(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "kblock%s%d", g->path == QATTN_KERNELS_PATH_PORTABLE ? "<=" : "=", g->kblock_max);
}

static int k_mask(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    return (g->masks >> pb->mask.kind) & 1u;
}
static void o_mask(const qattn_kernels_sig *g, char *b, size_t n) { mask_set(g->masks, b, n); }

static int k_varlen(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    return !pb->varlen || g->varlen;
}
static void o_varlen(const qattn_kernels_sig *g, char *b, size_t n)
{
    snprintf(b, n, "%s", g->varlen ? "varlen" : "equal lengths only");
}

static int k_gqa(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    return pb->hq == pb->hkv || g->gqa;
}
static void o_gqa(const qattn_kernels_sig *g, char *b, size_t n) { snprintf(b, n, "%s", g->gqa ? "GQA" : "MHA only"); }

static int k_lse(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    return !pb->lse || g->lse;
}
static void o_lse(const qattn_kernels_sig *g, char *b, size_t n) { snprintf(b, n, "%s", g->lse ? "LSE" : "no LSE"); }

static int k_out(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    return (g->out_fmts >> s->out) & 1u;
}
static void o_out(const qattn_kernels_sig *g, char *b, size_t n)
{
    char f[64];
    fmt_set(g->out_fmts, f, sizeof f);
    snprintf(b, n, "out=%s", f);
}

/* the device (pb->cc, resolved by qattn_kernels_find) can run the code, and
 * the path is one the caller allows (pb->paths, resolved) */
static int k_device(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    if (!((pb->paths >> g->path) & 1u))
        return 0;
    if (pb->cc <= 0)
        return 1;
    return (!g->cc_min || pb->cc >= g->cc_min) && (!g->cc_max || pb->cc <= g->cc_max);
}
static void o_device(const qattn_kernels_sig *g, char *b, size_t n)
{
    char cc[32];
    cc_text(g, cc, sizeof cc);
    snprintf(b, n, "%s: %s", qattn_kernels_path_name(g->path), cc);
}

static int k_quant(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)s;
    return g->family == QATTN_KERNELS_FAMILY_QUANT && g->launch_quant && ((g->in_fmts >> pb->in) & 1u);
}
static void o_quant(const qattn_kernels_sig *g, char *b, size_t n)
{
    char f[64];
    fmt_set(g->in_fmts, f, sizeof f);
    snprintf(b, n, "%s input", f);
}

static int k_quant_fmt(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    (void)pb;
    return ((g->out_fmts >> s->q.fmt) & 1u) && ((g->out_fmts >> s->k.fmt) & 1u) && ((g->out_fmts >> s->v.fmt) & 1u);
}
static void o_quant_fmt(const qattn_kernels_sig *g, char *b, size_t n) { fmt_set(g->out_fmts, b, n); }

/* the code layouts a quant instance writes */
static unsigned quant_layouts(const qattn_kernels_sig *g)
{
    return g->layouts ? g->layouts : 1u << QATTN_KERNELS_LAYOUT_ROWS;
}

static int check_problem(const qattn_scheme *s, const qattn_kernels_problem *pb, qattn_err *err)
{
    if (pb->nseq <= 0 || pb->hq <= 0 || pb->hkv <= 0 || pb->d <= 0 || pb->seqlen_q < 0 || pb->seqlen_k < 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "bad problem: nseq %d, heads %d/%d, d %d, lengths %d/%d", pb->nseq,
                             pb->hq, pb->hkv, pb->d, pb->seqlen_q, pb->seqlen_k);
    if (pb->hq % pb->hkv)
        return qattn_err_set(err, QATTN_ERR_ARG, "q heads %d are not a multiple of kv heads %d", pb->hq, pb->hkv);
    if (pb->in != QATTN_FMT_FP16 && pb->in != QATTN_FMT_BF16 && pb->in != QATTN_FMT_FP32)
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED, "input dtype %s (fp16, bf16 or fp32)",
                             qattn_fmt_name(pb->in));
    if (pb->mask.kind == QATTN_MASK_WINDOW && (pb->mask.left < 0 || pb->mask.right < 0))
        return qattn_err_set(err, QATTN_ERR_ARG, "window mask needs non-negative sizes");
    if ((s->smooth & QATTN_SMOOTH_Q) && qattn_scheme_qblock(s) <= 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "smooth=q needs a Q block");
    if (s->rope > 0)
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "rope=%d: no instance keeps a bf16 part of the head (the emulation does)", s->rope);
    /* e4m3 with acc=fp22 and one scale a row's channels implies that sum already (the instances form it) */
    if (s->qk_fp22 && (s->acc != QATTN_ACC_FP22 || s->q.group.ch > 0 || s->k.group.ch > 0))
        return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                             "qk=fp22: no attention instance sums Q.K per channel group or beside acc=%s (the "
                             "emulation does; e4m3 with acc=fp22 and no channel groups forms it anyway)",
                             s->acc == QATTN_ACC_FP16 ? "fp16" : "fp32");
    return QATTN_OK;
}

/* pb with the device's compute capability and the allowed paths filled in */
static qattn_kernels_problem resolve_device(const qattn_kernels_problem *in)
{
    qattn_kernels_problem pb = *in;
    if (pb.cc == 0)
        pb.cc = qattn_kernels_dev_cc();
    if (pb.paths == 0) {
        const char *sync = getenv("QATTN_MMA_SYNC"); /* an override for experiments: mma.sync on sm_90 */
        pb.paths = ((1u << QATTN_KERNELS_PATH_COUNT) - 1u) &
                   ~(sync && sync[0] == '1' ? 1u << QATTN_KERNELS_PATH_WGMMA : 0u);
    }
    return pb;
}

int qattn_kernels_find(const qattn_scheme *s, const qattn_kernels_problem *pbin, const qattn_kernels_sig **attn,
                       const qattn_kernels_sig **quant, qattn_err *err)
{
    int rc = check_problem(s, pbin, err);
    if (rc)
        return rc;
    const qattn_kernels_problem pbv = resolve_device(pbin), *pb = &pbv;
    char what[160], grp[64];
    cand c;
    c.n = 0;
    for (size_t i = 0; i < qattn_kernels_table_len && c.n < MAXC; i++)
        c.s[c.n++] = &qattn_kernels_table[i];
    if ((rc = narrow(&c, k_attn, o_attn, s, pb, "attention forward (no instance was built)", err)))
        return rc;
    /* paths asked for explicitly: those first, so that the message names
     * what those paths cannot do (e.g. `qattn kernels --plan`'s fast paths) */
    if (pbin->paths) {
        snprintf(what, sizeof what, "the paths asked for on this device (sm_%d)", pb->cc);
        if ((rc = narrow(&c, k_device, o_device, s, pb, what, err)))
            return rc;
    }
    snprintf(what, sizeof what, "head dim %d", pb->d);
    if ((rc = narrow(&c, k_dim, o_dim, s, pb, what, err)))
        return rc;
    snprintf(what, sizeof what, "q=%s k=%s", qattn_fmt_name(s->q.fmt), qattn_fmt_name(s->k.fmt));
    if ((rc = narrow(&c, k_qk, o_qk, s, pb, what, err)))
        return rc;
    snprintf(what, sizeof what, "p=%s v=%s after q=%s k=%s", qattn_fmt_name(s->p), qattn_fmt_name(s->v.fmt),
             qattn_fmt_name(s->q.fmt), qattn_fmt_name(s->k.fmt));
    if ((rc = narrow(&c, k_pv, o_pv, s, pb, what, err)))
        return rc;
    snprintf(what, sizeof what, "p=%s%s", qattn_fmt_name(s->p), s->p_static ? "@static" : " (plain cast)");
    if ((rc = narrow(&c, k_pstatic, o_pstatic, s, pb, what, err)))
        return rc;
    if (s->acc_chunk > 0)
        snprintf(what, sizeof what, "acc=%s+fp32:%d", acc_name(s->acc), s->acc_chunk);
    else
        snprintf(what, sizeof what, "acc=%s", acc_name(s->acc));
    if ((rc = narrow(&c, k_acc, o_acc, s, pb, what, err)))
        return rc;
    if (!qk_group_ok(&s->q) || !qk_group_ok(&s->k))
        snprintf(what, sizeof what, "%s=%s@%s (Q/K scales split along channels)", qk_group_ok(&s->q) ? "k" : "q",
                 qattn_fmt_name(qk_group_ok(&s->q) ? s->k.fmt : s->q.fmt),
                 qattn_group_format(qk_group_ok(&s->q) ? &s->k.group : &s->q.group, grp, sizeof grp));
    else if (!v_group_ok(&s->v))
        snprintf(what, sizeof what, "v=%s@%s (V scales that vary along tokens)", qattn_fmt_name(s->v.fmt),
                 qattn_group_format(&s->v.group, grp, sizeof grp));
    else {
        char grp2[64];
        snprintf(what, sizeof what, "the scale groups q=%s@%s k=%s@%s", qattn_fmt_name(s->q.fmt),
                 qattn_group_format(&s->q.group, grp, sizeof grp), qattn_fmt_name(s->k.fmt),
                 qattn_group_format(&s->k.group, grp2, sizeof grp2));
    }
    if ((rc = narrow(&c, k_groups, o_groups, s, pb, what, err)))
        return rc;
    snprintf(what, sizeof what, "smoothing %s%s%s", s->smooth & QATTN_SMOOTH_Q ? "q" : "",
             s->smooth & QATTN_SMOOTH_K ? "k" : "", s->smooth & QATTN_SMOOTH_V ? "v" : "");
    if ((rc = narrow(&c, k_smooth, o_smooth, s, pb, what, err)))
        return rc;
    snprintf(what, sizeof what, "kblock=%d", s->kblock);
    if ((rc = narrow(&c, k_kblock, o_kblock, s, pb, what, err)))
        return rc;
    qattn_mask_format(&pb->mask, grp, sizeof grp);
    snprintf(what, sizeof what, "mask %s", grp);
    if ((rc = narrow(&c, k_mask, o_mask, s, pb, what, err)))
        return rc;
    if ((rc = narrow(&c, k_varlen, o_varlen, s, pb, "variable sequence lengths", err)))
        return rc;
    snprintf(what, sizeof what, "grouped-query attention (%d q heads on %d kv heads)", pb->hq, pb->hkv);
    if ((rc = narrow(&c, k_gqa, o_gqa, s, pb, what, err)))
        return rc;
    if ((rc = narrow(&c, k_lse, o_lse, s, pb, "LSE output", err)))
        return rc;
    snprintf(what, sizeof what, "out=%s", qattn_fmt_name(s->out));
    if ((rc = narrow(&c, k_out, o_out, s, pb, what, err)))
        return rc;
    if (pb->cc > 0)
        snprintf(what, sizeof what, "this device (sm_%d)%s", pb->cc,
                 pbin->paths ? " on the paths asked for" : "");
    else
        snprintf(what, sizeof what, "the paths asked for");
    if ((rc = narrow(&c, k_device, o_device, s, pb, what, err)))
        return rc;
    /* the most preferred path (the order of qattn_kernels_path) */
    const qattn_kernels_sig *best = c.s[0];
    for (size_t i = 1; i < c.n; i++)
        if (c.s[i]->path > best->path)
            best = c.s[i];
    if (attn)
        *attn = best;
    if (!quant)
        return QATTN_OK;
    c.n = 0;
    for (size_t i = 0; i < qattn_kernels_table_len && c.n < MAXC; i++)
        c.s[c.n++] = &qattn_kernels_table[i];
    snprintf(what, sizeof what, "quantizing %s input", qattn_fmt_name(pb->in));
    if ((rc = narrow(&c, k_quant, o_quant, s, pb, what, err)))
        return rc;
    snprintf(what, sizeof what, "storing q=%s k=%s v=%s", qattn_fmt_name(s->q.fmt), qattn_fmt_name(s->k.fmt),
             qattn_fmt_name(s->v.fmt));
    if ((rc = narrow(&c, k_quant_fmt, o_quant_fmt, s, pb, what, err)))
        return rc;
    {
        cand next;
        next.n = 0;
        for (size_t i = 0; i < c.n; i++)
            if ((quant_layouts(c.s[i]) >> best->v_layout) & 1u)
                next.s[next.n++] = c.s[i];
        if (next.n == 0)
            return qattn_err_set(err, QATTN_KERNELS_ERR_UNSUPPORTED,
                                 "no GPU kernel writes the V codes in the layout %s reads (%s)", best->name,
                                 best->v_layout == QATTN_KERNELS_LAYOUT_TRANSPOSED ? "transposed" : "rows");
        c = next;
    }
    /* the fast path (name quant_fast_*: it hands what it does not take to the
     * portable kernels) before the portable one */
    *quant = c.s[0];
    for (size_t i = 0; i < c.n; i++)
        if (strstr(c.s[i]->name, "quant_fast_")) {
            *quant = c.s[i];
            break;
        }
    return QATTN_OK;
}
