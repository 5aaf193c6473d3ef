/* qattn error reporting: every fallible function returns 0 on success or a
 * negative QATTN_ERR_* code, and writes a one-line message into a caller's
 * qattn_err buffer. */
#ifndef QATTN_ERROR_H
#define QATTN_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum qattn_status {
    QATTN_OK = 0,
    QATTN_ERR_ARG = -1,    /* bad argument or malformed spec */
    QATTN_ERR_NAN = -2,    /* NaN or Inf where a finite number is required */
    QATTN_ERR_IO = -3,     /* file missing, unreadable, not HDF5 */
    QATTN_ERR_SCHEMA = -4, /* file readable but not the activation schema */
    QATTN_ERR_NOMEM = -5,
    QATTN_ERR_RANGE = -6   /* value outside what the format or call supports */
};

typedef struct qattn_err {
    char msg[512];
} qattn_err;

/* printf-style: write the message into e (if e != NULL); returns code.
 * Control characters (newlines of a quoted input) become '?': one line. */
int qattn_err_set(qattn_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
