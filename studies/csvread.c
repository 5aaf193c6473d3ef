/* RFC 4180 CSV reader: see csvread.h. The text is copied once and fields
 * are unquoted in place (unquoting only shrinks a field), so every string of
 * a table lives in one allocation. */
#include "csvread.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qattn_csv_free(qattn_csv *t)
{
    if (!t)
        return;
    free(t->header); /* header[] and cells[] share one pointer array */
    free(t->line);
    free(t->text);
    t->header = t->cells = NULL;
    t->line = NULL;
    t->text = NULL;
    t->ncols = t->nrows = 0;
}

/* growable array of field pointers and record start lines */
typedef struct fieldvec {
    char **p;
    size_t n, cap;
    size_t *lines;
    size_t nrec, reccap;
} fieldvec;

static int push_field(fieldvec *v, char *s)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        char **p = realloc(v->p, cap * sizeof *p);
        if (!p)
            return -1;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = s;
    return 0;
}

static int push_line(fieldvec *v, size_t line)
{
    if (v->nrec == v->reccap) {
        size_t cap = v->reccap ? 2 * v->reccap : 64;
        size_t *p = realloc(v->lines, cap * sizeof *p);
        if (!p)
            return -1;
        v->lines = p;
        v->reccap = cap;
    }
    v->lines[v->nrec++] = line;
    return 0;
}

/* "column 'name'" for data records, "field N" inside the header */
static void field_name(char *buf, size_t n, const fieldvec *v, size_t ncols, size_t idx)
{
    if (ncols && idx < ncols)
        snprintf(buf, n, "column '%s'", v->p[idx]);
    else
        snprintf(buf, n, "field %zu", idx + 1);
}

int qattn_csv_parse(const char *src, size_t len, const char *name, qattn_csv *t, qattn_err *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", name ? name : "(csv)");
    char *text = malloc(len + 1);
    if (!text)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory (%zu bytes)", t->path, len);
    memcpy(text, src, len);
    text[len] = '\0';

    fieldvec v = {0};
    size_t ncols = 0; /* known once the header is complete */
    size_t pos = 0, line = 1;
    int code = 0;
    char fname[300];
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF)
        pos = 3;

    while (pos < len) {
        /* blank line between records */
        if (text[pos] == '\n') {
            pos++, line++;
            continue;
        }
        if (text[pos] == '\r' && (pos + 1 == len || text[pos + 1] == '\n')) {
            pos += pos + 1 < len ? 2 : 1;
            line++;
            continue;
        }
        size_t rec_line = line, nf = 0;
        if (push_line(&v, rec_line))
            goto nomem;
        for (;;) {
            char *out = text + pos, *start = out;
            size_t fidx = nf;
            if (text[pos] == '"') {
                size_t qline = line;
                pos++;
                for (;;) {
                    if (pos >= len) {
                        field_name(fname, sizeof fname, &v, ncols, fidx);
                        code = qattn_err_set(err, QATTN_ERR_SCHEMA,
                                             "%s:%zu: %s: quoted field never closed", t->path,
                                             qline, fname);
                        goto fail;
                    }
                    char c = text[pos];
                    if (c == '"') {
                        if (pos + 1 < len && text[pos + 1] == '"') {
                            *out++ = '"';
                            pos += 2;
                            continue;
                        }
                        pos++;
                        break;
                    }
                    if (c == '\n')
                        line++;
                    *out++ = c;
                    pos++;
                }
                if (pos < len && text[pos] != ',' && text[pos] != '\n' &&
                    !(text[pos] == '\r' && (pos + 1 == len || text[pos + 1] == '\n'))) {
                    field_name(fname, sizeof fname, &v, ncols, fidx);
                    code = qattn_err_set(err, QATTN_ERR_SCHEMA,
                                         "%s:%zu: %s: text after a closing quote (a quote inside "
                                         "a quoted field must be doubled)",
                                         t->path, line, fname);
                    goto fail;
                }
            } else {
                while (pos < len && text[pos] != ',' && text[pos] != '\n' &&
                       !(text[pos] == '\r' && (pos + 1 == len || text[pos + 1] == '\n'))) {
                    if (text[pos] == '"') {
                        field_name(fname, sizeof fname, &v, ncols, fidx);
                        code = qattn_err_set(err, QATTN_ERR_SCHEMA,
                                             "%s:%zu: %s: quote inside an unquoted field", t->path,
                                             line, fname);
                        goto fail;
                    }
                    *out++ = text[pos++];
                }
            }
            /* the delimiter is read before the terminator overwrites it */
            int end_of_record = 1;
            if (pos < len && text[pos] == ',') {
                end_of_record = 0;
                pos++;
            } else if (pos < len && text[pos] == '\r') {
                pos += pos + 1 < len ? 2 : 1;
                line++;
            } else if (pos < len) { /* '\n' */
                pos++;
                line++;
            }
            *out = '\0';
            if (push_field(&v, start))
                goto nomem;
            nf++;
            if (end_of_record)
                break;
            if (pos >= len) { /* "a,b," at the very end: one more empty field */
                if (push_field(&v, text + len))
                    goto nomem;
                nf++;
                break;
            }
        }
        if (!ncols) {
            ncols = nf;
            for (size_t i = 0; i < ncols; i++) {
                if (!v.p[i][0]) {
                    code = qattn_err_set(err, QATTN_ERR_SCHEMA,
                                         "%s:%zu: header field %zu is empty", t->path, rec_line,
                                         i + 1);
                    goto fail;
                }
                for (size_t j = 0; j < i; j++)
                    if (!strcmp(v.p[i], v.p[j])) {
                        code = qattn_err_set(err, QATTN_ERR_SCHEMA,
                                             "%s:%zu: column '%s' appears twice in the header",
                                             t->path, rec_line, v.p[i]);
                        goto fail;
                    }
            }
        } else if (nf != ncols) {
            code = qattn_err_set(err, QATTN_ERR_SCHEMA,
                                 "%s:%zu: %zu fields, the header has %zu%s", t->path, rec_line,
                                 nf, ncols,
                                 nf > ncols ? " (an unquoted comma inside a field?)" : "");
            goto fail;
        }
    }
    if (!ncols) {
        code = qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: empty file (no header line)", t->path);
        goto fail;
    }
    t->ncols = ncols;
    t->nrows = v.nrec - 1;
    t->header = v.p;
    t->cells = v.p + ncols;
    /* lines[0] is the header's: drop it */
    memmove(v.lines, v.lines + 1, t->nrows * sizeof *v.lines);
    t->line = v.lines;
    t->text = text;
    return 0;

nomem:
    code = qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory", t->path);
fail:
    free(v.p);
    free(v.lines);
    free(text);
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", name ? name : "(csv)");
    return code;
}

int qattn_csv_load(const char *path, qattn_csv *t, qattn_err *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return qattn_err_set(err, QATTN_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (n == cap) {
            char *p = cap < ((size_t)1 << 40) ? realloc(buf, 2 * cap) : NULL;
            if (!p) {
                free(buf);
                fclose(f);
                return qattn_err_set(err, QATTN_ERR_NOMEM, "%s: out of memory (%zu bytes read)",
                                     path, n);
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    int e = errno;
    fclose(f);
    if (bad) {
        free(buf);
        return qattn_err_set(err, QATTN_ERR_IO, "%s: read error: %s", path, strerror(e));
    }
    int rc = qattn_csv_parse(buf, n, path, t, err);
    free(buf);
    return rc;
}

int qattn_csv_col(const qattn_csv *t, const char *name)
{
    for (size_t i = 0; i < t->ncols; i++)
        if (!strcmp(t->header[i], name))
            return (int)i;
    return -1;
}

int qattn_csv_need(const qattn_csv *t, const char *name, qattn_err *err)
{
    int c = qattn_csv_col(t, name);
    if (c < 0)
        return qattn_err_set(err, QATTN_ERR_SCHEMA, "%s: missing column '%s'", t->path, name);
    return c;
}

const char *qattn_csv_str(const qattn_csv *t, size_t row, int col)
{
    if (col < 0 || (size_t)col >= t->ncols || row >= t->nrows)
        return "";
    return t->cells[row * t->ncols + (size_t)col];
}

/* the field without leading and trailing blanks, into buf; 0 or -1 if too long */
static int trimmed(const char *s, char *buf, size_t n)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t len = strlen(s);
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len >= n)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

static int where(const qattn_csv *t, size_t row, int col, qattn_err *err, int code,
                 const char *what)
{
    if (col < 0 || (size_t)col >= t->ncols || row >= t->nrows)
        return qattn_err_set(err, QATTN_ERR_ARG, "%s: no field at row %zu, column %d", t->path,
                             row, col);
    const char *s = qattn_csv_str(t, row, col);
    return qattn_err_set(err, code, "%s:%zu: column '%s': '%.60s%s' %s", t->path, t->line[row],
                         t->header[col], s, strlen(s) > 60 ? "..." : "", what);
}

int qattn_csv_num(const qattn_csv *t, size_t row, int col, double *out, qattn_err *err)
{
    if (col < 0 || (size_t)col >= t->ncols || row >= t->nrows)
        return where(t, row, col, err, QATTN_ERR_ARG, "");
    char buf[128];
    if (trimmed(qattn_csv_str(t, row, col), buf, sizeof buf))
        return where(t, row, col, err, QATTN_ERR_SCHEMA, "is not a number");
    if (!buf[0]) {
        *out = NAN;
        return 0;
    }
    char *end;
    errno = 0;
    double x = strtod(buf, &end);
    if (end == buf || *end)
        return where(t, row, col, err, QATTN_ERR_SCHEMA, "is not a number");
    *out = x; /* overflow gives +-inf, underflow a denormal or 0: both fine */
    return 0;
}

int qattn_csv_long(const qattn_csv *t, size_t row, int col, long *out, qattn_err *err)
{
    if (col < 0 || (size_t)col >= t->ncols || row >= t->nrows)
        return where(t, row, col, err, QATTN_ERR_ARG, "");
    char buf[64];
    if (trimmed(qattn_csv_str(t, row, col), buf, sizeof buf) || !buf[0])
        return where(t, row, col, err, QATTN_ERR_SCHEMA, "is not an integer");
    char *end;
    errno = 0;
    long x = strtol(buf, &end, 10);
    if (end == buf || *end)
        return where(t, row, col, err, QATTN_ERR_SCHEMA, "is not an integer");
    if (errno == ERANGE)
        return where(t, row, col, err, QATTN_ERR_RANGE, "is out of range");
    *out = x;
    return 0;
}
