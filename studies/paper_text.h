/* qattn paper-tables: text utilities. A growing string buffer with LaTeX
 * escaping, the paper's number formats, and macro names spelled in letters. */
#ifndef QATTN_PAPER_TEXT_H
#define QATTN_PAPER_TEXT_H

#include <stddef.h>

#define QATTN_PAPER_NA "n/a"

/* ---- a string buffer; after a failed allocation it keeps what it had and sets oom */
typedef struct qattn_text {
    char *p; /* [cap] NUL-terminated text of n bytes */
    size_t n, cap;
    int oom;
} qattn_text;

void qattn_text_add(qattn_text *b, const char *s, size_t n);
void qattn_text_puts(qattn_text *b, const char *s);
void qattn_text_printf(qattn_text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *qattn_text_str(const qattn_text *b);
void qattn_text_clear(qattn_text *b);
void qattn_text_free(qattn_text *b);
/* s with LaTeX's special characters escaped */
void qattn_text_tex(qattn_text *b, const char *s);
/* a path or name, escaped, with line breaks allowed after '/', '_' and '-' */
void qattn_text_tex_path(qattn_text *b, const char *s);

/* ---- numbers as the paper prints them ("n/a" when not finite) */
typedef struct qattn_num {
    char s[160];
} qattn_num;

/* decimals for cos values in percent: 2 to 4, enough to show the gap to 100% */
int qattn_num_pct_decimals(const double *v, int n);
qattn_num qattn_num_fixed(double x, int dec);  /* dec decimals */
qattn_num qattn_num_pct(double cos, int dec);  /* 100 cos, dec decimals */
qattn_num qattn_num_pct1(double cos);          /* with its own decimals */
qattn_num qattn_num_g3(double x);              /* 3 significant digits, m x 10^e when far from 1 */
qattn_num qattn_num_int(double x);
qattn_num qattn_num_ci(const char *lo, const char *hi); /* "[lo, hi]" */
/* decimals for a signed difference and its interval (2 to 5) */
int qattn_num_diff_decimals(double d, double lo, double hi);
qattn_num qattn_num_signed(double x, int dec); /* "+x", or "\ensuremath{-}x" */

/* ---- macro names: letters only */
typedef struct qattn_mname {
    char s[256];
} qattn_mname;

qattn_mname qattn_mname_make(const char *prefix);
void qattn_mname_cat(qattn_mname *m, const char *s);
/* s spelled in letters: letter runs capitalized, digit runs as number words
 * (64 -> SixtyFour), everything else dropped */
void qattn_mname_word(qattn_mname *m, const char *s);
/* tag of the i-th model: ModelA .. ModelZ, ModelAA .. */
void qattn_mname_model(char *buf, size_t n, size_t i);

#endif
