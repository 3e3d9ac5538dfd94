/* SPDX-License-Identifier: Apache-2.0 */
/*
 * err: names for the error codes and the errinfo helpers.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Indexed by enum ld_err; the enum is append-only, so is this table. */
static const char *const err_names[] = {
    [LD_OK] = "ok",
    [LD_ENOMEM] = "out of memory",
    [LD_EINVAL] = "invalid argument",
    [LD_ETOOBIG] = "too big",
    [LD_EDECODE] = "decode error",
    [LD_EIO] = "i/o error",
    [LD_ETRANSPORT] = "transport error",
    [LD_ETIMEOUT] = "timeout",
    [LD_ECANCELED] = "canceled",
    [LD_ENOTFOUND] = "not found",
    [LD_ECONFLICT] = "conflict",
    [LD_EEXISTS] = "already exists",
    [LD_EUNAUTHORIZED] = "unauthorized",
    [LD_EFORBIDDEN] = "forbidden",
    [LD_EINVALID] = "invalid",
    [LD_EBADREQUEST] = "bad request",
    [LD_ETOOMANY] = "too many requests",
    [LD_ESERVER] = "server error",
    [LD_EHTTP] = "unexpected http status",
    [LD_EGONE] = "gone",
    [LD_ECONFIG] = "configuration error",
    [LD_EEOF] = "end of stream",
    [LD_ECONNECT] = "could not connect",
    [LD_ENOTSENT] = "timeout before sending",
    [LD_ESYS] = "system call failed",
};

const char *ld_strerror(enum ld_err code)
{
    size_t i = (size_t)code;

    if (i >= sizeof err_names / sizeof err_names[0] || !err_names[i])
        return "unknown error";
    return err_names[i];
}

void ld_errinfo_clear(struct ld_errinfo *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->code = LD_OK;
}

/* Only code and msg are written: http_status, reason and retry_after_ms may
 * already hold what the caller learned from the response. */
enum ld_err ld_errinfo_set(struct ld_errinfo *info, enum ld_err code, const char *fmt,
                           ...)
{
    va_list ap;

    if (!info)
        return code;
    info->code = code;
    va_start(ap, fmt);
    vsnprintf(info->msg, sizeof info->msg, fmt, ap);
    va_end(ap);
    return code;
}

enum ld_err ld_err_from_http(long http_status, const char *reason)
{
    if (http_status >= 200 && http_status < 300)
        return LD_OK;
    switch (http_status) {
    case 400:
        return LD_EBADREQUEST;
    case 401:
        return LD_EUNAUTHORIZED;
    case 403:
        return LD_EFORBIDDEN;
    case 404:
        return LD_ENOTFOUND;
    case 409:
        return reason && strcmp(reason, "AlreadyExists") == 0 ? LD_EEXISTS : LD_ECONFLICT;
    case 410:
        return LD_EGONE;
    case 422:
        return LD_EINVALID;
    case 429:
        return LD_ETOOMANY;
    default:
        break;
    }
    if (http_status >= 500 && http_status < 600)
        return LD_ESERVER;
    return LD_EHTTP;
}
