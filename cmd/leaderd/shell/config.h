/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config: the daemon's configuration from flags and LEADERD_* variables
 * (a flag beats its variable), with the contract's defaults and fallbacks,
 * validated as a whole. Parsing is pure; loading credentials, the
 * service-account namespace and the host name is a separate I/O step.
 */
#ifndef LEADERD_CONFIG_H
#define LEADERD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "kubeconfig.h"
#include "log.h"
#include "logsink.h"

#ifndef LEADERD_VERSION
#define LEADERD_VERSION "0.0.0-dev"
#endif

/* err buffers passed in here should be at least this big. */
#define LD_CONFIG_ERR_LEN 512

/* Every string is owned by the struct (free with ld_config_clear). */
struct ld_config {
    /* --help or --version was printed on stdout: nothing else is set, and
     * the daemon exits 0. */
    bool printed_only;
    char *lease_name;
    char *namespace_;
    char *identity;
    int64_t lease_duration_ms; /* a whole number of seconds >= 1 */
    int64_t renew_deadline_ms;
    int64_t retry_period_ms;
    char *listen_host;     /* "" = all interfaces (dual stack when possible) */
    int listen_port;       /* 1..65535 */
    char *kubeconfig_path; /* NULL => in-cluster */
    struct ld_kube_config kube;
    bool release_on_exit;
    enum ld_log_format log_format;
    enum ld_log_level log_level;
    char *service_account_dir; /* default LD_SA_DIR */
    /* What follows "--": NULL-terminated, owned with its strings; NULL when
     * no command was given. */
    char **command;
    int64_t child_grace_ms;     /* > 0 and < lease - renew deadline */
    char *pod_label;            /* --pod-label KEY (a valid label key), NULL when unset */
    bool events;                /* --events */
    int64_t resign_cooldown_ms; /* >= 0; no contending this long after resigning */
    /* --shards: 0 when unset (one Lease); else the number of shards, named
     * by shard_names (NULL-terminated, owned) or numbered when that is
     * NULL. Checked as ld_shardgroup_new checks them. */
    uint32_t n_shards;
    char **shard_names;
    /* --shard-drain: 0 <= it < renew_deadline_ms; default retry_period_ms. */
    int64_t shard_drain_ms;
    char *pod_uid; /* $POD_UID (the member Lease's ownerReference), NULL when unset */
    /* $POD_NAME and $POD_NAMESPACE as given (NULL when unset), whatever
     * --identity and --namespace say: the Pod that POD_UID names. */
    char *pod_name;
    char *pod_namespace;
    /* --api-proxy ADDR:PORT, the API write gate: a loopback address
     * ("127.x.y.z", "::1" or "localhost"), NULL when unset; port 1..65535. */
    char *api_proxy_host;
    int api_proxy_port;
    /* --api-proxy-impersonation: the proxy forwards Impersonate-* headers
     * instead of answering 403. */
    bool api_proxy_impersonation;
    /* Where namespace_, identity and kubeconfig_path came from: a flag,
     * variable or file name, for messages and the startup line. Static
     * strings; NULL while unresolved. */
    const char *namespace_from;
    const char *identity_from;
    const char *kubeconfig_from;
};

/* Parses argv (argv[0] is the program name) and the environment (getenv
 * only), then loads credentials (ld_config_load). Returns LD_OK when the
 * daemon should run, or printed_only set when --help or --version was
 * printed on stdout (exit 0); LD_ECONFIG when the configuration is invalid, with one
 * line naming the problem, "leaderd: ..." without a newline, in err (exit
 * 2). The line is err's, not an ld_errinfo's: it quotes what the user
 * typed and can be longer than an errinfo holds. cfg is always left
 * initialised (clear it with ld_config_clear whatever the result).
 *
 * A LEADERD_* variable that is set, even to "", counts as its flag given
 * with that value, except LEADERD_KUBECONFIG="" (and --kubeconfig=""),
 * which means "not given". Empty POD_NAMESPACE, POD_NAME and KUBECONFIG
 * count as unset. */
enum ld_err ld_config_parse(struct ld_config *cfg, int argc, char **argv, char *err,
                            size_t errlen);

/* The pure half of ld_config_parse: flags, variables, defaults and every
 * check that needs no file. Leaves namespace_ NULL when neither the flag,
 * its variable nor POD_NAMESPACE gave one, identity NULL when neither the
 * flag, its variable nor POD_NAME gave one, and the kube config empty
 * (kubeconfig_path is resolved: flag, variable, first $KUBECONFIG entry).
 * Same return values as ld_config_parse. */
enum ld_err ld_config_parse_args(struct ld_config *cfg, int argc, char **argv, char *err,
                                 size_t errlen);

/* The I/O half: loads the kubeconfig file or the in-cluster config, then
 * resolves the namespace (POD_NAMESPACE, service-account namespace file,
 * kubeconfig context, "default") and the identity (host name) when
 * ld_config_parse_args left them unset, and validates them. Returns LD_OK,
 * or LD_ECONFIG with err filled as above. */
enum ld_err ld_config_load(struct ld_config *cfg, char *err, size_t errlen);

/* The environment variables leaderd reads, by index: the LEADERD_* variable
 * of every flag, then POD_NAMESPACE, POD_NAME, KUBECONFIG,
 * KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT and POD_UID. Returns a static
 * string, or NULL when i is past the last one. For tests that must start
 * from an environment that says nothing. */
const char *ld_config_env_name(size_t i);

/* One row of the table of flags that --help prints, for whatever renders
 * it elsewhere (tools/gen-man.c writes the man page's OPTIONS from it).
 * help is lower-case prose without a final full stop; a newline followed
 * by spaces in it breaks --help's lines and reads as one space elsewhere. */
struct ld_config_option {
    const char *flag;    /* with the leading "--" */
    const char *env;     /* its variable; NULL for --help and --version */
    const char *metavar; /* the value's name; NULL when the flag takes none */
    const char *def;     /* NULL when there is no plain default (help says why) */
    const char *help;
};

/* The number of rows of the table: every flag leaderd accepts. */
size_t ld_config_option_count(void);

/* Row i in --help's order, or NULL when i is past the last one. Static:
 * never freed, valid for the life of the process. */
const struct ld_config_option *ld_config_option(size_t i);

/* Frees what cfg owns and leaves it zeroed (safe to clear twice). */
void ld_config_clear(struct ld_config *cfg);

/* One line describing the effective configuration for the startup log,
 * without credentials, e.g. "lease=ns/name identity=x lease-duration=15s
 * ...". Always NUL-terminates buf (cut if too small). */
void ld_config_describe(const struct ld_config *cfg, char *buf, size_t len);

#endif
