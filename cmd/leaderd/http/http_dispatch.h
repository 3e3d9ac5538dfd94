/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_dispatch: libmicrohttpd's request handler for the server of
 * http_listen, which ties the other http_* modules together: it marks the
 * connection busy (http_conn), answers plain requests through the route
 * table (http_route), and hands GET /leader with wait=, GET /watch and
 * POST /resign (loopback peers only) to http_hold, answering a poll or a
 * resign when it is resumed In shard mode (the state has a group) the
 * route table is http_shards', and GET /shards/ID and GET /shard?key=K
 * with wait= are the polls.
 */
#ifndef LEADERD_HTTP_DISPATCH_H
#define LEADERD_HTTP_DISPATCH_H

#include <stddef.h>

#include <microhttpd.h>

/* MHD's access handler; cls is the struct ld_http. */
enum MHD_Result ld_http_dispatch(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls);

struct ld_http_mode;
struct ld_http_hold_mode;

/* What mode's held requests show of the state (http_hold.h). */
const struct ld_http_hold_mode *ld_http_mode_holds(const struct ld_http_mode *mode);

/* MHD's MHD_OPTION_NOTIFY_COMPLETED callback; cls is the struct ld_http.
 * Lets go of what the request held and marks the connection idle. */
void ld_http_dispatch_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                                enum MHD_RequestTerminationCode toe);

#endif
