/* The small parsers of the command line, chosen by the first byte:
 *   0: scale groups (tensor, token, block:B, thread:B/S/W, ,ch:C, ,e8m0):
 *      parse(format(g)) == g and every element's group is < the count;
 *   1: --layers / --heads selections over n items (the next two bytes):
 *      strictly increasing indices below n, at least one;
 *   2: masks (none, causal, causal-br, window:L,R): parse(format(m)) == m
 *      and the key ranges agree with the definition of each mask.
 * A failure is a negative code with one line of message. */
#include "fuzz.h"
#include "qattn/attn.h"
#include "qattn/group.h"
#include "select.h"

static void fuzz_group(const char *s)
{
    qattn_group a, b;
    qattn_err e = {""};
    int rc = qattn_group_parse(s, &a, &e);
    if (rc) {
        fuzz_check_error(rc, &e, s);
        return;
    }
    char n1[128], n2[128];
    qattn_group_format(&a, n1, sizeof n1);
    rc = qattn_group_parse(n1, &b, &e);
    FUZZ_CHECK(rc == 0, "'%s' formats as '%s', which does not parse: %s", s, n1, e.msg);
    FUZZ_CHECK(!memcmp(&a, &b, sizeof a), "'%s' and its normal form '%s' differ", s, n1);
    qattn_group_format(&b, n2, sizeof n2);
    FUZZ_CHECK(!strcmp(n1, n2), "'%s' -> '%s' -> '%s'", s, n1, n2);
    static const size_t shapes[3][2] = {{1, 1}, {37, 24}, {130, 8}};
    for (int k = 0; k < 3; k++) {
        size_t n = shapes[k][0], d = shapes[k][1], count = qattn_group_count(&a, n, d);
        FUZZ_CHECK(count >= 1, "'%s': %zu groups for [%zu, %zu]", s, count, n, d);
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < d; c++) {
                size_t gi = qattn_group_index(&a, n, d, t, c);
                FUZZ_CHECK(gi < count, "'%s': element (%zu, %zu) of [%zu, %zu] in group %zu of %zu",
                           s, t, c, n, d, gi, count);
            }
    }
}

static void fuzz_select(const char *s, size_t n)
{
    size_t *idx = malloc((n ? n : 1) * sizeof *idx), count = 0;
    if (!idx)
        abort();
    qattn_err e = {""};
    int rc = qattn_select_parse(s, n, idx, &count, &e);
    if (rc) {
        fuzz_check_error(rc, &e, s);
    } else {
        FUZZ_CHECK(count >= 1 && count <= n, "'%s' over %zu: %zu selected", s, n, count);
        for (size_t i = 0; i < count; i++)
            FUZZ_CHECK(idx[i] < n && (i == 0 || idx[i] > idx[i - 1]), "'%s' over %zu: index %zu is %zu",
                       s, n, i, idx[i]);
    }
    free(idx);
}

/* query i of sq may see key j of sk: the definitions of qattn/attn.h */
static int allowed(const qattn_mask *m, long i, long j, long sq, long sk)
{
    long ib = i + sk - sq;
    switch (m->kind) {
    case QATTN_MASK_NONE: return 1;
    case QATTN_MASK_CAUSAL: return j <= i;
    case QATTN_MASK_CAUSAL_BR: return j <= ib;
    case QATTN_MASK_WINDOW: return ib - m->left <= j && j <= ib + m->right;
    }
    return 0;
}

static void fuzz_mask(const char *s)
{
    qattn_mask a, b;
    qattn_err e = {""};
    int rc = qattn_mask_parse(s, &a, &e);
    if (rc) {
        fuzz_check_error(rc, &e, s);
        return;
    }
    char n1[64], n2[64];
    qattn_mask_format(&a, n1, sizeof n1);
    rc = qattn_mask_parse(n1, &b, &e);
    FUZZ_CHECK(rc == 0, "'%s' formats as '%s', which does not parse: %s", s, n1, e.msg);
    FUZZ_CHECK(a.kind == b.kind && a.left == b.left && a.right == b.right, "'%s' and '%s' differ", s, n1);
    qattn_mask_format(&b, n2, sizeof n2);
    FUZZ_CHECK(!strcmp(n1, n2), "'%s' -> '%s' -> '%s'", s, n1, n2);
    for (long sq = 1; sq <= 5; sq++)
        for (long sk = 1; sk <= 5; sk++)
            for (long i = 0; i < sq; i++) {
                size_t lo, hi;
                qattn_mask_range(&a, (size_t)i, (size_t)sq, (size_t)sk, &lo, &hi);
                FUZZ_CHECK(lo <= hi && hi <= (size_t)sk, "'%s': query %ld of %ld, %ld keys: [%zu, %zu)", s,
                           i, sq, sk, lo, hi);
                for (long j = 0; j < sk; j++)
                    FUZZ_CHECK(qattn_mask_allows(&a, (size_t)i, (size_t)j, (size_t)sq, (size_t)sk) ==
                                   allowed(&a, i, j, sq, sk),
                               "'%s': query %ld of %ld, key %ld of %ld", s, i, sq, j, sk);
            }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    int which = data[0] % 3;
    size_t n = 0;
    data++, size--;
    if (which == 1) {
        if (size < 2)
            return 0;
        n = ((size_t)data[0] | (size_t)data[1] << 8) % 2048;
        data += 2, size -= 2;
    }
    char *s = fuzz_string(data, size);
    if (which == 0)
        fuzz_group(s);
    else if (which == 1)
        fuzz_select(s, n);
    else
        fuzz_mask(s);
    free(s);
    return 0;
}
