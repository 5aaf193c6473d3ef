/* The engine behind the emulation studies: a grid of cells (one scheme
 * each, with the study's factor values), run over every activation file,
 * selected layer and head; tidy CSV out (studies/CSV.md); resumable. */
#ifndef QATTN_STUDY_H
#define QATTN_STUDY_H

#include <stddef.h>

#include "qattn/scheme.h"

typedef struct qattn_cell {
    char label[QATTN_SCHEME_LEN_MAX + 1]; /* short stable name: legends, table rows, resume key
                                           * (a custom cell's scheme string as given) */
    char factors[160];   /* the study's factor values, CSV, e.g. "int8,block,k" */
    char spec[512];      /* normalized scheme */
    qattn_scheme scheme;
    double kbias_r;      /* > 0: K + qattn_kbias_offsets(r) (augmented data) */
} qattn_cell;

typedef struct qattn_study {
    const char *name;        /* e.g. "granularity" */
    const char *about;       /* one paragraph for --help */
    char factor_header[160]; /* e.g. "qk_fmt,group,smooth" */
    qattn_cell *cells;       /* [ncells] */
    size_t ncells;
} qattn_study;

/* Add a cell; spec is parsed here (a bad spec is a programming error and
 * aborts with its message). */
void qattn_study_add(qattn_study *st, const char *label, const char *factors, const char *spec, double kbias_r);
void qattn_study_free(qattn_study *st);

/* Parse the common options, run, write <out>/cells.csv, summary.csv and
 * layers.csv. Returns the process exit status. */
int qattn_study_main(qattn_study *st, int argc, char **argv);

#endif
