/* Scheme strings and --schemes lists: whatever parses normalizes to a spec
 * that parses to the same scheme (parse(normalize(s)) == parse(s)) and
 * normalizes to itself; every list item is its own scheme, normalized; a
 * failure is a negative code with one line of message. */
#include "fuzz.h"
#include "qattn/scheme.h"
#include "schemelist.h"

static int same_group(const qattn_group *a, const qattn_group *b)
{
    return a->tok == b->tok && a->b == b->b && a->s == b->s && a->w == b->w && a->ch == b->ch &&
           a->e8m0 == b->e8m0;
}

/* the group of an unscaled format means nothing (qattn/scheme.h) */
static int same_operand(const qattn_operand *a, const qattn_operand *b)
{
    return a->fmt == b->fmt && (!qattn_fmt_is_scaled(a->fmt) || same_group(&a->group, &b->group));
}

static int same_scheme(const qattn_scheme *a, const qattn_scheme *b)
{
    return same_operand(&a->q, &b->q) && same_operand(&a->k, &b->k) && same_operand(&a->v, &b->v) &&
           a->p == b->p && a->p_static == b->p_static && a->smooth == b->smooth && a->acc == b->acc &&
           a->acc_chunk == b->acc_chunk && a->kblock == b->kblock && a->qblock == b->qblock &&
           a->out == b->out;
}

/* s parses: its normal form is a fixed point */
static void check_normal(const char *s, const qattn_scheme *a, char n1[512])
{
    qattn_scheme b;
    qattn_err e = {""};
    char n2[512];
    qattn_scheme_format(a, n1, 512);
    FUZZ_CHECK(strlen(n1) < 511, "normal form of '%s' may be cut: '%s'", s, n1);
    FUZZ_CHECK(strlen(n1) <= QATTN_SCHEME_LEN_MAX, "normal form of '%s' is longer than a scheme may be: '%s'",
               s, n1);
    int rc = qattn_scheme_parse(n1, &b, &e);
    FUZZ_CHECK(rc == 0, "'%s' normalizes to '%s', which does not parse: %s", s, n1, e.msg);
    FUZZ_CHECK(same_scheme(a, &b), "'%s' and its normal form '%s' parse differently", s, n1);
    qattn_scheme_format(&b, n2, sizeof n2);
    FUZZ_CHECK(!strcmp(n1, n2), "normalizing twice: '%s' -> '%s' -> '%s'", s, n1, n2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *s = fuzz_string(data, size);
    qattn_scheme a;
    qattn_err e = {""};
    char n1[512];
    int rc = qattn_scheme_parse(s, &a, &e);
    if (rc == 0)
        check_normal(s, &a, n1);
    else
        fuzz_check_error(rc, &e, s);

    qattn_scheme_list l;
    rc = qattn_scheme_list_parse(s, &l, &e);
    if (rc == 0) {
        FUZZ_CHECK(l.n >= 1, "an empty list from '%s'", s);
        for (size_t i = 0; i < l.n; i++) {
            qattn_scheme b;
            rc = qattn_scheme_parse(l.items[i].label, &b, &e);
            FUZZ_CHECK(rc == 0 && same_scheme(&b, &l.items[i].scheme), "list item '%s' of '%s'",
                       l.items[i].label, s);
            check_normal(l.items[i].label, &b, n1);
            FUZZ_CHECK(!strcmp(n1, l.items[i].spec), "list item '%s': spec '%s', normal form '%s'",
                       l.items[i].label, l.items[i].spec, n1);
        }
        qattn_scheme_list_free(&l);
    } else {
        fuzz_check_error(rc, &e, s);
    }
    free(s);
    return 0;
}
