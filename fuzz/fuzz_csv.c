/* The CSV reader the studies resume from (studies/csvread.c): a table that
 * parses has a unique, non-empty header, rows of its width and lines that
 * never go back; every field reads as a number or an integer or fails with
 * one line naming it; and written back with every field quoted (RFC 4180)
 * it parses to the same table. */
#include "csvread.h"
#include "fuzz.h"

static void quote(char **p, const char *s)
{
    *(*p)++ = '"';
    for (; *s; s++) {
        if (*s == '"')
            *(*p)++ = '"';
        *(*p)++ = *s;
    }
    *(*p)++ = '"';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    qattn_csv t, u;
    qattn_err e = {""};
    int rc = qattn_csv_parse((const char *)data, size, "fuzz.csv", &t, &e);
    if (rc) {
        fuzz_check_error(rc, &e, "(csv)");
        FUZZ_CHECK(!t.header && !t.cells && !t.text && t.nrows == 0, "a failed parse left a table");
        qattn_csv_free(&t);
        return 0;
    }
    FUZZ_CHECK(t.ncols >= 1, "%zu columns", t.ncols);
    size_t need = 3; /* the rewritten text: at most 2 bytes a byte, quotes, commas, newlines */
    for (size_t c = 0; c < t.ncols; c++) {
        FUZZ_CHECK(t.header[c][0], "empty column name %zu", c);
        FUZZ_CHECK(qattn_csv_col(&t, t.header[c]) == (int)c, "column '%s' is not found at %zu", t.header[c],
                   c);
        need += 2 * strlen(t.header[c]) + 3;
    }
    for (size_t r = 0; r < t.nrows; r++) {
        FUZZ_CHECK(t.line[r] >= 2 && (r == 0 || t.line[r] > t.line[r - 1]), "row %zu on line %zu", r,
                   t.line[r]);
        for (size_t c = 0; c < t.ncols; c++) {
            double x;
            long v;
            rc = qattn_csv_num(&t, r, (int)c, &x, &e);
            if (rc)
                fuzz_check_error(rc, &e, qattn_csv_str(&t, r, (int)c));
            rc = qattn_csv_long(&t, r, (int)c, &v, &e);
            if (rc)
                fuzz_check_error(rc, &e, qattn_csv_str(&t, r, (int)c));
            need += 2 * strlen(qattn_csv_str(&t, r, (int)c)) + 3;
        }
    }
    FUZZ_CHECK(qattn_csv_str(&t, t.nrows, 0)[0] == '\0' && qattn_csv_str(&t, 0, (int)t.ncols)[0] == '\0',
               "out-of-range fields are empty");

    char *text = malloc(need), *p = text;
    if (!text)
        abort();
    for (size_t r = 0; r <= t.nrows; r++) {
        for (size_t c = 0; c < t.ncols; c++) {
            if (c)
                *p++ = ',';
            quote(&p, r == 0 ? t.header[c] : qattn_csv_str(&t, r - 1, (int)c));
        }
        *p++ = '\n';
    }
    rc = qattn_csv_parse(text, (size_t)(p - text), "again.csv", &u, &e);
    FUZZ_CHECK(rc == 0, "the table written back does not parse: %s", e.msg);
    FUZZ_CHECK(u.ncols == t.ncols && u.nrows == t.nrows, "%zu x %zu written back as %zu x %zu", t.nrows,
               t.ncols, u.nrows, u.ncols);
    for (size_t c = 0; c < t.ncols; c++)
        FUZZ_CHECK(!strcmp(t.header[c], u.header[c]), "column %zu: '%s' read back as '%s'", c, t.header[c],
                   u.header[c]);
    for (size_t r = 0; r < t.nrows; r++)
        for (size_t c = 0; c < t.ncols; c++)
            FUZZ_CHECK(!strcmp(qattn_csv_str(&t, r, (int)c), qattn_csv_str(&u, r, (int)c)),
                       "field (%zu, %zu) read back differently", r, c);
    free(text);
    qattn_csv_free(&u);
    qattn_csv_free(&t);
    return 0;
}
