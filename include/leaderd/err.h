/* SPDX-License-Identifier: Apache-2.0 */
/*
 * err: the one error vocabulary of libleaderd.
 *
 * Every fallible function in lib/ returns an enum ld_err (LD_OK == 0) and may
 * fill a caller-owned struct ld_errinfo with the detail a log line needs.
 * The enum is append-only: values are never renumbered or removed.
 */
#ifndef LEADERD_ERR_H
#define LEADERD_ERR_H

#include <stdint.h>

enum ld_err {
    LD_OK = 0,
    LD_ENOMEM = 1,         /* allocation failed */
    LD_EINVAL = 2,         /* bad argument or malformed input (our side) */
    LD_ETOOBIG = 3,        /* input or body over its cap */
    LD_EDECODE = 4,        /* a document (JSON, YAML, time) did not decode */
    LD_EIO = 5,            /* a local file could not be read */
    LD_ETRANSPORT = 6,     /* connect/TLS/reset: no HTTP answer */
    LD_ETIMEOUT = 7,       /* the request did not finish in time */
    LD_ECANCELED = 8,      /* the caller's cancel fd fired */
    LD_ENOTFOUND = 9,      /* HTTP 404 */
    LD_ECONFLICT = 10,     /* HTTP 409 reason Conflict (stale resourceVersion) */
    LD_EEXISTS = 11,       /* HTTP 409 reason AlreadyExists (create lost a race) */
    LD_EUNAUTHORIZED = 12, /* HTTP 401 */
    LD_EFORBIDDEN = 13,    /* HTTP 403 */
    LD_EINVALID = 14,      /* HTTP 422 (server-side validation) */
    LD_EBADREQUEST = 15,   /* HTTP 400 */
    LD_ETOOMANY = 16,      /* HTTP 429 */
    LD_ESERVER = 17,       /* HTTP 5xx */
    LD_EHTTP = 18,         /* any other unexpected HTTP status */
    LD_EGONE = 19,         /* HTTP 410 / watch ERROR Expired */
    LD_ECONFIG = 20,       /* configuration is incomplete or inconsistent */
    LD_EEOF = 21,          /* a stream (watch) ended */
    LD_ECONNECT = 22,      /* no connection was made: the request was not sent */
    LD_ENOTSENT = 23,      /* its time ran out before it was sent: certainly not sent */
    LD_ESYS = 24,          /* a system call failed (the message says which, with errno) */
};

/* Detail for one failure. Caller-owned; every field is always a valid C
 * string (possibly empty) after a call that filled it. */
struct ld_errinfo {
    enum ld_err code;
    long http_status;       /* 0 when no HTTP answer arrived */
    int64_t retry_after_ms; /* from Retry-After or Status details; 0 if none */
    char reason[64];        /* metav1.Status reason, e.g. "Conflict" */
    char msg[256];          /* human-readable, never contains credentials */
};

/* Returns a static string naming the code ("conflict", "timeout", ...). */
const char *ld_strerror(enum ld_err code);

/* Maps an HTTP status and a metav1.Status reason (NULL or "" when none) to
 * a code: 2xx LD_OK, 400 EBADREQUEST, 401 EUNAUTHORIZED, 403 EFORBIDDEN,
 * 404 ENOTFOUND, 409 EEXISTS for reason "AlreadyExists" else ECONFLICT,
 * 410 EGONE, 422 EINVALID, 429 ETOOMANY, 5xx ESERVER, anything else EHTTP.
 * Shared by the REST client and the watch decoder. */
enum ld_err ld_err_from_http(long http_status, const char *reason);

/* Resets info (NULL-safe) to LD_OK with empty strings. */
void ld_errinfo_clear(struct ld_errinfo *info);

/* Fills info (NULL-safe) with code and a printf-formatted message; returns
 * code so callers can write `return ld_errinfo_set(info, LD_EINVAL, ...)`. */
enum ld_err ld_errinfo_set(struct ld_errinfo *info, enum ld_err code, const char *fmt,
                           ...) __attribute__((format(printf, 3, 4)));

#endif
