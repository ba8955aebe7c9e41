/* diag: error code table and detail messages. */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *sd_strerror(int code)
{
    switch (code) {
#define SD__ERR_CASE(name, val, msg)                                                                         \
    case val:                                                                                                \
        return msg;
        SD_ERRNO_MAP(SD__ERR_CASE)
#undef SD__ERR_CASE
    }
    return "unknown error";
}

int sd_diag_set(sd_diag *d, int code, const char *fmt, ...)
{
    if (!d)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->code = code;
    return code;
}

int sd_diag_wrap(sd_diag *d, int code, const char *fmt, ...)
{
    if (!d)
        return code;
    char prefix[SD_DIAG_MSG_MAX], old[SD_DIAG_MSG_MAX];
    snprintf(old, sizeof old, "%s", d->code ? d->msg : sd_strerror(code));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* prefix + ": " + old, cut to fit (memcpy keeps -Wformat-truncation quiet) */
    size_t pl = strlen(prefix), ol = strlen(old), cap = sizeof d->msg - 1;
    if (pl > cap - 2)
        pl = cap - 2;
    if (ol > cap - 2 - pl)
        ol = cap - 2 - pl;
    memcpy(d->msg, prefix, pl);
    memcpy(d->msg + pl, ": ", 2);
    memcpy(d->msg + pl + 2, old, ol);
    d->msg[pl + 2 + ol] = '\0';
    d->code = code;
    return code;
}

const char *sd_diag_str(const sd_diag *d, int code)
{
    if (d && d->code && d->msg[0])
        return d->msg;
    return sd_strerror(code);
}
