/* qattn synth: write a synthetic activation file (schema qattn-activations/1)
 * for tests and quick probes. Deterministic given --seed.
 *
 * Per layer and kv head (own PRNG stream, xoshiro256** seeded by splitmix64
 * from seed, layer and head):
 *   K[t][c] = sk_c * z (z ~ N(0,1)), sk_c log-normal so channels differ,
 *             plus the planted offset X * b_c (b_c ~ N(0,1), X = --k-bias);
 *   V[t][c] = sv_c * z + mu_c, mu_c a small per-channel mean;
 *   outlier tokens (the first M tokens of each sequence) have K and V rows
 *             10x larger;
 * and per q head: each query t is a noisy copy of the (unbiased, unscaled)
 * key of a random earlier token j of its sequence, Q[t][c] = beta * sq_c *
 * (rho z_j[c] + sqrt(1 - rho^2) z'[c]), beta chosen so that the chosen key's
 * logit q.k/sqrt(d) is about 4 above the others; then the query's logit to
 * each visible outlier token is set to about 5, so queries attend to them
 * strongly (attention-sink-like). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qattn/h5io.h"

#define SYNTH_RHO 0.6      /* correlation of a query with its chosen key */
#define SYNTH_PEAK 4.0     /* logit of the chosen key (scaled by 1/sqrt(d)) */
#define SYNTH_SINK 5.0     /* logit of each visible outlier token */
#define SYNTH_OUTLIER 10.0 /* outlier rows of K and V are this much larger */
/* a layer holds at most 2e9 values (checked below), so no single size
 * can exceed that; layers are bounded apart */
#define SYNTH_SIZE_MAX 2000000000LL
#define SYNTH_LAYERS_MAX 100000LL

/* ---- PRNG: splitmix64 seeding, xoshiro256**, Box-Muller ---- */

typedef struct rng {
    uint64_t s[4];
    int has_spare;
    double spare;
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t x = seed;
    x = splitmix64(&x) ^ (a * 0xd1b54a32d192ed03ull);
    x = splitmix64(&x) ^ (b * 0xabc98388fb8fac03ull);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    r->has_spare = 0;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

/* uniform in (0, 1) */
static double rng_uniform(rng *r) { return ((double)(rng_next(r) >> 11) + 0.5) * 0x1p-53; }

/* uniform integer in [0, n) */
static size_t rng_below(rng *r, size_t n) { return (size_t)(rng_uniform(r) * (double)n) % n; }

static double rng_gauss(rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    r->spare = rad * sin(th);
    r->has_spare = 1;
    return rad * cos(th);
}

/* ---- arguments ---- */

typedef struct synth_args {
    const char *out;
    size_t layers, heads, kv_heads, tokens, dim, outliers;
    double k_bias;
    double softmax_scale; /* 0: no attribute (consumers use 1/sqrt(d)) */
    uint64_t seed;
    int64_t *seqlens;
    size_t nseq;
    int f16;
    int vlen_strings;
    const char *model;
    size_t q_rows;   /* 0: every query row; else the last q_rows (q_offset = N - q_rows) */
    int rope_dim;    /* the rope_dim attribute, 0: none */
    int shared_kv;   /* 1: v is k (one row as key and value, DeepSeek-V4's layout) */
} synth_args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn synth --out F.h5 --layers L --heads H --kv-heads HK --tokens N --dim D\n"
            "                   [--k-bias X] [--outlier-tokens M] [--seed S] [--seqlens A,B,...]\n"
            "                   [--dtype f16|f32] [--model NAME] [--vlen-strings]\n"
            "                   [--q-rows R] [--rope-dim R] [--shared-kv]\n"
            "\n"
            "Write synthetic Q/K/V activations (schema qattn-activations/1), deterministic\n"
            "given the seed: gaussian Q and K with per-channel scales, queries correlated\n"
            "with earlier keys (peaked attention rows), V with small per-channel means.\n"
            "\n"
            "  --out F.h5            output file (written atomically)\n"
            "  --layers L            number of layers (1 to 100000)\n"
            "  --heads H             query heads (>= 1)\n"
            "  --kv-heads HK         key/value heads, must divide H\n"
            "  --tokens N            tokens per layer (all sequences together)\n"
            "  --dim D               head dimension; a layer holds (H + 2 HK) x N x D values,\n"
            "                        at most 2e9\n"
            "  --k-bias X            planted per-channel K offset X * b_c, b_c ~ N(0,1) (default 0)\n"
            "  --outlier-tokens M    first M tokens of each sequence get 10x larger K and V rows\n"
            "                        and attract attention (default 0)\n"
            "  --seed S              PRNG seed (default 1)\n"
            "  --seqlens A,B,...     pack several sequences along N; must sum to N\n"
            "  --dtype f16|f32       stored type (default f16)\n"
            "  --model NAME          value of the 'model' attribute (default synthetic)\n"
            "  --softmax-scale X     write the 'softmax_scale' attribute, 0 < X <= 10000\n"
            "                        (default: none, readers use 1/sqrt(D))\n"
            "  --vlen-strings        write the string attributes variable-length, as h5py\n"
            "                        does (default: fixed-length), to test reading such files\n"
            "  --q-rows R            store only the last R query rows (attribute q_offset = N - R;\n"
            "                        one sequence; read by qattn dsv4)\n"
            "  --rope-dim R          write the 'rope_dim' attribute (0 < R <= D)\n"
            "  --shared-kv           V equal to K (one row as key and value)\n");
}

static int input_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int input_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "qattn synth: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return QATTN_EXIT_INPUT;
}

static int parse_seqlens(const char *s, synth_args *a)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    a->seqlens = malloc(cap * sizeof *a->seqlens);
    if (!a->seqlens)
        return input_error("out of memory");
    a->nseq = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item)
            return input_error("--seqlens must be a comma-separated list of positive integers, "
                               "got '%s'", s);
        memcpy(item, p, len);
        item[len] = '\0';
        long long v;
        if (qattn_cli_int("synth", "--seqlens entry", item, 1, SYNTH_SIZE_MAX, &v))
            return QATTN_EXIT_INPUT;
        a->seqlens[a->nseq++] = (int64_t)v;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

/* a finite number in [lo, hi]: 0, else -1 */
static int parse_real(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return !s[0] || *end || errno || !(*out >= lo && *out <= hi) ? -1 : 0;
}

static int parse_args(int argc, char **argv, synth_args *a, int *help)
{
    long long layers = 0, heads = 0, kv = 0, tokens = 0, dim = 0, outliers = 0, qrows = 0, ropedim = 0;
    unsigned long long seed = 1;
    const char *seqarg = NULL, *kbias = NULL, *dtype = NULL, *sscale = NULL;
    memset(a, 0, sizeof *a);
    a->model = "synthetic";
    *help = 0;
    const qattn_opt opts[] = {
        {"out", QATTN_OPT_STR, &a->out, NULL, 0, 0},
        {"layers", QATTN_OPT_INT, &layers, NULL, 1, SYNTH_LAYERS_MAX},
        {"heads", QATTN_OPT_INT, &heads, NULL, 1, SYNTH_SIZE_MAX},
        {"kv-heads", QATTN_OPT_INT, &kv, NULL, 1, SYNTH_SIZE_MAX},
        {"tokens", QATTN_OPT_INT, &tokens, NULL, 1, SYNTH_SIZE_MAX},
        {"dim", QATTN_OPT_INT, &dim, NULL, 1, SYNTH_SIZE_MAX},
        {"k-bias", QATTN_OPT_STR, &kbias, NULL, 0, 0},
        {"outlier-tokens", QATTN_OPT_INT, &outliers, NULL, 0, SYNTH_SIZE_MAX},
        {"seed", QATTN_OPT_U64, &seed, NULL, 0, 0},
        {"seqlens", QATTN_OPT_STR, &seqarg, NULL, 0, 0},
        {"dtype", QATTN_OPT_STR, &dtype, NULL, 0, 0},
        {"model", QATTN_OPT_STR, &a->model, NULL, 0, 0},
        {"softmax-scale", QATTN_OPT_STR, &sscale, NULL, 0, 0},
        {"vlen-strings", QATTN_OPT_FLAG, &a->vlen_strings, NULL, 0, 0},
        {"q-rows", QATTN_OPT_INT, &qrows, NULL, 1, SYNTH_SIZE_MAX},
        {"rope-dim", QATTN_OPT_INT, &ropedim, NULL, 1, SYNTH_SIZE_MAX},
        {"shared-kv", QATTN_OPT_FLAG, &a->shared_kv, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int rc = qattn_cli_parse(argc, argv, opts, NULL);
    if (rc) {
        *help = rc == QATTN_CLI_HELP;
        return *help ? 0 : rc;
    }
    a->layers = (size_t)layers;
    a->heads = (size_t)heads;
    a->kv_heads = (size_t)kv;
    a->tokens = (size_t)tokens;
    a->dim = (size_t)dim;
    a->outliers = (size_t)outliers;
    a->q_rows = (size_t)qrows;
    a->rope_dim = (int)ropedim;
    a->seed = seed;
    a->f16 = 1;
    if (kbias && parse_real(kbias, -1e4, 1e4, &a->k_bias))
        return input_error("--k-bias must be a number with |X| <= 10000, got '%s'", kbias);
    if (sscale && (parse_real(sscale, 0, QATTN_SOFTMAX_SCALE_MAX, &a->softmax_scale) || !(a->softmax_scale > 0)))
        return input_error("--softmax-scale must be a number > 0 and at most %g, got '%s'",
                           QATTN_SOFTMAX_SCALE_MAX, sscale);
    if (dtype && (!strcmp(dtype, "f32") || !strcmp(dtype, "float32")))
        a->f16 = 0;
    else if (dtype && strcmp(dtype, "f16") && strcmp(dtype, "float16"))
        return input_error("--dtype must be f16 or f32, got '%s'", dtype);
    if (!a->model[0] || strlen(a->model) >= sizeof(((qattn_act_meta *)0)->model))
        return input_error("--model must be 1 to 255 bytes long");
    static const char *req[6] = {"--out", "--layers", "--heads", "--kv-heads", "--tokens",
                                 "--dim"};
    int have[6] = {a->out != NULL, a->layers > 0, a->heads > 0, a->kv_heads > 0,
                   a->tokens > 0, a->dim > 0};
    for (int i = 0; i < 6; i++)
        if (!have[i])
            return input_error("missing required option %s (qattn synth --help)", req[i]);
    /* the file is renamed over --out at the end: refuse what a rename
     * cannot replace before generating anything */
    if ((rc = qattn_cli_check_out_file("synth", "--out", a->out)))
        return rc;
    if (a->heads % a->kv_heads)
        return input_error("--kv-heads %zu must divide --heads %zu", a->kv_heads, a->heads);
    if (a->q_rows > a->tokens)
        return input_error("--q-rows %zu is more than --tokens %zu", a->q_rows, a->tokens);
    if ((size_t)a->rope_dim > a->dim)
        return input_error("--rope-dim %d is more than --dim %zu", a->rope_dim, a->dim);
    if (a->outliers > a->tokens)
        return input_error("--outlier-tokens %zu is more than --tokens %zu", a->outliers,
                           a->tokens);
    /* each layer is held in memory as float32 (and the keys once more as
     * float64): keep it sane */
    double elems = (double)(a->heads + 2 * a->kv_heads) * (double)a->tokens * (double)a->dim;
    if (elems > 2e9)
        return input_error("requested size is too large (%.3g values per layer, at most 2e9)",
                           elems);
    /* a layer in float32 and one kv head's keys in float64 */
    if ((rc = qattn_cli_memory_check("synth", a->out, elems * 4 + (double)a->tokens * (double)a->dim * 8)))
        return rc;
    if (seqarg) {
        if ((rc = parse_seqlens(seqarg, a)))
            return rc;
        /* compared with what is left, never summed past --tokens: a sum in
         * 64 bits could wrap around to it */
        size_t sum = 0;
        for (size_t i = 0; i < a->nseq; i++) {
            if ((size_t)a->seqlens[i] > a->tokens - sum)
                return input_error("--seqlens sum to more than --tokens %zu", a->tokens);
            sum += (size_t)a->seqlens[i];
        }
        if (sum != a->tokens)
            return input_error("--seqlens sum to %zu but --tokens is %zu", sum, a->tokens);
        if (a->q_rows && a->nseq > 1)
            return input_error("--q-rows needs one sequence (--seqlens has %zu)", a->nseq);
    }
    return 0;
}

/* ---- generation ---- */

typedef struct synth_work {
    double *zk;    /* [n, d] standardized keys of one kv head */
    double *sk;    /* [d] K channel scales */
    double *sq;    /* [d] Q channel scales */
    double *vrow;  /* [d] a query's standardized vector */
    double *wsink; /* [d] */
    size_t *seq_start; /* [n] first token of each token's sequence */
} synth_work;

static void gen_layer(const synth_args *a, size_t l, synth_work *wk, float *q, float *k,
                      float *v)
{
    const size_t n = a->tokens, d = a->dim, group = a->heads / a->kv_heads;
    const double sqrtd = sqrt((double)d);
    for (size_t g = 0; g < a->kv_heads; g++) {
        rng r;
        rng_seed(&r, a->seed, l + 1, g + 1);
        double *zk = wk->zk, *sk = wk->sk;
        for (size_t c = 0; c < d; c++)
            sk[c] = exp(0.4 * rng_gauss(&r));
        /* keys */
        float *kg = k + g * n * d;
        for (size_t t = 0; t < n; t++) {
            int outl = t - wk->seq_start[t] < a->outliers;
            for (size_t c = 0; c < d; c++) {
                zk[t * d + c] = rng_gauss(&r);
                kg[t * d + c] = (float)(sk[c] * zk[t * d + c] * (outl ? SYNTH_OUTLIER : 1.0));
            }
        }
        for (size_t c = 0; c < d; c++) {
            double b = rng_gauss(&r);
            if (a->k_bias != 0)
                for (size_t t = 0; t < n; t++)
                    kg[t * d + c] += (float)(a->k_bias * b);
        }
        /* values */
        float *vg = v + g * n * d;
        for (size_t c = 0; c < d; c++) {
            double sv = exp(0.3 * rng_gauss(&r)), mu = 0.1 * rng_gauss(&r);
            for (size_t t = 0; t < n; t++) {
                int outl = t - wk->seq_start[t] < a->outliers;
                vg[t * d + c] = (float)((sv * rng_gauss(&r) + mu) * (outl ? SYNTH_OUTLIER : 1.0));
            }
        }
        /* queries of this kv head's group */
        for (size_t hi = 0; hi < group; hi++) {
            size_t h = g * group + hi;
            double *sq = wk->sq, *vr = wk->vrow, *w = wk->wsink;
            double P = 0;
            for (size_t c = 0; c < d; c++) {
                sq[c] = exp(0.4 * rng_gauss(&r));
                P += sq[c] * sk[c];
            }
            /* logit to the chosen key: beta * rho * sum sq sk z_j^2 / sqrt d ~ PEAK */
            double beta = SYNTH_PEAK * sqrtd / (SYNTH_RHO * P);
            double noise = sqrt(1.0 - SYNTH_RHO * SYNTH_RHO);
            float *qh = q + h * n * d;
            for (size_t t = 0; t < n; t++) {
                size_t s0 = wk->seq_start[t];
                size_t j = s0 + rng_below(&r, t - s0 + 1);
                for (size_t c = 0; c < d; c++)
                    vr[c] = SYNTH_RHO * zk[j * d + c] + noise * rng_gauss(&r);
                /* visible outlier tokens of this sequence: set the logit to ~SINK */
                size_t nout = a->outliers < t - s0 + 1 ? a->outliers : t - s0 + 1;
                for (size_t o = 0; o < nout; o++) {
                    const double *zs = zk + (s0 + o) * d;
                    double ww = 0, vw = 0;
                    for (size_t c = 0; c < d; c++) {
                        w[c] = sq[c] * sk[c] * zs[c];
                        ww += w[c] * w[c];
                        vw += vr[c] * w[c];
                    }
                    if (ww < 1e-12)
                        continue;
                    /* logit = beta * OUTLIER * (vr . w) / sqrt d */
                    double target = (SYNTH_SINK + 0.5 * rng_gauss(&r)) * sqrtd /
                                    (beta * SYNTH_OUTLIER);
                    double step = (target - vw) / ww;
                    for (size_t c = 0; c < d; c++)
                        vr[c] += step * w[c];
                }
                for (size_t c = 0; c < d; c++)
                    qh[t * d + c] = (float)(beta * sq[c] * vr[c]);
            }
        }
    }
}

int qattn_cmd_synth(int argc, char **argv)
{
    synth_args a;
    int help = 0;
    int rc = parse_args(argc, argv, &a, &help);
    if (rc || help) {
        free(a.seqlens);
        if (help)
            usage(stdout);
        return rc;
    }

    qattn_act_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.model, sizeof m.model, "%s", a.model);
    snprintf(m.source, sizeof m.source, "%s", "synthetic");
    snprintf(m.license, sizeof m.license, "%s", "CC0-1.0");
    snprintf(m.text_source, sizeof m.text_source, "%s", "none (synthetic)");
    m.rope_applied = 0;
    m.causal = 1;
    m.nlayers = a.layers;
    m.hq = a.heads;
    m.hkv = a.kv_heads;
    m.n = a.tokens;
    m.d = a.dim;
    m.f16 = a.f16;
    m.vlen_strings = a.vlen_strings;
    m.seqlens = a.seqlens;
    m.nseq = a.nseq;
    m.has_softmax_scale = a.softmax_scale > 0;
    m.softmax_scale = a.softmax_scale;
    m.q_offset = a.q_rows ? a.tokens - a.q_rows : 0;
    m.rope_dim = a.rope_dim;

    size_t n = a.tokens, d = a.dim;
    float *q = malloc(a.heads * n * d * sizeof *q);
    float *k = malloc(a.kv_heads * n * d * sizeof *k);
    float *v = malloc(a.kv_heads * n * d * sizeof *v);
    synth_work wk = {
        .zk = malloc(n * d * sizeof(double)),
        .sk = malloc(d * sizeof(double)),
        .sq = malloc(d * sizeof(double)),
        .vrow = malloc(d * sizeof(double)),
        .wsink = malloc(d * sizeof(double)),
        .seq_start = malloc(n * sizeof(size_t)),
    };
    qattn_act_writer w;
    memset(&w, 0, sizeof w);
    w.fid = -1;
    char tmp[sizeof w.tmp] = "";
    if (!q || !k || !v || !wk.zk || !wk.sk || !wk.sq || !wk.vrow || !wk.wsink ||
        !wk.seq_start) {
        fprintf(stderr, "qattn synth: out of memory\n");
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    for (size_t i = 0, t = 0; i < (a.nseq ? a.nseq : 1); i++) {
        size_t len = a.nseq ? (size_t)a.seqlens[i] : n;
        for (size_t j = 0; j < len; j++)
            wk.seq_start[t + j] = t;
        t += len;
    }

    /* remember the temporary file before it exists, so that an interrupt can
     * never leave it behind: a termination signal may reach any thread
     * (OpenBLAS's and OpenMP's do not block it), so blocking it in this one
     * around the creation is not enough */
    qattn_cli_signals_init();
    qattn_err err = {""};
    tmp[0] = '\0';
    if (qattn_act_tmp_path(a.out, tmp, sizeof tmp) == 0)
        qattn_cli_tmp_remember(tmp);
    int e = qattn_act_write_begin(&w, a.out, &m, &err);
    if (e && tmp[0]) {
        qattn_cli_tmp_forget(tmp);
        tmp[0] = '\0';
    }
    if (e) {
        fprintf(stderr, "qattn synth: %s\n", err.msg);
        rc = e == QATTN_ERR_NOMEM ? QATTN_EXIT_FAIL : QATTN_EXIT_INPUT;
        goto done;
    }
    for (size_t l = 0; l < a.layers; l++) {
        gen_layer(&a, l, &wk, q, k, v);
        if (a.shared_kv)
            memcpy(v, k, a.kv_heads * n * d * sizeof *v);
        for (size_t h = 0; h < a.heads && m.q_offset; h++) /* keep the last rows, heads packed */
            memmove(q + h * (n - m.q_offset) * d, q + (h * n + m.q_offset) * d, (n - m.q_offset) * d * sizeof *q);
        e = qattn_act_write_layer(&w, q, k, v, &err);
        if (e) {
            if (e == QATTN_ERR_RANGE)
                fprintf(stderr, "qattn synth: %s (use --dtype f32 or a smaller --k-bias)\n",
                        err.msg);
            else
                fprintf(stderr, "qattn synth: %s\n", err.msg);
            rc = e == QATTN_ERR_RANGE ? QATTN_EXIT_INPUT : QATTN_EXIT_FAIL;
            goto done;
        }
        qattn_cli_progress("synth: layer", l + 1, a.layers);
    }
    e = qattn_act_write_commit(&w, &err);
    if (e) {
        fprintf(stderr, "qattn synth: %s\n", err.msg);
        rc = QATTN_EXIT_FAIL;
        goto done;
    }
    rc = QATTN_EXIT_OK;
done:
    qattn_act_write_abort(&w); /* no-op after a commit or a failure */
    if (tmp[0])
        qattn_cli_tmp_forget(tmp);
    free(q), free(k), free(v);
    free(wk.zk), free(wk.sk), free(wk.sq), free(wk.vrow), free(wk.wsink), free(wk.seq_start);
    free(a.seqlens);
    return rc;
}
