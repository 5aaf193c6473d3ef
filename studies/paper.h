/* qattn paper-tables: what the table generators share (cmd_paper.c): the
 * inputs read from results/ (one per study record with a table, then
 * comparisons.csv and models.csv), the models in table order, and the
 * macros defined so far. Macro names: cmd_paper.c. */
#ifndef QATTN_PAPER_H
#define QATTN_PAPER_H

#include <stddef.h>

#include "csvread.h"
#include "paper_text.h"
#include "qattn/error.h"
#include "registry.h"

typedef struct qattn_paper_input {
    const qattn_study_rec *rec; /* the study whose table reads it, or NULL */
    const char *rel;            /* path under results/ */
    char path[1024];
    int present; /* read; else the file was not there */
    qattn_csv t;
} qattn_paper_input;

typedef struct qattn_paper {
    qattn_paper_input *in; /* [nin] */
    size_t nin;
    qattn_paper_input *cmp, *mod; /* comparisons.csv and models.csv, in in[] */
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

/* \QA<abbrev><Model tag><factor tags and values> of study r, point v */
qattn_mname qattn_paper_cell_name(const qattn_study_rec *r, const char *tag, const char *const *v);
/* "n/a" for metrics of every point of r's factor levels (those in grid, if
 * not NULL) not defined yet, for the first ntags models */
void qattn_paper_def_na(qattn_paper *c, const qattn_study_rec *r, const qattn_study *grid,
                        const char *const *metrics, size_t nmetrics);
/* the input of study r's table */
qattn_paper_input *qattn_paper_in(qattn_paper *c, const qattn_study_rec *r);
/* the same with its label "tab:<table>" into label [n]; NULL, after the
 * "not run" table into tab, when it was not there */
qattn_paper_input *qattn_paper_open(qattn_paper *c, const qattn_study_rec *r, qattn_text *tab, char *label, size_t n);

/* The generators: each writes its table into tab and its macros; 0 or a
 * QATTN_ERR_* with c->err set. A study's (qattn_table_fn): */
int qattn_paper_summary_table(qattn_paper *c, const qattn_study_rec *r, qattn_text *tab); /* grid studies */
int qattn_paper_outliers_table(qattn_paper *c, const qattn_study_rec *r, qattn_text *tab);
int qattn_paper_pareto_table(qattn_paper *c, const qattn_study_rec *r, qattn_text *tab);
int qattn_paper_columns_table(qattn_paper *c, const qattn_study_rec *r, qattn_text *tab); /* r->columns */
int qattn_paper_e2e_table(qattn_paper *c, const qattn_study_rec *r, qattn_text *tab);     /* + Spearman */
/* the paper's own */
int qattn_paper_models_table(qattn_paper *c, qattn_text *tab);
int qattn_paper_anchors_table(qattn_paper *c, qattn_text *tab);
/* the published values of every study (\QApub...) */
void qattn_paper_def_pubs(qattn_paper *c);

#endif
