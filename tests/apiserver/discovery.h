/* SPDX-License-Identifier: Apache-2.0 */
/*
 * discovery: the non-resource documents kubectl and client-go read before
 * touching Leases (/version, legacy /api and /apis discovery, health
 * endpoints) and the server-side Table rendering `kubectl get` asks for.
 */
#ifndef AS_DISCOVERY_H
#define AS_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "status.h"
#include "store.h"

/* True for paths served without authentication (/healthz, /livez,
 * /readyz, /version), as kube's system:public-info-viewer allows. */
bool as_discovery_is_public(const char *path);

/* Serves path if it is a discovery or health document; server_addr is
 * "host:port" for /api. Returns false (r untouched) for other paths. */
bool as_discovery_serve(const char *path, const char *server_addr, struct as_reply *r);

/* A meta.k8s.io/v1 Table of the snapshot with kube's Lease columns Name,
 * Holder, Age. include_object is the includeObject parameter ("None",
 * "Object", anything else: "Metadata"). New reference or NULL. */
json_t *as_table(const struct as_snapshot *snap, const char *include_object,
                 int64_t now_wall_us);

/* kube's duration.HumanDuration ("5s", "3m20s", "2d5h", ...) of seconds. */
void as_human_duration(int64_t seconds, char *out, size_t len);

#endif
