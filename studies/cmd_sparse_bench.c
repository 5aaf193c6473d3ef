/* qattn sparse-bench: the sparse prefill's three variants side by side on
 * the GPU (the DeepSeek-V4 layout: d = 512, the last 64 channels rope, MQA).
 * For each (h, topk, n_kv): n_q query tokens, each with its own list of topk
 * random positions of the cache (every entry valid), the cache a paged
 * prefix (pages of --page tokens in a shuffled order) of n_kv - 512
 * positions plus an extend part of 512, random bf16 values, stored as bf16
 * rows (variant bf16) or fp8 rows (prepass, fused); per-head sinks. Timed
 * with device events, median of --reps runs; prepass includes its
 * dequantization. tflops = 4 h topk d n_q / time (Q.K and P.V over d = 512
 * each, multiply-adds counted twice); kv_gbs = n_q topk x the stored row's
 * bytes / time (1024 for bf16 rows, 584 for fp8 rows: what the gather
 * reads). A variant whose instance is the portable one runs n_q = --portable-nq
 * tokens (it is 10^3 times slower). The matmul_tflops column is left empty:
 * kernels/bench_torch_matmul.py fills it with torch's bf16 matmul rate in the
 * same device call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "gpu_util.h"

#ifdef QATTN_HAVE_GPU
#include "qattn/formats.h"
#include "qattn_kernels_sparse.h"

#define SB_D 512
#define SB_ROPE 64
#define SB_EXT 512 /* extend positions */

typedef struct sbctx {
    const qattn_kernels_sparse_plan *pl;
} sbctx;

static int timed(void *c, qattn_err *err)
{
    return qattn_kernels_sparse_plan_run(((const sbctx *)c)->pl, 0, NULL, err);
}

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn sparse-bench [--out FILE.csv] [--heads LIST] [--topk LIST] [--nkv LIST] [--nq N]\n"
            "                          [--page P] [--reps R] [--variants LIST] [--portable-nq N]\n\n"
            "Times the sparse prefill (d = 512 with 64 rope channels, MQA, per-query lists of\n"
            "cache positions over a paged prefix + extend) on the GPU: the bf16 kernel on bf16\n"
            "rows, the fp8 -> bf16 prepass + the bf16 kernel, and the fused fp8 kernel.\n\n"
            "  --heads LIST       query heads, comma-separated (default 16,32,64,128)\n"
            "  --topk LIST        list lengths (default 512,2048)\n"
            "  --nkv LIST         cache positions (default 4096,65536; at least 1024)\n"
            "  --nq N             query tokens (default 2048)\n"
            "  --page P           page size in tokens (default 64)\n"
            "  --reps R           timed runs (default 10)\n"
            "  --variants LIST    bf16,prepass,fused (default all)\n"
            "  --portable-nq N    query tokens of a variant on the portable path (default 16)\n"
            "CSV: device,date,variant,h,topk,n_q,n_kv,page,us,tflops,kv_gbs,instance,matmul_tflops\n");
}

/* comma-separated positive integers into v (at most max); 0 on success */
static int int_list(const char *what, const char *s, int *v, int max, int *n, int lo, int hi)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        const long x = strtol(tok, &end, 10);
        if (*n == max || end == tok || *end || x < lo || x > hi) {
            fprintf(stderr, "qattn sparse-bench: %s: bad value '%s' (%d .. %d, at most %d)\n", what, tok, lo, hi, max);
            return 1;
        }
        v[(*n)++] = (int)x;
    }
    return *n == 0;
}

/* one timed configuration; its row into f */
static int bench_one(FILE *f, const char *dev, const char *date, qattn_kernels_sparse_variant var, int h, int topk,
                     int nq, int nkv, int page, int reps, uint64_t *seed, qattn_err *err)
{
    const int fp8 = var != QATTN_KERNELS_SPARSE_BF16, prefix = nkv - SB_EXT;
    const int npage = (prefix + page - 1) / page, npool = npage + 8;
    /* the pool's and the extend part's rows, random values, encoded by the upload */
    const size_t pool_rows = (size_t)npool * page, nrows = pool_rows + SB_EXT;
    float *rows = malloc(nrows * SB_D * sizeof *rows);
    int32_t *table = malloc((size_t)npool * sizeof *table), *idx = malloc((size_t)nq * topk * sizeof *idx);
    float *sink = malloc((size_t)h * sizeof *sink);
    uint16_t *q = malloc((size_t)nq * h * SB_D * sizeof *q);
    int rc = QATTN_OK;
    qattn_kernels_sparse_kv kv;
    memset(&kv, 0, sizeof kv);
    qattn_kernels_sparse_plan pl;
    memset(&pl, 0, sizeof pl);
    void *qd = NULL, *od = NULL, *idxd = NULL, *sinkd = NULL;
    if (!rows || !table || !idx || !sink || !q) {
        rc = qattn_err_set(err, QATTN_ERR_NOMEM, "sparse-bench: out of host memory");
        goto done;
    }
    for (size_t i = 0; i < nrows * SB_D; i++)
        rows[i] = (float)((double)(mix((*seed)++) >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    for (int i = 0; i < npool; i++)
        table[i] = i;
    for (int i = npool - 1; i > 0; i--) {
        const int j = (int)(mix((*seed)++) % (uint64_t)(i + 1));
        const int32_t t = table[i];
        table[i] = table[j], table[j] = t;
    }
    for (size_t i = 0; i < (size_t)nq * topk; i++)
        idx[i] = (int32_t)(mix((*seed)++) % (uint64_t)nkv);
    for (int i = 0; i < h; i++)
        sink[i] = (float)(i % 5) - 2.0f;
    for (size_t i = 0; i < (size_t)nq * h * SB_D; i++)
        q[i] = qattn_bf16_encode((float)((double)(mix((*seed)++) >> 11) / 9007199254740992.0 * 2.0 - 1.0));
    {
        /* the upload reads the KV rows only: q is a placeholder of one head and token its checks accept */
        qattn_sparse a = {rows, rows, rows, 1, 1, 1, (size_t)nkv, SB_D, idx, (size_t)topk, NULL, sink,
                          (size_t)page, (size_t)prefix, (size_t)npool, table, rows + pool_rows * SB_D,
                          rows + pool_rows * SB_D};
        if ((rc = qattn_kernels_sparse_kv_upload(&kv, &a, fp8, SB_ROPE, err)))
            goto done;
    }
    const size_t qbytes = (size_t)nq * h * SB_D * 2;
    rc = qattn_kernels_dev_alloc(&qd, qbytes, err) || qattn_kernels_dev_to(qd, q, qbytes, err) ||
         qattn_kernels_dev_alloc(&od, qbytes, err) ||
         qattn_kernels_dev_alloc(&idxd, (size_t)nq * topk * 4, err) ||
         qattn_kernels_dev_to(idxd, idx, (size_t)nq * topk * 4, err) ||
         qattn_kernels_dev_alloc(&sinkd, (size_t)h * 4, err) || qattn_kernels_dev_to(sinkd, sink, (size_t)h * 4, err);
    if (rc)
        goto done;
    qattn_kernels_sparse_problem pb;
    memset(&pb, 0, sizeof pb);
    pb.sq = nq, pb.hq = h, pb.hkv = 1, pb.d = SB_D, pb.rope = SB_ROPE, pb.topk = topk, pb.variant = var;
    pb.in = pb.out = QATTN_FMT_BF16, pb.kblock = 64;
    const qattn_kernels_tensor qt = {qd, 0, SB_D, (int64_t)h * SB_D}, ot = {od, 0, SB_D, (int64_t)h * SB_D};
    if ((rc = qattn_kernels_sparse_plan_init(&pl, &pb, &qt, &ot, NULL, (const int32_t *)idxd, NULL,
                                             (const float *)sinkd, &kv, err)))
        goto done;
    sbctx tc = {&pl};
    double ms = 0.0, mn = 0.0;
    if ((rc = qattn_kernels_dev_time(timed, &tc, 2, reps, &ms, &mn, err)))
        goto done;
    const double flops = 4.0 * h * (double)topk * SB_D * nq;
    const double rowb = fp8 ? (double)(SB_D - SB_ROPE) + (SB_D - SB_ROPE) / 64 + 2.0 * SB_ROPE : 2.0 * SB_D;
    const double gbs = (double)nq * topk * rowb / (ms * 1e-3) * 1e-9;
    fprintf(f, "%s,%s,%s,%d,%d,%d,%d,%d,%.2f,%.4g,%.4g,%s,\n", dev, date, qattn_kernels_sparse_variant_name(var), h,
            topk, nq, nkv, page, ms * 1e3, flops / (ms * 1e-3) * 1e-12, gbs, pl.sig->name);
    fprintf(stderr, "sparse-bench: %-7s h %-3d topk %-4d n_q %-5d n_kv %-6d: %-24s %10.1f us %7.1f TFLOPS %7.1f GB/s\n",
            qattn_kernels_sparse_variant_name(var), h, topk, nq, nkv, pl.sig->name, ms * 1e3,
            flops / (ms * 1e-3) * 1e-12, gbs);
done:
    qattn_kernels_sparse_plan_free(&pl);
    qattn_kernels_sparse_kv_free(&kv);
    qattn_kernels_dev_free(qd), qattn_kernels_dev_free(od), qattn_kernels_dev_free(idxd), qattn_kernels_dev_free(sinkd);
    free(rows), free(table), free(idx), free(sink), free(q);
    return rc;
}

int qattn_cmd_sparse_bench(int argc, char **argv)
{
    const char *out = NULL, *heads = "16,32,64,128", *topks = "512,2048", *nkvs = "4096,65536",
               *variants = "bf16,prepass,fused";
    long long nq_v = 2048, page_v = 64, reps_v = 10, pnq_v = 16;
    const qattn_opt opts[] = {{"out", QATTN_OPT_STR, &out, NULL, 0, 0},
                              {"heads", QATTN_OPT_STR, &heads, NULL, 0, 0},
                              {"topk", QATTN_OPT_STR, &topks, NULL, 0, 0},
                              {"nkv", QATTN_OPT_STR, &nkvs, NULL, 0, 0},
                              {"nq", QATTN_OPT_INT, &nq_v, NULL, 1, 65535},
                              {"page", QATTN_OPT_INT, &page_v, NULL, 1, 256},
                              {"reps", QATTN_OPT_INT, &reps_v, NULL, 1, 1000},
                              {"variants", QATTN_OPT_STR, &variants, NULL, 0, 0},
                              {"portable-nq", QATTN_OPT_INT, &pnq_v, NULL, 1, 65535},
                              {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (out && (prc = qattn_cli_check_out_file("sparse-bench", "--out", out)))
        return prc;
    int hv[16], tv[16], kvv[16], nh, nt, nk;
    if (int_list("--heads", heads, hv, 16, &nh, 1, 1024) || int_list("--topk", topks, tv, 16, &nt, 1, 1 << 16) ||
        int_list("--nkv", nkvs, kvv, 16, &nk, 1024, 1 << 22))
        return QATTN_EXIT_INPUT;
    qattn_kernels_sparse_variant vv[QATTN_KERNELS_SPARSE_COUNT];
    int nv = 0;
    {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", variants);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int found = -1;
            for (int v = 0; v < QATTN_KERNELS_SPARSE_COUNT; v++)
                if (!strcmp(tok, qattn_kernels_sparse_variant_name((qattn_kernels_sparse_variant)v)))
                    found = v;
            if (found < 0 || nv == QATTN_KERNELS_SPARSE_COUNT) {
                fprintf(stderr, "qattn sparse-bench: --variants: unknown variant '%s' (bf16, prepass, fused)\n", tok);
                return QATTN_EXIT_INPUT;
            }
            vv[nv++] = (qattn_kernels_sparse_variant)found;
        }
    }
    qattn_err err;
    int ndev = 0;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "qattn sparse-bench: no GPU found (%s)\n", ndev ? err.msg : "device count 0");
        return QATTN_EXIT_INPUT;
    }
    char devname[256], dev[64], date[16];
    if (qattn_kernels_dev_name(devname, sizeof devname, &err)) {
        fprintf(stderr, "qattn sparse-bench: %s\n", err.msg);
        return QATTN_EXIT_FAIL;
    }
    qattn_gpu_device_slug(devname, dev, sizeof dev);
    qattn_gpu_date(date, sizeof date);
    fprintf(stderr, "qattn sparse-bench: %s\n", devname);
    qattn_out o;
    FILE *f = stdout;
    if (out) {
        if (qattn_out_open(&o, out)) {
            fprintf(stderr, "qattn sparse-bench: cannot write %s\n", out);
            return QATTN_EXIT_FAIL;
        }
        f = o.f;
    }
    fprintf(f, "device,date,variant,h,topk,n_q,n_kv,page,us,tflops,kv_gbs,instance,matmul_tflops\n");
    uint64_t seed = 11;
    int rc = 0;
    const size_t total = (size_t)nh * nt * nk * nv;
    size_t done = 0;
    for (int ki = 0; ki < nk && !rc; ki++)
        for (int ti = 0; ti < nt && !rc; ti++)
            for (int hi = 0; hi < nh && !rc; hi++)
                for (int vi = 0; vi < nv && !rc; vi++, done++) {
                    qattn_cli_progress("sparse-bench", done, total);
                    qattn_kernels_sparse_problem pb;
                    memset(&pb, 0, sizeof pb);
                    pb.sq = 1, pb.hq = hv[hi], pb.hkv = 1, pb.d = SB_D, pb.rope = SB_ROPE, pb.topk = tv[ti];
                    pb.variant = vv[vi], pb.in = pb.out = QATTN_FMT_BF16, pb.kblock = 64;
                    const qattn_kernels_sig *sig = NULL;
                    if ((rc = qattn_kernels_sparse_find(&pb, &sig, &err)))
                        break;
                    const int nq = sig->path == QATTN_KERNELS_PATH_PORTABLE ? (int)pnq_v : (int)nq_v;
                    rc = bench_one(f, dev, date, vv[vi], hv[hi], tv[ti], nq, kvv[ki], (int)page_v, (int)reps_v, &seed,
                                   &err);
                }
    qattn_cli_progress("sparse-bench", total, total);
    if (rc) {
        fprintf(stderr, "qattn sparse-bench: %s\n", err.msg);
        if (out)
            qattn_out_abort(&o);
        return QATTN_EXIT_FAIL;
    }
    if (out && qattn_out_commit(&o)) {
        fprintf(stderr, "qattn sparse-bench: cannot write %s\n", out);
        return QATTN_EXIT_FAIL;
    }
    return QATTN_EXIT_OK;
}
#else
int qattn_cmd_sparse_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: qattn sparse-bench ... (this qattn was built without GPU kernels: QATTN_GPU=off)\n");
            return QATTN_EXIT_OK;
        }
    fprintf(stderr, "qattn sparse-bench: this qattn was built without GPU kernels (configure with -DQATTN_GPU=nvidia "
                    "or amd)\n");
    return QATTN_EXIT_INPUT;
}
#endif
