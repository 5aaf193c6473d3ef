/* Minimal test harness: CHECK(cond, fmt, ...) records a failure with its
 * location; check_done() prints "N passed, N failed" and returns the exit
 * status. */
#ifndef QATTN_TEST_CHECK_H
#define QATTN_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_pass_, check_fail_;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (cond) {                                                           \
            check_pass_++;                                                    \
        } else {                                                              \
            check_fail_++;                                                    \
            if (check_fail_ <= 50) {                                          \
                fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__,        \
                        __LINE__, #cond);                                     \
                fprintf(stderr, __VA_ARGS__);                                 \
                fputc('\n', stderr);                                          \
            }                                                                 \
        }                                                                     \
    } while (0)

/* |a - b| <= tol (absolute) */
#define CHECK_NEAR(a, b, tol)                                                 \
    CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%s = %.17g, %s = %.17g", \
          #a, (double)(a), #b, (double)(b))

#define CHECK_STR_CONTAINS(hay, needle)                                       \
    CHECK(strstr((hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"",  \
          (hay), (needle))

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_pass_, check_fail_);
    return check_fail_ ? 1 : 0;
}

#endif
