/* Selections such as "all", "3", "0,2,5-7" over [0, n). */
#ifndef QATTN_SELECT_H
#define QATTN_SELECT_H

#include <stddef.h>

#include "qattn/error.h"

/* Fills idx[] (capacity n) in increasing order without duplicates and
 * *count; an empty result or an index >= n is an error naming the word. */
int qattn_select_parse(const char *sel, size_t n, size_t *idx, size_t *count, qattn_err *err);

#endif
