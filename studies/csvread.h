/* A small reader for the studies' CSV files (studies/CSV.md): the whole
 * file is loaded into memory; fields follow RFC 4180 (a field in double
 * quotes may hold commas, newlines and "" for a quote); the first record is
 * the header and columns are found by name. CRLF line ends, a UTF-8 byte
 * order mark and blank lines between records are accepted; every record must
 * have as many fields as the header.
 *
 * Errors are one line naming the file, the line (1-based, where the record
 * starts) and the column by header name:
 *   results/pv/summary.csv:7: column 'cos_mean': 'x' is not a number
 *
 *   qattn_csv t;
 *   qattn_err err;
 *   if (qattn_csv_load("results/pv/summary.csv", &t, &err)) { puts(err.msg); ... }
 *   int cos = qattn_csv_need(&t, "cos_mean", &err);   // -> index, or < 0
 *   for (size_t r = 0; r < t.nrows; r++) {
 *       double v;
 *       if (qattn_csv_num(&t, r, cos, &v, &err)) ...   // "nan" or "" -> NaN
 *   }
 *   qattn_csv_free(&t);
 */
#ifndef QATTN_CSVREAD_H
#define QATTN_CSVREAD_H

#include <stddef.h>

#include "qattn/error.h"

typedef struct qattn_csv {
    char path[512];   /* file name used in messages */
    size_t ncols;     /* fields per record (header included) */
    size_t nrows;     /* data records, header excluded */
    char **header;    /* [ncols] column names, NUL-terminated, unquoted */
    char **cells;     /* [nrows][ncols] row-major: field (r, c) is cells[r * ncols + c] */
    size_t *line;     /* [nrows] 1-based line on which record r starts */
    char *text;       /* [bytes] storage for all the strings above */
} qattn_csv;

/* Read and parse a whole file. 0, or QATTN_ERR_IO (cannot open or read),
 * QATTN_ERR_SCHEMA (malformed: bad quoting, wrong field count, no header,
 * empty or duplicate column name) or QATTN_ERR_NOMEM; on error *t is empty
 * (qattn_csv_free is still safe to call). */
int qattn_csv_load(const char *path, qattn_csv *t, qattn_err *err);

/* Parse text [len bytes] held in memory; name is used in messages. */
int qattn_csv_parse(const char *text, size_t len, const char *name, qattn_csv *t,
                    qattn_err *err);

void qattn_csv_free(qattn_csv *t);

/* Index of the column whose header is name, or -1. */
int qattn_csv_col(const qattn_csv *t, const char *name);

/* As qattn_csv_col, but a missing column is an error (QATTN_ERR_SCHEMA,
 * "FILE: missing column 'name'"), returned as the negative code. */
int qattn_csv_need(const qattn_csv *t, const char *name, qattn_err *err);

/* Field (row, col) as a string; "" when col is out of range. */
const char *qattn_csv_str(const qattn_csv *t, size_t row, int col);

/* Field as a double: a decimal or %g number with optional surrounding blanks;
 * "nan" (any case, with sign), "inf", and the empty field give NaN / inf.
 * 0, or QATTN_ERR_SCHEMA naming file, line and column. */
int qattn_csv_num(const qattn_csv *t, size_t row, int col, double *out, qattn_err *err);

/* Field as a long: a decimal integer (blanks around it allowed; empty is an
 * error). 0, or QATTN_ERR_SCHEMA / QATTN_ERR_RANGE naming file, line, column. */
int qattn_csv_long(const qattn_csv *t, size_t row, int col, long *out, qattn_err *err);

#endif
