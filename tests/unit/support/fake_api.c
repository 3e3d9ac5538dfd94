/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_api: the in-memory Lease store of fake_api.h.
 */
#include "fake_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fake_api_init(struct fake_api *api)
{
    memset(api, 0, sizeof(*api));
    ld_lease_init(&api->lease);
    api->next_rv = 100;
}

void fake_api_clear(struct fake_api *api)
{
    ld_lease_clear(&api->lease);
}

static void bump_rv(struct fake_api *api)
{
    char rv[32];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)api->next_rv++);
    free(api->lease.resource_version);
    api->lease.resource_version = strdup(rv);
}

static void store(struct fake_api *api, const struct ld_lease *in, const char *ns,
                  const char *name)
{
    struct ld_lease copy;
    ld_lease_init(&copy);
    ld_lease_copy(&copy, in);
    /* A server keeps an object, whatever form the engine wrote it from. */
    if (copy.object_text) {
        copy.object = json_loads(copy.object_text, 0, NULL);
        free(copy.object_text);
        copy.object_text = NULL;
    }
    ld_lease_clear(&api->lease);
    api->lease = copy;
    if (!api->lease.name)
        api->lease.name = strdup(name);
    if (!api->lease.namespace_)
        api->lease.namespace_ = strdup(ns);
    api->exists = true;
    bump_rv(api);
    api->writes_ok++;
}

void fake_api_put_record(struct fake_api *api, const char *holder, int32_t duration_s,
                         int32_t transitions, int64_t renew_us)
{
    struct ld_lease l;
    ld_lease_init(&l);
    l.name = strdup("lock");
    l.namespace_ = strdup("default");
    l.spec.holder = strdup(holder);
    l.spec.duration_s = duration_s;
    l.spec.transitions = transitions;
    l.spec.has_renew = l.spec.has_acquire = true;
    l.spec.renew_us = l.spec.acquire_us = renew_us;
    store(api, &l, "default", "lock");
    api->writes_ok--; /* not a write by the engine under test */
    ld_lease_clear(&l);
}

void fake_api_put_lease(struct fake_api *api, const struct ld_lease *l)
{
    store(api, l, "default", "lock");
    api->writes_ok--; /* not a write by the engine under test */
}

static enum ld_err answer(struct fake_api *api, struct ld_lease *out)
{
    ld_lease_copy(out, &api->lease);
    return LD_OK;
}

static enum ld_err fail(enum ld_err rc, const struct fake_api *api,
                        struct ld_errinfo *err)
{
    ld_errinfo_set(err, rc, "fake: %s", ld_strerror(rc));
    if (err)
        err->retry_after_ms = api->retry_after_ms;
    return rc;
}

enum ld_err fake_api_execute(struct fake_api *api, const struct ld_action *act,
                             const char *ns, const char *name, struct ld_lease *out,
                             struct ld_errinfo *err)
{
    ld_errinfo_clear(err);
    if (api->fail_with != LD_OK)
        return fail(api->fail_with, api, err);
    switch (act->kind) {
    case LD_ACT_GET:
        api->gets++;
        return api->exists ? answer(api, out) : fail(LD_ENOTFOUND, api, err);
    case LD_ACT_CREATE:
        api->creates++;
        if (api->exists)
            return fail(LD_EEXISTS, api, err);
        store(api, act->lease, ns, name);
        /* A new object, as the server gives it: its own uid. */
        free(api->lease.uid);
        if (asprintf(&api->lease.uid, "fake-uid-%d", api->creates) < 0)
            api->lease.uid = NULL;
        return answer(api, out);
    case LD_ACT_UPDATE:
        api->updates++;
        if (!act->lease->resource_version)
            return fail(LD_EINVALID, api, err);
        if (api->exists &&
            strcmp(act->lease->resource_version, api->lease.resource_version) != 0)
            return fail(LD_ECONFLICT, api, err);
        store(api, act->lease, ns, name);
        return answer(api, out);
    default:
        return fail(LD_EINVAL, api, err);
    }
}
