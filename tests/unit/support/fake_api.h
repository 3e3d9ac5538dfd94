/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_api: an in-memory Lease store that stands in for kube-apiserver in
 * tests of the election engine (election.h), which it serves by executing
 * the engine's actions directly: no HTTP, no JSON, no clock. It keeps the
 * server's concurrency rules (resourceVersion checks, 404 NotFound, 409
 * Conflict and AlreadyExists) for one Lease; faults are set by tests.
 *
 * Names: struct fake_api and fake_api_* functions, as in every
 * tests/unit/support/fake_*.h but fake_transport's.
 */
#ifndef LEADERD_TEST_FAKE_API_H
#define LEADERD_TEST_FAKE_API_H

#include <stdbool.h>
#include <stdint.h>

#include "election.h"
#include "lease.h"

struct fake_api {
    struct ld_lease lease; /* the stored object, valid when exists */
    bool exists;
    uint64_t next_rv;
    enum ld_err fail_with;      /* when not LD_OK every request fails with it */
    int64_t retry_after_ms;     /* copied into errinfo on failures */
    int gets, creates, updates; /* counts of requests that reached the store */
    int writes_ok;
};

void fake_api_init(struct fake_api *api);
void fake_api_clear(struct fake_api *api);

/* Stores a record as if another client wrote it (bumps resourceVersion). */
void fake_api_put_record(struct fake_api *api, const char *holder, int32_t duration_s,
                         int32_t transitions, int64_t renew_us);

/* Stores l (copied) as if another client wrote it (bumps resourceVersion). */
void fake_api_put_lease(struct fake_api *api, const struct ld_lease *l);

/* Executes the action against the store. Returns the rc and, on LD_OK,
 * fills out (caller clears) with the stored object. */
enum ld_err fake_api_execute(struct fake_api *api, const struct ld_action *act,
                             const char *ns, const char *name, struct ld_lease *out,
                             struct ld_errinfo *err);

#endif
