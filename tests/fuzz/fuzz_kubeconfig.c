/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_kubeconfig: ld_kube_config_load_text on arbitrary YAML. A config
 * that loads must be usable as the header promises (a clean server URL,
 * consistent credentials, paths resolved); one that does not must leave
 * nothing behind and say why.
 */
#include "fuzz.h"

#include "kubeconfig.h"

#define BASE_DIR "/fuzz/base"

static void check_opt_nonempty(const char *s)
{
    FUZZ_CHECK(s == NULL || s[0] != '\0');
}

static void check_path(const char *s)
{
    FUZZ_CHECK(s == NULL || s[0] == '/');
}

static void check_loaded(const struct ld_kube_config *c)
{
    const char *s = c->server;

    FUZZ_CHECK(s != NULL);
    FUZZ_CHECK(strncmp(s, "https://", 8) == 0 || strncmp(s, "http://", 7) == 0);
    FUZZ_CHECK(s[strlen(s) - 1] != '/');
    for (const char *p = s; *p; p++)
        FUZZ_CHECK((unsigned char)*p > ' ' && (unsigned char)*p < 0x7f);

    bool has_cert = c->client_cert_data || c->client_cert_file;
    bool has_key = c->client_key_data || c->client_key_file;
    FUZZ_CHECK(has_cert == has_key);
    FUZZ_CHECK(has_cert || c->token || c->token_file);
    FUZZ_CHECK(!(c->client_cert_data && c->client_cert_file));
    FUZZ_CHECK(!(c->client_key_data && c->client_key_file));
    FUZZ_CHECK(!(c->ca_data && c->ca_file));
    FUZZ_CHECK(!(c->insecure_skip_tls_verify && (c->ca_data || c->ca_file)));

    check_opt_nonempty(c->ca_data);
    check_opt_nonempty(c->client_cert_data);
    check_opt_nonempty(c->client_key_data);
    check_opt_nonempty(c->token);
    check_opt_nonempty(c->tls_server_name);
    check_opt_nonempty(c->namespace_);
    check_path(c->ca_file);
    check_path(c->token_file);
    check_path(c->client_cert_file);
    check_path(c->client_key_file);
}

static bool all_null(const struct ld_kube_config *c)
{
    return !c->server && !c->ca_file && !c->ca_data && !c->token && !c->token_file &&
           !c->client_cert_file && !c->client_key_file && !c->client_cert_data &&
           !c->client_key_data && !c->tls_server_name && !c->namespace_ &&
           !c->insecure_skip_tls_verify;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ld_kube_config c;
    struct ld_errinfo err;
    enum ld_err rc;

    ld_errinfo_clear(&err);
    ld_kube_config_init(&c);
    rc = ld_kube_config_load_text(&c, (const char *)data, size, BASE_DIR, &err);
    if (rc == LD_OK) {
        check_loaded(&c);
    } else {
        FUZZ_CHECK(all_null(&c));
        FUZZ_CHECK(err.code == rc && err.msg[0] != '\0');
        FUZZ_CHECK(rc == LD_EDECODE || rc == LD_ECONFIG || rc == LD_ENOMEM);
    }
    ld_kube_config_clear(&c);
    FUZZ_CHECK(all_null(&c));
    return 0;
}
