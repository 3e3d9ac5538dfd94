/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth: who is calling leaderd-apiserver. One bearer token per client name
 * (DIR/tokens/NAME) plus an admin token (DIR/admin-token), reused across
 * restarts, or a client certificate (certs.h); kubeconfig files per client;
 * token rotation with an optional grace period and revocation, for tests of
 * credential handling. Thread-safe.
 */
#ifndef AS_AUTH_H
#define AS_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "faults.h"

/* The admin identity's name (reserved: no client may use it). */
#define AS_ADMIN "admin"
#define AS_TOKEN_MAX 256

enum as_who {
    AS_WHO_NONE,   /* no token, or a token nobody ever had */
    AS_WHO_CLIENT, /* a client's current, in-grace or retired token */
    AS_WHO_ADMIN,
};

/* True for 1..63 characters of [A-Za-z0-9._-] starting with an
 * alphanumeric, other than "admin" and "anonymous". */
bool as_valid_client_name(const char *name);

struct as_auth;

/* Creates DIR/tokens and loads or creates the token of each of the n
 * clients and the admin token. dir must be absolute. Returns NULL with a
 * message in err (errlen bytes). */
struct as_auth *as_auth_new(const char *dir, char *const *clients, size_t n, char *err,
                            size_t errlen);
void as_auth_free(struct as_auth *a); /* NULL-safe */

/* Records the server URL and writes, for every client, DIR/kubeconfig-NAME
 * (token inline), DIR/kubeconfig-NAME-tokenfile (tokenFile: DIR/tokens/NAME,
 * for rotation tests), DIR/kubeconfig-NAME-cert (client-certificate-data and
 * client-key-data) and DIR/kubeconfig-NAME-certfile (client-certificate and
 * client-key naming the files), and DIR/kubeconfig-admin. The client
 * certificates must exist (as_certs_setup()). */
bool as_auth_set_server(struct as_auth *a, const char *server_url, char *err,
                        size_t errlen);

/* Identifies the caller the way kube-apiserver's x509-then-token
 * authenticators do. cert_cn is the Subject CN of a client certificate that
 * verified against the CA (NULL when none did): when it names a client, that
 * client is authenticated, whatever the Authorization header says. Otherwise
 * authz, the Authorization header value (NULL when absent), decides. For
 * AS_WHO_CLIENT the name is copied into name (AS_CLIENT_MAX bytes) even when
 * the token is no longer accepted, so faults and statistics still apply to
 * that client; *valid says whether the request is authenticated. */
enum as_who as_auth_identify(struct as_auth *a, const char *cert_cn, const char *authz,
                             char *name, bool *valid);

/* Gives client a new token, written to DIR/tokens/NAME atomically (and its
 * kubeconfigs rewritten). The previous token keeps working for grace_ms
 * (0: rejected at once). The new token is copied into token_out
 * (AS_TOKEN_MAX bytes). Returns false with a message for an unknown client
 * or a write error. */
bool as_auth_rotate(struct as_auth *a, const char *client, int64_t grace_ms,
                    char *token_out, char *err, size_t errlen);

/* Makes every token of client invalid (401) until the next rotation. The
 * token file is left as it is; the client certificate stays valid (a real
 * API server cannot revoke one either). Returns false for an unknown client. */
bool as_auth_revoke(struct as_auth *a, const char *client);

/* Ends the grace period of client's previous token now: from here on it
 * gets 401, while the current token keeps working (the end of a rotation
 * done with a grace period). Returns false for an unknown client. */
bool as_auth_revoke_previous(struct as_auth *a, const char *client);

/* How often each client's tokens were presented, counted by
 * as_auth_identify: {"NAME": {"current": N, "stale": N}}, where stale is a
 * previous token (in its grace period or not) or a revoked one; a client
 * certificate counts as neither. New reference, or NULL without memory. */
json_t *as_auth_uses_json(struct as_auth *a);

#endif
