/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_paths: the sidecar's URLs, each spelled once. The renderers' route
 * tables (http_route, http_shards) and the request dispatch's
 * (http_dispatch) use these names, so a route cannot be answered under
 * one spelling and held, refused or parsed under another.
 */
#ifndef LEADERD_HTTP_PATHS_H
#define LEADERD_HTTP_PATHS_H

#define LD_HTTP_PATH_ROOT "/"
#define LD_HTTP_PATH_LEADER "/leader"
#define LD_HTTP_PATH_WATCH "/watch"
#define LD_HTTP_PATH_HEALTHZ "/healthz"
#define LD_HTTP_PATH_READYZ "/readyz"
#define LD_HTTP_PATH_METRICS "/metrics"
#define LD_HTTP_PATH_RESIGN "/resign"
/* Shard mode: the table, one shard (LD_HTTP_PATH_SHARDS "/" ID), a key's
 * shard (?key=K), and the app's word that it drained a shard it is given
 * back (LD_HTTP_PATH_SHARDS "/" ID LD_HTTP_PATH_DRAINED). */
#define LD_HTTP_PATH_SHARDS "/shards"
#define LD_HTTP_PATH_SHARD_OF_KEY "/shard"
#define LD_HTTP_PATH_DRAINED "/drained"

#endif
