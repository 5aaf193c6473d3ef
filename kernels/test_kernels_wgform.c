/* The wgmma path's rules, checked on the host: the block form a problem takes
 * (wgmma_form.h: one warpgroup or consumer warpgroups, persistent CTAs,
 * ping-pong) on hand-made signatures and on the registry's instances, the
 * scores' conversion by form, and the 8-bit tile's key order and the K
 * groups it can index (wgmma_keys.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "qattn/numerics.h"
#include "qattn_kernels.h"
#include "wgmma_form.h"
#include "wgmma_keys.h"

/* the wgmma block form (wgmma_form.h): which instances have both, and the rule's choice by the
 * keys a row sees (hand-worked cases); the dispatcher's answer for the registry's instances */

/* a wgmma attention signature made by hand for the form rules (this build's registry may hold no wgmma
 * instance): head dim d; case c 2 fp16, 3 int8 Q.K with e4m3 P.V, else bf16 */
static qattn_kernels_sig wg_rule_sig(const char *name, int d, int c)
{
    qattn_kernels_sig g;
    memset(&g, 0, sizeof g);
    g.name = name, g.family = QATTN_KERNELS_FAMILY_ATTN_FWD, g.path = QATTN_KERNELS_PATH_WGMMA;
    g.head_dim = d, g.kblock_max = 128, g.acc = QATTN_ACC_FP32;
    g.q = g.k = g.p = g.v = c == 2 ? QATTN_FMT_FP16 : QATTN_FMT_BF16;
    if (c == 3)
        g.q = g.k = QATTN_FMT_INT8, g.p = g.v = QATTN_FMT_E4M3, g.acc = QATTN_ACC_FP22;
    return g;
}
static void check_wg_form(void)
{
    const qattn_mask none = {QATTN_MASK_NONE, 0, 0}, causal = {QATTN_MASK_CAUSAL, 0, 0};
    const qattn_mask br = {QATTN_MASK_CAUSAL_BR, 0, 0}, win = {QATTN_MASK_WINDOW, 1000, 23};
    const int I8 = QATTN_FMT_INT8, E4 = QATTN_FMT_E4M3, FP22 = QATTN_ACC_FP22;
    CHECK(qattn_wg_solo_can(128, 128, I8, E4, FP22) && qattn_wg_solo_can(128, 64, I8, E4, FP22) &&
              qattn_wg_solo_can(64, 128, E4, E4, FP22),
          "sage2-8b-sm90, sage2-8b, fa3-fp8 have both forms");
    CHECK(qattn_wg_solo_can(128, 64, I8, I8, QATTN_ACC_FP32) && !qattn_wg_solo_can(128, 64, E4, I8, QATTN_ACC_FP32),
          "sage1-vb (int8 P.V, exact per block) has both");
    CHECK(qattn_wg_solo_can(128, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16) &&
              qattn_wg_solo_can(64, 128, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32) &&
              qattn_wg_solo_can(64, 128, QATTN_FMT_FP16, QATTN_FMT_FP16, QATTN_ACC_FP32) &&
              !qattn_wg_solo_can(128, 128, QATTN_FMT_FP16, QATTN_FMT_FP16, QATTN_ACC_FP32),
          "sage1-b (fp16 P.V, f16 O) and the baselines at d = 64 have both");
    CHECK(!qattn_wg_solo_can(128, 64, E4, E4, FP22) && !qattn_wg_solo_can(128, 128, I8, E4, QATTN_ACC_FP32) &&
              !qattn_wg_solo_can(128, 128, QATTN_FMT_INT4, E4, FP22) &&
              !qattn_wg_solo_can(128, 64, QATTN_FMT_FP16, QATTN_FMT_BF16, QATTN_ACC_FP32),
          "e4m3 Q.K with d > kb, widened P.V, int4, mixed 16-bit types have one");
    CHECK(qattn_wg_solo_tma(I8, E4) && qattn_wg_solo_tma(E4, E4) && qattn_wg_solo_tma(I8, I8) &&
              !qattn_wg_solo_tma(I8, QATTN_FMT_FP16) && !qattn_wg_solo_tma(QATTN_FMT_BF16, QATTN_FMT_BF16),
          "TMA loads: 8-bit K and V^T only");
    CHECK(qattn_wg_nc(I8) == QATTN_WG_FORM_NC3 && qattn_wg_nc(QATTN_FMT_INT4) == QATTN_WG_FORM_NC3 &&
              qattn_wg_nc(QATTN_FMT_FP16) == QATTN_WG_FORM_NC2,
          "the producer form: three consumers for 8-bit codes, two for the baselines");
    CHECK(qattn_wg_row_keys(none, 4096) == 4096 && qattn_wg_row_keys(causal, 8191) == 4096 &&
              qattn_wg_row_keys(br, 8192) == 4096 && qattn_wg_row_keys(win, 65536) == 1024 && qattn_wg_row_keys(win, 500) == 500,
          "keys a row sees");
    /* loaded by cp.async (tma 0: varlen, or lengths not of whole 16-row groups) */
    CHECK(qattn_wg_form(128, 128, I8, E4, FP22, none, 4096, 0) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 128, I8, E4, FP22, none, 4097, 0) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(128, 128, I8, E4, FP22, causal, 8192, 0) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 128, I8, E4, FP22, causal, 16384, 0) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(128, 128, I8, E4, FP22, win, 1 << 20, 0) == QATTN_WG_FORM_SOLO,
          "int8 Q.K: one warpgroup up to 4096 keys a row");
    CHECK(qattn_wg_form(128, 128, E4, E4, FP22, none, 8192, 0) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 128, E4, E4, FP22, none, 8208, 0) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(64, 128, E4, E4, FP22, none, 8192, 0) == QATTN_WG_FORM_NC3,
          "e4m3 Q.K: up to 8192 at d = 128, 4096 at d = 64");
    /* K and V^T by TMA: e4m3 at d = 128 and the d = 64 instances at any length */
    CHECK(qattn_wg_form(128, 128, E4, E4, FP22, none, 1 << 20, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 64, I8, E4, FP22, none, 1 << 20, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 64, I8, E4, FP22, none, 1 << 20, 0) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(128, 128, I8, E4, FP22, none, 1 << 20, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 64, I8, E4, FP22, none, 4096, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 64, I8, E4, FP22, none, 4112, 1) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(128, 64, I8, E4, FP22, causal, 16384, 1) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(64, 128, E4, E4, FP22, none, 1 << 20, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 128, I8, E4, FP22, none, 1 << 20, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 128, E4, E4, FP22, none, 8192, 0) == QATTN_WG_FORM_NC3,
          "with TMA: e4m3 d = 128, int8 d = 128 with 128-key blocks and d = 64 always; 64-key int8 d = 128 as without");
    CHECK(qattn_wg_form(128, 64, I8, I8, QATTN_ACC_FP32, none, 1 << 20, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 64, I8, I8, QATTN_ACC_FP32, none, 8192, 0) == QATTN_WG_FORM_NC3,
          "int8 P.V: always with TMA, up to 4096 keys without");
    CHECK(qattn_wg_form(128, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16, none, 1024, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16, causal, 2048, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(128, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16, none, 1040, 1) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(64, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16, none, 1024, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16, causal, 2048, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16, none, 2048, 1) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(64, 64, I8, QATTN_FMT_FP16, QATTN_ACC_FP16, none, 4096, 1) == QATTN_WG_FORM_NC3 &&
              qattn_wg_form(64, 128, QATTN_FMT_FP16, QATTN_FMT_FP16, QATTN_ACC_FP32, none, 2048, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 128, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, causal, 4096, 1) == QATTN_WG_FORM_SOLO &&
              qattn_wg_form(64, 128, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, none, 4096, 1) == QATTN_WG_FORM_NC2 &&
              qattn_wg_form(128, 128, QATTN_FMT_FP16, QATTN_FMT_FP16, QATTN_ACC_FP32, none, 64, 1) == QATTN_WG_FORM_NC2,
          "f16 P.V: one warpgroup up to 1024 keys at d = 128 and for sage1-b at d = 64, 2048 for the d = 64 baselines, "
          "TMA or not; 16-bit d = 128: two always");
    CHECK(qattn_wg_tma_lengths(0, 4096) && !qattn_wg_tma_lengths(1, 4096) && !qattn_wg_tma_lengths(0, 1000), "TMA lengths");
    CHECK(qattn_wg_form(128, 128, QATTN_FMT_INT4, E4, FP22, none, 64, 1) == QATTN_WG_FORM_NC3, "int4: three always");
    /* the registry: the instances built here */
    qattn_kernels_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.seqlen_k = 16384;
    pb.varlen = 1; /* K and V^T by cp.async: the rule's limits hold */
    for (size_t i = 0; i < qattn_kernels_count(); i++) {
        const qattn_kernels_sig *g = qattn_kernels_get(i);
        const int both = g->path == QATTN_KERNELS_PATH_WGMMA && g->family == QATTN_KERNELS_FAMILY_ATTN_FWD &&
                         ((strstr(g->name, "_pv_e4m3_acc_fp22") != NULL &&
                           (strstr(g->name, "_qk_int8_") || (strstr(g->name, "_qk_e4m3_") && !strstr(g->name, "d128_kb64")))) ||
                          strstr(g->name, "_qk_int8_pv_int8_acc_fp32") != NULL || strstr(g->name, "_qk_int8_pv_fp16_acc_fp16") != NULL ||
                          strstr(g->name, "d64_qk_fp16_pv_fp16_acc_fp32") != NULL ||
                          strstr(g->name, "d64_qk_bf16_pv_bf16_acc_fp32") != NULL);
        const int multi = strstr(g->name, "_qk_fp16_") || strstr(g->name, "_qk_bf16_") ? QATTN_WG_FORM_NC2 : QATTN_WG_FORM_NC3;
        pb.wg_form = 0;
        CHECK(!qattn_kernels_wg_solo_keys(g, 0) == !both && !qattn_kernels_wg_solo_keys(g, 1) == !both, "%s: both forms %d",
              g->name, both);
        const int wg = g->path == QATTN_KERNELS_PATH_WGMMA && g->family == QATTN_KERNELS_FAMILY_ATTN_FWD;
        CHECK(qattn_kernels_wg_form(g, &pb, 0) == (wg ? multi : 0), "%s at 16384 keys", g->name);
        pb.wg_form = QATTN_WG_FORM_SOLO;
        CHECK(qattn_kernels_wg_form(g, &pb, 0) == (both ? QATTN_WG_FORM_SOLO : wg ? multi : 0), "%s asked for one warpgroup",
              g->name);
        CHECK(qattn_kernels_wg_form(g, &pb, 1) == (wg ? QATTN_WG_FORM_NC2 : 0), "%s quantizing Q", g->name);
    }
    /* persistent CTAs: the d = 64 baselines in the two-consumer form, no mask, equal lengths by TMA (sigs
     * made here: this build's registry may hold no wgmma instance) */
    for (int c = 0; c < 4; c++) {
        const qattn_kernels_sig g = wg_rule_sig("persist case", c == 1 ? 128 : 64, c);
        const int want = c == 0 || c == 2;
        memset(&pb, 0, sizeof pb);
        pb.seqlen_q = pb.seqlen_k = 8192;
        CHECK(qattn_kernels_wg_persist(&g, &pb, 0, NULL) == want, "case %d persistent at 8192 keys", c);
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 1, NULL), "case %d persistent with a fused Q", c);
        pb.seqlen_k = 1024; /* blocks of one warpgroup */
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, NULL), "case %d persistent at 1024 keys", c);
        pb.seqlen_k = 8200; /* not whole 16-row groups: cp.async */
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, NULL), "case %d persistent at 8200 keys", c);
        pb.seqlen_k = 8192, pb.mask.kind = QATTN_MASK_CAUSAL;
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, NULL), "case %d persistent with a causal mask", c);
        pb.mask.kind = QATTN_MASK_NONE, pb.varlen = 1;
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, NULL), "case %d persistent with varlen", c);
    }
    { /* with the plan's params: only K and V tensors the tensor maps accept (else the launch runs a CTA a tile,
       * and the plan must not say persistent) */
        const qattn_kernels_sig g = wg_rule_sig("persist tensors", 64, 0);
        memset(&pb, 0, sizeof pb);
        pb.seqlen_q = pb.seqlen_k = 8192;
        qattn_kernels_attn_params ap;
        memset(&ap, 0, sizeof ap);
        ap.k = (const void *)(uintptr_t)0x10000, ap.v = (const void *)(uintptr_t)0x90000; /* [b, h, t, 64] rows */
        ap.k_st = ap.v_st = 64, ap.k_sh = ap.v_sh = 64 * 8192, ap.k_sb = ap.v_sb = 64 * 8192 * 8;
        CHECK(qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent with 16-byte aligned tensors");
        ap.k = (const void *)(uintptr_t)0x10002; /* K a 2-byte offset into its allocation */
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent with K 2 bytes off 16");
        ap.k = (const void *)(uintptr_t)0x10000, ap.v_st = 68; /* V rows 136 bytes apart */
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent with V's token stride 136 bytes");
        ap.v_st = 64, ap.k_sh = -ap.k_sh;
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent with a negative head stride");
        ap.k_sh = -ap.k_sh, ap.k_sb = 1ll << 39;
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent with a batch stride of 2^40 bytes");
        ap.k_sb = ap.v_sb;
        setenv("QATTN_WG_TMA", "0", 1);
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent with QATTN_WG_TMA=0");
        setenv("QATTN_WG_TMA", "00", 1); /* off where it starts with 0 */
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent with QATTN_WG_TMA=00");
        unsetenv("QATTN_WG_TMA");
        CHECK(qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent again with the tensors mended");
        pb.seqlen_k = 0, pb.wg_form = QATTN_WG_FORM_NC2; /* the launch runs no persistent CTAs without keys */
        CHECK(!qattn_kernels_wg_persist(&g, &pb, 0, &ap), "persistent without keys");
    }
    CHECK(qattn_wg_persist(64, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, 0, (qattn_mask){QATTN_MASK_NONE, 0, 0}, 0) == 1 &&
              qattn_wg_persist(128, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, 0, (qattn_mask){QATTN_MASK_NONE, 0, 0}, 0) == 0 &&
              qattn_wg_persist(64, QATTN_FMT_INT8, QATTN_FMT_E4M3, QATTN_ACC_FP22, 0, (qattn_mask){QATTN_MASK_NONE, 0, 0}, 0) == 0 &&
              qattn_wg_persist(64, QATTN_FMT_FP16, QATTN_FMT_FP16, QATTN_ACC_FP32, 1, (qattn_mask){QATTN_MASK_NONE, 0, 0}, 0) == 0,
          "qattn_wg_persist: d = 64 baselines without a fused Q only");
    /* the widened int4 form: int4 Q.K with e4m3 P.V on the fp8 MMA (not the CK int4 preset's fp16 P.V), key
     * blocks by TMA (equal lengths of whole 16-row groups); its scratch: Q's then K's codes as bytes */
    for (int c = 0; c < 4; c++) {
        qattn_kernels_sig g = wg_rule_sig("int4 case", 128, 3);
        g.q = g.k = QATTN_FMT_INT4, g.kblock_max = 64;
        if (c == 1) /* ck-i4fp8bf16: P and V widened to fp16 by the producer */
            g.acc = QATTN_ACC_FP32;
        if (c == 2)
            g.q = g.k = QATTN_FMT_INT8;
        if (c == 3)
            g.path = QATTN_KERNELS_PATH_MMA;
        const int want = c == 0;
        memset(&pb, 0, sizeof pb);
        pb.seqlen_q = pb.seqlen_k = 8192;
        CHECK(qattn_kernels_wg_i4w(&g, &pb) == want, "case %d widened at 8192 keys", c);
        pb.seqlen_k = 8200;
        CHECK(!qattn_kernels_wg_i4w(&g, &pb), "case %d widened at 8200 keys", c);
        pb.seqlen_k = 8192, pb.varlen = 1;
        CHECK(!qattn_kernels_wg_i4w(&g, &pb), "case %d widened with varlen", c);
        pb.varlen = 0;
        if (c == 0) {
            setenv("QATTN_WG_I4W", "0", 1);
            CHECK(!qattn_kernels_wg_i4w(&g, &pb), "widened with QATTN_WG_I4W=0");
            unsetenv("QATTN_WG_I4W");
            setenv("QATTN_WG_TMA", "0", 1);
            CHECK(!qattn_kernels_wg_i4w(&g, &pb), "widened with QATTN_WG_TMA=0");
            unsetenv("QATTN_WG_TMA");
        }
        qattn_kernels_attn_params ap;
        memset(&ap, 0, sizeof ap);
        ap.hq = 8, ap.hkv = 2, ap.nseq = 3, ap.seqlen_q = 1024, ap.seqlen_k = 2048, ap.d = 128;
        CHECK(qattn_kernels_attn_i4w_bytes(&g, &ap) == 0, "case %d: no scratch where the plan did not choose it", c);
        qattn_kernels_wg_choose(&g, &pb, 0, &ap);
        CHECK(ap.wg_i4w == want, "case %d: the plan's wg_i4w %d", c, ap.wg_i4w);
        CHECK(qattn_kernels_attn_i4w_bytes(&g, &ap) == (want ? (size_t)(8 * 1024 + 2 * 2048) * 3 * 128 : 0),
              "case %d: scratch %zu bytes", c, qattn_kernels_attn_i4w_bytes(&g, &ap));
    }
    CHECK(qattn_wg_i4w(QATTN_FMT_INT4, E4, FP22, 0, 4096) && !qattn_wg_i4w(QATTN_FMT_INT4, E4, FP22, 1, 4096) &&
              !qattn_wg_i4w(QATTN_FMT_INT4, E4, FP22, 0, 4100) && !qattn_wg_i4w(QATTN_FMT_INT4, E4, QATTN_ACC_FP32, 0, 4096) &&
              !qattn_wg_i4w(I8, E4, FP22, 0, 4096),
          "qattn_wg_i4w: int4 Q.K with fp8 P.V, whole 16-row groups, no varlen");
    /* ping-pong: the d = 128 baselines, no mask or causal */
    for (int c = 0; c < 5; c++) {
        qattn_kernels_sig g = wg_rule_sig("ping-pong case", c == 1 ? 64 : 128, c);
        if (c == 4) /* the mma.sync path */
            g.path = QATTN_KERNELS_PATH_MMA;
        const int want = c == 0 || c == 2;
        memset(&pb, 0, sizeof pb);
        pb.seqlen_q = pb.seqlen_k = 4096;
        CHECK(qattn_kernels_wg_pingpong(&g, &pb, 0) == want, "case %d ping-pong at 4096 keys", c);
        pb.seqlen_k = 4100, pb.varlen = 1;
        CHECK(qattn_kernels_wg_pingpong(&g, &pb, 0) == want, "case %d ping-pong with varlen", c);
        pb.mask.kind = QATTN_MASK_CAUSAL;
        CHECK(qattn_kernels_wg_pingpong(&g, &pb, 0) == want, "case %d ping-pong with a causal mask", c);
        pb.mask = (qattn_mask){QATTN_MASK_WINDOW, 256, 0};
        CHECK(!qattn_kernels_wg_pingpong(&g, &pb, 0), "case %d ping-pong with a window", c);
        if (c == 0) { /* the switch's first character decides */
            setenv("QATTN_WG_PINGPONG", "10", 1);
            CHECK(qattn_kernels_wg_pingpong(&g, &pb, 0), "ping-pong with a window and QATTN_WG_PINGPONG=10");
            pb.mask.kind = QATTN_MASK_NONE;
            setenv("QATTN_WG_PINGPONG", "00", 1);
            CHECK(!qattn_kernels_wg_pingpong(&g, &pb, 0), "ping-pong without a mask and QATTN_WG_PINGPONG=00");
            unsetenv("QATTN_WG_PINGPONG");
        }
    }
    /* the plan's choices into the params (the launch follows them, reading no switch), and the blocks a
     * launch runs for a form asked for */
    {
        const qattn_kernels_sig g16 = wg_rule_sig("choose bf16", 128, 0), g8 = wg_rule_sig("choose int8", 128, 3);
        qattn_kernels_attn_params ap;
        memset(&pb, 0, sizeof pb);
        memset(&ap, 0, sizeof ap);
        pb.seqlen_q = pb.seqlen_k = 8192;
        qattn_kernels_wg_choose(&g16, &pb, 0, &ap);
        CHECK(ap.wg_form == QATTN_WG_FORM_NC2 && ap.wg_pingpong == 1 && ap.wg_tma == 0,
              "bf16 d = 128: two consumers, ping-pong, TMA (%d %d %d)", ap.wg_form, ap.wg_pingpong, ap.wg_tma);
        setenv("QATTN_WG_PINGPONG", "0", 1);
        setenv("QATTN_WG_TMA", "0", 1);
        setenv("QATTN_WG_NC", "3", 1); /* not compiled for 16-bit 128-key blocks: two run */
        qattn_kernels_wg_choose(&g16, &pb, 0, &ap);
        CHECK(ap.wg_form == QATTN_WG_FORM_NC2 && ap.wg_pingpong == -1 && ap.wg_tma == -1,
              "bf16 d = 128 with QATTN_WG_PINGPONG=0, _TMA=0, _NC=3 (%d %d %d)", ap.wg_form, ap.wg_pingpong, ap.wg_tma);
        qattn_kernels_wg_choose(&g8, &pb, 0, &ap);
        CHECK(ap.wg_form == QATTN_WG_FORM_NC3 && ap.wg_pingpong == -1, "int8 with QATTN_WG_NC=3 (%d %d)", ap.wg_form,
              ap.wg_pingpong);
        setenv("QATTN_WG_NC", "1", 1);
        qattn_kernels_wg_choose(&g8, &pb, 0, &ap);
        CHECK(ap.wg_form == QATTN_WG_FORM_SOLO, "int8 with QATTN_WG_NC=1 (%d)", ap.wg_form);
        qattn_kernels_wg_choose(&g16, &pb, 0, &ap);
        CHECK(ap.wg_form == QATTN_WG_FORM_NC2, "bf16 d = 128 with QATTN_WG_NC=1: no such form, two (%d)", ap.wg_form);
        qattn_kernels_wg_choose(&g8, &pb, 1, &ap);
        CHECK(ap.wg_form == QATTN_WG_FORM_NC2, "int8 quantizing Q with QATTN_WG_NC=1: two (%d)", ap.wg_form);
        unsetenv("QATTN_WG_NC");
        unsetenv("QATTN_WG_TMA");
        unsetenv("QATTN_WG_PINGPONG");
        qattn_kernels_wg_choose(&g8, &pb, 0, &ap);
        CHECK(ap.wg_form == QATTN_WG_FORM_SOLO && ap.wg_pingpong == -1 && ap.wg_tma == 0,
              "int8 at 8192 keys by TMA: the rule's one warpgroup (%d %d %d)",
              ap.wg_form, ap.wg_pingpong, ap.wg_tma);
        qattn_kernels_sig gm = g8;
        gm.path = QATTN_KERNELS_PATH_MMA;
        memset(&ap, 0, sizeof ap);
        ap.wg_form = 7;
        qattn_kernels_wg_choose(&gm, &pb, 0, &ap);
        CHECK(ap.wg_form == 7 && ap.wg_pingpong == 0 && ap.wg_tma == 0, "the mma path's params untouched");
        const qattn_mask nm = {QATTN_MASK_NONE, 0, 0};
        CHECK(qattn_wg_form_run(128, 128, QATTN_FMT_INT4, QATTN_FMT_E4M3, QATTN_ACC_FP22, QATTN_WG_FORM_SOLO, nm, 64, 1) ==
                      QATTN_WG_FORM_NC3 &&
                  qattn_wg_form_run(64, 128, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, QATTN_WG_FORM_NC3, nm, 8192, 1) ==
                      QATTN_WG_FORM_NC2 &&
                  qattn_wg_form_run(128, 64, QATTN_FMT_INT8, QATTN_FMT_FP16, QATTN_ACC_FP16, QATTN_WG_FORM_RULE, nm, 1024, 1) ==
                      QATTN_WG_FORM_SOLO &&
                  qattn_wg_form_run(128, 64, QATTN_FMT_INT8, QATTN_FMT_FP16, QATTN_ACC_FP16, QATTN_WG_FORM_NC2, nm, 1024, 1) ==
                      QATTN_WG_FORM_NC2,
              "qattn_wg_form_run: int4 asked for one warpgroup runs three; 16-bit 128-key blocks asked for three run two; "
              "the rule; two asked");
    }
    CHECK(qattn_wg_pingpong(128, QATTN_FMT_FP16, QATTN_FMT_FP16, QATTN_ACC_FP32, (qattn_mask){QATTN_MASK_NONE, 0, 0}) == 1 &&
              qattn_wg_pingpong(128, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, (qattn_mask){QATTN_MASK_CAUSAL_BR, 0, 0}) == 1 &&
              qattn_wg_pingpong(128, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, (qattn_mask){QATTN_MASK_WINDOW, 64, 0}) == 0 &&
              qattn_wg_pingpong(64, QATTN_FMT_BF16, QATTN_FMT_BF16, QATTN_ACC_FP32, (qattn_mask){QATTN_MASK_NONE, 0, 0}) == 0,
          "qattn_wg_pingpong: d = 128 baselines, no window");
}

/* spec parsed into *g: 1, or a failed check naming it and 0 */
static int parse_group(const char *spec, qattn_group *g)
{
    qattn_err err;
    if (qattn_group_parse(spec, g, &err)) {
        CHECK(0, "group %s: %s", spec, err.msg);
        return 0;
    }
    return 1;
}

/* the 8-bit wgmma tile's key order (a permutation: each key of a block once
 * per row) and the K groups it can index (hand-worked cases) */
static void check_wg_keys(void)
{
    int seen[128] = {0};
    for (int c = 0; c < 32; c++)
        seen[qattn_wg_sigma(c)]++;
    for (int c = 0; c < 32; c++)
        CHECK(seen[c] == 1, "sigma: key %d taken %d times", c, seen[c]);
    memset(seen, 0, sizeof seen);
    for (int t = 0; t < 16; t++)
        for (int qi = 0; qi < 4; qi++)
            for (int e = 0; e < 2; e++)
                seen[qattn_wg_key(t, qi, e)]++;
    for (int j = 0; j < 128; j++)
        CHECK(seen[j] == 1, "wg_key: key %d held %d times by a row's lanes", j, seen[j]);
    CHECK(qattn_wg_key(0, 1, 0) == 4 && qattn_wg_key(1, 1, 1) == 7 && qattn_wg_key(2, 0, 0) == 16 &&
              qattn_wg_key(4, 3, 1) == 45,
          "wg_key: hand-worked keys");
    static const struct {
        const char *g;
        int kb, ok;
    } cases[] = {
        {"thread:128/8/2", 128, 1}, {"thread:64/8/2", 64, 1},   {"thread:64/16/4", 64, 1}, {"tensor", 128, 1},
        {"block:256", 128, 1},      {"block:128", 128, 1},      {"warp:512", 64, 1},       {"thread:256/8/2", 128, 1},
        {"token", 128, 0},          {"block:64", 128, 0},       {"thread:128/8/1", 128, 0}, {"thread:64/8/2", 128, 0},
        {"block:192", 128, 0},      {"tensor,ch:32", 128, 0},   {"thread:128/32/8", 128, 0}, {"channel", 64, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qattn_group g;
        if (!parse_group(cases[i].g, &g))
            continue;
        CHECK(qattn_wg_kgroup_ok(g, cases[i].kb) == cases[i].ok, "wg_kgroup_ok(%s, %d) != %d", cases[i].g,
              cases[i].kb, cases[i].ok);
    }
    /* Q groups the fused Q quantization can take: inside a 128-row tile, one scale a row */
    static const struct {
        const char *g;
        int ok;
    } qcases[] = {
        {"token", 1},        {"block:128", 1},     {"block:32", 1},          {"warp:64", 1},
        {"thread:16/8/1", 1}, {"thread:32/8/1", 1}, {"thread:64/16/1", 1},    {"thread:128/8/2", 1},
        {"tensor", 0},       {"channel", 0},       {"block:256", 0},         {"block:96", 0},
        {"token,ch:64", 0},  {"block:128,ch:32", 0}, {"thread:256/8/1", 0},
    };
    for (size_t i = 0; i < sizeof qcases / sizeof qcases[0]; i++) {
        qattn_group g;
        if (!parse_group(qcases[i].g, &g))
            continue;
        CHECK(qattn_wg_qfuse_group_ok(g) == qcases[i].ok, "wg_qfuse_group_ok(%s) != %d", qcases[i].g, qcases[i].ok);
    }
    /* int4 unpacking (16 x the code): hand-worked word, then every nibble value in every position */
    uint32_t lo, hi;
    qattn_wg_unpack_i4(0x8f7a1009u, &lo, &hi); /* channels -7, 0, 0, 1, -6, 7, -1, -8 */
    CHECK(lo == 0x10000090u && hi == 0x80f070a0u, "unpack_i4(0x8f7a1009) = %08x %08x", lo, hi); /* 16 x */
    uint32_t rng = 12345u;
    for (int n = 0; n < 4096; n++) {
        rng = rng * 1664525u + 1013904223u;
        const uint32_t w = n < 16 ? 0x11111111u * (uint32_t)n : rng;
        qattn_wg_unpack_i4(w, &lo, &hi);
        for (int c = 0; c < 8; c++) {
            const int nib = (int)(w >> (4 * c) & 15u), want = nib < 8 ? nib : nib - 16;
            const int got = (int8_t)((c < 4 ? lo : hi) >> (8 * (c & 3)) & 0xffu);
            if (got != 16 * want) {
                CHECK(0, "unpack_i4(%08x) channel %d: %d, not 16 x %d", w, c, got, want);
                n = 4096;
                break;
            }
        }
    }
}

/* the int32 scores' conversion by form (qattn_wg_s2f): all by cvt for 128-key blocks of one warpgroup,
 * half and half where d and the key block are both 64 or neither, else the add-subtract pair */
static void check_wg_s2f(void)
{
    CHECK(qattn_wg_s2f(128, 128, 1) == QATTN_WG_S2F_CVT && qattn_wg_s2f(64, 128, 1) == QATTN_WG_S2F_CVT,
          "128-key blocks of one warpgroup: all by cvt");
    CHECK(qattn_wg_s2f(128, 128, 0) == QATTN_WG_S2F_MIX && qattn_wg_s2f(64, 64, 0) == QATTN_WG_S2F_MIX &&
              qattn_wg_s2f(64, 64, 1) == QATTN_WG_S2F_MIX,
          "half and half: d = 128 with 128 keys in the producer forms, d = 64 with 64 keys");
    CHECK(qattn_wg_s2f(128, 64, 1) == QATTN_WG_S2F_PAIR && qattn_wg_s2f(128, 64, 0) == QATTN_WG_S2F_PAIR &&
              qattn_wg_s2f(64, 128, 0) == QATTN_WG_S2F_PAIR,
          "the pair elsewhere");
}

int main(void)
{
    /* the rules as they stand without the environment's comparison switches */
    static const char *const switches[] = {"QATTN_WG_NC", "QATTN_WG_PERSIST", "QATTN_WG_PINGPONG", "QATTN_WG_TMA",
                                           "QATTN_MMA_SYNC"};
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++)
        unsetenv(switches[i]);
    check_wg_keys();
    check_wg_form();
    check_wg_s2f();
    return check_done();
}
