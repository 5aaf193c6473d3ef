/* The sparse family (the DeepSeek-V4 sparse prefill) against the emulation
 * (qattn_emu_sparse): the case table of kernels/sparse_check.c.
 *
 * Built against the host simulation (CTest test_kernels_sparse, CPU): every
 * case on the portable instance, which must give the emulation's
 * bits (o, lse). Built against a GPU backend (test_kernels_sparse_gpu, label
 * gpu): every case on the dispatcher's instance and on the portable one,
 * within the tolerances of qattn_kernels_sparse.h; and the fused instance's
 * widening of every e4m3 code times every e8m0 scale against the emulation's
 * value rounded to bf16 (its fast and float paths), and its Q quantization
 * of 64-value slabs against the emulation's.
 * Also the dispatcher's and the upload's messages. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"
#include "qattn/numerics.h"
#include "qattn_kernels_sparse.h"

#ifdef QATTN_TEST_SIM /* built against the host simulation */
#define EXACT 1
#else
#define EXACT 0
#endif

static uint64_t seed = 3030;

static void run_case(size_t i, unsigned paths, const char *label)
{
    size_t n;
    const qattn_kernels_sparse_case *c = qattn_kernels_sparse_cases(&n) + i;
    qattn_kernels_sparse_result r;
    qattn_err err = {{0}};
    const int rc = qattn_kernels_sparse_run_case(c, paths, &seed, &r, &err);
    CHECK(rc == 0, "%s: %s", label, err.msg);
    if (rc || !r.ran)
        return;
    const char *lists[] = {"sparse", "dense", "empty"};
    printf("%-18s %-24s %-7s d=%d rope=%d h=%d/%d tokens=%d topk=%-4d sk=%d prefix=%d page=%-3d %-6s sink=%d: "
           "max|dO|/max|V| %.2e, max|dLSE| %.1e, cos %.7f, differing %ld O\n",
           label, r.sig->name, qattn_kernels_sparse_variant_name(c->variant), c->d, c->rope, c->hq, c->hkv, c->sq,
           c->topk, c->sk, c->prefix, c->page, lists[c->lists], c->sink, r.err, r.max_dlse, r.cos, r.diff_o);
    if (EXACT && r.sig->path == QATTN_KERNELS_PATH_PORTABLE)
        CHECK(r.diff_o == 0 && r.max_dlse == 0.0, "%s: %ld outputs differ from the emulation, max |dLSE| %.3g", label,
              r.diff_o, r.max_dlse);
    else
        CHECK(r.pass, "%s: max |O - O_emu| / max|V| %.3g (tolerance %.1g), max |LSE - LSE_emu| %.3g (%.1g)", label,
              r.err, r.tol, r.max_dlse, r.lse_tol);
}

#ifndef QATTN_TEST_SIM
/* the fused wgmma instance, or NULL (this build or GPU has none: the test says it is skipped) */
static const qattn_kernels_sig *fused_wgmma(const char *test)
{
    qattn_kernels_sparse_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.sq = 1, pb.hq = 64, pb.hkv = 1, pb.d = 512, pb.rope = 64, pb.topk = 64;
    pb.variant = QATTN_KERNELS_SPARSE_FUSED, pb.in = pb.out = QATTN_FMT_BF16;
    pb.paths = 1u << QATTN_KERNELS_PATH_WGMMA;
    qattn_err err = {{0}};
    const qattn_kernels_sig *sig = NULL;
    if (qattn_kernels_sparse_find(&pb, &sig, &err)) {
        printf("%s: skipped (%s)\n", test, err.msg);
        return NULL;
    }
    return sig;
}

/* the fused wgmma instance's widening (params widen_table): code c times scale code sc must be
 * bf16(e4m3(c) x e8m0(sc)) bit for bit, NaN codes and the NaN scale 255 aside; scales above 2^7
 * take the float path */
static void widen_table(void)
{
    const qattn_kernels_sig *sig = fused_wgmma("widen table");
    if (!sig)
        return;
    qattn_err err = {{0}};
    enum { N = 256 * 256 };
    uint16_t *got = malloc(N * sizeof *got);
    void *dev = NULL;
    qattn_kernels_sparse_params p;
    memset(&p, 0, sizeof p);
    int rc = !got || qattn_kernels_dev_alloc(&dev, N * sizeof *got, &err) ||
             qattn_kernels_dev_fill(dev, 0x5a, N * sizeof *got, &err);
    if (!rc) {
        p.widen_table = dev;
        rc = sig->launch_sparse(&p, NULL, &err) || qattn_kernels_dev_sync(&err) ||
             qattn_kernels_dev_from(got, dev, N * sizeof *got, &err);
    }
    CHECK(rc == 0, "widen table: %s", err.msg);
    long bad = 0, slow = 0;
    for (int sc = 0; sc < 255 && !rc; sc++)
        for (int c = 0; c < 256; c++) {
            if ((c & 0x7f) == 0x7f)
                continue;
            const uint16_t want = qattn_num_bf16_encode(qattn_num_e4m3_decode((uint8_t)c) * qattn_num_e8m0_decode((uint8_t)sc));
            if (got[sc * 256 + c] != want && bad++ < 4)
                printf("widen table: code 0x%02x, scale code %d: 0x%04x, want 0x%04x\n", c, sc, got[sc * 256 + c], want);
            slow += sc > 134;
        }
    printf("widen table (%s): %ld of 254 x 254 differ (%ld on the float path)\n", sig->name, bad, slow);
    CHECK(!rc && bad == 0, "widen table: %ld codes differ from bf16(e4m3 x e8m0)", bad);
    qattn_kernels_dev_free(dev);
    free(got);
}

/* the fused wgmma instance's Q quantization (params qquant_table) on 64-value slabs against the
 * emulation's: e4m3 with the slab's e8m0 scale s, as bf16 values code times s; slabs with and
 * without e4m3 subnormals, zeros, scales from 2^-127 up */
static void qquant_table(void)
{
    const qattn_kernels_sig *sig = fused_wgmma("Q quantization table");
    if (!sig)
        return;
    qattn_err err = {{0}};
    enum { N = 4096 };
    uint16_t *x = malloc(N * 64 * sizeof *x), *got = malloc(N * 64 * sizeof *got);
    uint64_t rs = 77;
    int paths[2] = {0, 0};
    for (int i = 0; i < N && x; i++) {
        const int kind = i % 8;
        const float row = ldexpf(1.0f, (int)(i * 7919 % 200) - 130); /* scales 2^-127 (clamped) .. 2^70 */
        for (int c = 0; c < 64; c++) {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            const float g = ((float)(rs >> 40) / 16777216.0f - 0.5f) * 4.0f;
            float v = row * g;
            if (kind == 4 && c % 9 == 0) /* e4m3 subnormals beside normals */
                v *= 0x1p-12f;
            if (kind == 5)
                v = 0.0f;
            if (kind == 6 && c)
                v = row * g * 0x1p-20f;
            x[i * 64 + c] = qattn_num_bf16_encode(v);
        }
    }
    void *dev = NULL;
    qattn_kernels_sparse_params p;
    memset(&p, 0, sizeof p);
    int rc = !x || !got || qattn_kernels_dev_alloc(&dev, N * 64 * sizeof *x, &err) ||
             qattn_kernels_dev_to(dev, x, N * 64 * sizeof *x, &err);
    if (!rc) {
        p.qquant_table = dev, p.qquant_n = N;
        rc = sig->launch_sparse(&p, NULL, &err) || qattn_kernels_dev_sync(&err) ||
             qattn_kernels_dev_from(got, dev, N * 64 * sizeof *got, &err);
    }
    CHECK(rc == 0, "Q quantization table: %s", err.msg);
    long bad = 0;
    for (int i = 0; i < N && !rc; i++) {
        float amax = 0.0f;
        for (int c = 0; c < 64; c++)
            amax = fmaxf(amax, fabsf(qattn_num_bf16_decode(x[i * 64 + c])));
        const float s = qattn_num_scale_for(QATTN_FMT_E4M3, amax, 1);
        int sub = !(s == 0.0f || (s >= 0x1p-120f && s <= 0x1p127f));
        for (int c = 0; c < 64; c++) {
            const float v = qattn_num_bf16_decode(x[i * 64 + c]);
            sub |= v != 0.0f && fabsf(v) < 0x1p-6f * s;
            const float want = s > 0.0f ? qattn_num_round(QATTN_FMT_E4M3, v / s) * s : 0.0f;
            const uint16_t w = qattn_num_bf16_encode(want), g = got[i * 64 + c];
            if (g != w && ((g | w) & 0x7fffu) != 0 && bad++ < 4)
                printf("Q quantization table: slab %d value %d (0x%04x): 0x%04x, want 0x%04x\n", i, c,
                       x[i * 64 + c], g, w);
        }
        paths[sub]++;
    }
    printf("Q quantization table (%s): %ld of %d values differ; %d slabs without e4m3 subnormals, %d "
           "with\n", sig->name, bad, N * 64, paths[0], paths[1]);
    CHECK(!rc && bad == 0 && paths[0] > 0 && paths[1] > 0, "Q quantization table: %ld values differ", bad);
    qattn_kernels_dev_free(dev);
    free(x);
    free(got);
}

/* the fused wgmma instance refuses fp8 cache arrays its vector loads cannot read, and params without
 * the item counter its persistent CTAs take items from (before any launch) */
static void misaligned(void)
{
    const qattn_kernels_sig *sig = fused_wgmma("misaligned");
    if (!sig)
        return;
    qattn_err err = {{0}};
    static _Alignas(16) uint64_t words[64];
    qattn_kernels_sparse_params p;
    memset(&p, 0, sizeof p);
    p.sq = 1, p.hq = 64, p.hkv = 1, p.d = 512, p.rope = 64, p.topk = 64, p.q_fp8 = 1, p.in = p.out = QATTN_FMT_BF16;
    p.kv.fp8 = 1, p.kv.d = 512, p.kv.rope = 64, p.kv.hkv = 1;
    p.kv.pool.val = p.kv.ext.val = words, p.kv.pool.rope = p.kv.ext.rope = (uint16_t *)words;
    p.kv.pool.sc = (uint8_t *)words, p.kv.ext.sc = (uint8_t *)words + 4;
    int rc = sig->launch_sparse(&p, NULL, &err);
    CHECK(rc == QATTN_ERR_ARG, "scales 4 bytes off: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "fp8 cache arrays must be 16-byte aligned (scales 8)");
    p.kv.ext.sc = (uint8_t *)words, p.kv.pool.val = (uint8_t *)words + 8;
    rc = sig->launch_sparse(&p, NULL, &err);
    CHECK(rc == QATTN_ERR_ARG, "codes 8 bytes off: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "fp8 cache arrays must be 16-byte aligned");
    p.kv.pool.val = words; /* aligned, but no item counter (a plan always allocates one) */
    rc = sig->launch_sparse(&p, NULL, &err);
    CHECK(rc == QATTN_ERR_ARG, "no item counter: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "needs its item counter");
}
#endif

/* what no instance takes, and the upload's refusals */
static void messages(void)
{
    qattn_kernels_sparse_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.sq = 4, pb.hq = 16, pb.hkv = 1, pb.d = 576, pb.rope = 64, pb.topk = 64;
    pb.variant = QATTN_KERNELS_SPARSE_FUSED, pb.in = pb.out = QATTN_FMT_BF16, pb.cc = -1;
    qattn_err err = {{0}};
    const qattn_kernels_sig *sig = NULL;
    int rc = qattn_kernels_sparse_find(&pb, &sig, &err);
    CHECK(rc == QATTN_KERNELS_ERR_UNSUPPORTED, "d = 576: rc %d", rc);
    CHECK_STR_CONTAINS(err.msg, "(head dim): d=576, variant fused");
    pb.d = 512, pb.hq = 6, pb.hkv = 4;
    CHECK(qattn_kernels_sparse_find(&pb, &sig, &err) == QATTN_ERR_ARG, "6 q heads on 4 kv heads");
    CHECK_STR_CONTAINS(err.msg, "bad sparse problem");
    pb.hq = 16, pb.hkv = 1;
    rc = qattn_kernels_sparse_find(&pb, &sig, &err);
    CHECK(rc == 0 && sig && sig->family == QATTN_KERNELS_FAMILY_SPARSE, "fused, d 512: %s", rc ? err.msg : "");
    pb.paths = 1u << QATTN_KERNELS_PATH_WGMMA, pb.in = QATTN_FMT_FP16;
    CHECK(qattn_kernels_sparse_find(&pb, &sig, &err) == QATTN_KERNELS_ERR_UNSUPPORTED, "fp16 queries on wgmma only");
    CHECK_STR_CONTAINS(err.msg, "no sparse instance takes this problem");
    pb.in = QATTN_FMT_BF16;

    enum { D = 128, SK = 8 };
    float k[SK * D], v[SK * D], q[2 * D];
    int32_t idx[SK];
    for (int i = 0; i < SK * D; i++)
        k[i] = v[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 2 * D; i++)
        q[i] = 1.0f;
    for (int i = 0; i < SK; i++)
        idx[i] = i;
    qattn_sparse a = {q, k, v, 2, 1, 1, SK, D, idx, SK, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    qattn_kernels_sparse_kv kv;
    CHECK(qattn_kernels_sparse_kv_upload(&kv, &a, 0, 0, &err) == QATTN_ERR_ARG, "v != k");
    CHECK_STR_CONTAINS(err.msg, "one row as key and value (v = k)");
    a.v = k;
    CHECK(qattn_kernels_sparse_kv_upload(&kv, &a, 1, 32, &err) == QATTN_ERR_ARG, "fp8 rows, d - rope = 96");
    CHECK_STR_CONTAINS(err.msg, "d - rope a multiple of 64 and rope a multiple of 16 (d 128, rope 32)");
    CHECK(qattn_kernels_sparse_kv_upload(&kv, &a, 1, 64, &err) == 0, "%s", err.msg);
    qattn_kernels_tensor t = {NULL, 0, D, 2 * D};
    qattn_kernels_sparse_plan pl;
    pb.paths = 0, pb.d = D, pb.hq = 2, pb.sq = 1, pb.topk = SK, pb.variant = QATTN_KERNELS_SPARSE_BF16;
    CHECK(qattn_kernels_sparse_plan_init(&pl, &pb, &t, &t, NULL, NULL, NULL, NULL, &kv, &err) == QATTN_ERR_ARG,
          "bf16 variant on fp8 rows");
    CHECK_STR_CONTAINS(err.msg, "the bf16 variant reads bf16 rows, the cache has fp8 rows");
    qattn_kernels_sparse_kv_free(&kv);
}

int main(int argc, char **argv)
{
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 1 && !quick) {
        fprintf(stderr, "test_kernels_sparse: unknown option '%s' (--quick)\n", argv[1]);
        return 2;
    }
    int ndev = 0;
    qattn_err err;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "test_kernels_sparse: no GPU (%s)\n", ndev ? err.msg : "none found");
        return 1;
    }
    messages();
#ifndef QATTN_TEST_SIM
    widen_table();
    qquant_table();
    misaligned();
#endif
    size_t ncase;
    const qattn_kernels_sparse_case *cases = qattn_kernels_sparse_cases(&ncase);
    for (size_t i = 0; i < ncase; i++) {
        if (quick && !cases[i].quick)
            continue;
        char label[48];
        snprintf(label, sizeof label, "case %zu", i);
        run_case(i, 0, label);
#ifndef QATTN_TEST_SIM
        snprintf(label, sizeof label, "case %zu portable", i);
        run_case(i, 1u << QATTN_KERNELS_PATH_PORTABLE, label);
#endif
    }
    return check_done();
}
