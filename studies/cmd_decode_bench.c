/* qattn decode-bench: the decode family's speed on the GPU. For each cache
 * format and shape (sk keys per sequence, batch, hkv kv heads, hq = 8 hkv, one
 * query row, d = 128, causal-br): a paged cache (pages of --page tokens in a
 * shuffled order) of random values (int8 / e4m3 / int4: random codes, a random
 * scale per token), timed with device events (median of --reps runs) with the
 * plan's num_splits, and with num_splits = 1 beside it where the plan splits.
 * A timed run is S decode calls back to back on R replicas of the batch in
 * turn (R = 192 MB / the batch's KV bytes + 1, at most 64, so that a call's
 * cache is not in L2 from the call before; S = the larger of R and --steps,
 * so that the calls follow each other as in a decoding loop); each run is
 * enqueued behind a stall kernel (qattn_kernels_dev_time), so that no launch
 * latency falls between its events; us is the run's time / S.
 * kv_gbs = bytes of K and V (codes and scales) over the time; copy_gbs = a
 * device-to-device copy (1 GiB, --copy-mib) in the same run, counted read +
 * write. The
 * torch column is left empty: kernels/bench_torch_decode.py fills it in the
 * same device call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "gpu_util.h"

#ifdef QATTN_HAVE_GPU
#include "qattn/formats.h"
#include "qattn/scheme.h"

typedef struct dtctx {
    qattn_kernels_decode_plan *pl; /* [npl] plans (replicas), run in turn */
    int npl;
    int steps; /* calls a timed run */
    void *dst;
    const void *src;
    size_t bytes;
} dtctx;

static int timed(void *c, qattn_err *err)
{
    const dtctx *t = (const dtctx *)c;
    if (t->bytes)
        return qattn_kernels_dev_copy(t->dst, t->src, t->bytes, err);
    int rc = 0;
    for (int i = 0; i < t->steps && !rc; i++)
        rc = qattn_kernels_decode_plan_run(&t->pl[i % t->npl], NULL, err);
    return rc;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n bytes of random valid storage of format f (no NaN, never all zero) */
static void fill_random(qattn_fmt f, unsigned char *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i += 2) {
        uint64_t z = mix(seed + (i + 1) * 0x9E3779B97F4A7C15ull);
        float u = (float)((double)(z >> 11) / 9007199254740992.0 * 4.0 - 2.0);
        uint16_t h = f == QATTN_FMT_BF16 ? qattn_bf16_encode(u) : qattn_fp16_encode(u);
        if (f == QATTN_FMT_INT8) {
            x[i] = (unsigned char)(int8_t)((int)(z & 0xff) % 255 - 127);
            if (i + 1 < n)
                x[i + 1] = (unsigned char)(int8_t)((int)((z >> 8) & 0xff) % 255 - 127);
        } else if (f == QATTN_FMT_E4M3) {
            x[i] = qattn_e4m3_encode(u * 100.0f);
            if (i + 1 < n)
                x[i + 1] = qattn_e4m3_encode(-u * 37.0f);
        } else {
            memcpy(x + i, &h, i + 1 < n ? 2 : 1);
        }
    }
}

/* dst [n bytes] on the device from a 64 MiB host pattern, copied in pieces */
static int fill_device(qattn_fmt f, void *dst, size_t n, uint64_t seed, qattn_err *err)
{
    const size_t piece = (size_t)64 << 20;
    unsigned char *h = malloc(piece);
    if (!h)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of host memory");
    fill_random(f, h, piece, seed);
    int rc = 0;
    for (size_t at = 0; at < n && !rc; at += piece)
        rc = qattn_kernels_dev_to((unsigned char *)dst + at, h, n - at < piece ? n - at : piece, err);
    free(h);
    return rc;
}

typedef struct shape {
    int sk, batch, hkv;
} shape;

static void stamps_header(FILE *f)
{
    fprintf(f, "cache,sk,batch,hkv,num_splits,replica,block,smid,rank,chunks");
    for (int i = 0; i < QATTN_KERNELS_DECODE_STAMP_PHASES; i++)
        fprintf(f, ",t%d_ns", i);
    for (int i = 1; i < QATTN_KERNELS_DECODE_STAMP_PHASES; i++)
        fprintf(f, ",c%d_cycles", i);
    for (int w = 0; w < QATTN_KERNELS_DECODE_STAMPS - QATTN_KERNELS_DECODE_STAMP_WARP - 1; w++)
        fprintf(f, ",warp%d_ns", w);
    fprintf(f, "\n");
}

/* One more timed run of t's calls with every replica's blocks stamping their phases (params stamps),
 * then a row per replica and block: the global timer relative to the earliest entry of the run, the
 * cycles since the block's entry (0: a phase the block did not reach) */
static int stamps_run(FILE *f, dtctx *t, const char *cache, shape s, qattn_err *err)
{
    const qattn_kernels_decode_plan *pl = &t->pl[0];
    const int64_t blocks = (int64_t)s.hkv * s.batch * pl->num_splits, per = blocks * QATTN_KERNELS_DECODE_STAMPS;
    const size_t bytes = (size_t)(per * t->npl) * sizeof(unsigned long long);
    unsigned long long *dev = NULL, *h = malloc(bytes);
    double ms = 0.0, mn = 0.0;
    int rc = !h ? qattn_err_set(err, QATTN_ERR_NOMEM, "out of host memory")
                : qattn_kernels_dev_alloc((void **)&dev, bytes, err) || qattn_kernels_dev_fill(dev, 0, bytes, err);
    for (int r = 0; r < t->npl && !rc; r++)
        t->pl[r].p.stamps = dev + r * per;
    rc = rc || qattn_kernels_dev_time(timed, t, 0, 1, &ms, &mn, err) || qattn_kernels_dev_sync(err) ||
         qattn_kernels_dev_from(h, dev, bytes, err);
    for (int r = 0; r < t->npl; r++)
        t->pl[r].p.stamps = NULL;
    if (!rc) {
        unsigned long long t0 = ~0ull;
        for (int64_t i = 0; i < per * t->npl; i += QATTN_KERNELS_DECODE_STAMPS)
            if (h[i] && h[i] < t0)
                t0 = h[i];
        for (int r = 0; r < t->npl; r++)
            for (int64_t blk = 0; blk < blocks; blk++) {
                const unsigned long long *x = h + r * per + blk * QATTN_KERNELS_DECODE_STAMPS;
                const unsigned long long where = x[QATTN_KERNELS_DECODE_STAMP_WHERE];
                fprintf(f, "%s,%d,%d,%d,%d,%d,%lld,%u,%u,%u", cache, s.sk, s.batch, s.hkv, pl->num_splits, r,
                        (long long)blk, (unsigned)(where & 0xffffu), (unsigned)((where >> 16) & 0xffffu),
                        (unsigned)(where >> 32));
                for (int i = 0; i < QATTN_KERNELS_DECODE_STAMP_PHASES; i++)
                    x[i] ? fprintf(f, ",%lld", (long long)(x[i] - t0)) : fprintf(f, ",");
                for (int i = 1; i < QATTN_KERNELS_DECODE_STAMP_PHASES; i++) {
                    const unsigned long long c = x[QATTN_KERNELS_DECODE_STAMP_CLOCK + i],
                                             c0 = x[QATTN_KERNELS_DECODE_STAMP_CLOCK];
                    c ? fprintf(f, ",%lld", (long long)(c - c0)) : fprintf(f, ",");
                }
                for (int w = QATTN_KERNELS_DECODE_STAMP_WARP; w < QATTN_KERNELS_DECODE_STAMPS - 1; w++)
                    x[w] ? fprintf(f, ",%lld", (long long)(x[w] - t0)) : fprintf(f, ",");
                fprintf(f, "\n");
            }
    }
    qattn_kernels_dev_free(dev);
    free(h);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn decode-bench [--out FILE.csv] [--caches LIST] [--shapes LIST] [--page P]\n"
            "                          [--page-order ORDER] [--kv-layout L] [--reps R] [--steps S]\n"
            "                          [--copy-mib M] [--splits LIST] [--stamps FILE.csv]\n\n"
            "Times split-KV decode over a paged KV cache on the GPU (one query row per sequence,\n"
            "hq = 8 hkv, d = 128, causal-br): the plan's num_splits, and num_splits = 1 beside it\n"
            "where the plan splits; a 1 GiB device-to-device copy in the same run. The torch\n"
            "column is filled by kernels/bench_torch_decode.py.\n\n"
            "  --caches LIST   cache operands, comma-separated (default bf16,int8@token,e4m3@token,int4@token)\n"
            "  --shapes LIST   SK:BATCH:HKV triples, comma-separated (default 1024:1:1,32768:1:1,\n"
            "                  131072:1:1,32768:1:8,8192:8:8,32768:8:8,131072:4:8,1024:64:8,8192:64:8)\n"
            "  --page P        page size in tokens (default 16)\n"
            "  --page-order O  where the pages lie in the pool: shuffled (default: any page anywhere),\n"
            "                  local (shuffled within runs of pages that span 2 MiB of a pool), sorted\n"
            "                  (each sequence's pages in order: its K and V contiguous, as torch reads them)\n"
            "  --kv-layout L   the rows of a page: nhd (default: [page, token, kv head, d], a token's heads\n"
            "                  together) or hnd ([page, kv head, token, d], a head's tokens together)\n"
            "  --reps R        timed runs (default 30)\n"
            "  --steps S       decode calls a timed run, at least (default 8; back to back, as in a\n"
            "                  decoding loop; 1: each call alone)\n"
            "  --copy-mib M    size of the timed device-to-device copy (default 1024)\n"
            "  --splits LIST   num_splits to time besides the plan's and 1 (tuning the split rule)\n"
            "  --stamps FILE   the split kernel's timeline at the plan's num_splits (mma path): one more timed\n"
            "                  run whose blocks write the global timer at each phase, a CSV row a block and\n"
            "                  replica; needs kernels built with -DQATTN_DECODE_STAMPS=ON (kernels/DESIGN.md,\n"
            "                  \"Decode timelines\")\n"
            "CSV: device,date,kernel,cache,sk,batch,hq,hkv,num_splits,us,kv_gbs,copy_gbs,us_torch,us_combine,us_split,\n"
            "page_order,kv_layout\n"
            "(us: split kernel + combine; us_combine: the combine kernel alone, us_split: the split kernel alone\n"
            "writing partials, both empty without splits; 1 - us_split / us is what the combine adds to a decode\n"
            "step, also where 2-8 splits combine inside a thread-block cluster and no combine kernel runs)\n");
}

int qattn_cmd_decode_bench(int argc, char **argv)
{
    const char *out = NULL, *caches = "bf16,int8@token,e4m3@token,int4@token",
               *shapes = "1024:1:1,32768:1:1,131072:1:1,32768:1:8,8192:8:8,32768:8:8,131072:4:8,1024:64:8,8192:64:8";
    long long page_v = 16, reps_v = 30, copy_v = 1024, steps_v = 8;
    const char *split_list = NULL, *order = "shuffled", *layout_s = "nhd", *stamps_out = NULL;
    const qattn_opt opts[] = {
        {"out", QATTN_OPT_STR, &out, NULL, 0, 0},
        {"caches", QATTN_OPT_STR, &caches, NULL, 0, 0},
        {"shapes", QATTN_OPT_STR, &shapes, NULL, 0, 0},
        {"page", QATTN_OPT_INT, &page_v, NULL, 1, QATTN_KV_PAGE_MAX},
        {"reps", QATTN_OPT_INT, &reps_v, NULL, 1, 1000},
        {"steps", QATTN_OPT_INT, &steps_v, NULL, 1, 1000},
        {"copy-mib", QATTN_OPT_INT, &copy_v, NULL, 1, 16384},
        {"splits", QATTN_OPT_STR, &split_list, NULL, 0, 0},
        {"page-order", QATTN_OPT_STR, &order, NULL, 0, 0},
        {"kv-layout", QATTN_OPT_STR, &layout_s, NULL, 0, 0},
        {"stamps", QATTN_OPT_STR, &stamps_out, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (out && (prc = qattn_cli_check_out_file("decode-bench", "--out", out)))
        return prc;
    if (stamps_out && (prc = qattn_cli_check_out_file("decode-bench", "--stamps", stamps_out)))
        return prc;
    if (stamps_out && !qattn_kernels_decode_stamps_built()) {
        fprintf(stderr, "qattn decode-bench: --stamps: this qattn's kernels write no timeline (configure with "
                        "-DQATTN_DECODE_STAMPS=ON)\n");
        return QATTN_EXIT_INPUT;
    }
    if (strcmp(order, "shuffled") && strcmp(order, "local") && strcmp(order, "sorted")) {
        fprintf(stderr, "qattn decode-bench: --page-order: unknown order '%s' (shuffled, local, sorted)\n", order);
        return QATTN_EXIT_INPUT;
    }
    if (strcmp(layout_s, "nhd") && strcmp(layout_s, "hnd")) {
        fprintf(stderr, "qattn decode-bench: --kv-layout: unknown layout '%s' (nhd, hnd)\n", layout_s);
        return QATTN_EXIT_INPUT;
    }
    const int layout = !strcmp(layout_s, "hnd") ? QATTN_KERNELS_KV_HND : QATTN_KERNELS_KV_NHD;
    qattn_err err;
    char clist[1024], slist[1024];
    snprintf(clist, sizeof clist, "%s", caches);
    snprintf(slist, sizeof slist, "%s", shapes);
    char *cname[16];
    qattn_operand cop[16];
    int nc = 0, nsh = 0;
    for (char *save = NULL, *tok = strtok_r(clist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (nc == 16 || qattn_operand_parse("--caches", tok, &cop[nc], &err)) {
            fprintf(stderr, "qattn decode-bench: %s\n", nc == 16 ? "at most 16 caches" : err.msg);
            return QATTN_EXIT_INPUT;
        }
        cname[nc++] = tok;
    }
    shape sh[32];
    for (char *save = NULL, *tok = strtok_r(slist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (nsh == 32 || sscanf(tok, "%d:%d:%d", &sh[nsh].sk, &sh[nsh].batch, &sh[nsh].hkv) != 3 || sh[nsh].sk < 1 ||
            sh[nsh].batch < 1 || sh[nsh].hkv < 1 || sh[nsh].sk > (1 << 24) || sh[nsh].batch > 4096 || sh[nsh].hkv > 64) {
            fprintf(stderr, "qattn decode-bench: --shapes: bad triple '%s' (SK:BATCH:HKV)\n", tok);
            return QATTN_EXIT_INPUT;
        }
        nsh++;
    }
    int splits[16], nsplit = 0;
    if (split_list) {
        char sl[256];
        snprintf(sl, sizeof sl, "%s", split_list);
        for (char *save = NULL, *tok = strtok_r(sl, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *end = NULL;
            long v = strtol(tok, &end, 10);
            if (nsplit == 16 || end == tok || *end || v < 1 || v > QATTN_KERNELS_DECODE_SPLITS_MAX) {
                fprintf(stderr, "qattn decode-bench: --splits: bad value '%s' (1 .. %d, at most 16)\n", tok,
                        QATTN_KERNELS_DECODE_SPLITS_MAX);
                return QATTN_EXIT_INPUT;
            }
            splits[nsplit++] = (int)v;
        }
    }
    const int page = (int)page_v, reps = (int)reps_v, d = 128;
    int ndev = 0;
    if (qattn_kernels_dev_count(&ndev, &err) || ndev == 0) {
        fprintf(stderr, "qattn decode-bench: no GPU found (%s)\n", ndev ? err.msg : "device count 0");
        return QATTN_EXIT_INPUT;
    }
    char devname[256], dev[64], date[16];
    if (qattn_kernels_dev_name(devname, sizeof devname, &err)) {
        fprintf(stderr, "qattn decode-bench: %s\n", err.msg);
        return QATTN_EXIT_FAIL;
    }
    qattn_gpu_device_slug(devname, dev, sizeof dev);
    qattn_gpu_date(date, sizeof date);

    /* the copy, once */
    const size_t cbytes = (size_t)copy_v << 20;
    void *ca = NULL, *cb = NULL;
    double copy_gbs = 0.0, mn = 0.0, ms = 0.0;
    int rc = qattn_kernels_dev_alloc(&ca, cbytes, &err) || qattn_kernels_dev_alloc(&cb, cbytes, &err) ||
             fill_device(QATTN_FMT_BF16, ca, cbytes, 99, &err);
    if (!rc) {
        dtctx tc = {NULL, 0, 0, cb, ca, cbytes};
        rc = qattn_kernels_dev_time(timed, &tc, 3, reps, &ms, &mn, &err);
        copy_gbs = 2.0 * (double)cbytes / (ms * 1e-3) * 1e-9;
    }
    qattn_kernels_dev_free(ca), qattn_kernels_dev_free(cb);
    if (rc) {
        fprintf(stderr, "qattn decode-bench: %s\n", err.msg);
        return QATTN_EXIT_FAIL;
    }
    fprintf(stderr, "qattn decode-bench: %s; copy %.0f GB/s (read + write)\n", devname, copy_gbs);
    qattn_out o;
    FILE *f = stdout;
    if (out) {
        if (qattn_out_open(&o, out)) {
            fprintf(stderr, "qattn decode-bench: cannot write %s\n", out);
            return QATTN_EXIT_FAIL;
        }
        f = o.f;
    }
    fprintf(f, "device,date,kernel,cache,sk,batch,hq,hkv,num_splits,us,kv_gbs,copy_gbs,us_torch,us_combine,us_split,"
               "page_order,kv_layout\n");
    qattn_out so;
    if (stamps_out) {
        if (qattn_out_open(&so, stamps_out)) {
            fprintf(stderr, "qattn decode-bench: cannot write %s\n", stamps_out);
            if (out)
                qattn_out_abort(&o);
            return QATTN_EXIT_FAIL;
        }
        stamps_header(so.f);
    }
    uint64_t seed = 7;
    for (int ci = 0; ci < nc && !rc; ci++)
        for (int si = 0; si < nsh && !rc; si++) {
            qattn_cli_progress("decode-bench", (size_t)(ci * nsh + si), (size_t)(nc * nsh));
            const shape s = sh[si];
            const int hq = 8 * s.hkv, pages_per = (s.sk + page - 1) / page;
            const qattn_operand op = cop[ci];
            const int scaled = qattn_fmt_is_scaled(op.fmt);
            const size_t rowb = qattn_kernels_kv_row_bytes(op.fmt, d); /* a stored row (int4: d / 2 bytes) */
            /* bytes the kernel must read: K and V of every token and kv head, scales included */
            const double kv = 2.0 * (double)s.batch * s.hkv * s.sk * ((double)rowb + (scaled ? 4.0 : 0.0));
            /* replicas of the batch, run back to back, so that what one call reads is not in L2 from the
             * last (>= 192 MB between two reads of a replica; at most 64) */
            int nrep = (int)(192e6 / kv) + 1;
            nrep = nrep > 64 ? 64 : nrep;
            const int nb = s.batch * nrep;
            const int64_t npages = (int64_t)nb * pages_per;
            const size_t pool = (size_t)npages * page * s.hkv * rowb;
            qattn_kernels_kvcache_dev dc;
            memset(&dc, 0, sizeof dc);
            dc.num_pages = npages, dc.page_size = page, dc.max_pages = pages_per, dc.nseq = nb;
            dc.hkv = s.hkv, dc.d = d, dc.kop = op, dc.vop = op, dc.layout = layout;
            const qattn_fmt qf = op.fmt == QATTN_FMT_FP16 ? QATTN_FMT_FP16 : QATTN_FMT_BF16;
            void *qd = NULL, *od = NULL;
            int32_t *tab = malloc((size_t)npages * sizeof *tab);
            int *lens = malloc((size_t)nb * sizeof *lens);
            float *sc = NULL;
            rc = !tab || !lens ? qattn_err_set(&err, QATTN_ERR_NOMEM, "out of host memory") : 0;
            if (!rc) {
                for (int64_t i = 0; i < npages; i++)
                    tab[i] = (int32_t)i;
                /* pages shuffled over the pool, or within runs spanning 2 MiB of a pool (local), or not */
                const int64_t pbytes = (int64_t)page * s.hkv * (int64_t)rowb;
                const int64_t run = !strcmp(order, "local") ? ((int64_t)2 << 20) / pbytes > 1 ? ((int64_t)2 << 20) / pbytes : 1
                                    : !strcmp(order, "sorted") ? 1
                                                               : npages;
                for (int64_t r0 = 0; r0 < npages; r0 += run) {
                    const int64_t n = npages - r0 < run ? npages - r0 : run;
                    for (int64_t i = n - 1; i > 0; i--) {
                        int64_t j = (int64_t)(mix(seed++) % (uint64_t)(i + 1));
                        int32_t t = tab[r0 + i];
                        tab[r0 + i] = tab[r0 + j], tab[r0 + j] = t;
                    }
                }
                for (int b = 0; b < nb; b++)
                    lens[b] = s.sk;
            }
            rc = rc || qattn_kernels_dev_alloc(&dc.k, pool, &err) || fill_device(op.fmt, dc.k, pool, seed++, &err) ||
                 qattn_kernels_dev_alloc(&dc.v, pool, &err) || fill_device(op.fmt, dc.v, pool, seed++, &err) ||
                 qattn_kernels_dev_alloc((void **)&dc.table, (size_t)npages * 4, &err) ||
                 qattn_kernels_dev_to(dc.table, tab, (size_t)npages * 4, &err) ||
                 qattn_kernels_dev_alloc((void **)&dc.len, (size_t)nb * 4, &err) ||
                 qattn_kernels_dev_to(dc.len, lens, (size_t)nb * 4, &err);
            const size_t nsc = (size_t)nb * s.hkv * pages_per * page;
            if (!rc && scaled) {
                dc.k_ntok = dc.v_ntok = pages_per * page, dc.k_nch = dc.v_nch = 1;
                sc = malloc(nsc * sizeof *sc);
                rc = !sc ? qattn_err_set(&err, QATTN_ERR_NOMEM, "out of host memory") : 0;
                for (size_t i = 0; i < nsc && sc; i++)
                    sc[i] = (float)(0.01 + 0.01 * (double)(mix(seed + i) >> 11) / 9007199254740992.0);
                rc = rc || qattn_kernels_dev_alloc((void **)&dc.k_scale, nsc * 4, &err) ||
                     qattn_kernels_dev_to(dc.k_scale, sc, nsc * 4, &err) ||
                     qattn_kernels_dev_alloc((void **)&dc.v_scale, nsc * 4, &err) ||
                     qattn_kernels_dev_to(dc.v_scale, sc, nsc * 4, &err);
            }
            const size_t qbytes = (size_t)s.batch * hq * d * 2;
            rc = rc || qattn_kernels_dev_alloc(&qd, qbytes, &err) || fill_device(qf, qd, qbytes, seed++, &err) ||
                 qattn_kernels_dev_alloc(&od, qbytes, &err);
            int tried[2 + 16] = {0, 1}; /* the plan's num_splits, then 1, then --splits */
            int ntried = 2;
            for (int i = 0; i < nsplit; i++)
                tried[ntried++] = splits[i];
            int planned = 0;
            for (int pass = 0; pass < ntried && !rc; pass++) {
                qattn_kernels_decode_problem pb;
                memset(&pb, 0, sizeof pb);
                pb.nseq = s.batch, pb.hq = hq, pb.hkv = s.hkv, pb.d = d, pb.seqlen_q = 1, pb.max_seqlen_k = s.sk;
                pb.mask.kind = QATTN_MASK_CAUSAL_BR;
                pb.in = pb.out = qf;
                pb.k = pb.v = op;
                pb.num_splits = tried[pass];
                int seen = pass >= 1 && planned == tried[pass]; /* the plan's row has it */
                for (int q = 1; q < pass && !seen; q++)
                    seen = tried[q] == tried[pass]; /* so has an earlier row (1 or --splits) */
                if (seen)
                    continue;
                qattn_kernels_tensor qt = {qd, (int64_t)hq * d, d, (int64_t)hq * d};
                qattn_kernels_tensor ot = {od, (int64_t)hq * d, d, (int64_t)hq * d};
                qattn_kernels_decode_plan *pls = calloc((size_t)nrep, sizeof *pls);
                if (!pls) {
                    rc = qattn_err_set(&err, QATTN_ERR_NOMEM, "out of host memory");
                    break;
                }
                int made = 0;
                for (; made < nrep && !rc; made++) { /* replica r: its sequences' table rows, lengths, scales */
                    qattn_kernels_kvcache_dev view = dc;
                    view.nseq = s.batch;
                    view.table = dc.table + (int64_t)made * s.batch * pages_per;
                    view.len = dc.len + (int64_t)made * s.batch;
                    if (scaled) {
                        view.k_scale = dc.k_scale + (int64_t)made * s.batch * s.hkv * dc.k_ntok;
                        view.v_scale = dc.v_scale + (int64_t)made * s.batch * s.hkv * dc.v_ntok;
                    }
                    view.owned = 0;
                    rc = qattn_kernels_decode_plan_init(&pls[made], &pb, &qt, &ot, NULL, NULL, &view, &err);
                }
                if (!rc) {
                    const qattn_kernels_decode_plan *pl = &pls[0];
                    if (pass == 0)
                        planned = pl->num_splits;
                    const int steps = nrep > (int)steps_v ? nrep : (int)steps_v;
                    dtctx tc = {pls, nrep, steps, NULL, NULL, 0};
                    rc = qattn_kernels_dev_time(timed, &tc, 2, reps, &ms, &mn, &err);
                    ms /= steps;
                    if (!rc && pass == 0 && stamps_out)
                        rc = stamps_run(so.f, &tc, cname[ci], s, &err);
                    double mc = 0.0, msp = 0.0; /* the combine alone, the split kernel alone */
                    if (!rc && pl->num_splits > 1) {
                        for (int r = 0; r < nrep; r++)
                            pls[r].p.stages = 2;
                        rc = qattn_kernels_dev_time(timed, &tc, 2, reps, &mc, &mn, &err);
                        mc /= steps;
                        for (int r = 0; r < nrep; r++)
                            pls[r].p.stages = 1;
                        rc = rc || qattn_kernels_dev_time(timed, &tc, 2, reps, &msp, &mn, &err);
                        msp /= steps;
                    }
                    if (!rc) {
                        char comb[64] = ",";
                        if (pl->num_splits > 1)
                            snprintf(comb, sizeof comb, "%.2f,%.2f", mc * 1e3, msp * 1e3);
                        fprintf(f, "%s,%s,%s,%s,%d,%d,%d,%d,%d,%.2f,%.4g,%.1f,,%s,%s,%s\n", dev, date,
                                pl->sig->name, cname[ci], s.sk, s.batch, hq, s.hkv, pl->num_splits, ms * 1e3,
                                kv / (ms * 1e-3) * 1e-9, copy_gbs, comb, order, layout_s);
                        fprintf(stderr,
                                "decode-bench: %-12s sk %-6d batch %-2d hkv %d: %-26s splits %-3d %9.2f us  %7.1f GB/s "
                                "(%.2f of the copy; %d calls on %d replicas; split kernel alone %.2f us)\n",
                                cname[ci], s.sk, s.batch, s.hkv, pl->sig->name, pl->num_splits, ms * 1e3,
                                kv / (ms * 1e-3) * 1e-9, kv / (ms * 1e-3) * 1e-9 / copy_gbs, steps, nrep, msp * 1e3);
                    }
                }
                for (int r = 0; r < made; r++)
                    qattn_kernels_decode_plan_free(&pls[r]);
                free(pls);
            }
            free(tab), free(lens), free(sc);
            qattn_kernels_dev_free(qd), qattn_kernels_dev_free(od);
            dc.owned = 1;
            qattn_kernels_kvcache_dev_free(&dc);
        }
    qattn_cli_progress("decode-bench", (size_t)(nc * nsh), (size_t)(nc * nsh));
    if (rc) {
        fprintf(stderr, "qattn decode-bench: %s\n", err.msg);
        if (out)
            qattn_out_abort(&o);
        if (stamps_out)
            qattn_out_abort(&so);
        return QATTN_EXIT_FAIL;
    }
    if ((out && qattn_out_commit(&o)) || (stamps_out && qattn_out_commit(&so))) {
        fprintf(stderr, "qattn decode-bench: cannot write %s\n", out ? out : stamps_out);
        return QATTN_EXIT_FAIL;
    }
    return QATTN_EXIT_OK;
}
#else
int qattn_cmd_decode_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: qattn decode-bench ... (this qattn was built without GPU kernels: QATTN_GPU=off)\n");
            return QATTN_EXIT_OK;
        }
    fprintf(stderr, "qattn decode-bench: this qattn was built without GPU kernels (configure with -DQATTN_GPU=nvidia "
                    "or amd)\n");
    return QATTN_EXIT_INPUT;
}
#endif
