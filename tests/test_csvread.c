/* The studies' CSV reader (studies/csvread.c): RFC 4180 quoting, columns by
 * name, typed getters, and errors that name file, line and column. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "csvread.h"

static int parse(const char *text, qattn_csv *t, qattn_err *err)
{
    return qattn_csv_parse(text, strlen(text), "f.csv", t, err);
}

static void test_basic(void)
{
    qattn_csv t;
    qattn_err err = {""};
    int e = parse("model,label,cos\nm1,a,0.5\nm2,b,nan\n", &t, &err);
    CHECK(e == 0, "parse: %s", err.msg);
    CHECK(t.ncols == 3 && t.nrows == 2, "ncols %zu nrows %zu", t.ncols, t.nrows);
    CHECK(qattn_csv_col(&t, "label") == 1, "label column");
    CHECK(qattn_csv_col(&t, "nope") == -1, "missing column -> -1");
    CHECK(!strcmp(qattn_csv_str(&t, 1, 0), "m2"), "str");
    CHECK(!strcmp(qattn_csv_str(&t, 5, 0), ""), "row out of range -> \"\"");
    CHECK(!strcmp(qattn_csv_str(&t, 0, 7), ""), "col out of range -> \"\"");
    double x = 0;
    CHECK(qattn_csv_num(&t, 0, 2, &x, &err) == 0 && x == 0.5, "num 0.5: %g", x);
    CHECK(qattn_csv_num(&t, 1, 2, &x, &err) == 0 && isnan(x), "num nan");
    CHECK(t.line[0] == 2 && t.line[1] == 3, "lines %zu %zu", t.line[0], t.line[1]);
    qattn_csv_free(&t);
    qattn_csv_free(&t); /* twice is safe */
    CHECK(t.nrows == 0 && t.cells == NULL, "freed");
}

static void test_quoting(void)
{
    qattn_csv t;
    qattn_err err = {""};
    const char *text = "model,label,spec\n"
                       "m1,\"a, b\",\"q=int8@token,ch:64 \"\"x\"\"\"\n"
                       "m2,\"two\nlines\",\"\"\n"
                       "m3,,plain\n";
    int e = parse(text, &t, &err);
    CHECK(e == 0, "parse: %s", err.msg);
    CHECK(t.nrows == 3, "nrows %zu", t.nrows);
    CHECK(!strcmp(qattn_csv_str(&t, 0, 1), "a, b"), "comma in quotes: '%s'",
          qattn_csv_str(&t, 0, 1));
    CHECK(!strcmp(qattn_csv_str(&t, 0, 2), "q=int8@token,ch:64 \"x\""), "doubled quotes: '%s'",
          qattn_csv_str(&t, 0, 2));
    CHECK(!strcmp(qattn_csv_str(&t, 1, 1), "two\nlines"), "newline in quotes");
    CHECK(!strcmp(qattn_csv_str(&t, 1, 2), ""), "empty quoted field");
    CHECK(!strcmp(qattn_csv_str(&t, 2, 1), ""), "empty field");
    /* the record after a two-line field starts on line 5 */
    CHECK(t.line[1] == 3 && t.line[2] == 5, "lines %zu %zu", t.line[1], t.line[2]);
    qattn_csv_free(&t);
}

static void test_line_ends(void)
{
    qattn_csv t;
    qattn_err err = {""};
    /* byte order mark, CRLF, a blank line, no final newline, a final empty field */
    int e = parse("\xEF\xBB\xBF" "a,b\r\n1,2\r\n\r\n3,\r\n4,5", &t, &err);
    CHECK(e == 0, "parse: %s", err.msg);
    CHECK(qattn_csv_col(&t, "a") == 0, "BOM skipped: '%s'", t.ncols ? t.header[0] : "");
    CHECK(t.nrows == 3, "nrows %zu", t.nrows);
    CHECK(!strcmp(qattn_csv_str(&t, 0, 1), "2"), "CRLF stripped: '%s'", qattn_csv_str(&t, 0, 1));
    CHECK(!strcmp(qattn_csv_str(&t, 1, 1), ""), "trailing empty field");
    CHECK(!strcmp(qattn_csv_str(&t, 2, 1), "5"), "last line without newline");
    CHECK(t.line[1] == 4 && t.line[2] == 5, "lines %zu %zu", t.line[1], t.line[2]);
    qattn_csv_free(&t);
    e = parse("a,b\n1,", &t, &err);
    CHECK(e == 0 && t.nrows == 1 && !strcmp(qattn_csv_str(&t, 0, 1), ""), "'1,' at EOF: %s",
          err.msg);
    qattn_csv_free(&t);
    e = parse("a,b\n", &t, &err);
    CHECK(e == 0 && t.nrows == 0 && t.ncols == 2, "header only");
    qattn_csv_free(&t);
}

static void test_numbers(void)
{
    qattn_csv t;
    qattn_err err = {""};
    int e = parse("x,n\n 1e-3 ,12\nNaN,-3\n-nan, 7 \n,\ninf,1.5\nabc,99999999999999999999999\n"
                  "1.5x,x\n",
                  &t, &err);
    CHECK(e == 0, "parse: %s", err.msg);
    double x;
    long n;
    CHECK(qattn_csv_num(&t, 0, 0, &x, &err) == 0 && x == 1e-3, "blanks around a number");
    CHECK(qattn_csv_num(&t, 1, 0, &x, &err) == 0 && isnan(x), "NaN");
    CHECK(qattn_csv_num(&t, 2, 0, &x, &err) == 0 && isnan(x), "-nan");
    CHECK(qattn_csv_num(&t, 3, 0, &x, &err) == 0 && isnan(x), "empty -> NaN");
    CHECK(qattn_csv_num(&t, 4, 0, &x, &err) == 0 && isinf(x), "inf");
    e = qattn_csv_num(&t, 5, 0, &x, &err);
    CHECK(e == QATTN_ERR_SCHEMA, "abc -> error %d", e);
    CHECK_STR_CONTAINS(err.msg, "f.csv:7: column 'x': 'abc' is not a number");
    e = qattn_csv_num(&t, 6, 0, &x, &err);
    CHECK(e == QATTN_ERR_SCHEMA, "1.5x -> error");
    CHECK_STR_CONTAINS(err.msg, "f.csv:8: column 'x'");
    CHECK(qattn_csv_long(&t, 0, 1, &n, &err) == 0 && n == 12, "long 12");
    CHECK(qattn_csv_long(&t, 1, 1, &n, &err) == 0 && n == -3, "long -3");
    CHECK(qattn_csv_long(&t, 2, 1, &n, &err) == 0 && n == 7, "long with blanks");
    e = qattn_csv_long(&t, 3, 1, &n, &err);
    CHECK(e == QATTN_ERR_SCHEMA, "empty long -> error");
    CHECK_STR_CONTAINS(err.msg, "f.csv:5: column 'n'");
    e = qattn_csv_long(&t, 4, 1, &n, &err);
    CHECK(e == QATTN_ERR_SCHEMA, "1.5 is not an integer");
    CHECK_STR_CONTAINS(err.msg, "not an integer");
    e = qattn_csv_long(&t, 5, 1, &n, &err);
    CHECK(e == QATTN_ERR_RANGE, "overflow -> range error %d", e);
    CHECK_STR_CONTAINS(err.msg, "out of range");
    e = qattn_csv_num(&t, 0, 5, &x, &err);
    CHECK(e == QATTN_ERR_ARG, "bad column index -> arg error");
    qattn_csv_free(&t);
}

/* parse must fail with a message containing want */
static void bad(const char *text, const char *want)
{
    qattn_csv t;
    qattn_err err = {""};
    int e = parse(text, &t, &err);
    CHECK(e == QATTN_ERR_SCHEMA, "expected a schema error for [%s], got %d", text, e);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK(t.nrows == 0 && t.cells == NULL && t.text == NULL, "empty table after an error");
    qattn_csv_free(&t);
}

static void test_errors(void)
{
    bad("a,b\n1,\"open\n2,3\n", "f.csv:2: column 'b': quoted field never closed");
    bad("a,b\n1,\"x\"y\n", "f.csv:2: column 'b': text after a closing quote");
    bad("a,b\n1,x\"y\n", "f.csv:2: column 'b': quote inside an unquoted field");
    bad("a,b\n1,2\n1,2,3\n", "f.csv:3: 3 fields, the header has 2");
    bad("a,b\n1\n", "f.csv:2: 1 fields, the header has 2");
    bad("", "f.csv: empty file");
    bad("\n\n", "f.csv: empty file");
    bad("a,,c\n", "f.csv:1: header field 2 is empty");
    bad("a,b,a\n", "column 'a' appears twice");
    bad("\"a\nb,c\n", "f.csv:1: field 1: quoted field never closed");

    qattn_csv t;
    qattn_err err = {""};
    CHECK(parse("model,cos\n", &t, &err) == 0, "parse");
    int c = qattn_csv_need(&t, "cos_mean", &err);
    CHECK(c == QATTN_ERR_SCHEMA, "need -> error %d", c);
    CHECK_STR_CONTAINS(err.msg, "f.csv: missing column 'cos_mean'");
    CHECK(qattn_csv_need(&t, "cos", &err) == 1, "need finds cos");
    qattn_csv_free(&t);
}

static void test_load(void)
{
    char path[] = "/tmp/qattn_csvread_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    /* more than the reader's first 64 KiB buffer */
    FILE *f = fdopen(fd, "w");
    fprintf(f, "model,layer,cos\n");
    for (int i = 0; i < 5000; i++)
        fprintf(f, "\"model, %d\",%d,%.17g\n", i % 3, i, 1.0 - i * 1e-6);
    fclose(f);
    qattn_csv t;
    qattn_err err = {""};
    int e = qattn_csv_load(path, &t, &err);
    CHECK(e == 0, "load: %s", err.msg);
    CHECK(t.nrows == 5000, "nrows %zu", t.nrows);
    long l = -1;
    double x = 0;
    CHECK(qattn_csv_long(&t, 4999, qattn_csv_col(&t, "layer"), &l, &err) == 0 && l == 4999,
          "last layer %ld", l);
    CHECK(qattn_csv_num(&t, 4999, 2, &x, &err) == 0 && x == 1.0 - 4999 * 1e-6, "last cos");
    CHECK(!strcmp(qattn_csv_str(&t, 4, 0), "model, 1"), "quoted model");
    CHECK(!strcmp(t.path, path), "path kept");
    qattn_csv_free(&t);
    unlink(path);
    e = qattn_csv_load(path, &t, &err);
    CHECK(e == QATTN_ERR_IO, "missing file -> io error %d", e);
    CHECK_STR_CONTAINS(err.msg, path);
    qattn_csv_free(&t);
}

int main(void)
{
    test_basic();
    test_quoting();
    test_line_ends();
    test_numbers();
    test_errors();
    test_load();
    return check_done();
}
