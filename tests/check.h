/* Minimal test harness: CHECK(cond, fmt, ...) records a failure with its
 * location; check_done() prints "N passed, N failed" and returns the exit
 * status. */
#ifndef QATTN_TEST_CHECK_H
#define QATTN_TEST_CHECK_H

#include <math.h>
#include <stdint.h>
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

/* A standard normal deviate (Box-Muller on two splitmix64 uniforms in
 * (0, 1)) from the stream *state: tests seed their own stream, so a
 * failure repeats exactly. (Named check_ so that it cannot clash with a
 * test's own gauss().) */
static inline double check_gauss(uint64_t *state)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        u[i] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_pass_, check_fail_);
    return check_fail_ ? 1 : 0;
}

#endif
