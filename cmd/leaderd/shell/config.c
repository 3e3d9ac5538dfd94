/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config: flags + LEADERD_* variables -> struct ld_config. parse_args()
 * is pure (argv and getenv only); ld_config_load() does the file I/O.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dnsname.h"
#include "lease.h"
#include "pods.h"
#include "shardgroup.h"
#include "timefmt.h"
#include "utf8.h"

enum opt_id {
    OPT_LEASE_NAME,
    OPT_NAMESPACE,
    OPT_IDENTITY,
    OPT_LEASE_DURATION,
    OPT_RENEW_DEADLINE,
    OPT_RETRY_PERIOD,
    OPT_LISTEN,
    OPT_KUBECONFIG,
    OPT_RELEASE_ON_EXIT,
    OPT_LOG_FORMAT,
    OPT_LOG_LEVEL,
    OPT_SA_DIR,
    OPT_CHILD_GRACE,
    OPT_POD_LABEL,
    OPT_EVENTS,
    OPT_RESIGN_COOLDOWN,
    OPT_SHARDS,
    OPT_SHARD_DRAIN,
    OPT_API_PROXY,
    OPT_API_PROXY_IMPERSONATION,
    OPT_COUNT,
    /* Not settable from the environment. */
    OPT_VERSION = OPT_COUNT,
    OPT_HELP,
    OPT_ALL
};

static const struct ld_config_option opts[OPT_ALL] = {
    [OPT_LEASE_NAME] = {"--lease-name", "LEADERD_LEASE_NAME", "NAME", NULL,
                        "the Lease object (coordination.k8s.io/v1) to contend for,\n"
                        "        a DNS-1123 subdomain; required"},
    [OPT_NAMESPACE] = {"--namespace", "LEADERD_NAMESPACE", "NS", NULL,
                       "namespace of the Lease; default $POD_NAMESPACE, else the\n"
                       "        service-account namespace file, else the kubeconfig\n"
                       "        context's namespace, else \"default\""},
    [OPT_IDENTITY] = {"--identity", "LEADERD_IDENTITY", "ID", NULL,
                      "this replica's holderIdentity, unique to each process;\n"
                      "        default $POD_NAME, else the host name"},
    [OPT_LEASE_DURATION] = {"--lease-duration", "LEADERD_LEASE_DURATION", "D", "15s",
                            "how long standbys wait after the last observed change\n"
                            "        (the Lease's leaseDurationSeconds): whole seconds,\n"
                            "        more than renew-deadline"},
    [OPT_RENEW_DEADLINE] = {"--renew-deadline", "LEADERD_RENEW_DEADLINE", "D", "10s",
                            "a leader that has not renewed for this long stops\n"
                            "        claiming leadership; more than 1.2 x retry-period"},
    [OPT_RETRY_PERIOD] = {"--retry-period", "LEADERD_RETRY_PERIOD", "D", "2s",
                          "time between attempts to acquire or renew (at least 1s)"},
    [OPT_LISTEN] = {"--listen", "LEADERD_LISTEN", "ADDR:PORT", "0.0.0.0:4040",
                    "the HTTP server's address; \":4040\" means all interfaces,\n"
                    "        IPv6 as [::1]:4040"},
    [OPT_KUBECONFIG] = {"--kubeconfig", "LEADERD_KUBECONFIG", "PATH", NULL,
                        "kubeconfig file (current context); default $KUBECONFIG\n"
                        "        (its first entry), else the in-cluster config"},
    [OPT_RELEASE_ON_EXIT] = {"--release-on-exit", "LEADERD_RELEASE_ON_EXIT", "BOOL",
                             "true",
                             "on SIGTERM/SIGINT a leader gives the Lease up before\n"
                             "        exiting (true/false, 1/0, yes/no)"},
    [OPT_LOG_FORMAT] = {"--log-format", "LEADERD_LOG_FORMAT", "text|json", "text",
                        "format of the log lines on stderr: plain text, or one\n"
                        "        JSON object a line"},
    [OPT_LOG_LEVEL] = {"--log-level", "LEADERD_LOG_LEVEL", "LEVEL", "info",
                       "lowest level logged: debug, info, warn, error"},
    [OPT_SA_DIR] = {"--service-account-dir", "LEADERD_SERVICE_ACCOUNT_DIR", "DIR",
                    LD_SA_DIR,
                    "where the service account's token, ca.crt and\n"
                    "        namespace files are mounted"},
    [OPT_CHILD_GRACE] =
        {"--child-grace", "LEADERD_CHILD_GRACE", "D", NULL,
         "with a command after --: how long after leadership ended\n"
         "        its processes may live before SIGKILL; more than 0 and\n"
         "        less than lease-duration - renew-deadline, leaving at\n"
         "        least max(250ms, lease-duration / 10) of that; default\n"
         "        half of it"},
    [OPT_POD_LABEL] = {"--pod-label", "LEADERD_POD_LABEL", "KEY", NULL,
                       "label this replica's Pod (--identity) KEY: \"true\" while\n"
                       "        leading, \"false\" otherwise; a new leader first sets\n"
                       "        \"false\" on other Pods still labelled \"true\""},
    [OPT_EVENTS] = {"--events", "LEADERD_EVENTS", "BOOL", "false",
                    "record an events.k8s.io/v1 Event on the Lease at every start\n"
                    "        and stop of leading"},
    [OPT_RESIGN_COOLDOWN] = {"--resign-cooldown", "LEADERD_RESIGN_COOLDOWN", "D", NULL,
                             "after POST /resign (or a preferredHolder hand-over),\n"
                             "        how long this replica does not contend (0s: it\n"
                             "        contends again at once); default lease-duration"},
    [OPT_SHARDS] =
        {"--shards", "LEADERD_SHARDS", "N|a,b,c", NULL,
         "run a shard group named --lease-name: N numbered shards\n"
         "        (1 to 1024) or the listed names; every replica owns its\n"
         "        fair share (see /shards); not with --pod-label or a command"},
    [OPT_SHARD_DRAIN] =
        {"--shard-drain", "LEADERD_SHARD_DRAIN", "D", NULL,
         "with --shards: how long a shard given back stays unclaimed\n"
         "        before its release is written, so that an app polling at\n"
         "        least this often has stopped (POST /shards/ID/drained cuts\n"
         "        it short); 0s or more, less than renew-deadline; default\n"
         "        retry-period"},
    [OPT_API_PROXY] =
        {"--api-proxy", "LEADERD_API_PROXY", "ADDR:PORT", NULL,
         "serve a proxy to the Kubernetes API on this loopback\n"
         "        address (e.g. 127.0.0.1:8001) that lets the app's writes\n"
         "        through only while this replica leads; it answers only\n"
         "        requests addressed to that address, refuses browsers,\n"
         "        dot segments and writes to this replica's own Leases"},
    [OPT_API_PROXY_IMPERSONATION] =
        {"--api-proxy-impersonation", "LEADERD_API_PROXY_IMPERSONATION", "BOOL", "false",
         "let the API proxy forward Impersonate-* headers (the app\n"
         "        then acts as anyone leaderd's ServiceAccount may\n"
         "        impersonate); when false such requests get 403"},
    [OPT_VERSION] = {"--version", NULL, NULL, NULL, "print the version and exit"},
    [OPT_HELP] = {"--help", NULL, NULL, NULL, "print this help and exit"},
};

/* Longest lease duration: leaseDurationSeconds is an int32. Bounding all
 * three durations by it also keeps the arithmetic below far from overflow. */
#define MAX_DURATION_MS ((int64_t)INT32_MAX * 1000)
/* The service-account namespace file holds one short name. */
#define NS_FILE_MAX 256

/* What the command line and the environment said, before interpretation. */
struct raw {
    const char *val[OPT_COUNT];
    const char *from[OPT_COUNT]; /* flag or variable name, for messages */
    bool from_env[OPT_COUNT];
    char **command; /* argv after "--", NULL when there is none */
    int command_len;
    bool printed; /* --help or --version: nothing else to do */
};

static enum ld_err fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Messages quote what the user typed; control characters in it must not
 * break the one-line promise (or a terminal). */
static void one_line(char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
    }
}

static enum ld_err fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        one_line(err);
    }
    return LD_ECONFIG;
}

/* "--lease-duration" or "--lease-duration (from LEADERD_LEASE_DURATION)":
 * the flag is always named, the variable too when that is where the value
 * came from. */
static const char *who(const struct raw *r, enum opt_id id, char *buf, size_t len)
{
    if (r->from_env[id])
        snprintf(buf, len, "%s (from %s)", opts[id].flag, opts[id].env);
    else
        snprintf(buf, len, "%s", opts[id].flag);
    return buf;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void print_help(void)
{
    printf("Usage: leaderd --lease-name NAME [flags] [-- CMD [ARG...]]\n\n"
           "Kubernetes leader-election sidecar: contends for a coordination.k8s.io/v1 "
           "Lease\nand serves the result over HTTP (/leader, /healthz, /readyz, "
           "/metrics, /).\nWith a command after --, runs it only while this replica "
           "leads.\n\n"
           "Every flag can also be set through the environment variable shown; a flag\n"
           "beats its variable. Durations are Go-style: 15s, 500ms, 1m30s.\n\n"
           "Flags:\n");
    for (int i = 0; i < OPT_ALL; i++) {
        const struct ld_config_option *o = &opts[i];
        if (o->metavar)
            printf("  %s %s\n", o->flag, o->metavar);
        else
            printf("  %s\n", o->flag);
        printf("        %s\n", o->help);
        if (o->env && o->def)
            printf("        env %s, default %s\n", o->env, o->def);
        else if (o->env)
            printf("        env %s\n", o->env);
    }
    printf("\nExit status: 0 after a clean shutdown or --help/--version, 2 on an\n"
           "invalid configuration; with a command, the command's status (128 + signal\n"
           "number when a signal ended it).\n");
    fflush(stdout);
}

static int find_flag(const char *name, size_t len)
{
    for (int i = 0; i < OPT_ALL; i++) {
        if (strlen(opts[i].flag) == len && strncmp(opts[i].flag, name, len) == 0)
            return i;
    }
    return -1;
}

/* Fills r from argv, then from the environment for whatever argv left
 * unset. Returns LD_OK (r->printed after --help or --version) or
 * LD_ECONFIG with the line in err. */
static enum ld_err collect(struct raw *r, int argc, char **argv, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc) {
                r->command = argv + i + 1;
                r->command_len = argc - i - 1;
            }
            break;
        }
        if (strcmp(a, "-h") == 0) {
            print_help();
            r->printed = true;
            return LD_OK;
        }
        if (a[0] != '-' || a[1] != '-') {
            if (a[0] == '-')
                return fail(err, errlen, "leaderd: unknown flag \"%s\" (see --help)", a);
            return fail(err, errlen,
                        "leaderd: unexpected argument \"%s\" (a command to run goes "
                        "after --)",
                        a);
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        int id = find_flag(a, nlen);
        if (id < 0)
            return fail(err, errlen, "leaderd: unknown flag \"%.*s\" (see --help)",
                        (int)nlen, a);
        if (id == OPT_HELP || id == OPT_VERSION) {
            if (eq)
                return fail(err, errlen, "leaderd: %s takes no value", opts[id].flag);
            if (id == OPT_HELP)
                print_help();
            else {
                printf("leaderd %s\n", LEADERD_VERSION);
                fflush(stdout);
            }
            r->printed = true;
            return LD_OK;
        }
        const char *val;
        if (eq) {
            val = eq + 1;
        } else if (id == OPT_RELEASE_ON_EXIT) {
            /* A bare boolean flag means true; a following word that is not a
             * flag is its value (and is checked as one). */
            if (i + 1 < argc && argv[i + 1][0] != '-')
                val = argv[++i];
            else
                val = "true";
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            val = argv[++i];
        } else {
            return fail(err, errlen, "leaderd: %s: missing value (%s %s)", opts[id].flag,
                        opts[id].flag, opts[id].metavar);
        }
        r->val[id] = val;
        r->from[id] = opts[id].flag;
        r->from_env[id] = false;
    }
    for (int id = 0; id < OPT_COUNT; id++) {
        const char *v = r->val[id] ? NULL : getenv(opts[id].env);
        if (v) {
            r->val[id] = v;
            r->from[id] = opts[id].env;
            r->from_env[id] = true;
        }
    }
    return LD_OK;
}

/* Namespaces are DNS-1123 labels in Kubernetes (no dots, <= 63). */
static enum ld_err check_namespace(const char *ns, const char *from, char *err,
                                   size_t errlen)
{
    if (*ns == '\0')
        return fail(err, errlen, "leaderd: %s: namespace must not be empty", from);
    if (!ld_dns1123_label(ns))
        return fail(err, errlen,
                    "leaderd: %s: invalid namespace \"%s\": must be a DNS-1123 label "
                    "(lower-case letters, digits and '-', starting and ending with a "
                    "letter or digit, at most 63 characters)",
                    from, ns);
    return LD_OK;
}

/* The identity goes into holderIdentity as JSON: the API server would
 * replace invalid UTF-8, and we would no longer recognise our own lease. */
static bool valid_identity_bytes(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
        size_t len = ld_utf8_seq(s + i, n - i);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

static enum ld_err check_identity(const char *id, const char *from, char *err,
                                  size_t errlen)
{
    if (*id == '\0')
        return fail(err, errlen, "leaderd: %s: identity must not be empty", from);
    if (strlen(id) > LD_LEASE_MAX_HOLDER)
        return fail(err, errlen, "leaderd: %s: identity is longer than %d bytes", from,
                    LD_LEASE_MAX_HOLDER);
    if (!valid_identity_bytes(id))
        return fail(err, errlen,
                    "leaderd: %s: identity must be UTF-8 without control characters",
                    from);
    return LD_OK;
}

static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "1", "yes"};
    static const char *const no[] = {"false", "0", "no"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static int parse_port(const char *s, int *port)
{
    if (*s == '\0' || strlen(s) > 5)
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
    }
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 1 || v > 65535)
        return -1;
    *port = (int)v;
    return 0;
}

static bool hostname_chars(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > LD_DNS1123_SUBDOMAIN_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* ADDR:PORT, ":PORT" (all interfaces), "[IPv6]:PORT". On success *host is
 * new (free()) and *port set; on failure why says what is wrong. */
static int parse_listen(const char *s, char **host, int *port, const char **why)
{
    const char *colon;
    char *h = NULL;
    int rc = -1;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':') {
            *why = "expected [IPv6]:PORT";
            goto out;
        }
        h = strndup(s + 1, (size_t)(close - s - 1));
        if (!h) {
            *why = "out of memory";
            goto out;
        }
        struct in6_addr a6;
        if (inet_pton(AF_INET6, h, &a6) != 1) {
            *why = "not an IPv6 address inside the brackets";
            goto out;
        }
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) {
            *why = "expected ADDR:PORT, e.g. 0.0.0.0:4040 or :4040";
            goto out;
        }
        if (memchr(s, ':', (size_t)(colon - s))) {
            *why = "IPv6 addresses go in brackets, e.g. [::1]:4040";
            goto out;
        }
        h = strndup(s, (size_t)(colon - s));
        if (!h) {
            *why = "out of memory";
            goto out;
        }
        if (*h && strspn(h, "0123456789.") == strlen(h)) {
            struct in_addr a4;
            if (inet_pton(AF_INET, h, &a4) != 1) {
                *why = "not an IPv4 address";
                goto out;
            }
        } else if (*h && !hostname_chars(h)) {
            *why = "not an address or host name";
            goto out;
        }
    }
    if (parse_port(colon + 1, port) != 0) {
        *why = "port must be a number from 1 to 65535";
        goto out;
    }
    *host = h;
    h = NULL;
    rc = 0;
out:
    free(h);
    return rc;
}

static enum ld_err parse_duration(const struct raw *r, enum opt_id id, int64_t *ms,
                                  char *err, size_t errlen)
{
    char name[128];
    const char *text = r->val[id] ? r->val[id] : opts[id].def;
    if (ld_duration_parse(text, ms) != LD_OK)
        return fail(err, errlen,
                    "leaderd: %s: invalid duration \"%s\" (use e.g. 15s, 500ms, 1m30s)",
                    who(r, id, name, sizeof(name)), text);
    if (*ms > MAX_DURATION_MS)
        return fail(err, errlen, "leaderd: %s: duration \"%s\" is too long",
                    who(r, id, name, sizeof(name)), text);
    return LD_OK;
}

static enum ld_err set_str(char **dst, const char *src, char *err, size_t errlen)
{
    free(*dst);
    *dst = strdup(src);
    if (!*dst)
        return fail(err, errlen, "leaderd: out of memory");
    return LD_OK;
}

/* First non-empty entry of a colon-separated $KUBECONFIG. New string or
 * NULL (none, or out of memory: *oom set). */
static char *first_kubeconfig(const char *list, bool *oom)
{
    const char *p = list;
    *oom = false;
    while (*p) {
        size_t n = strcspn(p, ":");
        if (n > 0) {
            char *s = strndup(p, n);
            *oom = s == NULL;
            return s;
        }
        p += 1;
    }
    return NULL;
}

static enum ld_err set_command(struct ld_config *cfg, const struct raw *r, char *err,
                               size_t errlen)
{
    if (!r->command)
        return LD_OK;
    if (r->command[0][0] == '\0')
        return fail(err, errlen, "leaderd: the command after -- must not be empty");
    cfg->command = calloc((size_t)r->command_len + 1, sizeof(*cfg->command));
    if (!cfg->command)
        return fail(err, errlen, "leaderd: out of memory");
    for (int i = 0; i < r->command_len; i++) {
        cfg->command[i] = strdup(r->command[i]);
        if (!cfg->command[i])
            return fail(err, errlen, "leaderd: out of memory");
    }
    return LD_OK;
}

/* "N" (digits only) or "a,b,c" (anything else, "3x" too). The names themselves (DNS-1123
 * labels, distinct, not "member-...") and the Lease names they make are checked by
 * check_shard_group once the identity is known. */
static enum ld_err set_shards(struct ld_config *cfg, const struct raw *r, char *err,
                              size_t errlen)
{
    char name[128];
    const char *v = r->val[OPT_SHARDS];
    if (!v)
        return LD_OK;
    who(r, OPT_SHARDS, name, sizeof(name));
    if (*v && strspn(v, "0123456789") == strlen(v)) { /* names may start with a digit */
        char *end = NULL;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        if (errno != 0 || *end != '\0' || n < 1 || n > LD_SHARDGROUP_MAX_SHARDS)
            return fail(err, errlen,
                        "leaderd: %s: invalid shard count \"%s\" (a number of shards "
                        "from 1 to %d, or a comma-separated list of shard names)",
                        name, v, LD_SHARDGROUP_MAX_SHARDS);
        cfg->n_shards = (uint32_t)n;
        return LD_OK;
    }
    size_t count = 1;
    for (const char *p = v; *p; p++)
        count += *p == ',';
    if (count > LD_SHARDGROUP_MAX_SHARDS)
        return fail(err, errlen, "leaderd: %s: %zu shard names, at most %d", name, count,
                    LD_SHARDGROUP_MAX_SHARDS);
    cfg->shard_names = calloc(count + 1, sizeof(*cfg->shard_names));
    if (!cfg->shard_names)
        return fail(err, errlen, "leaderd: out of memory");
    const char *p = v;
    for (size_t i = 0; i < count; i++) {
        size_t len = strcspn(p, ",");
        if (len == 0)
            return fail(err, errlen, "leaderd: %s: empty shard name in \"%s\"", name, v);
        cfg->shard_names[i] = strndup(p, len);
        if (!cfg->shard_names[i])
            return fail(err, errlen, "leaderd: out of memory");
        p += len + (p[len] == ',');
    }
    cfg->n_shards = (uint32_t)count;
    return LD_OK;
}

/* The modes that consume one Lease's leadership have no meaning for a
 * group of them. */
static enum ld_err check_shard_modes(const struct ld_config *cfg, const struct raw *r,
                                     char *err, size_t errlen)
{
    char name[128];
    if (cfg->n_shards == 0)
        return LD_OK;
    if (cfg->pod_label)
        return fail(err, errlen,
                    "leaderd: %s cannot be used with --shards (a Pod label says who "
                    "leads one Lease; ask /shards instead)",
                    who(r, OPT_POD_LABEL, name, sizeof(name)));
    if (cfg->command)
        return fail(err, errlen,
                    "leaderd: a command after -- cannot be used with --shards (it would "
                    "run for one Lease; ask /shards instead)");
    return LD_OK;
}

static void config_init(struct ld_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    ld_kube_config_init(&cfg->kube);
    cfg->release_on_exit = true;
    cfg->log_format = LD_LOG_FORMAT_TEXT;
    cfg->log_level = LD_LOG_INFO;
}

/* The least time left between the command's latest SIGKILL and the
 * earliest takeover by another replica: a starved supervisor, a slow kill
 * or a clock read late must still end the command first. */
static int64_t child_margin_floor_ms(const struct ld_config *cfg)
{
    int64_t tenth = cfg->lease_duration_ms / 10;
    return tenth > 250 ? tenth : 250;
}

/* The command must be gone before another replica may acquire: that is
 * lease-duration after the leader's last write was observed, and the
 * command lives until renew-deadline + child-grace after that write began;
 * what is left must be at least child_margin_floor_ms. An explicit value
 * is checked with or without a command, so a bad value never waits for the
 * day a command is added; the default only matters with a command. */
static enum ld_err validate_child_grace(struct ld_config *cfg, const struct raw *r,
                                        char *err, size_t errlen)
{
    char a[128], da[32], db[32], dc[32];
    int64_t margin = cfg->lease_duration_ms - cfg->renew_deadline_ms;
    bool given = r->val[OPT_CHILD_GRACE] != NULL;
    if (!given) {
        cfg->child_grace_ms = margin / 2;
    } else {
        if (parse_duration(r, OPT_CHILD_GRACE, &cfg->child_grace_ms, err, errlen))
            return LD_ECONFIG;
        if (cfg->child_grace_ms <= 0 || cfg->child_grace_ms >= margin)
            return fail(
                err, errlen,
                "leaderd: %s: must be greater than 0 and less than lease-duration "
                "- renew-deadline (%s), got %s",
                who(r, OPT_CHILD_GRACE, a, sizeof(a)),
                ld_duration_format(margin, db, sizeof(db)),
                ld_duration_format(cfg->child_grace_ms, da, sizeof(da)));
    }
    int64_t left = margin - cfg->child_grace_ms, floor_ms = child_margin_floor_ms(cfg);
    if ((given || r->command) && left < floor_ms) {
        if (given)
            who(r, OPT_CHILD_GRACE, a, sizeof(a));
        else
            snprintf(a, sizeof(a), "--child-grace (default: half of %s)",
                     ld_duration_format(margin, dc, sizeof(dc)));
        return fail(
            err, errlen,
            "leaderd: %s leaves %s between the command's SIGKILL and the earliest "
            "takeover (lease-duration - renew-deadline - child-grace); at least %s "
            "is needed (the larger of 250ms and lease-duration / 10)",
            a, ld_duration_format(left, da, sizeof(da)),
            ld_duration_format(floor_ms, db, sizeof(db)));
    }
    return LD_OK;
}

/* Zero is allowed: the release follows the end of the claim at once. Less
 * than the renew deadline, so that a graceful exit's releases come before
 * anyone may evict the member Lease. */
static enum ld_err validate_shard_drain(struct ld_config *cfg, const struct raw *r,
                                        char *err, size_t errlen)
{
    char a[128], da[32], db[32];
    if (!r->val[OPT_SHARD_DRAIN]) {
        cfg->shard_drain_ms = cfg->retry_period_ms;
        return LD_OK;
    }
    if (parse_duration(r, OPT_SHARD_DRAIN, &cfg->shard_drain_ms, err, errlen))
        return LD_ECONFIG;
    if (cfg->shard_drain_ms < 0 || cfg->shard_drain_ms >= cfg->renew_deadline_ms)
        return fail(err, errlen,
                    "leaderd: %s: must be 0s or more and less than renew-deadline (%s), "
                    "got %s",
                    who(r, OPT_SHARD_DRAIN, a, sizeof(a)),
                    ld_duration_format(cfg->renew_deadline_ms, db, sizeof(db)),
                    ld_duration_format(cfg->shard_drain_ms, da, sizeof(da)));
    return LD_OK;
}

/* Zero is allowed: step down and contend again at once (a standby that
 * is quicker still wins the released Lease first). */
static enum ld_err validate_resign_cooldown(struct ld_config *cfg, const struct raw *r,
                                            char *err, size_t errlen)
{
    char a[128], da[32];
    if (!r->val[OPT_RESIGN_COOLDOWN]) {
        cfg->resign_cooldown_ms = cfg->lease_duration_ms;
        return LD_OK;
    }
    if (parse_duration(r, OPT_RESIGN_COOLDOWN, &cfg->resign_cooldown_ms, err, errlen))
        return LD_ECONFIG;
    if (cfg->resign_cooldown_ms < 0)
        return fail(err, errlen, "leaderd: %s: must not be negative, got %s",
                    who(r, OPT_RESIGN_COOLDOWN, a, sizeof(a)),
                    ld_duration_format(cfg->resign_cooldown_ms, da, sizeof(da)));
    return LD_OK;
}

static enum ld_err validate_durations(struct ld_config *cfg, const struct raw *r,
                                      char *err, size_t errlen)
{
    char a[128], b[128];
    char da[32], db[32];
    if (parse_duration(r, OPT_LEASE_DURATION, &cfg->lease_duration_ms, err, errlen) ||
        parse_duration(r, OPT_RENEW_DEADLINE, &cfg->renew_deadline_ms, err, errlen) ||
        parse_duration(r, OPT_RETRY_PERIOD, &cfg->retry_period_ms, err, errlen))
        return LD_ECONFIG;
    if (cfg->lease_duration_ms < 1000 || cfg->lease_duration_ms % 1000 != 0)
        return fail(err, errlen,
                    "leaderd: %s: must be a whole number of seconds >= 1s, got %s "
                    "(leaseDurationSeconds is an integer)",
                    who(r, OPT_LEASE_DURATION, a, sizeof(a)),
                    ld_duration_format(cfg->lease_duration_ms, da, sizeof(da)));
    if (cfg->retry_period_ms < 1000)
        return fail(err, errlen,
                    "leaderd: %s: must be at least 1s, got %s (peers compare renewTime "
                    "to the second)",
                    who(r, OPT_RETRY_PERIOD, a, sizeof(a)),
                    ld_duration_format(cfg->retry_period_ms, da, sizeof(da)));
    /* Durations are bounded above by MAX_DURATION_MS but may be negative;
     * a negative deadline would also overflow the 1.2 x check below. */
    if (cfg->renew_deadline_ms <= 0)
        return fail(err, errlen, "leaderd: %s: must be positive, got %s",
                    who(r, OPT_RENEW_DEADLINE, a, sizeof(a)),
                    ld_duration_format(cfg->renew_deadline_ms, da, sizeof(da)));
    if (cfg->lease_duration_ms <= cfg->renew_deadline_ms)
        return fail(err, errlen, "leaderd: %s (%s) must be greater than %s (%s)",
                    who(r, OPT_LEASE_DURATION, a, sizeof(a)),
                    ld_duration_format(cfg->lease_duration_ms, da, sizeof(da)),
                    who(r, OPT_RENEW_DEADLINE, b, sizeof(b)),
                    ld_duration_format(cfg->renew_deadline_ms, db, sizeof(db)));
    /* renew > 1.2 * retry, as client-go demands (JitterFactor). */
    if (cfg->renew_deadline_ms * 10 <= cfg->retry_period_ms * 12)
        return fail(err, errlen, "leaderd: %s (%s) must be greater than 1.2 x %s (%s)",
                    who(r, OPT_RENEW_DEADLINE, a, sizeof(a)),
                    ld_duration_format(cfg->renew_deadline_ms, da, sizeof(da)),
                    who(r, OPT_RETRY_PERIOD, b, sizeof(b)),
                    ld_duration_format(cfg->retry_period_ms, db, sizeof(db)));
    if (validate_resign_cooldown(cfg, r, err, errlen) ||
        validate_shard_drain(cfg, r, err, errlen))
        return LD_ECONFIG;
    return validate_child_grace(cfg, r, err, errlen);
}

/* --api-proxy: the proxy writes with leaderd's credentials, so only this
 * host may reach it: a loopback address, never a host name that could
 * resolve elsewhere (except "localhost", bound as 127.0.0.1). */
static bool loopback_host(const char *h)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(h, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, h, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static enum ld_err apply_api_proxy(struct ld_config *cfg, const struct raw *r, char *err,
                                   size_t errlen)
{
    char name[128];
    const char *why = NULL;
    char *host = NULL;
    const char *v = r->val[OPT_API_PROXY];
    if (!v)
        return LD_OK;
    if (parse_listen(v, &host, &cfg->api_proxy_port, &why) != 0)
        return fail(err, errlen, "leaderd: %s: invalid address \"%s\": %s",
                    who(r, OPT_API_PROXY, name, sizeof(name)), v, why);
    if (!loopback_host(host)) {
        free(host);
        return fail(err, errlen,
                    "leaderd: %s: \"%s\" is not a loopback address (use 127.0.0.1, "
                    "[::1] or localhost): the proxy writes with leaderd's credentials",
                    who(r, OPT_API_PROXY, name, sizeof(name)), v);
    }
    free(cfg->api_proxy_host);
    cfg->api_proxy_host = host;
    return LD_OK;
}

static enum ld_err apply(struct ld_config *cfg, const struct raw *r, char *err,
                         size_t errlen)
{
    char name[128];
    const char *v;
    enum ld_err rc;

    v = r->val[OPT_LEASE_NAME];
    if (!v)
        return fail(err, errlen,
                    "leaderd: --lease-name is required (or set LEADERD_LEASE_NAME)");
    if (!ld_dns1123_subdomain(v))
        return fail(err, errlen,
                    "leaderd: %s: invalid lease name \"%s\": must be a DNS-1123 "
                    "subdomain (lower-case letters, digits, '-' and '.', starting and "
                    "ending with a letter or digit, at most 253 characters)",
                    who(r, OPT_LEASE_NAME, name, sizeof(name)), v);
    if ((rc = set_str(&cfg->lease_name, v, err, errlen)))
        return rc;

    v = r->val[OPT_NAMESPACE];
    if (v) {
        cfg->namespace_from = r->from[OPT_NAMESPACE];
    } else if ((v = env_nonempty("POD_NAMESPACE"))) {
        cfg->namespace_from = "POD_NAMESPACE";
    }
    if (v) {
        const char *label = r->val[OPT_NAMESPACE]
                                ? who(r, OPT_NAMESPACE, name, sizeof(name))
                                : "$POD_NAMESPACE";
        if ((rc = check_namespace(v, label, err, errlen)) ||
            (rc = set_str(&cfg->namespace_, v, err, errlen)))
            return rc;
    }

    v = r->val[OPT_IDENTITY];
    if (v) {
        cfg->identity_from = r->from[OPT_IDENTITY];
    } else if ((v = env_nonempty("POD_NAME"))) {
        cfg->identity_from = "POD_NAME";
    }
    if (v) {
        const char *label =
            r->val[OPT_IDENTITY] ? who(r, OPT_IDENTITY, name, sizeof(name)) : "$POD_NAME";
        if ((rc = check_identity(v, label, err, errlen)) ||
            (rc = set_str(&cfg->identity, v, err, errlen)))
            return rc;
    }

    if ((rc = validate_durations(cfg, r, err, errlen)))
        return rc;

    v = r->val[OPT_LISTEN] ? r->val[OPT_LISTEN] : opts[OPT_LISTEN].def;
    const char *why = NULL;
    char *host = NULL;
    if (parse_listen(v, &host, &cfg->listen_port, &why) != 0)
        return fail(err, errlen, "leaderd: %s: invalid address \"%s\": %s",
                    who(r, OPT_LISTEN, name, sizeof(name)), v, why);
    free(cfg->listen_host);
    cfg->listen_host = host;

    v = r->val[OPT_KUBECONFIG];
    if (v && *v) {
        cfg->kubeconfig_from = r->from[OPT_KUBECONFIG];
        if ((rc = set_str(&cfg->kubeconfig_path, v, err, errlen)))
            return rc;
    } else if ((v = env_nonempty("KUBECONFIG"))) {
        bool oom;
        cfg->kubeconfig_path = first_kubeconfig(v, &oom);
        if (oom)
            return fail(err, errlen, "leaderd: out of memory");
        if (cfg->kubeconfig_path)
            cfg->kubeconfig_from = "KUBECONFIG";
    }

    v = r->val[OPT_RELEASE_ON_EXIT];
    if (v && parse_bool(v, &cfg->release_on_exit) != 0)
        return fail(err, errlen,
                    "leaderd: %s: invalid boolean \"%s\" (use true/false, 1/0, yes/no)",
                    who(r, OPT_RELEASE_ON_EXIT, name, sizeof(name)), v);

    v = r->val[OPT_LOG_FORMAT];
    if (v) {
        if (strcasecmp(v, "text") == 0)
            cfg->log_format = LD_LOG_FORMAT_TEXT;
        else if (strcasecmp(v, "json") == 0)
            cfg->log_format = LD_LOG_FORMAT_JSON;
        else
            return fail(err, errlen,
                        "leaderd: %s: invalid log format \"%s\" (use text or json)",
                        who(r, OPT_LOG_FORMAT, name, sizeof(name)), v);
    }

    v = r->val[OPT_LOG_LEVEL];
    if (v) {
        if (strcasecmp(v, "debug") == 0)
            cfg->log_level = LD_LOG_DEBUG;
        else if (strcasecmp(v, "info") == 0)
            cfg->log_level = LD_LOG_INFO;
        else if (strcasecmp(v, "warn") == 0 || strcasecmp(v, "warning") == 0)
            cfg->log_level = LD_LOG_WARN;
        else if (strcasecmp(v, "error") == 0)
            cfg->log_level = LD_LOG_ERROR;
        else
            return fail(err, errlen,
                        "leaderd: %s: invalid log level \"%s\" (use debug, info, warn or "
                        "error)",
                        who(r, OPT_LOG_LEVEL, name, sizeof(name)), v);
    }

    v = r->val[OPT_POD_LABEL];
    if (v) {
        if (!ld_label_key_valid(v))
            return fail(
                err, errlen,
                "leaderd: %s: invalid label key \"%s\": must be a name of at "
                "most 63 characters ([A-Za-z0-9._-], starting and ending with a "
                "letter or digit), optionally prefixed by a DNS subdomain and '/'",
                who(r, OPT_POD_LABEL, name, sizeof(name)), v);
        if ((rc = set_str(&cfg->pod_label, v, err, errlen)))
            return rc;
    }

    v = r->val[OPT_EVENTS];
    if (v && parse_bool(v, &cfg->events) != 0)
        return fail(err, errlen,
                    "leaderd: %s: invalid boolean \"%s\" (use true/false, 1/0, yes/no)",
                    who(r, OPT_EVENTS, name, sizeof(name)), v);

    if ((rc = apply_api_proxy(cfg, r, err, errlen)))
        return rc;
    v = r->val[OPT_API_PROXY_IMPERSONATION];
    if (v && parse_bool(v, &cfg->api_proxy_impersonation) != 0)
        return fail(err, errlen,
                    "leaderd: %s: invalid boolean \"%s\" (use true/false, 1/0, yes/no)",
                    who(r, OPT_API_PROXY_IMPERSONATION, name, sizeof(name)), v);

    v = r->val[OPT_SA_DIR] ? r->val[OPT_SA_DIR] : opts[OPT_SA_DIR].def;
    if (*v == '\0')
        return fail(err, errlen, "leaderd: %s: must not be empty",
                    who(r, OPT_SA_DIR, name, sizeof(name)));
    if ((rc = set_str(&cfg->service_account_dir, v, err, errlen)))
        return rc;
    if ((v = env_nonempty("POD_UID")) && (rc = set_str(&cfg->pod_uid, v, err, errlen)))
        return rc;
    if ((v = env_nonempty("POD_NAME")) && (rc = set_str(&cfg->pod_name, v, err, errlen)))
        return rc;
    if ((v = env_nonempty("POD_NAMESPACE")) &&
        (rc = set_str(&cfg->pod_namespace, v, err, errlen)))
        return rc;
    if ((rc = set_shards(cfg, r, err, errlen)) || (rc = set_command(cfg, r, err, errlen)))
        return rc;
    return check_shard_modes(cfg, r, err, errlen);
}

enum ld_err ld_config_parse_args(struct ld_config *cfg, int argc, char **argv, char *err,
                                 size_t errlen)
{
    struct raw r;
    enum ld_err rc;
    memset(&r, 0, sizeof(r));
    config_init(cfg);
    if (err && errlen > 0)
        err[0] = '\0';
    rc = collect(&r, argc, argv, err, errlen);
    cfg->printed_only = r.printed;
    if (rc != LD_OK || r.printed)
        return rc;
    return apply(cfg, &r, err, errlen);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Reads path (at most NS_FILE_MAX bytes, trimmed) into a new string; NULL
 * when absent, unreadable, too long or empty after trimming. */
static char *read_small_trimmed(const char *path)
{
    char buf[NS_FILE_MAX + 1];
    size_t n = 0;
    char *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    while (n < sizeof(buf)) {
        ssize_t r = read(fd, buf + n, sizeof(buf) - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n > NS_FILE_MAX)
        return NULL;
    size_t start = 0;
    while (start < n && is_space(buf[start]))
        start++;
    while (n > start && is_space(buf[n - 1]))
        n--;
    if (n > start)
        out = strndup(buf + start, n - start);
    return out;
}

static enum ld_err load_kube(struct ld_config *cfg, char *err, size_t errlen)
{
    struct ld_errinfo ei;
    enum ld_err e;
    ld_errinfo_clear(&ei);
    ld_kube_config_clear(&cfg->kube);
    ld_kube_config_init(&cfg->kube);
    if (cfg->kubeconfig_path) {
        const char *from = cfg->kubeconfig_from ? cfg->kubeconfig_from : "--kubeconfig";
        e = ld_kube_config_load_file(&cfg->kube, cfg->kubeconfig_path, &ei);
        if (e == LD_OK)
            return LD_OK;
        /* The library's message usually names the file already. */
        if (strstr(ei.msg, cfg->kubeconfig_path))
            return fail(err, errlen, "leaderd: %s: %s", from, ei.msg);
        return fail(err, errlen, "leaderd: %s: %s kubeconfig \"%s\": %s", from,
                    e == LD_EIO ? "cannot read" : "unusable", cfg->kubeconfig_path,
                    ei.msg);
    }
    const char *host = env_nonempty("KUBERNETES_SERVICE_HOST");
    const char *port = env_nonempty("KUBERNETES_SERVICE_PORT");
    if (!host)
        return fail(err, errlen,
                    "leaderd: no credentials: not running in a cluster "
                    "(KUBERNETES_SERVICE_HOST is not set) and no --kubeconfig, "
                    "LEADERD_KUBECONFIG or KUBECONFIG given");
    e = ld_kube_config_incluster(&cfg->kube, host, port ? port : "",
                                 cfg->service_account_dir, &ei);
    if (e != LD_OK)
        return fail(err, errlen, "leaderd: no credentials: in-cluster config (%s): %s",
                    cfg->service_account_dir, ei.msg);
    return LD_OK;
}

static enum ld_err resolve_namespace(struct ld_config *cfg, char *err, size_t errlen)
{
    char path[PATH_MAX];
    char label[PATH_MAX + 16];
    enum ld_err rc;
    if (cfg->namespace_)
        return LD_OK;
    if (snprintf(path, sizeof(path), "%s/namespace", cfg->service_account_dir) <
        (int)sizeof(path)) {
        char *ns = read_small_trimmed(path);
        if (ns) {
            snprintf(label, sizeof(label), "%s", path);
            rc = check_namespace(ns, label, err, errlen);
            if (rc != LD_OK) {
                free(ns);
                return rc;
            }
            cfg->namespace_ = ns;
            cfg->namespace_from = "service-account namespace file";
            return LD_OK;
        }
    }
    if (cfg->kube.namespace_ && *cfg->kube.namespace_) {
        if ((rc = check_namespace(cfg->kube.namespace_, "kubeconfig context", err,
                                  errlen)))
            return rc;
        cfg->namespace_from = "kubeconfig context";
        return set_str(&cfg->namespace_, cfg->kube.namespace_, err, errlen);
    }
    cfg->namespace_from = "default";
    return set_str(&cfg->namespace_, "default", err, errlen);
}

static enum ld_err resolve_identity(struct ld_config *cfg, char *err, size_t errlen)
{
    char host[HOST_NAME_MAX + 1];
    if (cfg->identity)
        return LD_OK;
    if (gethostname(host, sizeof(host)) != 0)
        host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    if (host[0] == '\0')
        return fail(
            err, errlen,
            "leaderd: --identity: empty identity (no --identity, LEADERD_IDENTITY "
            "or POD_NAME, and the host name is empty)");
    enum ld_err rc = check_identity(host, "host name", err, errlen);
    if (rc != LD_OK)
        return rc;
    cfg->identity_from = "host name";
    return set_str(&cfg->identity, host, err, errlen);
}

enum ld_err ld_config_load(struct ld_config *cfg, char *err, size_t errlen)
{
    enum ld_err rc = load_kube(cfg, err, errlen);
    if (rc == LD_OK)
        rc = resolve_namespace(cfg, err, errlen);
    if (rc == LD_OK)
        rc = resolve_identity(cfg, err, errlen);
    return rc;
}

/* Every name of the group (shard names, the shard and member Lease names,
 * POD_UID), as the group itself will check them. */
static enum ld_err check_shard_group(const struct ld_config *cfg, char *err,
                                     size_t errlen)
{
    struct ld_shardgroup_config gc = {
        .name = cfg->lease_name,
        .identity = cfg->identity,
        .names = (const char *const *)cfg->shard_names,
        .n_shards = cfg->n_shards,
        .pod_uid = cfg->pod_uid,
        .pod_name = cfg->pod_name,
        .lease_duration_ms = cfg->lease_duration_ms,
    };
    struct ld_errinfo e;
    struct ld_shardgroup *g = ld_shardgroup_new(&gc, &e);
    if (g) {
        ld_shardgroup_free(g);
        return LD_OK;
    }
    return fail(err, errlen, "leaderd: --shards: %s", e.msg);
}

enum ld_err ld_config_parse(struct ld_config *cfg, int argc, char **argv, char *err,
                            size_t errlen)
{
    enum ld_err rc = ld_config_parse_args(cfg, argc, argv, err, errlen);
    if (rc != LD_OK || cfg->printed_only)
        return rc;
    rc = ld_config_load(cfg, err, errlen);
    /* The label goes on the Pod named by the identity. */
    if (rc == LD_OK && cfg->pod_label && !ld_dns1123_subdomain(cfg->identity))
        rc = fail(err, errlen,
                  "leaderd: --pod-label needs the identity to be the Pod's name (a "
                  "DNS-1123 subdomain), got \"%s\"",
                  cfg->identity);
    if (rc == LD_OK && cfg->n_shards > 0)
        rc = check_shard_group(cfg, err, errlen);
    return rc;
}

const char *ld_config_env_name(size_t i)
{
    /* Read when neither a flag nor its variable gave the value. */
    static const char *const fallbacks[] = {
        "POD_NAMESPACE",           "POD_NAME", "KUBECONFIG", "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_SERVICE_PORT", "POD_UID"};
    if (i < OPT_COUNT)
        return opts[i].env;
    i -= OPT_COUNT;
    return i < sizeof(fallbacks) / sizeof(fallbacks[0]) ? fallbacks[i] : NULL;
}

size_t ld_config_option_count(void)
{
    return OPT_ALL;
}

const struct ld_config_option *ld_config_option(size_t i)
{
    return i < OPT_ALL ? &opts[i] : NULL;
}

void ld_config_clear(struct ld_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->lease_name);
    free(cfg->namespace_);
    free(cfg->identity);
    free(cfg->listen_host);
    free(cfg->kubeconfig_path);
    free(cfg->service_account_dir);
    free(cfg->pod_label);
    free(cfg->pod_uid);
    free(cfg->pod_name);
    free(cfg->pod_namespace);
    for (char **a = cfg->shard_names; a && *a; a++)
        free(*a);
    free(cfg->shard_names);
    free(cfg->api_proxy_host);
    for (char **a = cfg->command; a && *a; a++)
        free(*a);
    free(cfg->command);
    ld_kube_config_clear(&cfg->kube);
    config_init(cfg);
}

void ld_config_describe(const struct ld_config *cfg, char *buf, size_t len)
{
    char lease[32], renew[32], retry[32], grace[32], cooldown[32];
    char listen[300], shards[96] = "", drain[32];
    const char *host = cfg->listen_host ? cfg->listen_host : "";
    if (len == 0)
        return;
    if (cfg->n_shards > 0)
        snprintf(shards, sizeof(shards), " shards=%u%s shard-drain=%s",
                 (unsigned)cfg->n_shards, cfg->shard_names ? " (named)" : "",
                 ld_duration_format(cfg->shard_drain_ms, drain, sizeof(drain)));
    if (strchr(host, ':'))
        snprintf(listen, sizeof(listen), "[%s]:%d", host, cfg->listen_port);
    else
        snprintf(listen, sizeof(listen), "%s:%d", host, cfg->listen_port);
    snprintf(
        buf, len,
        "lease=%s/%s (namespace from %s) identity=%s (from %s) lease-duration=%s "
        "renew-deadline=%s "
        "retry-period=%s resign-cooldown=%s listen=%s kubeconfig=%s server=%s "
        "release-on-exit=%s log-format=%s log-level=%s%s%s%s%s%s%s",
        cfg->namespace_ ? cfg->namespace_ : "?", cfg->lease_name ? cfg->lease_name : "?",
        cfg->namespace_from ? cfg->namespace_from : "?",
        cfg->identity ? cfg->identity : "?",
        cfg->identity_from ? cfg->identity_from : "?",
        ld_duration_format(cfg->lease_duration_ms, lease, sizeof(lease)),
        ld_duration_format(cfg->renew_deadline_ms, renew, sizeof(renew)),
        ld_duration_format(cfg->retry_period_ms, retry, sizeof(retry)),
        ld_duration_format(cfg->resign_cooldown_ms, cooldown, sizeof(cooldown)), listen,
        cfg->kubeconfig_path ? cfg->kubeconfig_path : "in-cluster",
        cfg->kube.server ? cfg->kube.server : "?",
        cfg->release_on_exit ? "true" : "false",
        cfg->log_format == LD_LOG_FORMAT_JSON ? "json" : "text",
        ld_log_level_name(cfg->log_level), cfg->command ? " child-grace=" : "",
        cfg->command ? ld_duration_format(cfg->child_grace_ms, grace, sizeof(grace)) : "",
        cfg->pod_label ? " pod-label=" : "", cfg->pod_label ? cfg->pod_label : "",
        cfg->events ? " events=true" : "", shards);
    one_line(buf);
}
