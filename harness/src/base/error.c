/* error.c — see error.h. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum mc_err_code mc_error_set(struct mc_error *err, enum mc_err_code code, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    if (err->code != MC_ERR_NONE)
        return err->code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void mc_error_prefix(struct mc_error *err, const char *fmt, ...)
{
    if (err == NULL || err->code == MC_ERR_NONE)
        return;
    char ctx[MC_ERROR_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* msg <- ctx ": " msg, truncated to the buffer */
    size_t clen = strlen(ctx), mlen = strlen(err->msg), cap = sizeof err->msg - 1;
    size_t shift = clen + 2 < cap ? clen + 2 : cap;
    size_t keep = mlen < cap - shift ? mlen : cap - shift;
    memmove(err->msg + shift, err->msg, keep);
    err->msg[shift + keep] = '\0';
    memcpy(err->msg, ctx, shift < clen ? shift : clen);
    if (shift >= clen + 2) {
        err->msg[clen] = ':';
        err->msg[clen + 1] = ' ';
    }
}

void mc_error_clear(struct mc_error *err)
{
    err->code = MC_ERR_NONE;
    err->msg[0] = '\0';
}

int mc_error_exit_code(enum mc_err_code code)
{
    switch (code) {
    case MC_ERR_NONE:
        return 0;
    case MC_ERR_BACKEND:
        return 125;
    case MC_ERR_USAGE:
    case MC_ERR_INPUT:
    case MC_ERR_NOMEM:
    case MC_ERR_INTERNAL:
        return 2;
    }
    return 2;
}
