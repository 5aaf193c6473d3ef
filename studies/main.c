/* qattn: command-line entry point; dispatches to one subcommand. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "commands.h"
#include "registry.h"

typedef struct qattn_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} qattn_command;

static const qattn_command commands[] = {
    {"schemes", qattn_cmd_schemes, "list the preset schemes with their full spec strings"},
    {"scheme-check", qattn_cmd_scheme_check, "print the normalized form of a scheme, or its error"},
    {"synth", qattn_cmd_synth, "write a synthetic activation file"},
    {"inspect", qattn_cmd_inspect, "validate an activation file and print its channel statistics"},
    {"accuracy", qattn_cmd_accuracy, "measure schemes against float64 attention on an activation file"},
    {"bench-cpu", qattn_cmd_bench_cpu, "time the reference, the emulation and sgemm on this CPU"},
    {"paper-tables", qattn_cmd_paper_tables, "write the paper's generated LaTeX tables and number macros from results/"},
    {"studies", qattn_cmd_studies, "list the studies (the commands below), or run them all"},
    {"compare", qattn_cmd_compare, "paired comparisons behind the paper's claims"},
    {"pareto", qattn_cmd_pareto, "join kernel-scheme accuracy with measured GPU throughput"},
    {"models", qattn_cmd_models, "the activation files' provenance as one CSV"},
    {"kernels", qattn_cmd_kernels, "list the GPU kernel instances built in (--json for JSON)"},
    {"gpu-check", qattn_cmd_gpu_check, "GPU: every kernel instance against the CPU emulation"},
    {"bench", qattn_cmd_bench, "GPU: kernel-only and end-to-end TOPS of the attention kernels"},
    {"decode-bench", qattn_cmd_decode_bench, "GPU: split-KV decode over a paged KV cache against a D2D copy"},
    {"sparse-bench", qattn_cmd_sparse_bench, "GPU: the DeepSeek-V4 sparse prefill, bf16 / prepass / fused"},
};
static const size_t ncommands = sizeof commands / sizeof commands[0];

static void usage(FILE *f)
{
    fprintf(f, "usage: qattn COMMAND [options]   (qattn COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < ncommands; i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nstudies (qattn studies --list):\n");
    for (size_t i = 0; qattn_studies[i]; i++)
        fprintf(f, "  %-14s %s\n", qattn_studies[i]->name, qattn_studies[i]->summary);
}

/* What a command printed on stdout must have reached it: a full disk or a
 * closed pipe is only seen when the buffer is flushed and the stream
 * closed. Returns rc, or 1 (with a message) when it did not arrive; a
 * command that failed already said why, and keeps its status. */
static int close_stdout(int rc)
{
    int bad = ferror(stdout) != 0;
    errno = 0;
    bad |= fflush(stdout) != 0;
    int e = errno;
    bad |= fclose(stdout) != 0;
    e = e ? e : errno;
    if (!bad || rc)
        return rc;
    fprintf(stderr, "qattn: cannot write to standard output%s%s\n", e ? ": " : "", e ? strerror(e) : "");
    return QATTN_EXIT_FAIL;
}

static int dispatch(int argc, char **argv)
{
#ifdef __GLIBC__
    /* The emulation allocates and frees megabyte buffers per head: keep them
     * in the heap instead of mapping and unmapping (and page-faulting) them
     * each time. */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
    if (argc < 2) {
        usage(stderr);
        return QATTN_EXIT_INPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return QATTN_EXIT_OK;
    }
    for (size_t i = 0; i < ncommands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    const qattn_study_rec *r = qattn_studies_find(argv[1]);
    if (r)
        return qattn_studies_main(r, argc - 1, argv + 1);
    fprintf(stderr, "qattn: unknown command '%s' (qattn --help lists them)\n", argv[1]);
    return QATTN_EXIT_INPUT;
}

int main(int argc, char **argv) { return close_stdout(dispatch(argc, argv)); }
