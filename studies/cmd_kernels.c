/* qattn kernels [--json] [--plan]: the GPU kernel registry and the
 * dispatcher's choices (no GPU needed). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qattn/scheme.h"
#ifdef QATTN_HAVE_GPU
#include "qattn_kernels.h"
#endif

#ifdef QATTN_HAVE_GPU
static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned)(unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void json_fmts(unsigned bits)
{
    int first = 1;
    putchar('[');
    for (int f = 0; f < (int)QATTN_FMT_COUNT; f++)
        if (bits & (1u << f)) {
            printf("%s\"%s\"", first ? "" : ", ", qattn_fmt_name((qattn_fmt)f));
            first = 0;
        }
    putchar(']');
}

static void json_masks(unsigned bits)
{
    static const char *names[] = {"none", "causal", "causal-br", "window"};
    int first = 1;
    putchar('[');
    for (int m = 0; m < 4; m++)
        if (bits & (1u << m)) {
            printf("%s\"%s\"", first ? "" : ", ", names[m]);
            first = 0;
        }
    putchar(']');
}

static void print_json(void)
{
    printf("{\"backend\": ");
    json_str(qattn_kernels_backend());
    printf(", \"kernels\": [\n");
    for (size_t i = 0; i < qattn_kernels_count(); i++) {
        const qattn_kernels_sig *g = qattn_kernels_get(i);
        const char *path = qattn_kernels_path_name(g->path);
        printf("  {\"name\": ");
        json_str(g->name);
        printf(", \"family\": \"%s\", \"path\": \"%s\"",
               g->family == QATTN_KERNELS_FAMILY_QUANT    ? "quant"
               : g->family == QATTN_KERNELS_FAMILY_DECODE ? "decode"
               : g->family == QATTN_KERNELS_FAMILY_SPARSE ? "sparse"
                                                          : "attn-fwd",
               path);
        if (g->family == QATTN_KERNELS_FAMILY_ATTN_FWD) {
            const char *acc = g->acc == QATTN_ACC_FP16 ? "fp16" : g->acc == QATTN_ACC_FP22 ? "fp22" : "fp32";
            printf(", \"head_dim\": %d, \"q\": \"%s\", \"k\": \"%s\", \"p\": \"%s\", \"p_static\": [%s%s%s], "
                   "\"v\": \"%s\", \"acc\": \"%s\", \"two_level\": %s, \"kblock_max\": %d, \"masks\": ",
                   g->head_dim, qattn_fmt_name(g->q), qattn_fmt_name(g->k), qattn_fmt_name(g->p),
                   g->p_static & 1 ? "false" : "", g->p_static == 3 ? ", " : "", g->p_static & 2 ? "true" : "",
                   qattn_fmt_name(g->v), acc, g->two_level ? "true" : "false", g->kblock_max);
            json_masks(g->masks);
            printf(", \"varlen\": %s, \"gqa\": %s, \"lse\": %s, \"out\": ", g->varlen ? "true" : "false",
                   g->gqa ? "true" : "false", g->lse ? "true" : "false");
            json_fmts(g->out_fmts);
            printf(", \"fuse_q\": "); /* input dtypes the instance quantizes Q from itself */
            json_fmts(g->fuse_q);
        } else {
            printf(", \"in\": ");
            json_fmts(g->in_fmts);
            printf(", \"formats\": ");
            json_fmts(g->out_fmts);
            printf(", \"varlen\": %s", g->varlen ? "true" : "false");
        }
        printf(", \"qk_groups\": ");
        json_str(g->qk_groups);
        printf(", \"v_groups\": ");
        json_str(g->v_groups);
        printf(", \"smooth\": \"%s%s%s\", \"arch\": ", g->smooth & QATTN_SMOOTH_Q ? "q" : "",
               g->smooth & QATTN_SMOOTH_K ? "k" : "", g->smooth & QATTN_SMOOTH_V ? "v" : "");
        json_str(g->arch);
        printf("}%s\n", i + 1 < qattn_kernels_count() ? "," : "");
    }
    printf("]}\n");
}

/* --plan: per scheme and head dim, the instances the dispatcher takes on a
 * device of compute capability cc, why no faster path takes a scheme that
 * lands on the portable one, and what the tensor cores cannot do for it */
static int print_plan(const char *const *schemes, size_t nschemes, const int *dims, size_t ndims, int cc)
{
    for (size_t i = 0; i < nschemes; i++) { /* every scheme valid before any output */
        qattn_scheme s;
        qattn_err err = {{0}};
        if (qattn_scheme_parse(schemes[i], &s, &err)) {
            fprintf(stderr, "qattn kernels: --schemes: %s\n", err.msg);
            return QATTN_EXIT_INPUT;
        }
    }
    printf("plan for sm_%d (fp16 input, N = 4096, 4 q heads on 1 kv head, no mask)\n", cc);
    for (size_t i = 0; i < nschemes; i++) {
        qattn_scheme s;
        qattn_err err = {{0}};
        (void)qattn_scheme_parse(schemes[i], &s, &err);
        printf("%s\n", schemes[i]);
        for (size_t j = 0; j < ndims; j++) {
            qattn_kernels_problem pb;
            memset(&pb, 0, sizeof pb);
            pb.nseq = 1, pb.hq = 4, pb.hkv = 1, pb.d = dims[j];
            pb.seqlen_q = pb.seqlen_k = 4096;
            pb.in = QATTN_FMT_FP16;
            pb.cc = cc;
            const qattn_kernels_sig *attn = NULL, *quant = NULL;
            if (qattn_kernels_find(&s, &pb, &attn, &quant, &err)) {
                printf("  d=%-4d none: %s\n", dims[j], err.msg);
            } else {
                printf("  d=%-4d %s (%s), quantization %s%s\n", dims[j], attn->name, qattn_kernels_path_name(attn->path),
                       quant ? quant->name : "none",
                       qattn_kernels_fuse_q_can(attn, &s, &pb) ? " (Q: also by the attention kernel, with QATTN_FUSE_Q=1)" : "");
                const long solo = qattn_kernels_wg_solo_keys(attn, qattn_kernels_wg_tma_lengths(&pb));
                if (solo) { /* the wgmma block form, by the keys a row sees */
                    char most[128] = "one warpgroup at any length of whole 16-row groups";
                    if (solo > 0)
                        snprintf(most, sizeof most,
                                 "one warpgroup up to %ld keys a row on average; past that, %s", solo,
                                 qattn_kernels_wg_form_name(qattn_kernels_wg_multi(attn)));
                    printf("         blocks of %s here (%s)\n", qattn_kernels_wg_form_name(qattn_kernels_wg_form(attn, &pb, 0)),
                           most);
                }
                if (qattn_kernels_wg_i4w(attn, &pb))
                    printf("         int4 codes widened to int8 by a pass here (no varlen, whole 16-row groups; "
                           "else unpacked by the producer)\n");
                if (attn->path == QATTN_KERNELS_PATH_PORTABLE) { /* why no faster path */
                    pb.paths = ((1u << QATTN_KERNELS_PATH_COUNT) - 1u) & ~(1u << QATTN_KERNELS_PATH_PORTABLE);
                    if (qattn_kernels_find(&s, &pb, &attn, &quant, &err))
                        printf("         no fast path: %s\n", err.msg);
                }
            }
        }
        const char *hw;
        for (int k = 0; (hw = qattn_kernels_hw_limit(&s, cc, k)) != NULL; k++)
            printf("  hardware: %s\n", hw);
    }
    return QATTN_EXIT_OK;
}
#endif

int qattn_cmd_kernels(int argc, char **argv)
{
    int json = 0, plan = 0;
    long long cc = 0;
    const char *schemes_arg = NULL, *dims_arg = "64,128";
    const qattn_opt opts[] = {{"json", QATTN_OPT_FLAG, &json, NULL, 0, 0},
                              {"plan", QATTN_OPT_FLAG, &plan, NULL, 0, 0},
                              {"cc", QATTN_OPT_INT, &cc, NULL, 70, 200},
                              {"schemes", QATTN_OPT_STR, &schemes_arg, NULL, 0, 0},
                              {"dims", QATTN_OPT_STR, &dims_arg, NULL, 0, 0},
                              {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc == QATTN_CLI_HELP)
        printf("usage: qattn kernels [--json]\n"
               "       qattn kernels --plan [--cc CC] [--schemes LIST] [--dims LIST]\n\n"
               "Lists the GPU kernel instances built into this program, one per line with its\n"
               "signature (family, head dim, Q/K/P/V formats, accumulator, scale groups, masks,\n"
               "varlen, GQA, LSE, targets). No GPU is needed. --json writes one JSON document.\n\n"
               "--plan: for every preset (or the comma-separated --schemes, presets or specs)\n"
               "and head dim (--dims, default 64,128), the attention and quantization\n"
               "instances the dispatcher takes on a device of compute capability --cc (70..200,\n"
               "e.g. 90; default this GPU's, or 90 without one), why no faster path than the\n"
               "portable one takes the scheme, and what the tensor cores cannot do for it.\n");
    if (prc)
        return prc == QATTN_CLI_HELP ? QATTN_EXIT_OK : prc;
    if (!plan && (cc || schemes_arg || strcmp(dims_arg, "64,128"))) {
        fprintf(stderr, "qattn kernels: --cc, --schemes and --dims go with --plan\n");
        return QATTN_EXIT_INPUT;
    }
#ifdef QATTN_HAVE_GPU
    if (plan) {
        int dims[8];
        size_t ndims = 0;
        char dbuf[64];
        snprintf(dbuf, sizeof dbuf, "%s", dims_arg);
        for (char *save = NULL, *t = strtok_r(dbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            long long v;
            if (ndims == 8 || qattn_cli_int("kernels", "--dims", t, 1, 1024, &v))
                return QATTN_EXIT_INPUT;
            dims[ndims++] = (int)v;
        }
        if (!ndims) {
            fprintf(stderr, "qattn kernels: --dims: no head dim given\n");
            return QATTN_EXIT_INPUT;
        }
        const char *list[64];
        size_t n = 0;
        char sbuf[4096];
        if (schemes_arg) {
            if (strlen(schemes_arg) >= sizeof sbuf) {
                fprintf(stderr, "qattn kernels: --schemes: too long (at most %zu characters)\n", sizeof sbuf - 1);
                return QATTN_EXIT_INPUT;
            }
            snprintf(sbuf, sizeof sbuf, "%s", schemes_arg);
            for (char *save = NULL, *t = strtok_r(sbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (n == 64) {
                    fprintf(stderr, "qattn kernels: --schemes: at most 64 schemes\n");
                    return QATTN_EXIT_INPUT;
                }
                list[n++] = t;
            }
        } else {
            for (; n < qattn_scheme_preset_count() && n < 64; n++)
                list[n] = qattn_scheme_preset_name(n);
        }
        if (!n) {
            fprintf(stderr, "qattn kernels: --schemes: no scheme given\n");
            return QATTN_EXIT_INPUT;
        }
        int dev = cc ? (int)cc : qattn_kernels_dev_cc();
        return print_plan(list, n, dims, ndims, dev > 0 ? dev : 90);
    }
    if (json) {
        print_json();
        return QATTN_EXIT_OK;
    }
    printf("backend: %s\n", qattn_kernels_backend());
    for (size_t i = 0; i < qattn_kernels_count(); i++) {
        const qattn_kernels_sig *g = qattn_kernels_get(i);
        char buf[1024];
        printf("%-48s %s\n", g->name, qattn_kernels_describe(g, buf, sizeof buf));
    }
#else
    if (plan) {
        fprintf(stderr, "qattn kernels: --plan: no GPU kernels were built (configure with -DQATTN_GPU=nvidia or amd)\n");
        return QATTN_EXIT_INPUT;
    }
    if (json)
        printf("{\"backend\": \"off\", \"kernels\": []}\n");
    else
        printf("no GPU kernels were built (configure with -DQATTN_GPU=nvidia or amd)\n");
#endif
    return QATTN_EXIT_OK;
}
