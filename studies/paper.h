/* qattn paper-tables: what the table generators share (cmd_paper.c): the
 * inputs read from results/, the models in table order, and the macros
 * defined so far. Macro names: cmd_paper.c. */
#ifndef QATTN_PAPER_H
#define QATTN_PAPER_H

#include <stddef.h>

#include "csvread.h"
#include "paper_text.h"
#include "qattn/error.h"

enum { IN_GRAN, IN_SMOOTH, IN_PV, IN_ACC, IN_KBIAS, IN_OUT, IN_PARETO, IN_CMP, IN_MODELS, IN_N };

typedef struct qattn_paper_input {
    char path[1024];
    int present; /* read; else the file was not there */
    qattn_csv t;
} qattn_paper_input;

typedef struct qattn_paper {
    qattn_paper_input in[IN_N];
    char **models; /* [nmodels] model names, in table order */
    size_t nmodels;
    size_t ntags; /* max(2, nmodels): model tags that always get macros */
    /* macro names defined so far: open-addressing hash set */
    char **set; /* [setcap] */
    size_t setn, setcap;
    qattn_text numbers; /* numbers.tex */
    int dups_warned;
    qattn_err err;
} qattn_paper;

/* \newcommand{\NAME}{VALUE} into numbers.tex unless NAME is defined already
 * (the first definition wins; from_data: a second one gets a warning) */
void qattn_paper_def(qattn_paper *c, const char *name, const char *value, int from_data);
/* the same for the name base + metric */
void qattn_paper_def_metric(qattn_paper *c, const qattn_mname *base, const char *metric, const char *value,
                            int from_data);
/* index of model in table order, or (size_t)-1 */
size_t qattn_paper_model_index(const qattn_paper *c, const char *model);
/* cols[i] = the column of names[i]; an error names the file and the column */
int qattn_paper_need_cols(qattn_paper *c, const qattn_csv *t, const char *const *names, int n, int *cols);
/* the table of a study whose CSV (path) was not found */
void qattn_paper_not_run(qattn_text *tab, const char *title, const char *label, const char *path);

/* The generators: each writes its table into tab and its macros; 0 or a
 * QATTN_ERR_* with c->err set. */
#define QATTN_PAPER_NSTUDIES 5 /* the emulation studies' tables, tab[0..4] */
int qattn_paper_study_tables(qattn_paper *c, qattn_text *tab);
int qattn_paper_models_table(qattn_paper *c, qattn_text *tab);
int qattn_paper_outliers_table(qattn_paper *c, qattn_text *tab);
int qattn_paper_pareto_table(qattn_paper *c, qattn_text *tab);
int qattn_paper_anchors_table(qattn_paper *c, qattn_text *tab);
/* the published values (\QApub...) */
void qattn_paper_def_pubs(qattn_paper *c);

#endif
