/* qattn bench: throughput of the attention kernels on the GPU.
 *
 * For each scheme x head dim x causal x N: fp16 Q, K, V [B, H, N, d]
 * (B = max(1, tokens / N), H heads, random values with K channel offsets,
 * never zeros), one plan (qattn_kernels_plan_init), and three timings with
 * device events (median of --reps runs after warm-up, each run enqueued
 * behind a stall kernel so that no launch latency falls between its events):
 *   kernel  the attention instance alone on quantized operands,
 *   e2e     quantization + smoothing (the quant kernels) + attention,
 *   quant   the quantization kernels alone,
 * where the attention instance can quantize Q itself (fused, asked for by
 * the problem's fuse_q), ms_e2e_fused is that plan's end to end (e2e stays
 * the default plan's: Q by its own kernel);
 * and a device-to-device copy of one fp16 input (bytes counted twice: read
 * + write) in the same run, the bandwidth the quantization is compared with.
 * TOPS = 4 B H N^2 d / t (half of it with a causal mask). quant_gbs_floor
 * counts the bytes the quantization cannot avoid: fp16 Q, K, V read once,
 * their 8-bit (or 4-bit) codes written once (scales and means left out).
 * quant_gbs_traffic counts what the fast quantization kernels (quant_fast_*)
 * move through DRAM by design: the floor, plus, for an operand with a
 * statistics pass (K smoothing, V per-channel scales) that the three-launch
 * path runs (QATTN_QUANT_STREAM=0, or a case the streamed kernel does not
 * take), its input read again and the partial statistics (p.work) written
 * and read back; the streamed kernel reads each input from DRAM once (its
 * second read of a slice is meant to hit L2, its partials are a few KB per
 * head): the floor. Empty for other quantization instances.
 *
 * The torch columns are left empty here: kernels/bench_torch.py, run in the
 * same device call, times torch SDPA (flash and cuDNN backends) on the same
 * shapes and fills them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "gpu_util.h"

#ifdef QATTN_HAVE_GPU
#include "qattn/formats.h"


static int parse_ints(const char *s, int *v, int max, int lo, int hi)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        long x = strtol(p, &end, 10);
        if (end == p || x < lo || x > hi || n == max)
            return -1;
        v[n++] = (int)x;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return n;
}

typedef struct tctx {
    const qattn_kernels_plan *pl;
    int quant, attend;
    void *dst;
    const void *src;
    size_t bytes;
} tctx;

static int timed(void *c, qattn_err *err)
{
    const tctx *t = (const tctx *)c;
    int rc = 0;
    if (t->bytes)
        return qattn_kernels_dev_copy(t->dst, t->src, t->bytes, err);
    if (t->quant)
        rc = qattn_kernels_plan_quantize(t->pl, NULL, 0, err);
    if (!rc && t->attend)
        rc = qattn_kernels_plan_attend(t->pl, NULL, err);
    return rc;
}

/* fp16 x [n]: uniform in [-2, 2) times (0.5 + 0.2 (c mod 7)) plus
 * offs ((37 c mod 11) - 5) for channel c = i mod d; fast (hash, no log) */
static void fill_fp16(uint16_t *x, size_t n, size_t d, double offs, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const size_t c = i % d;
        const double u = (double)(z >> 11) / 9007199254740992.0 * 4.0 - 2.0;
        x[i] = qattn_fp16_encode((float)(u * (0.5 + 0.2 * (double)(c % 7)) + offs * (double)((int)((c * 37) % 11) - 5)));
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn bench [--out FILE.csv] [--schemes LIST] [--n LIST] [--dims LIST] [--causal LIST]\n"
            "                   [--tokens T] [--heads H] [--reps R] [--portable-max-n N]\n\n"
            "Times the attention kernels on the GPU: kernel-only (quantized operands ready),\n"
            "end-to-end (quantization + smoothing + attention from fp16) and the quantization\n"
            "alone, with device events (median of R runs, each behind a 1 ms stall kernel: no launch\n"
            "latency in the time), for every scheme x head dim x causal\n"
            "x N; fp16 Q, K, V [B, H, N, d], B = max(1, T / N). A device-to-device copy is timed\n"
            "in the same run. The torch columns are filled by kernels/bench_torch.py. Where the\n"
            "attention kernel can quantize Q itself, ms_e2e_fused is that plan's end to end.\n\n"
            "  --schemes LIST    presets or specs, comma-separated (default sage2-8b-sm90,sage2-8b,fp16)\n"
            "  --n LIST          sequence lengths (default 1024,2048,4096,8192,16384)\n"
            "  --dims LIST       head dims (default 64,128)\n"
            "  --causal LIST     0 and/or 1 (default 0,1)\n"
            "  --tokens T        B x N (default 32768)\n"
            "  --heads H         heads (default 32)\n"
            "  --reps R          timed runs (default 20; 5 for portable instances)\n"
            "  --portable-max-n  longest N for portable (correctness-path) instances (default 2048)\n"
            "CSV: device,date,kernel,scheme,head_dim,causal,n,batch,heads,tops_kernel,tops_e2e,\n"
            "tops_torch_flash,tops_torch_cudnn,ms_kernel,ms_e2e,ms_quant,quant_gbs_floor,copy_gbs,quant_kernel,"
            "quant_gbs_traffic,ms_e2e_fused\n");
}

int qattn_cmd_bench(int argc, char **argv)
{
    const char *out = NULL, *schemes = "sage2-8b-sm90,sage2-8b,fp16", *nlist = NULL, *dlist = NULL, *clist = NULL;
    int ns[16] = {1024, 2048, 4096, 8192, 16384}, nn = 5, dims[4] = {64, 128}, nd = 2, causals[2] = {0, 1}, nc = 2;
    long long tokens_v = 32768, heads_v = 32, reps_v = 20, pmax_v = 2048;
    const qattn_opt opts[] = {
        {"out", QATTN_OPT_STR, &out, NULL, 0, 0},
        {"schemes", QATTN_OPT_STR, &schemes, NULL, 0, 0},
        {"n", QATTN_OPT_STR, &nlist, NULL, 0, 0},
        {"dims", QATTN_OPT_STR, &dlist, NULL, 0, 0},
        {"causal", QATTN_OPT_STR, &clist, NULL, 0, 0},
        {"tokens", QATTN_OPT_INT, &tokens_v, NULL, 1, 1 << 24},
        {"heads", QATTN_OPT_INT, &heads_v, NULL, 1, 4096},
        {"reps", QATTN_OPT_INT, &reps_v, NULL, 1, 1000},
        {"portable-max-n", QATTN_OPT_INT, &pmax_v, NULL, 0, 1 << 20},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (out && (prc = qattn_cli_check_out_file("bench", "--out", out)))
        return prc;
    const char *badlist = (nlist && (nn = parse_ints(nlist, ns, 16, 1, 1 << 20)) < 1)  ? nlist
                          : (dlist && (nd = parse_ints(dlist, dims, 4, 1, 1024)) < 1) ? dlist
                          : (clist && (nc = parse_ints(clist, causals, 2, 0, 1)) < 1) ? clist
                                                                                     : NULL;
    if (badlist) {
        fprintf(stderr, "qattn bench: bad value '%s' (see --help)\n", badlist);
        return QATTN_EXIT_INPUT;
    }
    const int tokens = (int)tokens_v, heads = (int)heads_v, reps = (int)reps_v, pmax = (int)pmax_v;
    /* the schemes, parsed before any GPU work */
    char list[4096];
    snprintf(list, sizeof list, "%s", schemes);
    char *names[32];
    qattn_scheme sch[32];
    int nsch = 0;
    qattn_err err;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (nsch == 32 || qattn_scheme_parse(tok, &sch[nsch], &err)) {
            fprintf(stderr, "qattn bench: scheme '%s': %s\n", tok, nsch == 32 ? "at most 32 schemes" : err.msg);
            return QATTN_EXIT_INPUT;
        }
        names[nsch++] = tok;
    }
    int ndev = 0;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "qattn bench: no GPU found (%s)\n", ndev ? err.msg : "device count 0");
        return QATTN_EXIT_INPUT;
    }
    char devname[256], dev[64], date[16];
    if (qattn_kernels_dev_name(devname, sizeof devname, &err)) {
        fprintf(stderr, "qattn bench: %s\n", err.msg);
        return QATTN_EXIT_FAIL;
    }
    qattn_gpu_device_slug(devname, dev, sizeof dev);
    qattn_gpu_date(date, sizeof date);

    /* inputs for the largest problem, filled once */
    size_t maxel = 0;
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < nd; j++) {
            const size_t b = (size_t)(tokens / ns[i] > 0 ? tokens / ns[i] : 1);
            const size_t el = b * (size_t)heads * (size_t)ns[i] * (size_t)dims[j];
            maxel = el > maxel ? el : maxel;
        }
    fprintf(stderr, "qattn bench: %s; inputs 3 x %.0f MB fp16\n", devname, (double)maxel * 2 / 1e6);
    void *dx[3] = {NULL, NULL, NULL}, *dout = NULL, *dcopy = NULL;
    uint16_t *hx = malloc(maxel * 2);
    int rc = hx ? 0 : qattn_err_set(&err, QATTN_ERR_NOMEM, "out of host memory");
    for (int i = 0; i < 3 && !rc; i++) {
        /* Q, K (channel offsets), V; each with d = the largest head dim's channel pattern */
        fill_fp16(hx, maxel, (size_t)dims[nd - 1], i == 1 ? 1.5 : i == 0 ? 0.3 : 0.7, 1234567ull * (uint64_t)(i + 1));
        rc = qattn_kernels_dev_alloc(&dx[i], maxel * 2, &err) || qattn_kernels_dev_to(dx[i], hx, maxel * 2, &err);
    }
    free(hx);
    rc = rc || qattn_kernels_dev_alloc(&dout, maxel * 4, &err) || qattn_kernels_dev_alloc(&dcopy, maxel * 2, &err);
    if (rc) {
        fprintf(stderr, "qattn bench: %s\n", err.msg);
        for (int i = 0; i < 3; i++)
            qattn_kernels_dev_free(dx[i]);
        qattn_kernels_dev_free(dout), qattn_kernels_dev_free(dcopy);
        return QATTN_EXIT_FAIL;
    }
    qattn_out o;
    FILE *f = stdout;
    if (out) {
        if (qattn_out_open(&o, out)) {
            fprintf(stderr, "qattn bench: cannot write %s\n", out);
            rc = -1;
        }
        f = rc ? stdout : o.f;
    }
    if (!rc)
        fprintf(f, "device,date,kernel,scheme,head_dim,causal,n,batch,heads,tops_kernel,tops_e2e,tops_torch_flash,"
                   "tops_torch_cudnn,ms_kernel,ms_e2e,ms_quant,quant_gbs_floor,copy_gbs,quant_kernel,quant_gbs_traffic,"
                   "ms_e2e_fused\n");
    const size_t total = (size_t)nsch * nd * nc * nn;
    size_t done = 0;
    for (int si = 0; si < nsch && !rc; si++)
        for (int di = 0; di < nd && !rc; di++)
            for (int ci = 0; ci < nc && !rc; ci++)
                for (int ni = 0; ni < nn && !rc; ni++, done++) {
                    qattn_cli_progress("bench", done, total);
                    const int n = ns[ni], d = dims[di], B = tokens / n > 0 ? tokens / n : 1;
                    qattn_kernels_problem pb;
                    memset(&pb, 0, sizeof pb);
                    pb.nseq = B;
                    pb.hq = pb.hkv = heads;
                    pb.d = d;
                    pb.seqlen_q = pb.seqlen_k = n;
                    pb.mask.kind = causals[ci] ? QATTN_MASK_CAUSAL : QATTN_MASK_NONE;
                    pb.in = QATTN_FMT_FP16;
                    const qattn_kernels_sig *asig = NULL;
                    if (qattn_kernels_find(&sch[si], &pb, &asig, NULL, &err)) {
                        fprintf(stderr, "qattn bench: %s d=%d: %s (skipped)\n", names[si], d, err.msg);
                        continue;
                    }
                    const int portable = asig->path == QATTN_KERNELS_PATH_PORTABLE;
                    if (portable && n > pmax)
                        continue;
                    /* [B, H, N, d] */
                    qattn_kernels_io io;
                    memset(&io, 0, sizeof io);
                    const int64_t sb = (int64_t)heads * n * d, sh = (int64_t)n * d;
                    io.q = (qattn_kernels_tensor){dx[0], sb, sh, d};
                    io.k = (qattn_kernels_tensor){dx[1], sb, sh, d};
                    io.v = (qattn_kernels_tensor){dx[2], sb, sh, d};
                    io.o = (qattn_kernels_tensor){dout, sb, sh, d};
                    /* pl: the default plan; pf: Q quantized by the attention kernel, where it can */
                    qattn_kernels_plan pl, pf;
                    memset(&pl, 0, sizeof pl);
                    memset(&pf, 0, sizeof pf);
                    if ((rc = qattn_kernels_plan_init(&pl, &sch[si], &pb, &io, &err)))
                        break;
                    qattn_kernels_problem pbf = pb;
                    pbf.fuse_q = 1;
                    const int fused = qattn_kernels_fuse_q_can(pl.attn_sig, &sch[si], &pb);
                    if (fused && (rc = qattn_kernels_plan_init(&pf, &sch[si], &pbf, &io, &err))) {
                        qattn_kernels_plan_free(&pl);
                        break;
                    }
                    {
                        char line[512];
                        fprintf(stderr, "bench: %s d=%d causal=%d N=%d: %s\n", names[si], d, causals[ci], n,
                                qattn_kernels_plan_describe(&pl, line, sizeof line));
                    }
                    const int nq = pl.quantize[0] + pl.quantize[1] + pl.quantize[2];
                    const int r = portable ? (reps < 5 ? reps : 5) : reps, w = portable ? 1 : 3;
                    double mk = 0, me = 0, mq = 0, mc = 0, mu = 0, mkf = 0, mn;
                    tctx tk = {&pl, 0, 1, NULL, NULL, 0}, te = {&pl, 1, 1, NULL, NULL, 0},
                         tq = {&pl, 1, 0, NULL, NULL, 0}, tu = {&pf, 1, 1, NULL, NULL, 0},
                         tkf = {&pf, 0, 1, NULL, NULL, 0};
                    const size_t bytes = (size_t)B * heads * n * d * 2;
                    tctx tcp = {&pl, 0, 0, dcopy, dx[0], bytes};
                    rc = qattn_kernels_plan_quantize(&pl, NULL, 1, &err) || /* also checks the inputs are finite */
                         qattn_kernels_dev_time(timed, &tk, w, r, &mk, &mn, &err) ||
                         qattn_kernels_dev_time(timed, &te, w, r, &me, &mn, &err) ||
                         (nq && qattn_kernels_dev_time(timed, &tq, w, r, &mq, &mn, &err)) ||
                         (fused && qattn_kernels_dev_time(timed, &tu, w, r, &mu, &mn, &err)) ||
                         (fused && qattn_kernels_dev_time(timed, &tkf, w, r, &mkf, &mn, &err)) ||
                         qattn_kernels_dev_time(timed, &tcp, w, r, &mc, &mn, &err);
                    if (!rc) {
                        const double flops = 4.0 * B * heads * (double)n * n * d * (causals[ci] ? 0.5 : 1.0);
                        double codes = 0;
                        for (int i = 0; i < 3; i++)
                            if (pl.quantize[i])
                                codes += (double)B * heads * n * (pl.qp[i].fmt == QATTN_FMT_INT4 ? d / 2 : d);
                        const double floor_bytes = nq ? 3.0 * (double)bytes + codes : 0.0;
                        const double copy_gbs = 2.0 * (double)bytes / (mc * 1e-3) / 1e9;
                        fprintf(f, "%s,%s,%s,%s,%d,%d,%d,%d,%d,%.3f,%.3f,,,%.4f,%.4f,", dev, date, asig->name,
                                names[si], d, causals[ci], n, B, heads, flops / (mk * 1e-3) * 1e-12,
                                flops / (me * 1e-3) * 1e-12, mk, me);
                        const int fast = pl.quant_sig && !strncmp(pl.quant_sig->name, "quant_fast_", 11);
                        double traffic = floor_bytes;
                        for (int i = 0; i < 3; i++) {
                            const size_t ws = pl.quantize[i] ? qattn_kernels_quant_work_size(&pl.qp[i]) : 0;
                            /* the streamed route reads the input from DRAM once */
                            if (ws && !(fast && pl.qp[i].route == QATTN_KERNELS_QROUTE_STREAMED))
                                traffic += (double)bytes + 2.0 * (double)ws;
                        }
                        if (nq) {
                            fprintf(f, "%.4f,%.1f,%.1f,%s,", mq, floor_bytes / (mq * 1e-3) / 1e9, copy_gbs,
                                    pl.quant_sig ? pl.quant_sig->name : "");
                            if (fast)
                                fprintf(f, "%.1f", traffic / (mq * 1e-3) / 1e9);
                            fprintf(f, ",");
                        } else {
                            fprintf(f, ",,%.1f,,,", copy_gbs);
                        }
                        if (fused)
                            fprintf(f, "%.4f", mu);
                        fprintf(f, "\n");
                        fflush(f);
                        fprintf(stderr, "  %-14s d=%-3d %s N=%-5d B=%-2d H=%d  kernel %.3f ms %.1f TOPS  e2e %.1f TOPS%s",
                                names[si], d, causals[ci] ? "causal    " : "non-causal", n, B, heads, mk,
                                flops / (mk * 1e-3) * 1e-12, flops / (me * 1e-3) * 1e-12, nq ? "" : "\n");
                        if (nq)
                            fprintf(stderr, "  quant %.3f ms = %.2f of copy (floor)%s\n", mq,
                                    floor_bytes / (mq * 1e-3) / 1e9 / copy_gbs, fast ? "" : ", traffic not counted");
                        if (nq && fast)
                            fprintf(stderr, "    quant traffic %.1f MB = %.2f of copy\n", traffic / 1e6,
                                    traffic / (mq * 1e-3) / 1e9 / copy_gbs);
                        if (fused)
                            fprintf(stderr,
                                    "    Q fused: e2e %.4f ms against %.4f ms (%.3fx); the attention kernel "
                                    "quantizing Q %.4f ms, on stored codes %.4f ms\n",
                                    mu, me, me / mu, mkf, mk);
                    }
                    qattn_kernels_plan_free(&pl);
                    qattn_kernels_plan_free(&pf);
                }
    qattn_cli_progress("bench", total, total);
    for (int i = 0; i < 3; i++)
        qattn_kernels_dev_free(dx[i]);
    qattn_kernels_dev_free(dout), qattn_kernels_dev_free(dcopy);
    if (rc) {
        fprintf(stderr, "qattn bench: %s\n", err.msg);
        if (out && f != stdout)
            qattn_out_abort(&o);
        return QATTN_EXIT_FAIL;
    }
    if (out && qattn_out_commit(&o)) {
        fprintf(stderr, "qattn bench: cannot write %s\n", out);
        return QATTN_EXIT_FAIL;
    }
    return QATTN_EXIT_OK;
}
#else
int qattn_cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: qattn bench ... (this qattn was built without GPU kernels: QATTN_GPU=off)\n");
            return QATTN_EXIT_OK;
        }
    fprintf(stderr, "qattn bench: this qattn was built without GPU kernels (configure with -DQATTN_GPU=nvidia or amd)\n");
    return QATTN_EXIT_INPUT;
}
#endif
