/* qattn studies: the study records (registry.h) listed for people and
 * scripts, or run one after another; and qattn_studies_main, how a study's
 * own command runs. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "registry.h"

int qattn_studies_main(const qattn_study_rec *r, int argc, char **argv)
{
    if (r->run)
        return r->run(argc, argv);
    qattn_study st;
    qattn_studies_grid(r, &st);
    int rc = qattn_study_main(&st, argc, argv);
    qattn_study_free(&st);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: qattn studies [--list | --tsv]\n"
            "       qattn studies --run --data F.h5 [--data G.h5 ...] [--layout-data L.h5 ...] --results DIR\n"
            "                     [--threads N] [--force]\n"
            "\n"
            "The studies, one record each (studies/studies.c), in the order they run:\n"
            "  --list      each study with what it varies, its factors and their values, its\n"
            "              table, figure and claims (the default)\n"
            "  --tsv       the same as tab-separated columns under a header line ('-' for none):\n"
            "              name kind factors levels cells table input figure figure_in claims\n"
            "              threads resumable summary\n"
            "  --run       run every study on the files into DIR/<study>/, as qattn STUDY --data ...\n"
            "              --out DIR/STUDY; --threads and --force go to the studies that take them;\n"
            "              each in a process of its own; stops at the first that fails, with its\n"
            "              exit status; the studies of DeepSeek-V4's layout (dsv4) read the\n"
            "              --layout-data files instead, and are skipped without them\n");
}

/* "qk_fmt=int4|int8;group=..." into buf, or "-" */
static void levels_of(const qattn_study_rec *r, char *buf, size_t n, const char *eq, const char *alt,
                      const char *sep)
{
    snprintf(buf, n, "%s", r->nf ? "" : "-");
    for (int f = 0; f < r->nf; f++) {
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s%s", f ? sep : "", r->factor[f].name, eq);
        for (const char *const *l = r->factor[f].levels; *l; l++)
            snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", l == r->factor[f].levels ? "" : alt, *l);
    }
}

static void claims_of(const qattn_study_rec *r, char *buf, size_t n)
{
    snprintf(buf, n, "%s", r->claims && r->claims[0].name ? "" : "-");
    for (const qattn_claim *c = r->claims; c && c->name; c++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", c == r->claims ? "" : " ", c->name);
}

static size_t ncells(const qattn_study_rec *r)
{
    qattn_study st;
    qattn_studies_grid(r, &st);
    size_t n = st.ncells;
    qattn_study_free(&st);
    return n;
}

static void list(int tsv)
{
    char lv[1024], cl[512], tab[96];
    if (tsv)
        printf("name\tkind\tfactors\tlevels\tcells\ttable\tinput\tfigure\tfigure_in\tclaims\tthreads\tresumable\t"
               "summary\n");
    for (size_t i = 0; qattn_studies[i]; i++) {
        const qattn_study_rec *r = qattn_studies[i];
        char fh[160];
        qattn_studies_header(r, fh, sizeof fh);
        claims_of(r, cl, sizeof cl);
        snprintf(tab, sizeof tab, "tab_%s.tex", r->table_name ? r->table_name : "");
        if (tsv) {
            levels_of(r, lv, sizeof lv, "=", "|", ";");
            printf("%s\t%s\t%s\t%s\t%zu\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r->name, r->run ? "command" : "grid",
                   r->nf ? fh : "-", lv, ncells(r), r->input ? tab : "-", r->input ? r->input : "-",
                   r->figure ? r->figure : "-", r->figure ? r->figure_in : "-", cl, r->threads, r->resumable,
                   r->summary);
            continue;
        }
        printf("%-14s %s\n", r->name, r->summary);
        if (!r->run) {
            levels_of(r, lv, sizeof lv, ": ", " ", "; ");
            printf("    grid      %zu cells; %s\n", ncells(r), lv);
        } else {
            printf("    command   qattn %s --help\n", r->name);
        }
        if (r->input)
            printf("    table     %s (\\QA%s...) from results/%s\n", tab, r->abbrev, r->input);
        if (r->figure)
            printf("    figure    plots/%s.gp from results/%s\n", r->figure, r->figure_in);
        if (strcmp(cl, "-"))
            printf("    claims    %s\n", cl);
    }
}

/* s with "{results}" replaced by results, into buf */
static const char *subst(const char *s, const char *results, char *buf, size_t n)
{
    const char *p = strstr(s, "{results}");
    if (!p)
        return s;
    snprintf(buf, n, "%.*s%s%s", (int)(p - s), s, results, p + strlen("{results}"));
    return buf;
}

static int run_all(const char *const *data, size_t ndata, const char *const *layout, size_t nlayout,
                   const char *results, long long threads, int force)
{
    enum { MAXARG = 160 };
    for (size_t i = 0; qattn_studies[i]; i++) {
        const qattn_study_rec *r = qattn_studies[i];
        char out[1100], th[32], extra[8][1100];
        char *argv[MAXARG + 1];
        int argc = 0, nx = 0;
        argv[argc++] = (char *)r->name;
        if (r->layout_data && !nlayout) {
            fprintf(stderr, "[qattn] %s: skipped (no --layout-data file)\n", r->name);
            continue;
        }
        for (size_t d = 0; d < (r->layout_data ? nlayout : ndata); d++) {
            argv[argc++] = "--data";
            argv[argc++] = (char *)(r->layout_data ? layout[d] : data[d]);
        }
        snprintf(out, sizeof out, "%s/%s", results, r->name);
        argv[argc++] = "--out";
        argv[argc++] = out;
        if (r->threads && threads > 0) {
            snprintf(th, sizeof th, "%lld", threads);
            argv[argc++] = "--threads";
            argv[argc++] = th;
        }
        if (r->resumable && force)
            argv[argc++] = "--force";
        for (const char *const *a = r->args; a && *a && nx < 8 && argc < MAXARG; a++, nx++)
            argv[argc++] = (char *)subst(*a, results, extra[nx], sizeof extra[nx]);
        argv[argc] = NULL;
        fprintf(stderr, "[qattn] qattn");
        for (int k = 0; k < argc; k++)
            fprintf(stderr, " %s", argv[k]);
        fprintf(stderr, "\n");
        /* each in a process of its own, as if run from the shell */
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("qattn studies: fork");
            return QATTN_EXIT_FAIL;
        }
        if (pid == 0) {
            int rc = qattn_studies_main(r, argc, argv);
            _exit(fflush(stdout) && !rc ? QATTN_EXIT_FAIL : rc);
        }
        int status, rc = QATTN_EXIT_FAIL;
        if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
            rc = WEXITSTATUS(status);
        if (rc) {
            fprintf(stderr, "qattn studies: %s failed (exit %d)\n", r->name, rc);
            return rc;
        }
    }
    return QATTN_EXIT_OK;
}

int qattn_cmd_studies(int argc, char **argv)
{
    const char *data[64], *layout[16], *results = NULL;
    size_t ndata = 0, nlayout = 0;
    long long threads = 0;
    int tsv = 0, lst = 0, run = 0, force = 0;
    const qattn_opt opts[] = {
        {"list", QATTN_OPT_FLAG, &lst, NULL, 0, 0},
        {"tsv", QATTN_OPT_FLAG, &tsv, NULL, 0, 0},
        {"run", QATTN_OPT_FLAG, &run, NULL, 0, 0},
        {"data", QATTN_OPT_LIST, data, &ndata, 0, 64},
        {"layout-data", QATTN_OPT_LIST, layout, &nlayout, 0, 16},
        {"results", QATTN_OPT_STR, &results, NULL, 0, 0},
        {"threads", QATTN_OPT_INT, &threads, NULL, 1, qattn_cli_threads_max()},
        {"force", QATTN_OPT_FLAG, &force, NULL, 0, 0},
        {NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc)
        return prc == QATTN_CLI_HELP ? (usage(stdout), QATTN_EXIT_OK) : prc;
    if (lst + tsv + run > 1) {
        fprintf(stderr, "qattn studies: --list, --tsv and --run exclude each other\n");
        return QATTN_EXIT_INPUT;
    }
    if (!run) {
        if (ndata || nlayout || results || threads || force) {
            fprintf(stderr, "qattn studies: --data, --results, --threads and --force go with --run\n");
            return QATTN_EXIT_INPUT;
        }
        list(tsv);
        return QATTN_EXIT_OK;
    }
    if (!ndata || !results || !results[0]) {
        fprintf(stderr, "qattn studies: --run needs --data and --results (qattn studies --help)\n");
        return QATTN_EXIT_INPUT;
    }
    return run_all(data, ndata, layout, nlayout, results, threads, force);
}
