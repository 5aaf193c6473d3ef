/* The choices a launch takes within its instance, host C: the quantization
 * family's routes and K / V modes, the wgmma attention instances' block forms
 * (one warpgroup, producer forms, ping-pong, persistent, TMA, the widened int4
 * codes, fused Q), the environment's comparison switches, and the hardware
 * limits `qattn kernels` names. The instance itself: dispatch.c. */
#include <stdlib.h>
#include <string.h>

#include "qattn_kernels.h"
#include "registry.h"
#include "wgmma_form.h"
#include "wgmma_keys.h"

/* ---- quant family: routes ---- */

const char *qattn_kernels_qroute_name(qattn_kernels_qroute r)
{
    static const char *const names[QATTN_KERNELS_QROUTE_COUNT] = {"auto", "portable", "tiled", "lean", "streamed", "cast"};
    return (unsigned)r < QATTN_KERNELS_QROUTE_COUNT ? names[r] : "?";
}

const char *qattn_kernels_kvmode_name(qattn_kernels_kvmode m)
{
    static const char *const names[QATTN_KERNELS_KV_COUNT] = {"auto", "serial", "one-grid", "streams"};
    return (unsigned)m < QATTN_KERNELS_KV_COUNT ? names[m] : "?";
}

int qattn_kernels_env_is(const char *name, const char *value)
{
    const char *e = getenv(name);
    return e && !strcmp(e, value);
}
/* a comparison switch (QATTN_WG_PERSIST, _TMA) set off: its value starts with 0 */
static int env_first_zero(const char *name)
{
    const char *e = getenv(name);
    return e && e[0] == '0';
}

#define QROUTE_BIT(r) (1u << QATTN_KERNELS_QROUTE_##r)

qattn_kernels_qroute qattn_kernels_quant_route(unsigned routes, const qattn_kernels_quant_params *p)
{
    const int stats = p->group.tok == QATTN_TOK_TENSOR || p->group.tok == QATTN_TOK_CHANNEL ||
                      p->smooth == QATTN_KERNELS_SMOOTH_TOKENS;
    if (routes & QROUTE_BIT(CAST)) /* the unscaled casts: no other fast route takes them */
        return QATTN_KERNELS_QROUTE_CAST;
    if (qattn_kernels_env_is("QATTN_QUANT_LEAN", "0"))
        routes &= ~(QROUTE_BIT(LEAN) | QROUTE_BIT(STREAMED));
    if (qattn_kernels_env_is("QATTN_QUANT_STREAM", "0"))
        routes &= ~QROUTE_BIT(STREAMED);
    if ((routes & QROUTE_BIT(STREAMED)) && (stats || qattn_kernels_env_is("QATTN_QUANT_STREAM", "1")))
        return QATTN_KERNELS_QROUTE_STREAMED;
    if (routes & QROUTE_BIT(LEAN))
        return QATTN_KERNELS_QROUTE_LEAN;
    if (routes & QROUTE_BIT(TILED))
        return QATTN_KERNELS_QROUTE_TILED;
    return QATTN_KERNELS_QROUTE_PORTABLE;
}

qattn_kernels_kvmode qattn_kernels_quant_kv_mode(unsigned modes, qattn_kernels_qroute kr, qattn_kernels_qroute vr)
{
    const int both = kr == QATTN_KERNELS_QROUTE_STREAMED && vr == QATTN_KERNELS_QROUTE_STREAMED;
    if (getenv("QATTN_QUANT_KV")) {
        if (both && qattn_kernels_env_is("QATTN_QUANT_KV", "streams") && (modes & (1u << QATTN_KERNELS_KV_STREAMS)))
            return QATTN_KERNELS_KV_STREAMS;
        return QATTN_KERNELS_KV_SERIAL;
    }
    if (both && (modes & (1u << QATTN_KERNELS_KV_ONE_GRID)))
        return QATTN_KERNELS_KV_ONE_GRID;
    return QATTN_KERNELS_KV_SERIAL;
}

int qattn_kernels_quant_tpr_override(void)
{
    const char *e = getenv("QATTN_QUANT_STREAM_TPR");
    const int n = e ? atoi(e) : 0;
    return n > 0 && n <= 4096 ? n : 0;
}

int qattn_kernels_quant_choose(const qattn_kernels_sig *g, qattn_kernels_quant_params *p, qattn_err *err)
{
    if (!g || g->family != QATTN_KERNELS_FAMILY_QUANT || !g->launch_quant)
        return qattn_err_set(err, QATTN_ERR_ARG, "quant: %s is not a quantization instance", g ? g->name : "NULL");
    const unsigned routes = g->quant_routes ? g->quant_routes(p) : QROUTE_BIT(PORTABLE);
    p->route = qattn_kernels_quant_route(routes, p);
    if (p->stream_tpr == 0)
        p->stream_tpr = qattn_kernels_quant_tpr_override();
    return QATTN_OK;
}

int qattn_kernels_quant_choose_kv(const qattn_kernels_sig *g, qattn_kernels_quant_params *k,
                                  qattn_kernels_quant_params *v, qattn_err *err)
{
    int rc = qattn_kernels_quant_choose(g, k, err);
    if (!rc)
        rc = qattn_kernels_quant_choose(g, v, err);
    if (rc)
        return rc;
    const unsigned modes = g->quant_kv_modes ? g->quant_kv_modes(k, v) : 1u << QATTN_KERNELS_KV_SERIAL;
    k->kv = v->kv = qattn_kernels_quant_kv_mode(modes, k->route, v->route);
    return QATTN_OK;
}

int qattn_kernels_fuse_q_can(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    return g && ((g->fuse_q >> pb->in) & 1u) && s->q.fmt == QATTN_FMT_INT8 && !(s->smooth & QATTN_SMOOTH_Q) &&
           qattn_wg_qfuse_group_ok(s->q.group);
}

int qattn_kernels_fuse_q_ok(const qattn_kernels_sig *g, const qattn_scheme *s, const qattn_kernels_problem *pb)
{
    return qattn_kernels_fuse_q_can(g, s, pb) && (pb->fuse_q || qattn_kernels_env_is("QATTN_FUSE_Q", "1"));
}

int qattn_kernels_wg_form(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q)
{
    if (!qattn_registry_wg_attn(g))
        return 0;
    if (fused_q) /* the one form that quantizes Q (wgmma_qfuse.h) */
        return QATTN_WG_FORM_NC2;
    const char *env = getenv("QATTN_WG_NC");
    const int asked = env && env[0] >= '1' && env[0] <= '3' ? env[0] - '0' : pb->wg_form;
    return qattn_wg_form_run(g->head_dim, g->kblock_max, g->q, g->p, g->acc, asked, pb->mask, pb->seqlen_k,
                             qattn_kernels_wg_tma_lengths(pb));
}

int qattn_kernels_wg_tma_wanted(void) { return !env_first_zero("QATTN_WG_TMA"); }

void qattn_kernels_wg_choose(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q,
                             qattn_kernels_attn_params *ap)
{
    if (!qattn_registry_wg_attn(g))
        return;
    ap->wg_form = qattn_kernels_wg_form(g, pb, fused_q);
    ap->wg_pingpong = qattn_kernels_wg_pingpong(g, pb, fused_q) ? 1 : -1;
    ap->wg_tma = qattn_kernels_wg_tma_wanted() ? 0 : -1;
    ap->wg_i4w = qattn_kernels_wg_i4w(g, pb) ? 1 : 0;
}

int qattn_kernels_wg_i4w(const qattn_kernels_sig *g, const qattn_kernels_problem *pb)
{
    return qattn_registry_wg_attn(g) && qattn_kernels_wg_tma_wanted() && !env_first_zero("QATTN_WG_I4W") &&
           qattn_wg_i4w(g->q, g->p, g->acc, pb->varlen, pb->seqlen_k);
}

int qattn_kernels_wg_persist(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q,
                             const qattn_kernels_attn_params *ap)
{
    if (!qattn_registry_wg_attn(g) ||
        env_first_zero("QATTN_WG_PERSIST"))
        return 0;
    const int form = qattn_kernels_wg_form(g, pb, fused_q);
    if (form == QATTN_WG_FORM_SOLO || !qattn_kernels_wg_tma_lengths(pb) || pb->seqlen_k <= 0 ||
        !qattn_wg_persist(g->head_dim, g->q, g->p, g->acc, fused_q, pb->mask, pb->varlen))
        return 0;
    return !ap || (qattn_kernels_wg_tma_wanted() &&
                   qattn_wg_tma_rows16((uintptr_t)ap->k, (uintptr_t)ap->v, ap->k_sb, ap->k_sh, ap->k_st, ap->v_sb, ap->v_sh,
                                       ap->v_st, ap->cu_k != NULL));
}

int qattn_kernels_wg_pingpong(const qattn_kernels_sig *g, const qattn_kernels_problem *pb, int fused_q)
{
    const char *pp = getenv("QATTN_WG_PINGPONG"); /* its first character decides */
    if (!qattn_registry_wg_attn(g) ||
        (g->q != QATTN_FMT_FP16 && g->q != QATTN_FMT_BF16) || (pp && pp[0] == '0'))
        return 0;
    if (qattn_kernels_wg_form(g, pb, fused_q) == QATTN_WG_FORM_SOLO)
        return 0;
    return (pp && pp[0] == '1') || qattn_wg_pingpong(g->head_dim, g->q, g->p, g->acc, pb->mask);
}

const char *qattn_kernels_wg_form_name(int form)
{
    return form == QATTN_WG_FORM_SOLO  ? "one warpgroup"
           : form == QATTN_WG_FORM_NC2 ? "two consumer warpgroups"
           : form == QATTN_WG_FORM_NC3 ? "three consumer warpgroups"
                                       : "";
}

int qattn_kernels_wg_multi(const qattn_kernels_sig *g) { return qattn_wg_nc(g->q); }

int qattn_kernels_wg_tma_lengths(const qattn_kernels_problem *pb) { return qattn_wg_tma_lengths(pb->varlen, pb->seqlen_k); }

long qattn_kernels_wg_solo_keys(const qattn_kernels_sig *g, int tma)
{
    return qattn_registry_wg_both(g) ? qattn_wg_solo_keys(g->head_dim, g->kblock_max, g->q, g->p, tma) : 0;
}

const char *qattn_kernels_hw_limit(const qattn_scheme *s, int cc, int i)
{
    const int fp8_pv = s->p == QATTN_FMT_E4M3 || s->p == QATTN_FMT_E5M2;
    const char *lim[2];
    int n = 0;
    if (cc == 90 && s->p == QATTN_FMT_E4M3 && s->v.fmt == QATTN_FMT_E4M3 && s->acc == QATTN_ACC_FP32)
        lim[n++] = s->q.fmt == QATTN_FMT_E4M3
                       ? "acc=fp32 with e4m3 Q.K and P.V: the fp8 tensor-core MMA keeps about 22 bits of its sum "
                         "(fp22; its Q.K misses the fp32 emulation by 1.8e-2 of max |O| at d = 128, H100), so the "
                         "sm_90 instance widens Q, K, P and V to fp16 (exact) for the f16 MMA (25 bits a k-step of 16)"
                       : "acc=fp32 with e4m3 P.V: the fp8 tensor-core MMA keeps about 22 bits of its sum (fp22), so "
                         "the sm_90 instances widen P and V to fp16 (exact) for the f16 MMA (25 bits a k-step of 16 "
                         "keys)";
    else if ((cc == 89 || cc == 90) && fp8_pv && s->acc == QATTN_ACC_FP32)
        lim[n++] = "acc=fp32 with fp8 P.V: the fp8 tensor-core MMA of sm_89 / sm_90 keeps about 22 bits of its sum "
                   "(fp22), so only the portable path accumulates in fp32 exactly";
    if (cc == 90 && (s->q.fmt == QATTN_FMT_INT4 || s->k.fmt == QATTN_FMT_INT4))
        lim[n++] = "int4 Q.K: sm_90 has no int4 tensor-core MMA (ptxas emulates mma.s4); int4 codes are int8 values, "
                   "so a Hopper kernel reads them as int8 codes (exact: widened by a pass, or unpacked in shared "
                   "memory)";
    return i >= 0 && i < n ? lim[i] : NULL;
}
