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
        /* one line, whatever the input quoted in it holds (a scheme or a
         * CSV field with a newline, a file name with a tab) */
        for (char *p = e->msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
    }
    return code;
}
