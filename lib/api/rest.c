/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rest: a Status to an ld_errinfo, a non-2xx answer to one with its request
 * named, and the outcome of a round trip.
 */
#include "rest.h"

#include <string.h>

#include "lease.h"

enum ld_err ld_rest_status(long http_status, const char *text, size_t len,
                           struct ld_errinfo *err)
{
    ld_errinfo_clear(err);
    ld_status_decode(text, len, err);
    err->http_status = http_status;
    err->code = ld_err_from_http(http_status, err->reason);
    if (err->code == LD_OK)
        err->code = LD_EHTTP;
    return err->code;
}

enum ld_err ld_rest_error(const struct ld_http_result *r, const char *verb,
                          const char *what, struct ld_errinfo *err)
{
    char detail[sizeof(err->msg)];

    ld_rest_status(r->status, r->body, r->body_len, err);
    if (verb) {
        memcpy(detail, err->msg, sizeof(detail));
        ld_errinfo_set(err, err->code, "%s %s: HTTP %ld%s%s", verb, what, r->status,
                       detail[0] ? ": " : "", detail);
    }
    /* The header is the server's word for this answer; the Status's hint
     * only stands in when there is none. */
    if (r->retry_after_ms >= 0)
        err->retry_after_ms = r->retry_after_ms;
    return err->code;
}

enum ld_err ld_rest_outcome(const struct ld_http_result *r, const char *verb,
                            const char *what, struct ld_errinfo *err)
{
    if (r->rc != LD_OK) {
        *err = r->err;
        return r->rc;
    }
    if (r->status >= 200 && r->status < 300) {
        ld_errinfo_clear(err);
        err->http_status = r->status;
        return LD_OK;
    }
    return ld_rest_error(r, verb, what, err);
}
