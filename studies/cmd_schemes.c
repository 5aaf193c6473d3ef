/* qattn schemes / qattn scheme-check */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "qattn/scheme.h"

int qattn_cmd_schemes(int argc, char **argv)
{
    static const qattn_opt opts[] = {{NULL, 0, NULL, NULL, 0, 0}};
    int prc = qattn_cli_parse(argc, argv, opts, NULL);
    if (prc == QATTN_CLI_HELP)
        printf("usage: qattn schemes\n\nLists the preset schemes, one per line: name, then its full spec.\n");
    if (prc)
        return prc == QATTN_CLI_HELP ? QATTN_EXIT_OK : prc;
    for (size_t i = 0; i < qattn_scheme_preset_count(); i++) {
        qattn_scheme s;
        qattn_err err;
        char buf[512];
        if (qattn_scheme_parse(qattn_scheme_preset_spec(i), &s, &err)) {
            fprintf(stderr, "qattn schemes: preset %s does not parse: %s\n", qattn_scheme_preset_name(i), err.msg);
            return QATTN_EXIT_FAIL;
        }
        printf("%-14s %s\n", qattn_scheme_preset_name(i), qattn_scheme_format(&s, buf, sizeof buf));
    }
    return QATTN_EXIT_OK;
}

int qattn_cmd_scheme_check(int argc, char **argv)
{
    static const qattn_opt opts[] = {{NULL, 0, NULL, NULL, 0, 0}};
    int first = 0, prc = qattn_cli_parse(argc, argv, opts, &first);
    if (prc == QATTN_CLI_HELP)
        printf("usage: qattn scheme-check SPEC\n\n"
               "Prints the normalized full spec of SPEC (a preset name, a scheme string, or a preset\n"
               "followed by overrides such as 'sage2-8b acc=fp22'), or its error on stderr (exit 2).\n"
               "A scheme is at most %d characters, each key is given once, and every size in it\n"
               "(a group's B, S, W and ch:C, kblock, qblock, the N of acc=...+fp32:N) is 1 to %d\n"
               "(rope, the head's last channels kept in bf16, 0 to it).\n",
               QATTN_SCHEME_LEN_MAX, QATTN_SCHEME_SIZE_MAX);
    if (prc)
        return prc == QATTN_CLI_HELP ? QATTN_EXIT_OK : prc;
    if (first != argc - 1) {
        fprintf(stderr, "qattn scheme-check: expected one SPEC argument (quote it), got %d\n", argc - first);
        return QATTN_EXIT_INPUT;
    }
    qattn_scheme s;
    qattn_err err;
    char buf[512];
    if (qattn_scheme_parse(argv[first], &s, &err)) {
        fprintf(stderr, "qattn scheme-check: %s\n", err.msg);
        return QATTN_EXIT_INPUT;
    }
    printf("%s\n", qattn_scheme_format(&s, buf, sizeof buf));
    return QATTN_EXIT_OK;
}
