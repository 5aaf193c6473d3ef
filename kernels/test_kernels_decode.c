/* The decode family against the split-KV emulation (qattn_kv_emu) on paged,
 * quantized caches built by the emulation (qattn_kvcache) and uploaded in
 * storage form: the case table of kernels/decode_check.c.
 *
 * Built against the host simulation (CTest test_kernels_decode, CPU): the
 * portable instance must give the emulation's bits (o, lse) for every case.
 * Built against a GPU backend (test_kernels_decode_gpu, label gpu): every
 * case on the dispatcher's instance and on the portable one, within the
 * tolerances of qattn_kernels_decode.h; a case whose splits (2 .. 8) the NVIDIA
 * path combines inside a cluster (its blocks sharing the tile's chunks) runs
 * again with QATTN_DECODE_CLUSTER=0 (pairs of splits sharing theirs where the
 * count is even; the split kernel's own combine where its blocks are all
 * resident), with both and QATTN_DECODE_SPIN=0 (the combine kernels), with
 * QATTN_DECODE_SHARE=1 (sharing at the cases' short splits) and with
 * QATTN_DECODE_SHARE=0, so that the fixed chunks stay checked; a case of more
 * splits (the split kernel's own combine) again with QATTN_DECODE_SPIN=0;
 * every case runs its plan twice, the second run checked and the plan's spin
 * counters read back zero, and (the dispatcher's run) a fast-path case with
 * splits again beside a second plan on another stream, 4 launches each, bit
 * for bit (decode_check.c);
 * and every case again with the values
 * the NVIDIA path reads before its wait spoiled (QATTN_DECODE_SPEC=spoil-len,
 * spoil-rows), so that the path that redoes its first copies is checked, and
 * in both block forms of the 8-bit caches (QATTN_DECODE_WARPS=8, 12).
 * Also the split rule on a table of shapes and the dispatcher's messages. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "qattn/kvcache.h"
#include "qattn/scheme.h"
#include "qattn_kernels.h"

#ifdef QATTN_TEST_SIM /* built against the host simulation */
#define EXACT 1
#else
#define EXACT 0
#endif

static uint64_t seed = 4242;

/* case i on the paths allowed (0: the dispatcher's choice among all) with the extra checks
 * (QATTN_KERNELS_DECODE_CHECK_*); returns the splits it ran on a fast path (0: portable or not run) */
static int run_case(size_t i, unsigned paths, unsigned checks, const char *label)
{
    size_t n;
    const qattn_kernels_decode_case *tc = qattn_kernels_decode_cases(&n) + i;
    qattn_kernels_decode_result r;
    qattn_err err = {{0}};
    int rc = qattn_kernels_decode_run_case(tc, paths, checks, &seed, &r, &err);
    CHECK(rc == 0, "%s: %s", label, err.msg);
    if (rc || !r.ran)
        return 0;
    const int fast = r.sig->path != QATTN_KERNELS_PATH_PORTABLE;
    printf("%-18s %-26s d=%-3d h=%d/%d nseq=%d page=%-3d%s splits=%-2d(%s) K %-18s V %-18s %-11s: "
           "max|dO|/max|V| %.2e, max|dLSE| %.1e, differing %ld O / %ld LSE\n",
           label, r.sig->name, tc->d, tc->hq, tc->hkv, tc->nseq, tc->page,
           tc->layout == QATTN_KERNELS_KV_HND ? " HND" : "", r.num_splits, tc->num_splits ? "given" : "rule", tc->k,
           tc->v, tc->mask, r.err, r.max_dlse, r.diff_o, r.diff_lse);
    if (EXACT && !fast)
        CHECK(r.diff_o == 0 && r.diff_lse == 0, "%s: %ld outputs and %ld LSEs differ from the emulation", label,
              r.diff_o, r.diff_lse);
    else
        CHECK(r.pass, "%s: max |O - O_emu| / max|V| %.3g (tolerance %.1g), max |LSE - LSE_emu| %.3g (%.1g), %ld spin "
              "counters left, %ld bytes differ on two streams", label, r.err, r.tol, r.max_dlse, r.lse_tol,
              r.counters_left, r.streams_diff);
    return fast ? r.num_splits : 0;
}

/* the prologue's divisions: x / d by the device's formula in host arithmetic, for every
 * divisor 1 .. 4096 and 2^31 - 1, x at the ends of its range, near the multiples of d and
 * on a grid */
static int fastdiv_ok(uint32_t d)
{
    qattn_kernels_fastdiv f;
    qattn_kernels_fastdiv_init(&f, d);
    const uint32_t top = 0x7fffffffu;
    const uint32_t xs[] = {0, 1, d - 1, d, d + 1, top, top - 1, top / d * d, top / d * d - 1, 12345678u};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0] + 10000; i++) {
        const uint32_t x = i < sizeof xs / sizeof xs[0] ? xs[i] & top : (uint32_t)(i * 214739u) & top;
        const uint32_t q = f.mul ? (uint32_t)(((uint64_t)x * f.mul) >> 32) >> f.shift : x;
        if (q != x / d) {
            CHECK(0, "fastdiv: %u / %u gave %u", x, d, q);
            return 0;
        }
    }
    return 1;
}

static void fastdiv(void)
{
    int ok = fastdiv_ok(0x7fffffffu);
    for (uint32_t d = 1; d <= 4096 && ok; d++)
        ok = fastdiv_ok(d);
    CHECK(ok, "fastdiv: exact for d 1 .. 4096 and 2^31 - 1");
}

/* the split rule on a table of shapes, answers worked by hand for 132
 * multiprocessors holding 1 block each (B = batch x hkv blocks at sq = 1) */
static void split_rule(void)
{
    qattn_kernels_decode_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.d = 128;
    pb.seqlen_q = 1;
    const struct {
        int nseq, hq, hkv, sk, want;
    } t[] = {
        {1, 8, 1, 32768, 113},  /* B = 1: the first n with n / 132 >= 0.85 */
        {1, 8, 1, 65536, 113},  /* the same (the cap 256 is not reached) */
        {8, 64, 8, 32768, 2},   /* B = 64: 2 -> 128 blocks, 0.97 of a wave */
        {4, 64, 8, 131072, 4},  /* B = 32: 2 -> 0.48, 3 -> 0.73, 4 -> 128, 0.97 */
        {64, 64, 8, 8192, 1},   /* B = 512 fills the chip */
        {1, 8, 1, 200, 1},      /* one split's worth of keys */
        {1, 8, 1, 1024, 4},     /* no n reaches 0.85 within the cap ceil(1024 / 256) = 4: the cap */
        {1, 128, 1, 32768, 15}, /* B = 8 (128 rows in tiles of 16): 14 -> 112, 0.848; 15 -> 120, 0.91 */
        {1, 64, 8, 32768, 15},  /* B = 8 (8 kv heads of 8 rows): the same */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        pb.nseq = t[i].nseq;
        pb.hq = t[i].hq;
        pb.hkv = t[i].hkv;
        pb.max_seqlen_k = t[i].sk;
        int n = qattn_kernels_decode_splits(&pb, 132, 1, 0);
        CHECK(n == t[i].want, "batch %d, hq %d, hkv %d, sk %d: %d splits, want %d", t[i].nseq, t[i].hq, t[i].hkv,
                  t[i].sk, n, t[i].want);
        printf("split rule (132 SMs x 1 block): batch %-2d hq %-3d hkv %d sk %-6d -> %d splits\n", t[i].nseq, t[i].hq,
               t[i].hkv, t[i].sk, n);
    }
    /* two blocks per multiprocessor: 264 slots */
    pb.nseq = 8, pb.hq = 64, pb.hkv = 8, pb.max_seqlen_k = 32768;
    CHECK(qattn_kernels_decode_splits(&pb, 132, 2, 0) == 4, "B = 64 on 264 slots: 2 -> 0.48, 3 -> 0.73, 4 -> 256, "
          "0.97; got %d", qattn_kernels_decode_splits(&pb, 132, 2, 0));
    /* rounds evened (keys per round R: 128 for 16-bit caches, 256 for 8-bit): n grows within its
     * waves to the smallest n with the fewest ceil(ceil(sk / n) / R) */
    const struct {
        int nseq, hq, hkv, sk, r, want;
    } e[] = {
        {1, 8, 1, 32768, 128, 128},  /* 113: 290 keys, 3 rounds; 128: 256 keys, 2 (129-132: 2) */
        {1, 8, 1, 32768, 256, 128},  /* 113: 2 rounds; 128: 1 */
        {1, 8, 1, 65536, 128, 128},  /* 113: 580 keys, 5 rounds; 128: 512, 4 */
        {1, 128, 1, 32768, 128, 16}, /* B = 8: 15 -> 2185 keys, 18 rounds; 16 (132 / 8) -> 16 */
        {8, 64, 8, 32768, 128, 2},   /* B = 64: the wave holds 2 */
        {4, 64, 8, 131072, 256, 4},  /* B = 32: the wave holds 4 */
        {1, 8, 1, 1024, 128, 4},     /* the cap */
        {1, 8, 1, 200, 128, 1},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        pb.nseq = e[i].nseq, pb.hq = e[i].hq, pb.hkv = e[i].hkv, pb.max_seqlen_k = e[i].sk;
        int n = qattn_kernels_decode_splits(&pb, 132, 1, e[i].r);
        CHECK(n == e[i].want, "batch %d, hq %d, hkv %d, sk %d, R %d: %d splits, want %d", e[i].nseq, e[i].hq,
              e[i].hkv, e[i].sk, e[i].r, n, e[i].want);
    }
}

/* the dispatcher names what no instance takes */
/* the comparison switches: read from the environment into the params by the fill (the launch reads none) */
static void switches(void)
{
    static const char *const names[] = {"QATTN_DECODE_CLUSTER", "QATTN_DECODE_SHARE", "QATTN_DECODE_SPIN",
                                        "QATTN_DECODE_PREFETCH", "QATTN_DECODE_SPEC", "QATTN_DECODE_WARPS"};
    qattn_kernels_decode_params p;
    memset(&p, 0xff, sizeof p);
    for (int i = 0; i < 6; i++)
        unsetenv(names[i]);
    qattn_kernels_decode_switches(&p);
    CHECK(p.mma_off == 0u && p.mma_spec == 0 && p.mma_warps == 0, "no switch: off %u spec %d warps %d", p.mma_off,
          p.mma_spec, p.mma_warps);
    setenv("QATTN_DECODE_CLUSTER", "0", 1), setenv("QATTN_DECODE_SPIN", "0", 1), setenv("QATTN_DECODE_PREFETCH", "one", 1);
    setenv("QATTN_DECODE_SPEC", "spoil-rows", 1), setenv("QATTN_DECODE_WARPS", "12", 1);
    qattn_kernels_decode_switches(&p);
    CHECK(p.mma_off == (QATTN_KERNELS_DECODE_OFF_CLUSTER | QATTN_KERNELS_DECODE_OFF_SPIN |
                        QATTN_KERNELS_DECODE_OFF_PREFETCH_MULTI) &&
              p.mma_spec == 3 && p.mma_warps == 12,
          "switches: off %u spec %d warps %d", p.mma_off, p.mma_spec, p.mma_warps);
    setenv("QATTN_DECODE_SHARE", "0", 1), setenv("QATTN_DECODE_PREFETCH", "0", 1), setenv("QATTN_DECODE_SPEC", "0", 1);
    setenv("QATTN_DECODE_WARPS", "16", 1), setenv("QATTN_DECODE_CLUSTER", "1", 1), unsetenv("QATTN_DECODE_SPIN");
    qattn_kernels_decode_switches(&p);
    CHECK(p.mma_off == (QATTN_KERNELS_DECODE_OFF_SHARE | QATTN_KERNELS_DECODE_OFF_PREFETCH) && p.mma_spec == -1 &&
              p.mma_warps == 0,
          "other switches: off %u spec %d warps %d", p.mma_off, p.mma_spec, p.mma_warps);
    setenv("QATTN_DECODE_SPEC", "1", 1), setenv("QATTN_DECODE_SHARE", "1", 1);
    qattn_kernels_decode_switches(&p);
    CHECK(p.mma_spec == 1 && p.mma_off == (QATTN_KERNELS_DECODE_ON_SHARE | QATTN_KERNELS_DECODE_OFF_PREFETCH),
          "QATTN_DECODE_SPEC=1, QATTN_DECODE_SHARE=1: spec %d off %u", p.mma_spec, p.mma_off);
    for (int i = 0; i < 6; i++)
        unsetenv(names[i]);
}

static void messages(void)
{
    qattn_kernels_decode_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.nseq = 1, pb.hq = 8, pb.hkv = 1, pb.d = 96, pb.seqlen_q = 1, pb.max_seqlen_k = 100;
    pb.in = pb.out = QATTN_FMT_BF16;
    pb.k.fmt = pb.v.fmt = QATTN_FMT_BF16;
    pb.cc = -1;
    qattn_err err = {{0}};
    const qattn_kernels_sig *sig = NULL;
    int rc = qattn_kernels_decode_find(&pb, &sig, &err);
    CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "d = 96: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "head dim");
    pb.d = 128;
    pb.hq = 6, pb.hkv = 4;
    rc = qattn_kernels_decode_find(&pb, &sig, &err);
    CHECK(rc == QATTN_ERR_ARG, "6 q heads on 4 kv heads: rc %d", rc);
    pb.hq = 8, pb.hkv = 1;
    rc = qattn_kernels_decode_find(&pb, &sig, &err);
    CHECK(rc == 0 && sig && sig->family == QATTN_KERNELS_FAMILY_DECODE, "bf16 cache, d 128: %s", rc ? err.msg : "");
    /* a pool layout that is neither NHD nor HND: refused before anything is allocated */
    qattn_kvcache cache;
    memset(&cache, 0, sizeof cache);
    qattn_kernels_kvcache_dev dev;
    rc = qattn_kernels_kvcache_upload_as(&dev, &cache, 2, &err);
    CHECK(rc == QATTN_ERR_ARG && dev.k == NULL, "pool layout 2: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "unknown pool layout 2");
    CHECK(qattn_kernels_kv_layout_ok(QATTN_KERNELS_KV_NHD) && qattn_kernels_kv_layout_ok(QATTN_KERNELS_KV_HND) &&
              !qattn_kernels_kv_layout_ok(2) && !qattn_kernels_kv_layout_ok(-1),
          "qattn_kernels_kv_layout_ok");
    /* the row rule of both layouts, by hand: page 3 of 16 tokens x 4 heads, in-page row 5, head 2 */
    CHECK(qattn_kernels_kv_row(QATTN_KERNELS_KV_NHD, 3, 16, 4, 5, 2) == 3 * 64 + 5 * 4 + 2 &&
              qattn_kernels_kv_row(QATTN_KERNELS_KV_HND, 3, 16, 4, 5, 2) == 3 * 64 + 2 * 16 + 5,
          "pool rows: NHD %lld, HND %lld", (long long)qattn_kernels_kv_row(QATTN_KERNELS_KV_NHD, 3, 16, 4, 5, 2),
          (long long)qattn_kernels_kv_row(QATTN_KERNELS_KV_HND, 3, 16, 4, 5, 2));
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 1 && !quick) {
        fprintf(stderr, "test_kernels_decode: unknown option '%s' (--quick)\n", argv[1]);
        return 2;
    }
    fastdiv();
    int ndev = 0;
    qattn_err err;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "test_kernels_decode: no GPU (%s)\n", ndev ? err.msg : "none found");
        return 1;
    }
    split_rule();
    switches();
    messages();
    size_t ncase;
    const qattn_kernels_decode_case *cases = qattn_kernels_decode_cases(&ncase);
    for (size_t i = 0; i < ncase; i++) {
        if (quick && !cases[i].quick)
            continue;
        char label[48];
        snprintf(label, sizeof label, "case %zu", i);
        /* the dispatcher's choice, with a second plan beside it on another stream */
        const int ns = run_case(i, 0, QATTN_KERNELS_DECODE_CHECK_STREAMS, label);
#ifndef QATTN_TEST_SIM
        /* the in-cluster combine may have run (sm_90), its blocks sharing the tile's chunks where the
         * splits are long: now with the sharing at any length, without it, then the combine kernels */
        if (ns >= 2 && ns <= QATTN_DECODE_CLUSTER_MAX) { /* past 8 splits no block shares */
            snprintf(label, sizeof label, "case %zu share", i);
            setenv("QATTN_DECODE_SHARE", "1", 1);
            run_case(i, 0, 0u, label);
            snprintf(label, sizeof label, "case %zu no-share", i);
            setenv("QATTN_DECODE_SHARE", "0", 1);
            run_case(i, 0, 0u, label);
            unsetenv("QATTN_DECODE_SHARE");
            snprintf(label, sizeof label, "case %zu no-cluster", i);
            setenv("QATTN_DECODE_CLUSTER", "0", 1);
            run_case(i, 0, 0u, label);
            snprintf(label, sizeof label, "case %zu no-cluster no-spin", i);
            setenv("QATTN_DECODE_SPIN", "0", 1);
            run_case(i, 0, 0u, label);
            unsetenv("QATTN_DECODE_SPIN");
            unsetenv("QATTN_DECODE_CLUSTER");
        } else if (ns > QATTN_DECODE_CLUSTER_MAX && ns <= QATTN_DECODE_SPIN_MAX) {
            /* the split kernel's own combine ran: now the combine kernel */
            snprintf(label, sizeof label, "case %zu no-spin", i);
            setenv("QATTN_DECODE_SPIN", "0", 1);
            run_case(i, 0, 0u, label);
            unsetenv("QATTN_DECODE_SPIN");
        }
        /* the values read before the wait spoiled; the 8-bit caches' two block forms */
        static const char *const rerun[4][2] = {{"QATTN_DECODE_SPEC", "spoil-len"},
                                                {"QATTN_DECODE_SPEC", "spoil-rows"},
                                                {"QATTN_DECODE_WARPS", "8"},
                                                {"QATTN_DECODE_WARPS", "12"}};
        for (int k = 0; k < 4; k++) {
            snprintf(label, sizeof label, "case %zu %s", i, rerun[k][1]);
            setenv(rerun[k][0], rerun[k][1], 1);
            run_case(i, 0, 0u, label);
            unsetenv(rerun[k][0]);
        }
        snprintf(label, sizeof label, "case %zu portable", i);
        run_case(i, 1u << QATTN_KERNELS_PATH_PORTABLE, 0u, label);
#else
        (void)ns;
#endif
    }
    return check_done();
}
