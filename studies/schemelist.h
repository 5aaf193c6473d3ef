/* A list of schemes given on the command line: comma-separated preset names
 * and/or scheme strings ("sage2-8b,fp16,q=int8@token,ch:64 k=..."). A comma
 * continues a scheme only right after a word with a scale group (one holding
 * '@'), so suffixes such as ",ch:64" stay with their group; everywhere else
 * it starts a new scheme. ';' also separates schemes. */
#ifndef QATTN_SCHEMELIST_H
#define QATTN_SCHEMELIST_H

#include <stddef.h>

#include "qattn/error.h"
#include "qattn/scheme.h"

typedef struct qattn_scheme_item {
    char label[QATTN_SCHEME_LEN_MAX + 1]; /* preset name, or the scheme string as given */
    char spec[512];    /* canonical spec */
    qattn_scheme scheme;
} qattn_scheme_item;

typedef struct qattn_scheme_list {
    qattn_scheme_item *items; /* [n] */
    size_t n;
} qattn_scheme_list;

int qattn_scheme_list_parse(const char *text, qattn_scheme_list *l, qattn_err *err);
void qattn_scheme_list_free(qattn_scheme_list *l);

#endif
