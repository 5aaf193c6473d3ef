/* What the harnesses share: the input as a C string, and FUZZ_CHECK, which
 * reports a broken property and aborts (libFuzzer keeps the input). */
#ifndef QATTN_FUZZ_H
#define QATTN_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/error.h"

#define FUZZ_CHECK(cond, ...)                                                   \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, \
                    #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            abort();                                                            \
        }                                                                       \
    } while (0)

/* data [size] as a NUL-terminated string (a NUL inside ends it); free() it */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* a failed parse: a negative code and one line of message */
static inline void fuzz_check_error(int rc, const qattn_err *e, const char *input)
{
    FUZZ_CHECK(rc < 0, "code %d for '%s'", rc, input);
    FUZZ_CHECK(e->msg[0], "empty message for '%s'", input);
    FUZZ_CHECK(!strpbrk(e->msg, "\n\r"), "message of more than one line: '%s'", e->msg);
}

#endif
