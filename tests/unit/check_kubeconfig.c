/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_kubeconfig: kubeconfig files (tests/data/kubeconfig) and in-cluster
 * service-account config.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kubeconfig.h"
#include "support/run_suite.h"

static char data_dir[PATH_MAX];

/* The tests run from the source root or from anywhere via the binary's
 * location (build/tests/X or build/san/tests/X). */
static void find_data_dir(void)
{
    const char *rel = "tests/data/kubeconfig";
    char exe[PATH_MAX];
    if (access("tests/data/kubeconfig/token.yaml", R_OK) == 0 && realpath(rel, data_dir))
        return;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ck_assert_int_gt(n, 0);
    exe[n] = '\0';
    for (int up = 0; up < 5; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            break;
        *slash = '\0';
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof(cand), "%s/%s", exe, rel);
        if (access(cand, R_OK) == 0 && realpath(cand, data_dir))
            return;
    }
    ck_abort_msg("tests/data/kubeconfig not found");
}

static enum ld_err load(const char *name, struct ld_kube_config *c, struct ld_errinfo *e)
{
    char path[PATH_MAX + 64];
    if (!data_dir[0])
        find_data_dir();
    snprintf(path, sizeof(path), "%s/%s", data_dir, name);
    ld_errinfo_clear(e);
    return ld_kube_config_load_file(c, path, e);
}

static char *data_path(const char *name)
{
    char *p = NULL;
    if (!data_dir[0])
        find_data_dir();
    ck_assert_int_ge(asprintf(&p, "%s/%s", data_dir, name), 0);
    return p;
}

START_TEST(token_and_namespace)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(load("token.yaml", &c, &e), LD_OK);
    ck_assert_str_eq(c.server, "https://10.1.2.3:6443");
    ck_assert_str_eq(c.token, "s3cr3t-token");
    ck_assert_ptr_null(c.token_file);
    ck_assert_str_eq(c.namespace_, "kube-system");
    ck_assert_str_eq(c.ca_data,
                     "-----BEGIN CERTIFICATE-----\nTESTCA\n-----END CERTIFICATE-----\n");
    ck_assert_ptr_null(c.ca_file);
    ck_assert(!c.insecure_skip_tls_verify);
    ld_kube_config_clear(&c);
    ck_assert_ptr_null(c.server);
}
END_TEST

START_TEST(token_file_and_relative_ca)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(load("tokenfile.yaml", &c, &e), LD_OK);
    char *ca = data_path("ca.crt"), *tok = data_path("token");
    ck_assert_str_eq(c.server, "https://api.example:443");
    ck_assert_str_eq(c.ca_file, ca);
    ck_assert_str_eq(c.token_file, tok);
    ck_assert_ptr_null(c.token);
    ck_assert_ptr_null(c.namespace_);
    ck_assert_int_eq(access(c.ca_file, R_OK), 0);
    free(ca);
    free(tok);
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(client_cert_data)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(load("certdata.yaml", &c, &e), LD_OK);
    ck_assert_str_eq(c.server, "https://127.0.0.1:39211");
    ck_assert_str_eq(
        c.client_cert_data,
        "-----BEGIN CERTIFICATE-----\nTESTCERT\n-----END CERTIFICATE-----\n");
    ck_assert_str_eq(c.client_key_data,
                     "-----BEGIN PRIVATE KEY-----\nTESTKEY\n-----END PRIVATE KEY-----\n");
    ck_assert_ptr_null(c.client_cert_file);
    ck_assert_ptr_null(c.token);
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(client_cert_files)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(load("certfiles.yaml", &c, &e), LD_OK);
    char *key = data_path("keys/client.key");
    ck_assert_str_eq(c.server, "http://127.0.0.1:8080");
    ck_assert_str_eq(c.client_cert_file, "/etc/leaderd/client.crt");
    ck_assert_str_eq(c.client_key_file, key);
    free(key);
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(insecure_flag)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(load("insecure.yaml", &c, &e), LD_OK);
    ck_assert(c.insecure_skip_tls_verify);
    ck_assert_str_eq(c.tls_server_name, "kubernetes.default.svc");
    ck_assert_str_eq(c.token, "abc");
    ck_assert_ptr_null(c.namespace_); /* "" means unset */
    ld_kube_config_clear(&c);
}
END_TEST

static const struct bad_case {
    const char *file;
    enum ld_err code;
    const char *substr;
} bad_cases[] = {
    {"bad-yaml.yaml", LD_EDECODE, "not valid YAML"},
    {"empty.yaml", LD_ECONFIG, "empty"},
    {"not-a-mapping.yaml", LD_EDECODE, "not a YAML mapping"},
    {"no-current-context.yaml", LD_ECONFIG, "no current-context"},
    {"missing-context.yaml", LD_ECONFIG, "current-context nope"},
    {"missing-cluster.yaml", LD_ECONFIG, "cluster x (context x) is not in clusters"},
    {"missing-user.yaml", LD_ECONFIG, "user ghost"},
    {"exec.yaml", LD_ECONFIG, "exec credential plugin"},
    {"auth-provider.yaml", LD_ECONFIG, "auth-provider"},
    {"basic-auth.yaml", LD_ECONFIG, "basic auth"},
    {"bad-base64.yaml", LD_EDECODE, "certificate-authority-data is not valid base64"},
    {"no-server.yaml", LD_ECONFIG, "cluster x has no server"},
    {"no-credentials.yaml", LD_ECONFIG, "no credentials for user nobody"},
    {"bad-scheme.yaml", LD_ECONFIG, "https://"},
    {"cert-no-key.yaml", LD_ECONFIG, "no client key"},
    {"insecure-with-ca.yaml", LD_ECONFIG, "mutually exclusive"},
    {"does-not-exist.yaml", LD_EIO, "does-not-exist.yaml"},
    {".", LD_EIO, "cannot read kubeconfig"},
};

START_TEST(bad_files)
{
    const struct bad_case *bc = &bad_cases[_i];
    struct ld_kube_config c;
    struct ld_errinfo e;
    enum ld_err rc = load(bc->file, &c, &e);
    ck_assert_msg(rc == bc->code, "%s: got %d (%s), want %d", bc->file, rc, e.msg,
                  bc->code);
    ck_assert_int_eq(e.code, bc->code);
    ck_assert_msg(strstr(e.msg, bc->substr), "%s: message '%s' lacks '%s'", bc->file,
                  e.msg, bc->substr);
    ck_assert_ptr_null(c.server); /* nothing half-filled */
    ck_assert_ptr_null(c.token);
    ld_kube_config_clear(&c);
}
END_TEST

static enum ld_err load_str(const char *text, struct ld_kube_config *c,
                            struct ld_errinfo *e)
{
    ld_errinfo_clear(e);
    return ld_kube_config_load_text(c, text, strlen(text), "/base", e);
}

static const char *with_ca_data(const char *b64)
{
    static char buf[1024];
    snprintf(buf, sizeof(buf),
             "current-context: x\n"
             "clusters: [{name: x, cluster: {server: 'https://a', "
             "certificate-authority-data: \"%s\"}}]\n"
             "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
             "users: [{name: x, user: {token: t}}]\n",
             b64);
    return buf;
}

START_TEST(base64_padding)
{
    static const struct {
        const char *in, *out;
    } good[] = {
        {"YQ==", "a"},
        {"YWI=", "ab"},
        {"YWJj", "abc"},
        {"YWJj\\nZGVm", "abcdef"}, /* line break inside, as Go tolerates */
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct ld_kube_config c;
        struct ld_errinfo e;
        ck_assert_msg(load_str(with_ca_data(good[i].in), &c, &e) == LD_OK, "%s: %s",
                      good[i].in, e.msg);
        ck_assert_str_eq(c.ca_data, good[i].out);
        ld_kube_config_clear(&c);
    }
    static const char *const bad[] = {"YQ=", "Y===", "YQ==YQ==", "@@@@", "YQ", "AA=="};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ld_kube_config c;
        struct ld_errinfo e;
        ck_assert_msg(load_str(with_ca_data(bad[i]), &c, &e) == LD_EDECODE, "%s accepted",
                      bad[i]);
        ck_assert_ptr_null(c.ca_data);
    }
}
END_TEST

START_TEST(text_relative_and_absolute_paths)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    const char *text = "current-context: x\n"
                       "clusters: [{name: x, cluster: {server: 'https://h:1//', "
                       "certificate-authority: certs/ca.pem}}]\n"
                       "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
                       "users: [{name: x, user: {tokenFile: /run/tok, token: static}}]\n";
    ck_assert_int_eq(load_str(text, &c, &e), LD_OK);
    ck_assert_str_eq(c.server, "https://h:1");
    ck_assert_str_eq(c.ca_file, "/base/certs/ca.pem");
    ck_assert_str_eq(c.token_file, "/run/tok");
    ck_assert_str_eq(c.token, "static");
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(text_wrong_types)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(load_str("current-context: x\nclusters: {x: 1}\n"
                              "contexts: [{name: x, context: {cluster: x, user: x}}]\n",
                              &c, &e),
                     LD_EDECODE);
    ck_assert_ptr_nonnull(strstr(e.msg, "clusters is not a list"));
    ck_assert_int_eq(load_str("current-context: [a]\n", &c, &e), LD_EDECODE);
    ck_assert_int_eq(load_str("current-context: x\n"
                              "clusters: [{name: x, cluster: {server: 'https://a', "
                              "insecure-skip-tls-verify: maybe}}]\n"
                              "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
                              "users: [{name: x, user: {token: t}}]\n",
                              &c, &e),
                     LD_EDECODE);
    ck_assert_ptr_nonnull(strstr(e.msg, "insecure-skip-tls-verify is not a boolean"));
    ck_assert_ptr_null(c.server);
}
END_TEST

/* ---- in-cluster ---- */

static char sa_dir[64];

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void remove_file(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
}

static void sa_setup(void)
{
    snprintf(sa_dir, sizeof(sa_dir), "/tmp/ld-kc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(sa_dir));
    write_file(sa_dir, "token", "eyJhbGciOi.token\n");
    write_file(sa_dir, "ca.crt", "-----BEGIN CERTIFICATE-----\n");
    write_file(sa_dir, "namespace", "  team-a\n");
}

static void sa_teardown(void)
{
    remove_file(sa_dir, "token");
    remove_file(sa_dir, "ca.crt");
    remove_file(sa_dir, "namespace");
    rmdir(sa_dir);
}

START_TEST(incluster_good)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ld_errinfo_clear(&e);
    ck_assert_int_eq(ld_kube_config_incluster(&c, "10.96.0.1", "443", sa_dir, &e), LD_OK);
    char want[128];
    ck_assert_str_eq(c.server, "https://10.96.0.1:443");
    snprintf(want, sizeof(want), "%s/ca.crt", sa_dir);
    ck_assert_str_eq(c.ca_file, want);
    snprintf(want, sizeof(want), "%s/token", sa_dir);
    ck_assert_str_eq(c.token_file, want);
    ck_assert_ptr_null(c.token); /* read by the client, so rotation is seen */
    ck_assert_str_eq(c.namespace_, "team-a");
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(incluster_ipv6_bracketed)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(ld_kube_config_incluster(&c, "fd00:10:96::1", "6443", sa_dir, &e),
                     LD_OK);
    ck_assert_str_eq(c.server, "https://[fd00:10:96::1]:6443");
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(incluster_missing_token)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    remove_file(sa_dir, "token");
    ck_assert_int_eq(ld_kube_config_incluster(&c, "10.96.0.1", "443", sa_dir, &e),
                     LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(e.msg, "token"));
    ck_assert_ptr_nonnull(strstr(e.msg, sa_dir));
    ck_assert_ptr_null(c.server);
}
END_TEST

START_TEST(incluster_no_namespace_file)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    remove_file(sa_dir, "namespace");
    ck_assert_int_eq(ld_kube_config_incluster(&c, "10.96.0.1", "443", sa_dir, &e), LD_OK);
    ck_assert_ptr_null(c.namespace_);
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(incluster_empty_env)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ck_assert_int_eq(ld_kube_config_incluster(&c, "", "443", sa_dir, &e), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
    ck_assert_int_eq(ld_kube_config_incluster(&c, NULL, "443", sa_dir, &e), LD_ECONFIG);
    ck_assert_int_eq(ld_kube_config_incluster(&c, "10.0.0.1", "", sa_dir, &e),
                     LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(e.msg, "KUBERNETES_SERVICE_PORT"));
    ck_assert_int_eq(ld_kube_config_incluster(&c, "10.0.0.1", "https", sa_dir, &e),
                     LD_ECONFIG);
    ck_assert_int_eq(ld_kube_config_incluster(&c, "10.0.0.1", "70000", sa_dir, &e),
                     LD_ECONFIG);
    ck_assert_int_eq(ld_kube_config_incluster(&c, "a/b", "443", sa_dir, &e), LD_ECONFIG);
    ck_assert_ptr_null(c.server);
}
END_TEST

static Suite *kubeconfig_suite(void)
{
    Suite *s = suite_create("kubeconfig");
    TCase *tc = tcase_create("file");
    tcase_add_test(tc, token_and_namespace);
    tcase_add_test(tc, token_file_and_relative_ca);
    tcase_add_test(tc, client_cert_data);
    tcase_add_test(tc, client_cert_files);
    tcase_add_test(tc, insecure_flag);
    tcase_add_loop_test(tc, bad_files, 0,
                        (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(tc, base64_padding);
    tcase_add_test(tc, text_relative_and_absolute_paths);
    tcase_add_test(tc, text_wrong_types);
    suite_add_tcase(s, tc);

    tc = tcase_create("incluster");
    tcase_add_checked_fixture(tc, sa_setup, sa_teardown);
    tcase_add_test(tc, incluster_good);
    tcase_add_test(tc, incluster_ipv6_bracketed);
    tcase_add_test(tc, incluster_missing_token);
    tcase_add_test(tc, incluster_no_namespace_file);
    tcase_add_test(tc, incluster_empty_env);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(kubeconfig_suite());
}
