/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/config (flags, variables, defaults, fallbacks,
 * validation) and cmd/leaderd/logsink (line formats). Every test starts
 * from an environment with no relevant variable set and a fresh temporary
 * directory holding kubeconfig files and a fake service-account mount.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../../cmd/leaderd/shell/config.h"
#include "../../cmd/leaderd/shell/logsink.h"
#include "timefmt.h"
#include "support/run_suite.h"

#define MAX_ARGS 24
#define ERRLEN LD_CONFIG_ERR_LEN

#define SHORT_PATH 128

static char tmpdir[64];
static char kc_ns[SHORT_PATH];    /* kubeconfig whose context has namespace ctx-ns */
static char kc_nons[SHORT_PATH];  /* kubeconfig whose context has no namespace */
static char sa_dir[SHORT_PATH];   /* token, ca.crt, namespace "sa-ns" */
static char sa_empty[SHORT_PATH]; /* an empty directory: no namespace file */

static const char kubeconfig_fmt[] = "apiVersion: v1\n"
                                     "kind: Config\n"
                                     "clusters:\n"
                                     "- name: c\n"
                                     "  cluster:\n"
                                     "    server: https://127.0.0.1:6443\n"
                                     "    insecure-skip-tls-verify: true\n"
                                     "users:\n"
                                     "- name: u\n"
                                     "  user:\n"
                                     "    token: s3cr3t-token\n"
                                     "contexts:\n"
                                     "- name: x\n"
                                     "  context:\n"
                                     "    cluster: c\n"
                                     "    user: u\n"
                                     "%s"
                                     "current-context: x\n";

static void write_file(const char *dir, const char *name, const char *text,
                       char *path_out)
{
    char path[2 * SHORT_PATH];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    if (path_out) {
        ck_assert_uint_lt(strlen(path), SHORT_PATH);
        memcpy(path_out, path, strlen(path) + 1);
    }
}

static void setup(void)
{
    char text[2048];
    const char *name;
    for (size_t i = 0; (name = ld_config_env_name(i)) != NULL; i++)
        unsetenv(name);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_config.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(text, sizeof(text), kubeconfig_fmt, "    namespace: ctx-ns\n");
    write_file(tmpdir, "kc-ns.yaml", text, kc_ns);
    snprintf(text, sizeof(text), kubeconfig_fmt, "");
    write_file(tmpdir, "kc-nons.yaml", text, kc_nons);
    snprintf(sa_dir, sizeof(sa_dir), "%s/sa", tmpdir);
    ck_assert_int_eq(mkdir(sa_dir, 0700), 0);
    write_file(sa_dir, "token", "sa-token\n", NULL);
    write_file(sa_dir, "ca.crt", "not really a PEM\n", NULL);
    write_file(sa_dir, "namespace", "  sa-ns \n", NULL);
    snprintf(sa_empty, sizeof(sa_empty), "%s/sa-empty", tmpdir);
    ck_assert_int_eq(mkdir(sa_empty, 0700), 0);
}

static void rm_in(const char *dir, const char *name)
{
    char path[2 * SHORT_PATH];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
}

static void teardown(void)
{
    rm_in(tmpdir, "kc-ns.yaml");
    rm_in(tmpdir, "kc-nons.yaml");
    rm_in(tmpdir, "bad-ns");
    rm_in(sa_dir, "token");
    rm_in(sa_dir, "ca.crt");
    rm_in(sa_dir, "namespace");
    rmdir(sa_dir);
    rmdir(sa_empty);
    rmdir(tmpdir);
}

static const char *placeholder(const char *a)
{
    if (strcmp(a, "@KC") == 0)
        return kc_ns;
    if (strcmp(a, "@KCNONS") == 0)
        return kc_nons;
    if (strcmp(a, "@SA") == 0)
        return sa_dir;
    if (strcmp(a, "@SAEMPTY") == 0)
        return sa_empty;
    return a;
}

/* Runs ld_config_parse (or the pure half) on "leaderd" + args (NULL-ended;
 * the words "@KC", "@KCNONS", "@SA", "@SAEMPTY", alone or after "--flag=",
 * stand for the temporary files). */
static enum ld_err run(struct ld_config *cfg, bool full, const char *const *args,
                       char *err)
{
    static char expanded[MAX_ARGS][2 * SHORT_PATH];
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "leaderd";
    for (; args && *args && argc <= MAX_ARGS; args++) {
        const char *a = *args;
        const char *eq = strstr(a, "=@");
        if (eq) {
            snprintf(expanded[argc - 1], sizeof(expanded[0]), "%.*s=%s", (int)(eq - a), a,
                     placeholder(eq + 1));
            a = expanded[argc - 1];
        } else {
            a = placeholder(a);
        }
        argv[argc++] = (char *)a;
    }
    argv[argc] = NULL;
    err[0] = '\0';
    return full ? ld_config_parse(cfg, argc, argv, err, ERRLEN)
                : ld_config_parse_args(cfg, argc, argv, err, ERRLEN);
}

/* Sets NAME=VALUE pairs from a NULL-ended list, with the same "@" names. */
static void set_env(const char *const *pairs)
{
    for (; pairs && pairs[0]; pairs += 2) {
        setenv(pairs[0], placeholder(pairs[1]), 1);
    }
}

/* ---- good configurations ---- */

struct good_case {
    const char *name;
    const char *args[MAX_ARGS];
    const char *env[16];
    struct {
        const char *lease_name;
        const char *namespace_; /* NULL: not checked */
        const char *identity;   /* NULL: not checked */
        int64_t lease_ms, renew_ms, retry_ms;
        const char *host;
        int port;
        bool release;
        enum ld_log_format format;
        enum ld_log_level level;
    } want;
};

#define PART_64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define NS_63 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"

static const struct good_case good[] = {
    {"defaults",
     {"--lease-name", "demo", "--kubeconfig", "@KC", "--service-account-dir", "@SAEMPTY"},
     {NULL},
     {"demo", "ctx-ns", NULL, 15000, 10000, 2000, "0.0.0.0", 4040, true,
      LD_LOG_FORMAT_TEXT, LD_LOG_INFO}},
    {"every flag, = form",
     {"--lease-name=demo.v1", "--namespace=prod", "--identity=pod-a_1",
      "--lease-duration=1m", "--renew-deadline=40s", "--retry-period=5s",
      "--listen=127.0.0.1:8080", "--kubeconfig=@KC", "--release-on-exit=false",
      "--log-format=json", "--log-level=debug", "--service-account-dir=/nonexistent"},
     {NULL},
     {"demo.v1", "prod", "pod-a_1", 60000, 40000, 5000, "127.0.0.1", 8080, false,
      LD_LOG_FORMAT_JSON, LD_LOG_DEBUG}},
    {"every variable",
     {NULL},
     {"LEADERD_LEASE_NAME", "from-env", "LEADERD_NAMESPACE", "env-ns", "LEADERD_IDENTITY",
      "env-id", "LEADERD_LEASE_DURATION", "20s", "LEADERD_RENEW_DEADLINE", "15s",
      "LEADERD_RETRY_PERIOD", "3s"},
     {"from-env", "env-ns", "env-id", 20000, 15000, 3000, "0.0.0.0", 4040, true,
      LD_LOG_FORMAT_TEXT, LD_LOG_INFO}},
    {"flag beats variable",
     {"--lease-name", "flag", "--namespace", "flag-ns", "--identity", "flag-id",
      "--lease-duration", "30s", "--listen", ":9000", "--release-on-exit", "no",
      "--log-level", "ERROR"},
     {"LEADERD_LEASE_NAME", "env", "LEADERD_NAMESPACE", "env-ns", "LEADERD_IDENTITY",
      "env-id", "LEADERD_LEASE_DURATION", "40s", "LEADERD_LISTEN", "1.2.3.4:1",
      "LEADERD_RELEASE_ON_EXIT", "yes"},
     {"flag", "flag-ns", "flag-id", 30000, 10000, 2000, "", 9000, false,
      LD_LOG_FORMAT_TEXT, LD_LOG_ERROR}},
    {"LEADERD_NAMESPACE beats POD_NAMESPACE, LEADERD_IDENTITY beats POD_NAME",
     {"--lease-name", "x"},
     {"LEADERD_NAMESPACE", "env-ns", "POD_NAMESPACE", "pod-ns", "LEADERD_IDENTITY",
      "env-id", "POD_NAME", "pod-name", "LEADERD_LOG_FORMAT", "JSON", "LEADERD_LOG_LEVEL",
      "warning"},
     {"x", "env-ns", "env-id", 15000, 10000, 2000, "0.0.0.0", 4040, true,
      LD_LOG_FORMAT_JSON, LD_LOG_WARN}},
    {"IPv6 listen, bare bool flag",
     {"--lease-name", "x", "--listen", "[::1]:4040", "--release-on-exit"},
     {"LEADERD_RELEASE_ON_EXIT", "false"},
     {"x", NULL, NULL, 15000, 10000, 2000, "::1", 4040, true, LD_LOG_FORMAT_TEXT,
      LD_LOG_INFO}},
    {"bare bool before another flag",
     {"--release-on-exit", "--lease-name", "x", "--listen", "localhost:1"},
     {NULL},
     {"x", NULL, NULL, 15000, 10000, 2000, "localhost", 1, true, LD_LOG_FORMAT_TEXT,
      LD_LOG_INFO}},
    {"bool spellings",
     {"--lease-name", "x", "--release-on-exit=0", "--listen", "[::]:65535"},
     {NULL},
     {"x", NULL, NULL, 15000, 10000, 2000, "::", 65535, false, LD_LOG_FORMAT_TEXT,
      LD_LOG_INFO}},
    {"bool from variable, upper case",
     {"--lease-name", "x"},
     {"LEADERD_RELEASE_ON_EXIT", "FALSE"},
     {"x", NULL, NULL, 15000, 10000, 2000, "0.0.0.0", 4040, false, LD_LOG_FORMAT_TEXT,
      LD_LOG_INFO}},
    {"renew-deadline just over 1.2 x retry-period",
     {"--lease-name", "x", "--renew-deadline", "2401ms", "--lease-duration", "3s"},
     {NULL},
     {"x", NULL, NULL, 3000, 2401, 2000, "0.0.0.0", 4040, true, LD_LOG_FORMAT_TEXT,
      LD_LOG_INFO}},
    {"compound durations",
     {"--lease-name", "x", "--lease-duration", "1m30s", "--renew-deadline", "1m",
      "--retry-period", "1500ms"},
     {NULL},
     {"x", NULL, NULL, 90000, 60000, 1500, "0.0.0.0", 4040, true, LD_LOG_FORMAT_TEXT,
      LD_LOG_INFO}},
    /* Lease names are DNS-1123 subdomains: only the total is capped (253),
     * not each part; a namespace is a label and may have 63. */
    {"lease name part of 64, namespace of 63",
     {"--lease-name", PART_64 ".v1", "--namespace", NS_63},
     {NULL},
     {PART_64 ".v1", NS_63, NULL, 15000, 10000, 2000, "0.0.0.0", 4040, true,
      LD_LOG_FORMAT_TEXT, LD_LOG_INFO}},
    {"-- ends the flags",
     {"--lease-name", "x", "--"},
     {NULL},
     {"x", NULL, NULL, 15000, 10000, 2000, "0.0.0.0", 4040, true, LD_LOG_FORMAT_TEXT,
      LD_LOG_INFO}},
};

START_TEST(good_configs)
{
    const struct good_case *c = &good[_i];
    struct ld_config cfg;
    char err[ERRLEN];
    set_env(c->env);
    /* Credentials come from $KUBECONFIG unless the case names its own. */
    setenv("KUBECONFIG", kc_ns, 0);
    enum ld_err rc = run(&cfg, true, c->args, err);
    ck_assert_msg(rc == LD_OK, "%s: rc %d: %s", c->name, rc, err);
    ck_assert_str_eq(cfg.lease_name, c->want.lease_name);
    if (c->want.namespace_)
        ck_assert_str_eq(cfg.namespace_, c->want.namespace_);
    ck_assert_ptr_nonnull(cfg.namespace_);
    if (c->want.identity)
        ck_assert_str_eq(cfg.identity, c->want.identity);
    ck_assert_ptr_nonnull(cfg.identity);
    ck_assert_int_eq(cfg.lease_duration_ms, c->want.lease_ms);
    ck_assert_int_eq(cfg.renew_deadline_ms, c->want.renew_ms);
    ck_assert_int_eq(cfg.retry_period_ms, c->want.retry_ms);
    ck_assert_str_eq(cfg.listen_host, c->want.host);
    ck_assert_int_eq(cfg.listen_port, c->want.port);
    ck_assert_int_eq(cfg.release_on_exit, c->want.release);
    ck_assert_int_eq(cfg.log_format, c->want.format);
    ck_assert_int_eq(cfg.log_level, c->want.level);
    ck_assert_ptr_nonnull(cfg.kube.server);
    ck_assert_str_eq(cfg.kube.server, "https://127.0.0.1:6443");
    ld_config_clear(&cfg);
    ld_config_clear(&cfg); /* twice is fine */
}
END_TEST

/* ---- invalid configurations: exit status 2, one line naming the problem ---- */

struct bad_case {
    const char *args[MAX_ARGS];
    const char *env[6];
    const char *want[3]; /* substrings of the message */
};

/* 254 characters: one over the limit. */
#define LONG_NAME                                                                        \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"   \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"   \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"   \
    "aaaaaaaaaaaaaa"

static const struct bad_case bad[] = {
    {{"--lease-name", "x", "--bogus"}, {NULL}, {"unknown flag", "--bogus"}},
    {{"--lease-name", "x", "--bogus=1"}, {NULL}, {"unknown flag", "\"--bogus\""}},
    {{"--lease-name", "x", "-v"}, {NULL}, {"unknown flag", "-v"}},
    {{"--lease-name"}, {NULL}, {"--lease-name", "missing value"}},
    {{"--lease-name", "x", "--identity", "--namespace", "y"},
     {NULL},
     {"--identity", "missing value"}},
    {{"--lease-name", "x", "extra"}, {NULL}, {"unexpected argument", "extra"}},
    {{"--lease-name", "x", "--", ""}, {NULL}, {"command", "empty"}},
    /* --child-grace: > 0 and < lease-duration - renew-deadline (5s here). */
    {{"--lease-name", "x", "--child-grace", "0s", "--", "app"},
     {NULL},
     {"--child-grace", "greater than 0"}},
    {{"--lease-name", "x", "--child-grace", "5s", "--", "app"},
     {NULL},
     {"--child-grace", "less than lease-duration - renew-deadline (5s)", "got 5s"}},
    {{"--lease-name", "x", "--child-grace", "-1s", "--", "app"},
     {NULL},
     {"--child-grace"}},
    {{"--lease-name", "x", "--child-grace", "soon", "--", "app"},
     {NULL},
     {"--child-grace", "invalid duration"}},
    {{"--lease-name", "x", "--", "app"},
     {"LEADERD_CHILD_GRACE", "9s"},
     {"--child-grace (from LEADERD_CHILD_GRACE)"}},
    /* Checked without a command too: the value is wrong either way. */
    {{"--lease-name", "x", "--child-grace", "0s"}, {NULL}, {"--child-grace"}},
    /* It must leave max(250ms, lease-duration / 10) before a takeover: 1.5s
     * here, so 4s of the 5s margin is too much, with or without a command. */
    {{"--lease-name", "x", "--child-grace", "4s", "--", "app"},
     {NULL},
     {"--child-grace leaves 1s", "at least 1.5s"}},
    {{"--lease-name", "x", "--child-grace", "4s"}, {NULL}, {"--child-grace leaves 1s"}},
    /* The default (half the margin) too, once there is a command. */
    {{"--lease-name", "x", "--lease-duration", "15s", "--renew-deadline", "14s",
      "--retry-period", "2s", "--", "app"},
     {NULL},
     {"--child-grace (default: half of 1s) leaves 500ms", "at least 1.5s"}},
    /* The floor is lease-duration / 10, 400ms at 4s: 4s - 3s - 700ms leaves
     * 300ms. */
    {{"--lease-name", "x", "--lease-duration", "4s", "--renew-deadline", "3s",
      "--retry-period", "1s", "--child-grace", "700ms", "--", "app"},
     {NULL},
     {"leaves 300ms", "at least 400ms"}},
    /* And never under 250ms: 2s - 1.5s - 300ms leaves 200ms. */
    {{"--lease-name", "x", "--lease-duration", "2s", "--renew-deadline", "1500ms",
      "--retry-period", "1s", "--child-grace", "300ms", "--", "app"},
     {NULL},
     {"leaves 200ms", "at least 250ms"}},
    /* --resign-cooldown: a duration >= 0. */
    {{"--lease-name", "x", "--resign-cooldown", "-1s"},
     {NULL},
     {"--resign-cooldown", "must not be negative", "-1s"}},
    {{"--lease-name", "x", "--resign-cooldown", "later"},
     {NULL},
     {"--resign-cooldown", "invalid duration"}},
    {{"--lease-name", "x"},
     {"LEADERD_RESIGN_COOLDOWN", "1y"},
     {"--resign-cooldown (from LEADERD_RESIGN_COOLDOWN)", "invalid duration"}},
    {{NULL}, {NULL}, {"--lease-name", "required"}},
    {{"--lease-name", ""}, {NULL}, {"--lease-name", "DNS-1123"}},
    {{"--lease-name", "Bad_Name"}, {NULL}, {"--lease-name", "Bad_Name"}},
    {{"--lease-name", "a..b"}, {NULL}, {"--lease-name"}},
    {{"--lease-name", "a.-b"}, {NULL}, {"--lease-name"}},
    {{"--lease-name", "-abc"}, {NULL}, {"--lease-name"}},
    {{"--lease-name", "abc-"}, {NULL}, {"--lease-name"}},
    {{"--lease-name", LONG_NAME}, {NULL}, {"--lease-name", "253"}},
    {{NULL}, {"LEADERD_LEASE_NAME", "UPPER"}, {"--lease-name", "LEADERD_LEASE_NAME"}},
    {{"--lease-name", "x", "--namespace", "Prod"}, {NULL}, {"--namespace", "Prod"}},
    {{"--lease-name", "x", "--namespace", "a.b"}, {NULL}, {"--namespace", "DNS-1123"}},
    {{"--lease-name", "x", "--namespace", NS_63 "n"}, {NULL}, {"--namespace", "63"}},
    {{"--lease-name", PART_64 "."}, {NULL}, {"--lease-name", "DNS-1123"}},
    {{"--lease-name", "x", "--namespace="}, {NULL}, {"--namespace", "empty"}},
    {{"--lease-name", "x"}, {"POD_NAMESPACE", "Bad"}, {"POD_NAMESPACE", "Bad"}},
    {{"--lease-name", "x", "--identity", ""}, {NULL}, {"--identity", "empty"}},
    {{"--lease-name", "x"},
     {"LEADERD_IDENTITY", ""},
     {"--identity", "LEADERD_IDENTITY", "empty"}},
    {{"--lease-name", "x", "--identity", "a\nb"}, {NULL}, {"--identity", "control"}},
    {{"--lease-name", "x", "--listen", "a\nb"}, {NULL}, {"--listen", "\"a?b\""}},
    {{"--lease-name", "x", "--identity", "caf\xe9"}, {NULL}, {"--identity", "UTF-8"}},
    {{"--lease-name", "x", "--lease-duration", "15x"},
     {NULL},
     {"--lease-duration", "invalid duration", "\"15x\""}},
    {{"--lease-name", "x", "--lease-duration", ""}, {NULL}, {"--lease-duration"}},
    {{"--lease-name", "x"},
     {"LEADERD_RENEW_DEADLINE", "soon"},
     {"--renew-deadline", "LEADERD_RENEW_DEADLINE", "\"soon\""}},
    {{"--lease-name", "x", "--retry-period", "2"}, {NULL}, {"--retry-period", "\"2\""}},
    {{"--lease-name", "x", "--lease-duration", "1500ms", "--renew-deadline", "1400ms",
      "--retry-period", "1s"},
     {NULL},
     {"--lease-duration", "whole number of seconds"}},
    {{"--lease-name", "x", "--lease-duration", "0s"},
     {NULL},
     {"--lease-duration", ">= 1s"}},
    {{"--lease-name", "x", "--lease-duration", "-15s"}, {NULL}, {"--lease-duration"}},
    {{"--lease-name", "x", "--lease-duration", "100000000h"},
     {NULL},
     {"--lease-duration", "too long"}},
    {{"--lease-name", "x", "--lease-duration", "10s"},
     {NULL},
     {"--lease-duration", "--renew-deadline", "greater"}},
    {{"--lease-name", "x", "--lease-duration", "10s", "--renew-deadline", "11s"},
     {NULL},
     {"--lease-duration", "--renew-deadline"}},
    {{"--lease-name", "x", "--renew-deadline", "2400ms"},
     {NULL},
     {"--renew-deadline", "1.2", "--retry-period"}},
    {{"--lease-name", "x", "--renew-deadline", "-1s"},
     {NULL},
     {"--renew-deadline", "positive"}},
    /* Found by fuzzing: used to overflow the 1.2 x check. */
    {{"--lease-name", "x", "--renew-deadline", "-221m30s2222222222222222s"},
     {NULL},
     {"--renew-deadline", "positive"}},

    {{"--lease-name", "x", "--retry-period", "999ms"},
     {NULL},
     {"--retry-period", "at least 1s"}},
    {{"--lease-name", "x", "--retry-period", "500ms", "--renew-deadline", "1s"},
     {NULL},
     {"--retry-period"}},
    {{"--lease-name", "x", "--listen", "4040"}, {NULL}, {"--listen", "\"4040\""}},
    {{"--lease-name", "x", "--listen", ":0"}, {NULL}, {"--listen", "port"}},
    {{"--lease-name", "x", "--listen", ":65536"}, {NULL}, {"--listen", "port"}},
    {{"--lease-name", "x", "--listen", ":http"}, {NULL}, {"--listen", "port"}},
    {{"--lease-name", "x", "--listen", ":"}, {NULL}, {"--listen", "port"}},
    {{"--lease-name", "x", "--listen", ":+80"}, {NULL}, {"--listen", "port"}},
    {{"--lease-name", "x", "--listen", "::1:4040"}, {NULL}, {"--listen", "brackets"}},
    {{"--lease-name", "x", "--listen", "[::1]4040"}, {NULL}, {"--listen"}},
    {{"--lease-name", "x", "--listen", "[::1:4040"}, {NULL}, {"--listen"}},
    {{"--lease-name", "x", "--listen", "[zz]:80"}, {NULL}, {"--listen", "IPv6"}},
    {{"--lease-name", "x", "--listen", "300.1.1.1:80"}, {NULL}, {"--listen", "IPv4"}},
    {{"--lease-name", "x", "--listen", "a b:80"}, {NULL}, {"--listen"}},
    {{"--lease-name", "x"}, {"LEADERD_LISTEN", ""}, {"--listen", "LEADERD_LISTEN"}},
    {{"--lease-name", "x", "--release-on-exit=maybe"},
     {NULL},
     {"--release-on-exit", "\"maybe\""}},
    {{"--lease-name", "x", "--release-on-exit", "maybe"},
     {NULL},
     {"--release-on-exit", "\"maybe\""}},
    {{"--lease-name", "x", "--release-on-exit="}, {NULL}, {"--release-on-exit"}},
    {{"--lease-name", "x"},
     {"LEADERD_RELEASE_ON_EXIT", "2"},
     {"--release-on-exit", "LEADERD_RELEASE_ON_EXIT"}},
    {{"--lease-name", "x", "--log-format", "xml"}, {NULL}, {"--log-format", "\"xml\""}},
    {{"--lease-name", "x", "--log-level", "loud"}, {NULL}, {"--log-level", "\"loud\""}},
    {{"--lease-name", "x", "--service-account-dir="}, {NULL}, {"--service-account-dir"}},
    {{"--lease-name", "x", "--help=yes"}, {NULL}, {"--help", "no value"}},
    {{"--lease-name", "x", "--version=1"}, {NULL}, {"--version", "no value"}},
    {{"--lease-name", "x", "--kubeconfig", "/nonexistent/kubeconfig"},
     {NULL},
     {"--kubeconfig", "/nonexistent/kubeconfig"}},
    {{"--lease-name", "x"},
     {"KUBECONFIG", "/nonexistent/kc2"},
     {"KUBECONFIG", "/nonexistent/kc2"}},
};

START_TEST(bad_configs)
{
    const struct bad_case *c = &bad[_i];
    struct ld_config cfg;
    char err[ERRLEN];
    set_env(c->env);
    setenv("KUBECONFIG", kc_ns, 0);
    enum ld_err rc = run(&cfg, true, c->args, err);
    ck_assert_msg(rc == LD_ECONFIG, "case %d: rc %d (%s)", _i, rc, err);
    ck_assert_msg(strncmp(err, "leaderd: ", 9) == 0, "case %d: %s", _i, err);
    ck_assert_msg(strchr(err, '\n') == NULL, "case %d: more than one line: %s", _i, err);
    for (int k = 0; k < 3 && c->want[k]; k++)
        ck_assert_msg(strstr(err, c->want[k]) != NULL, "case %d: \"%s\" not in: %s", _i,
                      c->want[k], err);
    ld_config_clear(&cfg);
}
END_TEST

/* ---- the command after "--" and --child-grace ---- */

START_TEST(command_after_double_dash)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBECONFIG", kc_ns, 0);
    /* Flags after "--" belong to the command. */
    const char *args[] = {"--lease-name", "x", "--", "/app/run",
                          "--lease-name", "y", "-v", NULL};
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.lease_name, "x");
    ck_assert_ptr_nonnull(cfg.command);
    ck_assert_str_eq(cfg.command[0], "/app/run");
    ck_assert_str_eq(cfg.command[1], "--lease-name");
    ck_assert_str_eq(cfg.command[2], "y");
    ck_assert_str_eq(cfg.command[3], "-v");
    ck_assert_ptr_null(cfg.command[4]);
    ck_assert_int_eq(cfg.child_grace_ms, 2500); /* half of 15s - 10s */
    ld_config_clear(&cfg);

    const char *none[] = {"--lease-name", "x", "--", NULL};
    ck_assert_msg(run(&cfg, true, none, err) == LD_OK, "%s", err);
    ck_assert_ptr_null(cfg.command);
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(pod_label_and_events)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBECONFIG", kc_ns, 0);
    const char *on[] = {"--lease-name", "x",        "--identity", "pod-a", "--pod-label",
                        "a.io/lead",    "--events", "yes",        NULL};
    ck_assert_msg(run(&cfg, true, on, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.pod_label, "a.io/lead");
    ck_assert(cfg.events);
    ld_config_clear(&cfg);

    const char *off[] = {"--lease-name", "x", "--identity", "pod-a", NULL};
    ck_assert_msg(run(&cfg, true, off, err) == LD_OK, "%s", err);
    ck_assert_ptr_null(cfg.pod_label);
    ck_assert(!cfg.events);
    ld_config_clear(&cfg);

    const char *bad_key[] = {"--lease-name", "x", "--pod-label", "a.io/-lead", NULL};
    ck_assert_int_eq(run(&cfg, true, bad_key, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "--pod-label"));
    ck_assert_ptr_null(strchr(err, '\n'));
    ld_config_clear(&cfg);

    const char *bad_bool[] = {"--lease-name", "x", "--events", "maybe", NULL};
    ck_assert_int_eq(run(&cfg, true, bad_bool, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "--events"));
    ld_config_clear(&cfg);

    /* The label goes on the Pod the identity names: it must be a Pod name. */
    const char *bad_identity[] = {"--lease-name", "x",      "--identity", "Pod A",
                                  "--pod-label",  "leader", NULL};
    ck_assert_int_eq(run(&cfg, true, bad_identity, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "--pod-label"));
    ld_config_clear(&cfg);

    setenv("LEADERD_POD_LABEL", "from-env", 1);
    ck_assert_msg(run(&cfg, true, off, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.pod_label, "from-env");
    ld_config_clear(&cfg);
    unsetenv("LEADERD_POD_LABEL");
}
END_TEST

/* ---- --shards ---- */

START_TEST(shards_values)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBECONFIG", kc_ns, 0);
    const char *numbered[] = {"--lease-name", "web", "--identity", "pod-a",
                              "--shards",     "12",  NULL};
    ck_assert_msg(run(&cfg, true, numbered, err) == LD_OK, "%s", err);
    ck_assert_uint_eq(cfg.n_shards, 12);
    ck_assert_ptr_null(cfg.shard_names);
    ld_config_clear(&cfg);

    const char *named[] = {"--lease-name", "web",      "--identity", "pod-a", "--shards",
                           "eu,us,asia",   "--events", "true",       NULL};
    ck_assert_msg(run(&cfg, true, named, err) == LD_OK, "%s", err);
    ck_assert_uint_eq(cfg.n_shards, 3);
    ck_assert_str_eq(cfg.shard_names[0], "eu");
    ck_assert_str_eq(cfg.shard_names[2], "asia");
    ck_assert_ptr_null(cfg.shard_names[3]);
    ck_assert(cfg.events); /* --events works in both modes */
    ld_config_clear(&cfg);

    const char *unset[] = {"--lease-name", "web", NULL};
    ck_assert_msg(run(&cfg, true, unset, err) == LD_OK, "%s", err);
    ck_assert_uint_eq(cfg.n_shards, 0);
    ld_config_clear(&cfg);

    setenv("LEADERD_SHARDS", "1024", 1);
    setenv("POD_UID", "0b6d-42", 1);
    ck_assert_msg(run(&cfg, true, unset, err) == LD_OK, "%s", err);
    ck_assert_uint_eq(cfg.n_shards, 1024);
    ck_assert_str_eq(cfg.pod_uid, "0b6d-42");
    ld_config_clear(&cfg);
    unsetenv("LEADERD_SHARDS");
    unsetenv("POD_UID");
}
END_TEST

/* docs/guides/sharding.md: the listed names are DNS-1123 labels, which may start with
 * a digit ("1a", "2b"); a list is names whatever its first character. */
START_TEST(shards_names_may_start_with_a_digit)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBECONFIG", kc_ns, 0);
    const char *named[] = {"--lease-name", "web",   "--identity", "pod-a",
                           "--shards",     "1a,2b", NULL};
    ck_assert_msg(run(&cfg, true, named, err) == LD_OK, "%s", err);
    ck_assert_uint_eq(cfg.n_shards, 2);
    ck_assert_ptr_nonnull(cfg.shard_names);
    ck_assert_str_eq(cfg.shard_names[0], "1a");
    ck_assert_str_eq(cfg.shard_names[1], "2b");
    ld_config_clear(&cfg);
}
END_TEST

/* Each bad value exits 2 with one line naming the problem. */
START_TEST(shards_bad_values)
{
    static const struct {
        const char *args[10];
        const char *want;
    } cases[] = {
        {{"--shards", "0"}, "invalid shard count \"0\""},
        {{"--shards", "1025"}, "invalid shard count \"1025\""},
        {{"--shards", "3X"}, "shard name 3X is not a DNS-1123 label"},
        {{"--shards", ""}, "empty shard name"},
        {{"--shards", "a,,b"}, "empty shard name"},
        {{"--shards", "a,a"}, "shard name a is given twice"},
        {{"--shards", "a,member-x"}, "shard name member-x starts with"},
        {{"--shards", "EU"}, "shard name EU is not a DNS-1123 label"},
        {{"--shards", "e.u"}, "shard name e.u is not"},
        {{"--shards", "2", "--pod-label", "lead"},
         "--pod-label cannot be used with --shards"},
        {{"--shards", "2", "--", "/bin/true"}, "cannot be used with --shards"},
        {{"--shards", "2", "--identity", "Pod_A"}, "member Lease name web-member-Pod_A"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *args[16] = {"--lease-name", "web"};
        size_t n = 2;
        for (size_t k = 0; cases[i].args[k]; k++)
            args[n++] = cases[i].args[k];
        args[n] = NULL;
        struct ld_config cfg;
        char err[ERRLEN];
        setenv("KUBECONFIG", kc_ns, 0);
        enum ld_err rc = run(&cfg, true, args, err);
        ck_assert_msg(rc == LD_ECONFIG, "case %zu: rc %d", i, rc);
        ck_assert_msg(strstr(err, cases[i].want) != NULL, "case %zu: \"%s\" not in: %s",
                      i, cases[i].want, err);
        ck_assert_msg(strncmp(err, "leaderd: ", 9) == 0 && !strchr(err, '\n'),
                      "case %zu: %s", i, err);
        ld_config_clear(&cfg);
    }
    /* A group name whose member and shard Lease names grow past 253
     * characters: the message is cut, the reason is not. */
    char name[260];
    memset(name, 'a', 250);
    name[250] = '\0';
    const char *too_long[] = {"--lease-name", name, "--identity", "p",
                              "--shards",     "12", NULL};
    struct ld_config cfg;
    char err[ERRLEN];
    ck_assert_int_eq(run(&cfg, true, too_long, err), LD_ECONFIG);
    ck_assert_msg(strstr(err, "member Lease name aaaa") && strstr(err, "...") &&
                      strstr(err, "is not a valid Lease name"),
                  "%s", err);
    ld_config_clear(&cfg);
    /* The member Lease fits (209 characters), "NAME-" + a 60-character
     * shard name does not (261). */
    name[200] = '\0';
    char shard[61];
    memset(shard, 's', 60);
    shard[60] = '\0';
    const char *shard_long[] = {"--lease-name", name,  "--identity", "p",
                                "--shards",     shard, NULL};
    ck_assert_int_eq(run(&cfg, true, shard_long, err), LD_ECONFIG);
    ck_assert_msg(strstr(err, "shard Lease name aaaa") &&
                      strstr(err, "is not a valid Lease name"),
                  "%s", err);
    ld_config_clear(&cfg);
}
END_TEST

/* --api-proxy: loopback only (the proxy writes with leaderd's
 * credentials), a port from 1 to 65535, the variable as for every flag. */
START_TEST(api_proxy_values)
{
    struct ld_config cfg;
    char err[ERRLEN];
    static const struct {
        const char *arg, *host;
        int port;
    } ok[] = {
        {"127.0.0.1:8001", "127.0.0.1", 8001},
        {"127.1.2.3:1", "127.1.2.3", 1},
        {"[::1]:65535", "::1", 65535},
        {"localhost:8001", "localhost", 8001},
    };
    static const char *const wrong[] = {
        "0.0.0.0:8001",
        ":8001",
        "10.0.0.1:8001",
        "[::]:8001",
        "example.com:8001",
        "127.0.0.1",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "127.0.0.1:x",
        "[::ffff:10.0.0.1]:80",
        "",
        "128.0.0.1:8001",
    };
    setenv("KUBECONFIG", kc_ns, 0);
    const char *off[] = {"--lease-name", "x", NULL};
    ck_assert_msg(run(&cfg, false, off, err) == LD_OK, "%s", err);
    ck_assert_ptr_null(cfg.api_proxy_host);
    ld_config_clear(&cfg);
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *args[] = {"--lease-name", "x", "--api-proxy", ok[i].arg, NULL};
        ck_assert_msg(run(&cfg, false, args, err) == LD_OK, "%s: %s", ok[i].arg, err);
        ck_assert_str_eq(cfg.api_proxy_host, ok[i].host);
        ck_assert_int_eq(cfg.api_proxy_port, ok[i].port);
        ld_config_clear(&cfg);
    }
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        const char *args[] = {"--lease-name", "x", "--api-proxy", wrong[i], NULL};
        ck_assert_msg(run(&cfg, false, args, err) == LD_ECONFIG, "%s accepted", wrong[i]);
        ck_assert_msg(strstr(err, "--api-proxy") != NULL, "%s: %s", wrong[i], err);
        ck_assert_ptr_null(strchr(err, '\n'));
        ld_config_clear(&cfg);
    }
    const char *wild[] = {"--lease-name", "x", "--api-proxy", "0.0.0.0:8001", NULL};
    ck_assert_int_eq(run(&cfg, false, wild, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "loopback"));
    ld_config_clear(&cfg);

    setenv("LEADERD_API_PROXY", "127.0.0.1:9001", 1);
    ck_assert_msg(run(&cfg, false, off, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.api_proxy_host, "127.0.0.1");
    ck_assert_int_eq(cfg.api_proxy_port, 9001);
    ld_config_clear(&cfg);
    /* The flag beats its variable, and a bad variable is named. */
    const char *flag[] = {"--lease-name", "x", "--api-proxy", "[::1]:9002", NULL};
    ck_assert_msg(run(&cfg, false, flag, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.api_proxy_host, "::1");
    ld_config_clear(&cfg);
    setenv("LEADERD_API_PROXY", "0.0.0.0:9001", 1);
    ck_assert_int_eq(run(&cfg, false, off, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "LEADERD_API_PROXY"));
    ld_config_clear(&cfg);
    unsetenv("LEADERD_API_PROXY");
}
END_TEST

START_TEST(child_grace_values)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBECONFIG", kc_ns, 0);
    const char *just_under[] = {"--lease-name",
                                "x",
                                "--lease-duration",
                                "4s",
                                "--renew-deadline",
                                "3s",
                                "--retry-period",
                                "1s",
                                "--child-grace",
                                "600ms",
                                "--",
                                "app",
                                NULL};
    ck_assert_msg(run(&cfg, true, just_under, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.child_grace_ms, 600); /* leaves 400ms, the least */
    ld_config_clear(&cfg);

    const char *at_margin[] = {"--lease-name",
                               "x",
                               "--lease-duration",
                               "4s",
                               "--renew-deadline",
                               "3s",
                               "--retry-period",
                               "1s",
                               "--child-grace",
                               "1s",
                               "--",
                               "app",
                               NULL};
    ck_assert_int_eq(run(&cfg, true, at_margin, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "--child-grace"));
    ld_config_clear(&cfg);

    /* The default follows the other durations; the flag beats the variable. */
    const char *derived[] = {"--lease-name",
                             "x",
                             "--lease-duration",
                             "4s",
                             "--renew-deadline",
                             "3s",
                             "--retry-period",
                             "1s",
                             "--",
                             "app",
                             NULL};
    ck_assert_msg(run(&cfg, true, derived, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.child_grace_ms, 500);
    ld_config_clear(&cfg);
    setenv("LEADERD_CHILD_GRACE", "3s", 1);
    const char *flag[] = {"--lease-name", "x", "--child-grace", "1s", "--", "app", NULL};
    ck_assert_msg(run(&cfg, true, flag, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.child_grace_ms, 1000);
    ld_config_clear(&cfg);
    const char *env[] = {"--lease-name", "x", "--", "app", NULL};
    ck_assert_msg(run(&cfg, true, env, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.child_grace_ms, 3000);
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(no_credentials)
{
    struct ld_config cfg;
    char err[ERRLEN];
    const char *args[] = {"--lease-name", "x", NULL};
    ck_assert_int_eq(run(&cfg, true, args, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "no credentials"));
    ck_assert_ptr_nonnull(strstr(err, "KUBERNETES_SERVICE_HOST"));
    ck_assert_ptr_nonnull(strstr(err, "--kubeconfig"));
    ld_config_clear(&cfg);

    /* In a cluster but the token is not mounted. */
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    const char *args2[] = {"--lease-name", "x", "--service-account-dir", "@SAEMPTY",
                           NULL};
    ck_assert_int_eq(run(&cfg, true, args2, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "no credentials"));
    ck_assert_ptr_nonnull(strstr(err, sa_empty));
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(in_cluster)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    const char *args[] = {"--lease-name", "x", NULL};
    setenv("LEADERD_SERVICE_ACCOUNT_DIR", sa_dir, 1);
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_ptr_null(cfg.kubeconfig_path);
    ck_assert_str_eq(cfg.kube.server, "https://10.0.0.1:443");
    ck_assert_str_eq(cfg.service_account_dir, sa_dir);
    ck_assert_str_eq(cfg.namespace_, "sa-ns");
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(kubeconfig_wins_over_in_cluster)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    const char *args[] = {
        "--lease-name", "x", "--kubeconfig", "@KC", "--service-account-dir",
        "@SAEMPTY",     NULL};
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.kubeconfig_path, kc_ns);
    ck_assert_str_eq(cfg.kube.server, "https://127.0.0.1:6443");
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(kubeconfig_sources)
{
    struct ld_config cfg;
    char err[ERRLEN];
    char list[3 * SHORT_PATH];
    const char *args[] = {"--lease-name", "x", NULL};

    /* $KUBECONFIG is a list: its first non-empty entry is used. */
    snprintf(list, sizeof(list), "::%s:/nonexistent/second", kc_nons);
    setenv("KUBECONFIG", list, 1);
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.kubeconfig_path, kc_nons);
    ck_assert_str_eq(cfg.kubeconfig_from, "KUBECONFIG");
    ld_config_clear(&cfg);

    /* LEADERD_KUBECONFIG beats $KUBECONFIG, and --kubeconfig beats both. */
    setenv("LEADERD_KUBECONFIG", kc_ns, 1);
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.kubeconfig_path, kc_ns);
    ld_config_clear(&cfg);
    const char *args2[] = {"--lease-name", "x", "--kubeconfig", "@KCNONS", NULL};
    ck_assert_msg(run(&cfg, true, args2, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.kubeconfig_path, kc_nons);
    ld_config_clear(&cfg);

    /* An empty LEADERD_KUBECONFIG means "not given". */
    setenv("LEADERD_KUBECONFIG", "", 1);
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.kubeconfig_path, kc_nons);
    ld_config_clear(&cfg);
}
END_TEST

/* ---- namespace and identity fallbacks ---- */

START_TEST(namespace_fallback_order)
{
    struct ld_config cfg;
    char err[ERRLEN];

    /* The service-account file beats the kubeconfig context. */
    const char *sa_args[] = {
        "--lease-name", "x", "--kubeconfig", "@KC", "--service-account-dir", "@SA", NULL};
    ck_assert_msg(run(&cfg, true, sa_args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.namespace_, "sa-ns");
    ld_config_clear(&cfg);

    /* $POD_NAMESPACE beats the service-account file. */
    setenv("POD_NAMESPACE", "pod-ns", 1);
    ck_assert_msg(run(&cfg, true, sa_args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.namespace_, "pod-ns");
    ck_assert_str_eq(cfg.namespace_from, "POD_NAMESPACE");
    ld_config_clear(&cfg);

    /* --namespace beats $POD_NAMESPACE. */
    const char *flag_args[] = {
        "--lease-name", "x",           "--kubeconfig", "@KC", "--service-account-dir",
        "@SA",          "--namespace", "flag-ns",      NULL};
    ck_assert_msg(run(&cfg, true, flag_args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.namespace_, "flag-ns");
    ld_config_clear(&cfg);
    unsetenv("POD_NAMESPACE");

    /* An empty $POD_NAMESPACE counts as unset. */
    setenv("POD_NAMESPACE", "", 1);
    /* No service-account file: the kubeconfig context's namespace. */
    const char *kc_args[] = {
        "--lease-name", "x", "--kubeconfig", "@KC", "--service-account-dir",
        "@SAEMPTY",     NULL};
    ck_assert_msg(run(&cfg, true, kc_args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.namespace_, "ctx-ns");
    ld_config_clear(&cfg);

    /* Nothing anywhere: "default". */
    const char *none_args[] = {
        "--lease-name", "x", "--kubeconfig", "@KCNONS", "--service-account-dir",
        "@SAEMPTY",     NULL};
    ck_assert_msg(run(&cfg, true, none_args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.namespace_, "default");
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(namespace_file_invalid)
{
    struct ld_config cfg;
    char err[ERRLEN];
    write_file(sa_dir, "namespace", "Not_Valid\n", NULL);
    const char *args[] = {
        "--lease-name", "x", "--kubeconfig", "@KC", "--service-account-dir", "@SA", NULL};
    ck_assert_int_eq(run(&cfg, true, args, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "namespace"));
    ck_assert_ptr_nonnull(strstr(err, "Not_Valid"));
    ld_config_clear(&cfg);

    /* A blank file is as good as none. */
    write_file(sa_dir, "namespace", " \n", NULL);
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.namespace_, "ctx-ns");
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(identity_fallback_order)
{
    struct ld_config cfg;
    char err[ERRLEN];
    char host[HOST_NAME_MAX + 1] = "";
    const char *args[] = {"--lease-name", "x", "--kubeconfig", "@KC", NULL};

    setenv("POD_NAME", "pod-0", 1);
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.identity, "pod-0");
    ck_assert_str_eq(cfg.identity_from, "POD_NAME");
    ld_config_clear(&cfg);

    /* Unset or empty POD_NAME: the host name. */
    setenv("POD_NAME", "", 1);
    ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.identity, host);
    ck_assert_str_eq(cfg.identity_from, "host name");
    ld_config_clear(&cfg);
    unsetenv("POD_NAME");
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ck_assert_str_eq(cfg.identity, host);
    ld_config_clear(&cfg);

    /* The pure half leaves it to the load step. */
    ck_assert_int_eq(run(&cfg, false, args, err), LD_OK);
    ck_assert_ptr_null(cfg.identity);
    ck_assert_ptr_null(cfg.namespace_);
    ck_assert_ptr_null(cfg.kube.server);
    ld_config_clear(&cfg);
}
END_TEST

/* ---- --help and --version ---- */

/* Runs the parser with stdout sent to a file; returns what it printed. */
static char *capture_stdout(const char *const *args, enum ld_err *rc, bool *printed_only)
{
    static char out[16384];
    struct ld_config cfg;
    char err[ERRLEN];
    char path[SHORT_PATH];
    snprintf(path, sizeof(path), "%s/stdout", tmpdir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(fd, 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    *rc = run(&cfg, true, args, err);
    *printed_only = cfg.printed_only;
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    ld_config_clear(&cfg);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    unlink(path);
    return out;
}

START_TEST(help_and_version)
{
    enum ld_err rc;
    bool printed_only;
    const char *version[] = {"--version", NULL};
    char *out = capture_stdout(version, &rc, &printed_only);
    ck_assert_int_eq(rc, LD_OK);
    ck_assert(printed_only);
    ck_assert_str_eq(out, "leaderd " LEADERD_VERSION "\n");

    /* --help wins even without the required flags or credentials. */
    static const char *const helps[][2] = {{"--help", NULL}, {"-h", NULL}};
    for (size_t h = 0; h < 2; h++) {
        out = capture_stdout(helps[h], &rc, &printed_only);
        ck_assert_int_eq(rc, LD_OK);
        ck_assert(printed_only);
        static const char *const want[] = {"--lease-name",
                                           "LEADERD_LEASE_NAME",
                                           "--namespace",
                                           "LEADERD_NAMESPACE",
                                           "--identity",
                                           "LEADERD_IDENTITY",
                                           "--lease-duration",
                                           "LEADERD_LEASE_DURATION",
                                           "15s",
                                           "--renew-deadline",
                                           "LEADERD_RENEW_DEADLINE",
                                           "10s",
                                           "--retry-period",
                                           "LEADERD_RETRY_PERIOD",
                                           "2s",
                                           "--listen",
                                           "LEADERD_LISTEN",
                                           "0.0.0.0:4040",
                                           "--kubeconfig",
                                           "LEADERD_KUBECONFIG",
                                           "--release-on-exit",
                                           "LEADERD_RELEASE_ON_EXIT",
                                           "--log-format",
                                           "LEADERD_LOG_FORMAT",
                                           "--log-level",
                                           "LEADERD_LOG_LEVEL",
                                           "--service-account-dir",
                                           "LEADERD_SERVICE_ACCOUNT_DIR",
                                           LD_SA_DIR,
                                           "--version",
                                           "--help",
                                           "POD_NAMESPACE",
                                           "POD_NAME"};
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
            ck_assert_msg(strstr(out, want[i]) != NULL, "--help lacks %s", want[i]);
    }

    /* After a valid flag too; an invalid one before it still fails. */
    const char *late[] = {"--lease-name", "x", "--help", NULL};
    capture_stdout(late, &rc, &printed_only);
    ck_assert_int_eq(rc, LD_OK);
    ck_assert(printed_only);
    const char *bad_first[] = {"--nope", "--help", NULL};
    out = capture_stdout(bad_first, &rc, &printed_only);
    ck_assert_int_eq(rc, LD_ECONFIG);
    ck_assert(!printed_only);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(resign_cooldown_values)
{
    struct ld_config cfg;
    char err[ERRLEN];
    setenv("KUBECONFIG", kc_ns, 0);
    /* The default follows lease-duration. */
    const char *dflt[] = {"--lease-name", "x", "--lease-duration", "20s", NULL};
    ck_assert_msg(run(&cfg, true, dflt, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.resign_cooldown_ms, 20000);
    ld_config_clear(&cfg);
    /* Zero is allowed: contend again at once. */
    const char *zero[] = {"--lease-name", "x", "--resign-cooldown", "0s", NULL};
    ck_assert_msg(run(&cfg, true, zero, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.resign_cooldown_ms, 0);
    ld_config_clear(&cfg);
    /* The variable, and the flag beating it. */
    setenv("LEADERD_RESIGN_COOLDOWN", "1m30s", 1);
    const char *plain[] = {"--lease-name", "x", NULL};
    ck_assert_msg(run(&cfg, true, plain, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.resign_cooldown_ms, 90000);
    ld_config_clear(&cfg);
    const char *flag[] = {"--lease-name", "x", "--resign-cooldown", "500ms", NULL};
    ck_assert_msg(run(&cfg, true, flag, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.resign_cooldown_ms, 500);
    char line[1024];
    ld_config_describe(&cfg, line, sizeof(line));
    ck_assert_ptr_nonnull(strstr(line, "resign-cooldown=500ms"));
    ld_config_clear(&cfg);
    unsetenv("LEADERD_RESIGN_COOLDOWN");
}
END_TEST

START_TEST(shard_drain_values)
{
    struct ld_config cfg;
    char err[ERRLEN];
    char line[1024];
    setenv("KUBECONFIG", kc_ns, 0);
    /* The default follows retry-period. */
    const char *dflt[] = {"--lease-name",   "x",  "--shards", "4",
                          "--retry-period", "3s", NULL};
    ck_assert_msg(run(&cfg, true, dflt, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.shard_drain_ms, 3000);
    ld_config_describe(&cfg, line, sizeof(line));
    ck_assert_ptr_nonnull(strstr(line, "shard-drain=3s"));
    ld_config_clear(&cfg);
    /* Zero: the release follows the end of the claim at once. */
    const char *zero[] = {"--lease-name",  "x",  "--shards", "4",
                          "--shard-drain", "0s", NULL};
    ck_assert_msg(run(&cfg, true, zero, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.shard_drain_ms, 0);
    ld_config_clear(&cfg);
    /* The variable, and the flag beating it; just under renew-deadline. */
    setenv("LEADERD_SHARD_DRAIN", "9s", 1);
    const char *plain[] = {"--lease-name", "x", "--shards", "4", NULL};
    ck_assert_msg(run(&cfg, true, plain, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.shard_drain_ms, 9000);
    ld_config_clear(&cfg);
    const char *flag[] = {"--lease-name",  "x",     "--shards", "4",
                          "--shard-drain", "500ms", NULL};
    ck_assert_msg(run(&cfg, true, flag, err) == LD_OK, "%s", err);
    ck_assert_int_eq(cfg.shard_drain_ms, 500);
    ld_config_clear(&cfg);
    unsetenv("LEADERD_SHARD_DRAIN");
    /* Not less than renew-deadline, or negative: exit 2 naming the flag. */
    const char *equal[] = {"--lease-name",  "x",   "--shards", "4",
                           "--shard-drain", "10s", NULL};
    ck_assert_int_eq(run(&cfg, true, equal, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "--shard-drain"));
    ck_assert_ptr_nonnull(strstr(err, "renew-deadline"));
    ld_config_clear(&cfg);
    const char *negative[] = {"--lease-name",  "x",   "--shards", "4",
                              "--shard-drain", "-1s", NULL};
    ck_assert_int_eq(run(&cfg, true, negative, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "--shard-drain"));
    ld_config_clear(&cfg);
}
END_TEST

START_TEST(describe_line)
{
    struct ld_config cfg;
    char err[ERRLEN];
    char line[1024];
    const char *args[] = {"--lease-name",
                          "demo",
                          "--namespace",
                          "prod",
                          "--identity",
                          "me",
                          "--kubeconfig",
                          "@KC",
                          "--listen",
                          "[::1]:4040",
                          "--lease-duration",
                          "1m30s",
                          NULL};
    ck_assert_msg(run(&cfg, true, args, err) == LD_OK, "%s", err);
    ld_config_describe(&cfg, line, sizeof(line));
    ck_assert_ptr_nonnull(strstr(line, "lease=prod/demo"));
    ck_assert_ptr_nonnull(strstr(line, "identity=me"));
    ck_assert_ptr_nonnull(strstr(line, "lease-duration=1m30s"));
    ck_assert_ptr_nonnull(strstr(line, "renew-deadline=10s"));
    ck_assert_ptr_nonnull(strstr(line, "listen=[::1]:4040"));
    ck_assert_ptr_nonnull(strstr(line, "server=https://127.0.0.1:6443"));
    ck_assert_ptr_null(strstr(line, "s3cr3t"));
    ck_assert_ptr_null(strchr(line, '\n'));
    /* A tiny buffer is cut, still terminated. */
    ld_config_describe(&cfg, line, 8);
    ck_assert_uint_eq(strlen(line), 7);
    ld_config_clear(&cfg);
}
END_TEST

/* ---- logsink line formats ---- */

static int64_t t_us(const char *text)
{
    int64_t us = 0;
    ck_assert_int_eq(ld_microtime_parse(text, &us), LD_OK);
    return us;
}

START_TEST(logsink_text)
{
    char line[LD_LOGSINK_MAX_LINE];
    int64_t t = t_us("2026-11-29T19:00:00.123456Z");
    size_t n = ld_logsink_format(line, sizeof(line), LD_LOG_FORMAT_TEXT, LD_LOG_INFO, t,
                                 "acquired lease", "ns/x", "me");
    ck_assert_str_eq(line, "2026-11-29T19:00:00.123Z info leaderd: acquired lease\n");
    ck_assert_uint_eq(n, strlen(line));
    ld_logsink_format(line, sizeof(line), LD_LOG_FORMAT_TEXT, LD_LOG_WARN, t,
                      "two\nlines\tand \x01 bell \xff", "ns/x", "me");
    ck_assert_str_eq(line,
                     "2026-11-29T19:00:00.123Z warn leaderd: two\\nlines\\tand \\x01 "
                     "bell \xef\xbf\xbd\n");
}
END_TEST

START_TEST(logsink_json)
{
    char line[LD_LOGSINK_MAX_LINE];
    json_error_t jerr;
    int64_t t = t_us("2026-11-29T19:00:00.5Z");
    const char *msg = "say \"hi\" \\ now\nbye \x02 caf\xc3\xa9 \xc0\xaf";
    size_t n = ld_logsink_format(line, sizeof(line), LD_LOG_FORMAT_JSON, LD_LOG_ERROR, t,
                                 msg, "ns/x", "pod-\"a\"");
    ck_assert_uint_eq(n, strlen(line));
    ck_assert_int_eq(line[n - 1], '\n');
    ck_assert_ptr_null(memchr(line, '\n', n - 1));
    json_t *o = json_loads(line, 0, &jerr);
    ck_assert_msg(o != NULL, "%s: %s", jerr.text, line);
    ck_assert_str_eq(json_string_value(json_object_get(o, "time")),
                     "2026-11-29T19:00:00.500Z");
    ck_assert_str_eq(json_string_value(json_object_get(o, "level")), "error");
    ck_assert_str_eq(json_string_value(json_object_get(o, "msg")),
                     "say \"hi\" \\ now\nbye \x02 caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_str_eq(json_string_value(json_object_get(o, "lease")), "ns/x");
    ck_assert_str_eq(json_string_value(json_object_get(o, "identity")), "pod-\"a\"");
    ck_assert_int_eq(json_object_size(o), 5);
    json_decref(o);
}
END_TEST

START_TEST(logsink_long_lines_are_cut)
{
    static char msg[3 * LD_LOGSINK_MAX_LINE];
    char line[LD_LOGSINK_MAX_LINE];
    json_error_t jerr;
    /* Quotes escape to two bytes, so the cut must not split an escape. */
    for (size_t i = 0; i < sizeof(msg) - 1; i++)
        msg[i] = i % 3 == 0 ? '"' : 'a';
    msg[sizeof(msg) - 1] = '\0';
    size_t n = ld_logsink_format(line, sizeof(line), LD_LOG_FORMAT_JSON, LD_LOG_INFO, 0,
                                 msg, "ns/x", "me");
    ck_assert_uint_le(n, LD_LOGSINK_MAX_LINE - 1);
    ck_assert_uint_gt(n, LD_LOGSINK_MAX_LINE - 16);
    json_t *o = json_loads(line, 0, &jerr);
    ck_assert_msg(o != NULL, "%s", jerr.text);
    const char *m = json_string_value(json_object_get(o, "msg"));
    ck_assert_str_eq(m + strlen(m) - 3, "...");
    ck_assert_str_eq(json_string_value(json_object_get(o, "identity")), "me");
    json_decref(o);

    n = ld_logsink_format(line, sizeof(line), LD_LOG_FORMAT_TEXT, LD_LOG_INFO, 0, msg,
                          "ns/x", "me");
    ck_assert_uint_le(n, LD_LOGSINK_MAX_LINE - 1);
    ck_assert_str_eq(line + n - 4, "...\n");

    /* A small buffer: cut, terminated, still one line. */
    n = ld_logsink_format(line, 40, LD_LOG_FORMAT_TEXT, LD_LOG_INFO, 0, msg, "", "");
    ck_assert_uint_le(n, 39);
    ck_assert_int_eq(line[n - 1], '\n');
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("parse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, good_configs, 0, (int)(sizeof(good) / sizeof(good[0])));
    tcase_add_loop_test(tc, bad_configs, 0, (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_test(tc, command_after_double_dash);
    tcase_add_test(tc, child_grace_values);
    tcase_add_test(tc, pod_label_and_events);
    tcase_add_test(tc, shards_values);
    tcase_add_test(tc, shards_bad_values);
    tcase_add_test(tc, shards_names_may_start_with_a_digit);
    tcase_add_test(tc, api_proxy_values);
    tcase_add_test(tc, no_credentials);
    tcase_add_test(tc, in_cluster);
    tcase_add_test(tc, kubeconfig_wins_over_in_cluster);
    tcase_add_test(tc, kubeconfig_sources);
    tcase_add_test(tc, namespace_fallback_order);
    tcase_add_test(tc, namespace_file_invalid);
    tcase_add_test(tc, identity_fallback_order);
    tcase_add_test(tc, help_and_version);
    tcase_add_test(tc, describe_line);
    tcase_add_test(tc, resign_cooldown_values);
    tcase_add_test(tc, shard_drain_values);
    suite_add_tcase(s, tc);

    TCase *tl = tcase_create("logsink");
    tcase_add_test(tl, logsink_text);
    tcase_add_test(tl, logsink_json);
    tcase_add_test(tl, logsink_long_lines_are_cut);
    suite_add_tcase(s, tl);
    return s;
}

int main(void)
{
    return ld_test_run(config_suite());
}
