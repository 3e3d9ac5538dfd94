/*
 * rest: a non-2xx answer to an ld_errinfo, and the outcome of a round trip.
 */
#include "rest.h"

#include <string.h>

#include "lease.h"

enum ld_err ld_rest_error(const struct ld_http_result *r, const char *verb,
                          const char *what, struct ld_errinfo *err)
{
    char detail[sizeof(err->msg)];

    ld_errinfo_clear(err);
    ld_status_decode(r->body, r->body_len, err);
    if (verb) {
        memcpy(detail, err->msg, sizeof(detail));
        ld_errinfo_set(err, LD_EHTTP, "%s %s: HTTP %ld%s%s", verb, what, r->status,
                       detail[0] ? ": " : "", detail);
    }
    if (r->retry_after_ms >= 0)
        err->retry_after_ms = r->retry_after_ms;
    err->http_status = r->status;
    err->code = ld_err_from_http(r->status, err->reason);
    if (err->code == LD_OK)
        err->code = LD_EHTTP;
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
