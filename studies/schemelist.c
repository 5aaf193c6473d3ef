#include "schemelist.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* does the text at p (after a comma) start a new scheme? start..comma is the
 * current scheme so far. A comma can only continue a scheme as a scale-group
 * suffix (",ch:64", ",e8m0"), i.e. right after a word holding a group
 * ("q=int8@token"); anywhere else it separates schemes, so that an unknown
 * name after it ("fp16,nosuch") is reported on its own. */
static int starts_scheme(const char *start, const char *comma, const char *p)
{
    const char *w = comma;
    while (w > start && !isspace((unsigned char)w[-1]))
        w--;
    if (!memchr(w, '@', (size_t)(comma - w)))
        return 1;
    while (*p == ' ')
        p++;
    size_t n = strcspn(p, " ,;");
    char word[64];
    if (n == 0 || n >= sizeof word)
        return n > 0;
    memcpy(word, p, n);
    word[n] = '\0';
    return strchr(word, '=') != NULL || qattn_scheme_preset_find(word) != NULL;
}

static int add_item(qattn_scheme_list *l, const char *start, size_t len, qattn_err *err)
{
    while (len && isspace((unsigned char)*start)) {
        start++;
        len--;
    }
    while (len && isspace((unsigned char)start[len - 1]))
        len--;
    if (len == 0)
        return qattn_err_set(err, QATTN_ERR_ARG, "empty scheme in the list");
    qattn_scheme_item *items = realloc(l->items, (l->n + 1) * sizeof *items);
    if (!items)
        return qattn_err_set(err, QATTN_ERR_NOMEM, "out of memory");
    l->items = items;
    qattn_scheme_item *it = &items[l->n];
    memset(it, 0, sizeof *it);
    if (len >= sizeof it->label)
        return qattn_err_set(err, QATTN_ERR_ARG, "scheme '%.40s...' is too long (%zu characters, at most %d)",
                             start, len, QATTN_SCHEME_LEN_MAX);
    memcpy(it->label, start, len);
    it->label[len] = '\0';
    qattn_err e2;
    if (qattn_scheme_parse(it->label, &it->scheme, &e2))
        return qattn_err_set(err, QATTN_ERR_ARG, "scheme '%s': %s", it->label, e2.msg);
    qattn_scheme_format(&it->scheme, it->spec, sizeof it->spec);
    l->n++;
    return QATTN_OK;
}

int qattn_scheme_list_parse(const char *text, qattn_scheme_list *l, qattn_err *err)
{
    memset(l, 0, sizeof *l);
    if (!text || !*text)
        return qattn_err_set(err, QATTN_ERR_ARG, "empty scheme list");
    const char *start = text;
    for (const char *p = text;; p++) {
        if (*p == '\0' || *p == ';' || (*p == ',' && starts_scheme(start, p, p + 1))) {
            int rc = add_item(l, start, (size_t)(p - start), err);
            if (rc) {
                qattn_scheme_list_free(l);
                return rc;
            }
            if (*p == '\0')
                break;
            start = p + 1;
        }
    }
    return QATTN_OK;
}

void qattn_scheme_list_free(qattn_scheme_list *l)
{
    free(l->items);
    l->items = NULL;
    l->n = 0;
}
