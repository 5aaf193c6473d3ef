/* qattn schemes / qattn scheme-check */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "qattn/scheme.h"

int qattn_cmd_schemes(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: qattn schemes\n\nLists the preset schemes, one per line: name, then its full spec.\n");
            return QATTN_EXIT_OK;
        }
        fprintf(stderr, "qattn schemes: unknown option '%s'\n", argv[optind - 1]);
        return QATTN_EXIT_INPUT;
    }
    if (optind < argc) {
        fprintf(stderr, "qattn schemes: unexpected argument '%s'\n", argv[optind]);
        return QATTN_EXIT_INPUT;
    }
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
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: qattn scheme-check SPEC\n\n"
                   "Prints the normalized full spec of SPEC (a preset name, a scheme string, or a preset\n"
                   "followed by overrides such as 'sage2-8b acc=fp22'), or its error on stderr (exit 2).\n");
            return QATTN_EXIT_OK;
        }
        fprintf(stderr, "qattn scheme-check: unknown option '%s'\n", argv[optind - 1]);
        return QATTN_EXIT_INPUT;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "qattn scheme-check: expected one SPEC argument (quote it), got %d\n", argc - optind);
        return QATTN_EXIT_INPUT;
    }
    qattn_scheme s;
    qattn_err err;
    char buf[512];
    if (qattn_scheme_parse(argv[optind], &s, &err)) {
        fprintf(stderr, "qattn scheme-check: %s\n", err.msg);
        return QATTN_EXIT_INPUT;
    }
    printf("%s\n", qattn_scheme_format(&s, buf, sizeof buf));
    return QATTN_EXIT_OK;
}
