/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rest: what an answer of the Kubernetes API means, one rule for every REST
 * call of the library (Leases and their watches in kube.h, Pods in pods.h,
 * Events in event.h). A transport failure stays as the transport reported
 * it; a 2xx is a success; any other status is an error described by the
 * metav1.Status the server sends with it: the code from the status and the
 * Status reason (ld_err_from_http: 404 LD_ENOTFOUND, 409 LD_ECONFLICT or
 * LD_EEXISTS, 401, 403, 422, 429, 5xx, ...), the HTTP status, the reason,
 * the server's message, and how long to wait before trying again (the
 * Retry-After header, else the Status's details.retryAfterSeconds).
 *
 * Pure: no I/O, no allocation; err is the caller's.
 */
#ifndef LEADERD_REST_H
#define LEADERD_REST_H

#include <stddef.h>

#include "err.h"
#include "transport.h"

/* Fills err from a metav1.Status body (text of len bytes; a body that is
 * no Status lends its first line) that came with http_status, and returns
 * err->code: the mapped status, LD_EHTTP for a 2xx. err->msg is the
 * server's message. For a Status that is not an HTTP answer of its own
 * too: a watch's ERROR event. */
enum ld_err ld_rest_status(long http_status, const char *text, size_t len,
                           struct ld_errinfo *err);

/* Fills err from r, an HTTP answer (r->rc is LD_OK) that is not the one
 * the caller wanted, and returns err->code: the mapped status, LD_EHTTP
 * for a 2xx (a stream answered 201, say). err->msg reads "VERB what: HTTP
 * N: message", without ": message" when the body has none; with verb NULL
 * it is the server's message alone. */
enum ld_err ld_rest_error(const struct ld_http_result *r, const char *verb,
                          const char *what, struct ld_errinfo *err);

/* The outcome of a round trip: a transport failure as it is (r->err), a
 * 2xx as LD_OK (err cleared, its http_status set), anything else as
 * ld_rest_error describes it. */
enum ld_err ld_rest_outcome(const struct ld_http_result *r, const char *verb,
                            const char *what, struct ld_errinfo *err);

#endif
