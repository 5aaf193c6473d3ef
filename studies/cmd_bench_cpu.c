/* qattn bench-cpu: GFLOP/s of the float64 reference, of an emulated scheme and
 * of an OpenBLAS sgemm of the same shapes (Q K^T and P V), in one run. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "qattn/attn.h"

void openblas_set_num_threads(int num_threads);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double rng_gauss(void)
{
    /* splitmix64 + Box-Muller: deterministic, no libc rand */
    uint64_t z;
    double u[2];
    for (int i = 0; i < 2; i++) {
        z = (rng_state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        u[i] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: qattn bench-cpu [--n N] [--dim D] [--scheme S] [--threads T] [--reps R] [--csv]\n\n"
               "Times, on this CPU, one attention head of N tokens and head dim D (non-causal):\n"
               "the float64 reference, the emulation of scheme S (default sage2-8b), and an\n"
               "OpenBLAS sgemm of the same shapes (Q K^T: N x N x D, then P V: N x D x N).\n"
               "Each of T threads runs its own head at once (default 1; at most %lld here: 4 per\n"
               "online CPU, at least 256); the median of R repetitions (default 3) is reported as\n"
               "GFLOP/s = 4 N^2 D / t, total and per core. N, D and R: 1 to 1000000.\n",
            qattn_cli_threads_max());
}

int qattn_cmd_bench_cpu(int argc, char **argv)
{
    long long n = 4096, d = 128, threads = 1, reps = 3;
    int csv = 0;
    const char *spec = "sage2-8b";
    const qattn_opt opts[] = {
        {"n", QATTN_OPT_INT, &n, NULL, 1, 1000000},
        {"dim", QATTN_OPT_INT, &d, NULL, 1, 1000000},
        {"scheme", QATTN_OPT_STR, &spec, NULL, 0, 0},
        {"threads", QATTN_OPT_INT, &threads, NULL, 1, qattn_cli_threads_max()},
        {"reps", QATTN_OPT_INT, &reps, NULL, 1, 1000000},
        {"csv", QATTN_OPT_FLAG, &csv, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    qattn_scheme s;
    qattn_err err;
    if (qattn_scheme_parse(spec, &s, &err)) {
        fprintf(stderr, "qattn bench-cpu: %s\n", err.msg);
        return QATTN_EXIT_INPUT;
    }
    size_t N = (size_t)n, D = (size_t)d, T = (size_t)threads;
    openblas_set_num_threads(1);
    qattn_cli_threads_apply(threads);
    float *q = malloc(T * N * D * sizeof *q), *k = malloc(T * N * D * sizeof *k), *v = malloc(T * N * D * sizeof *v);
    float *of = malloc(T * N * D * sizeof *of), *sf = malloc(T * N * N * sizeof *sf);
    double *od = malloc(T * N * D * sizeof *od);
    double *t = malloc((size_t)reps * sizeof *t);
    int rc = QATTN_EXIT_FAIL;
    if (!q || !k || !v || !of || !sf || !od || !t) {
        fprintf(stderr, "qattn bench-cpu: out of memory for N = %zu, %zu threads\n", N, T);
        goto out;
    }
    for (size_t i = 0; i < T * N * D; i++) {
        q[i] = (float)rng_gauss();
        k[i] = (float)(rng_gauss() + 0.5);
        v[i] = (float)rng_gauss();
    }
    for (size_t i = 0; i < T * N * N; i++)
        sf[i] = (float)(rng_gauss() * 0.01);
    qattn_mask mask = {QATTN_MASK_NONE, 0, 0};
    {
        /* a small untimed run first, so that a scheme the emulation cannot run
         * at this head dim is one clear input error before any timing */
        size_t n0 = N < 64 ? N : 64;
        qattn_head h0 = {q, k, v, n0, n0, D, NULL, 0};
        qattn_err e0;
        int e = qattn_ref_head(&h0, &mask, 0.0, od, NULL, &e0);
        if (!e)
            e = qattn_emu_head(&s, &h0, &mask, 0.0, of, NULL, &e0);
        if (e) {
            fprintf(stderr, "qattn bench-cpu: scheme %s at d = %zu: %s\n", spec, D, e0.msg);
            rc = e == QATTN_ERR_NOMEM ? QATTN_EXIT_FAIL : QATTN_EXIT_INPUT;
            goto out;
        }
    }
    double flops = 4.0 * (double)N * (double)N * (double)D;
    const char *names[3] = {"reference-f64", "emulated", "sgemm-f32"};
    double med[3];
    /* the first error of any run: its code decides the exit status (a scheme
     * the emulation cannot run at this size is an input error) */
    int failed = 0, failcode = 0;
    char failmsg[600] = "";
    for (int which = 0; which < 3 && !failed; which++) {
        for (long r = 0; r < reps; r++) {
            double t0 = now_s();
#pragma omp parallel for schedule(static)
            for (size_t h = 0; h < T; h++) {
                qattn_head hv = {q + h * N * D, k + h * N * D, v + h * N * D, N, N, D, NULL, 0};
                qattn_err e2;
                int e = 0;
                if (which == 0) {
                    e = qattn_ref_head(&hv, &mask, 0.0, od + h * N * D, NULL, &e2);
                } else if (which == 1) {
                    e = qattn_emu_head(&s, &hv, &mask, 0.0, of + h * N * D, NULL, &e2);
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)N, (int)D, 1.0f,
                                q + h * N * D, (int)D, k + h * N * D, (int)D, 0.0f, sf + h * N * N, (int)N);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)D, (int)N, 1.0f,
                                sf + h * N * N, (int)N, v + h * N * D, (int)D, 0.0f, of + h * N * D, (int)D);
                }
                if (e) {
#pragma omp critical
                    if (!failed) {
                        failed = 1;
                        failcode = e;
                        snprintf(failmsg, sizeof failmsg, "%s: %s", names[which], e2.msg);
                    }
                }
            }
            if (failed)
                break;
            t[r] = now_s() - t0;
            fprintf(stderr, "bench-cpu: %s rep %ld/%lld %.3f s\n", names[which], r + 1, reps, t[r]);
        }
        if (!failed)
            med[which] = median(t, (int)reps);
    }
    if (failed) {
        fprintf(stderr, "qattn bench-cpu: %s\n", failmsg);
        rc = failcode == QATTN_ERR_NOMEM ? QATTN_EXIT_FAIL : QATTN_EXIT_INPUT;
        goto out;
    }
    char buf[512];
    if (csv)
        printf("what,n,dim,threads,seconds,gflops_total,gflops_per_core,ratio_to_sgemm,scheme\n");
    else
        printf("N = %zu, d = %zu, %zu thread(s), scheme %s\n%-14s %10s %12s %12s %10s\n", N, D, T,
               qattn_scheme_format(&s, buf, sizeof buf), "what", "seconds", "GFLOP/s", "per core", "/ sgemm");
    for (int w = 0; w < 3; w++) {
        double g = flops * (double)T / med[w] * 1e-9;
        double ratio = med[2] / med[w];
        if (csv)
            printf("%s,%zu,%zu,%zu,%.6f,%.3f,%.3f,%.4f,\"%s\"\n", names[w], N, D, T, med[w], g, g / (double)T, ratio,
                   w == 1 ? qattn_scheme_format(&s, buf, sizeof buf) : "");
        else
            printf("%-14s %10.4f %12.2f %12.2f %10.3f\n", names[w], med[w], g, g / (double)T, ratio);
    }
    rc = QATTN_EXIT_OK;
out:
    free(t);
    free(q);
    free(k);
    free(v);
    free(of);
    free(sf);
    free(od);
    return rc;
}
