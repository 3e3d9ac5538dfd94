/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeconfig: where the API server is and how to authenticate to it.
 * Builds a struct ld_kube_config from the in-cluster service-account mount
 * or from a kubeconfig file (YAML, parsed with libyaml). Reads files; never
 * touches the network or the environment (callers pass what they read).
 */
#ifndef LEADERD_KUBECONFIG_H
#define LEADERD_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define LD_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Every string is owned by the struct; NULL when not set. */
struct ld_kube_config {
    char *server;           /* "https://host:port", no trailing slash */
    char *ca_file;          /* PEM bundle path */
    char *ca_data;          /* PEM bundle bytes (NUL-terminated) */
    char *token;            /* static bearer token */
    char *token_file;       /* bearer token re-read periodically and after 401 */
    char *client_cert_file; /* PEM */
    char *client_key_file;  /* PEM */
    char *client_cert_data; /* PEM bytes */
    char *client_key_data;  /* PEM bytes */
    char *tls_server_name;  /* overrides the name checked in the certificate */
    bool insecure_skip_tls_verify;
    char *namespace_; /* the context's or the service account's; may be NULL */
};

void ld_kube_config_init(struct ld_kube_config *c);
void ld_kube_config_clear(struct ld_kube_config *c); /* frees members; NULL-safe */

/* In-cluster: server from host and port (as read from KUBERNETES_SERVICE_HOST
 * and _PORT; IPv6 hosts are bracketed), ca_file = sa_dir/ca.crt, token_file
 * = sa_dir/token, namespace_ from sa_dir/namespace (trimmed) when readable.
 * Fails with LD_ECONFIG when host or port is empty or the token file is not
 * readable, naming what is missing in err->msg. */
enum ld_err ld_kube_config_incluster(struct ld_kube_config *out, const char *host,
                                     const char *port, const char *sa_dir,
                                     struct ld_errinfo *err);

/* Loads the current context of a kubeconfig file: cluster server,
 * certificate-authority(-data), insecure-skip-tls-verify, tls-server-name;
 * user token, tokenFile, client-certificate(-data), client-key(-data);
 * context namespace. *-data fields are base64 and are decoded. Relative file
 * paths are resolved against the kubeconfig's directory, as kubectl does.
 * Unsupported auth (exec, auth-provider, username/password) and a user with
 * no credentials fail with LD_ECONFIG and a message naming the problem.
 * Unreadable file: LD_EIO; bad YAML: LD_EDECODE. */
enum ld_err ld_kube_config_load_file(struct ld_kube_config *out, const char *path,
                                     struct ld_errinfo *err);

/* Same from YAML text already in memory; base_dir resolves relative paths. */
enum ld_err ld_kube_config_load_text(struct ld_kube_config *out, const char *text,
                                     size_t len, const char *base_dir,
                                     struct ld_errinfo *err);

#endif
