/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube_curl: the two functions of kube.h that tie the Lease client to
 * libcurl (transport_curl.h); the rest of the client sees only transport.h,
 * so a build or a test can put any transport under it (ld_kube_new_on).
 */
#include "kube.h"

#include "transport_curl.h"

struct ld_kube *ld_kube_new(const struct ld_kube_config *cfg, struct ld_errinfo *err)
{
    struct ld_transport *t = ld_transport_curl_new(cfg, err);
    return t ? ld_kube_new_on(t, err) : NULL;
}

void ld_kube_set_user_agent_suffix(struct ld_kube *k, const char *suffix)
{
    if (k)
        ld_transport_curl_set_user_agent_suffix(ld_kube_transport(k), suffix);
}
