/* qattn kernels [--json]: the GPU kernel registry (no GPU needed). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
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
               g->family == QATTN_KERNELS_FAMILY_QUANT ? "quant" : "attn-fwd", path);
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
#endif

int qattn_cmd_kernels(int argc, char **argv)
{
    int json = 0;
    const qattn_opt opts[] = {{"json", QATTN_OPT_FLAG, &json, NULL, 0, 0}, {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc == QATTN_CLI_HELP)
        printf("usage: qattn kernels [--json]\n\n"
               "Lists the GPU kernel instances built into this program, one per line with its\n"
               "signature (family, head dim, Q/K/P/V formats, accumulator, scale groups, masks,\n"
               "varlen, GQA, LSE, targets). No GPU is needed. --json writes one JSON document.\n");
    if (prc)
        return prc == QATTN_CLI_HELP ? QATTN_EXIT_OK : prc;
#ifdef QATTN_HAVE_GPU
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
    if (json)
        printf("{\"backend\": \"off\", \"kernels\": []}\n");
    else
        printf("no GPU kernels were built (configure with -DQATTN_GPU=nvidia or amd)\n");
#endif
    return QATTN_EXIT_OK;
}
