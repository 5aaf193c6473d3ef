#include <stdarg.h>
#include <stdio.h>

#include "qattn/error.h"

int qattn_err_set(qattn_err *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}
