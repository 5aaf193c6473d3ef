/* The studies, one record each (studies.c). The study commands, `qattn
 * studies`, `qattn paper-tables`, `qattn compare`, scripts/reproduce,
 * scripts/plots and the tests read these records; adding a study is adding
 * a record (docs/DESIGN.md "Add a study"). */
#ifndef QATTN_REGISTRY_H
#define QATTN_REGISTRY_H

#include <stddef.h>

#include "study.h"

#define QATTN_STUDY_MAXF 3   /* factors of a grid study */
#define QATTN_CLAIM_MAXPAIRS 6

struct qattn_paper;
struct qattn_text;
struct qattn_study_rec;

/* One factor of a grid study: a CSV column and its values. */
typedef struct qattn_factor {
    const char *name;          /* CSV column, e.g. "qk_fmt" */
    const char *const *levels; /* its values in table order, NULL-terminated */
    const char *head;          /* LaTeX column header, e.g. "Q/K" */
    const char *tag;           /* word before the value in macro names ("Smooth"), or "" */
    const char *absent;        /* value of rows of a CSV without the column (NULL: required) */
    const char *dash;          /* the level the table shows as "--", or NULL */
} qattn_factor;

/* What the published finding predicts for a comparison of cells a and b:
 * that `side` (0: a, 1: b) is better, or that it loses nothing. */
enum { QATTN_EXPECT_BETTER, QATTN_EXPECT_NO_LOSS, QATTN_EXPECT_NONE };
typedef struct qattn_expect {
    int kind, side;
} qattn_expect;

/* A published finding, tested by paired comparisons of cells on the same
 * heads (qattn compare) and set next to the published values (anchors). */
typedef struct qattn_claim {
    const char *name;      /* comparisons.csv claim, e.g. "smooth_k_helps" */
    const char *title;     /* heading in the anchors table */
    const char *direction; /* the published direction, one clause */
    const char *published; /* the published values: LaTeX, @Name is \QApub<Name> */
    /* the expectation for labels a and b; NULL: a is better */
    qattn_expect (*expect)(const char *a, const char *b);
    const char *pairs[QATTN_CLAIM_MAXPAIRS + 1][2]; /* cell labels a, b; ends at {NULL} */
} qattn_claim;

/* A published value as printed in its paper: macro \QApub<name>. */
typedef struct qattn_pub {
    const char *name, *tex;
} qattn_pub;

/* One column of a table drawn straight from a study's CSV (the columns
 * table, qattn_paper_columns_table): its rows per model, the key factors
 * first, then these. */
enum { QATTN_COL_INT, QATTN_COL_G3, QATTN_COL_SIGNED2, QATTN_COL_PTS, QATTN_COL_F4 };
typedef struct qattn_column {
    const char *name;    /* CSV column */
    const char *head;    /* LaTeX column header */
    int format;          /* QATTN_COL_*: integer, 3 significant digits, signed with 2 decimals,
                          * x 100 signed (cos in percentage points), or 4 decimals (a loss) */
    const char *word;    /* macro \QA<abbrev><Model><key values><word> */
    const char *lo, *hi; /* CSV columns of its 95% interval, shown after it (macro <word>Ci), or NULL */
} qattn_column;

/* A study's table in the paper: writes tab_<table>.tex into tab and its
 * macros; 0 or a QATTN_ERR_* with the paper's err set. */
typedef int (*qattn_table_fn)(struct qattn_paper *c, const struct qattn_study_rec *r, struct qattn_text *tab);

typedef struct qattn_study_rec {
    const char *name;    /* command and results/<name>/ */
    const char *summary; /* one line for qattn --help and qattn studies --list */
    const char *about;   /* a grid study's --help paragraph */

    /* A grid study (the engine, study.h): its factors, and its cells. cell()
     * gets one level per factor (every point of the levels, in order) and
     * adds that point's cell with qattn_study_add, or nothing; cells(), if
     * set, adds every cell itself instead, in its own order. */
    int nf;
    qattn_factor factor[QATTN_STUDY_MAXF];
    void (*cell)(qattn_study *st, const char *const *v);
    void (*cells)(qattn_study *st);
    /* A study of another kind: its command (then nf is 0). */
    int (*run)(int argc, char **argv);
    /* How `qattn studies --run` calls it: --data, --out results/<name>,
     * --threads (threads) and --force (resumable) when given, then args
     * ("{results}" is the results directory). */
    int threads, resumable;
    const char *const *args; /* [..] NULL-terminated, or NULL */
    /* 1: it reads the DeepSeek-V4-layout files (studies --run --layout-data) instead of --data,
     * and is skipped when there are none */
    int layout_data;

    /* The paper: tab_<table>.tex (label tab:<table>) from results/<input>,
     * with macros \QA<abbrev>...; table NULL is the summary table of a grid
     * study. No table: input NULL. The columns table shows columns (ended
     * by a NULL name), keyed by the factors. */
    const char *table_name;
    const char *input;
    const char *abbrev;
    const char *title; /* caption */
    const char *note;  /* a sentence added to the caption, or NULL */
    qattn_table_fn table;
    const qattn_column *columns; /* [..] ended by a NULL name, or NULL */
    /* plots/<figure>.gp, drawn from results/<figure_in> */
    const char *figure, *figure_in;
    /* the findings its cells test, and the published values it cites */
    const qattn_claim *claims; /* [..] ended by a NULL name, or NULL */
    const qattn_pub *pubs;     /* [..] ended by a NULL name, or NULL */
} qattn_study_rec;

extern const qattn_study_rec *const qattn_studies[]; /* in run order, NULL-terminated */

/* the record called name, or NULL */
const qattn_study_rec *qattn_studies_find(const char *name);
/* the grid of a grid study (free with qattn_study_free) */
void qattn_studies_grid(const qattn_study_rec *r, qattn_study *st);
/* the factor columns joined by commas, e.g. "qk_fmt,group,smooth" */
const char *qattn_studies_header(const qattn_study_rec *r, char *buf, size_t n);
/* a published value by name (over every record), or NULL */
const char *qattn_studies_pub(const char *name);
/* run the study command of r (argv[0] is its name) */
int qattn_studies_main(const qattn_study_rec *r, int argc, char **argv);

#endif
