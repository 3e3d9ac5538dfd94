/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_config: ld_config_parse_args with an argv split from the input at
 * NUL bytes. A token "=xVALUE" (x = 'a', 'b', ...) sets the x-th variable
 * of ld_config_env_name to VALUE for that run instead, so the variable
 * paths are fuzzed too. An accepted configuration must satisfy every
 * documented check; a refused one must say why on one line.
 */
#include "fuzz.h"

#include <fcntl.h>
#include <unistd.h>

#include "../../cmd/leaderd/shell/config.h"
#include "lease.h"

#define MAX_ARGS 32
#define ENV_VALUE_MAX 512

/* One variable per letter at most. */
#define ENV_MAX 26

/* putenv keeps the pointer, so each variable has a static home; glibc's
 * setenv would keep every distinct value ever set alive. */
static char env_buf[ENV_MAX][ENV_VALUE_MAX + 64];

static void clear_env(void)
{
    const char *name;
    for (size_t i = 0; (name = ld_config_env_name(i)) != NULL; i++)
        unsetenv(name);
}

/* Sets the i-th variable; false when there is none. */
static bool set_env(size_t i, const char *value)
{
    const char *name = i < ENV_MAX ? ld_config_env_name(i) : NULL;
    if (!name)
        return false;
    snprintf(env_buf[i], sizeof env_buf[i], "%s=%.*s", name, ENV_VALUE_MAX, value);
    putenv(env_buf[i]);
    return true;
}

static bool one_line(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    }
    return true;
}

static void check_accepted(const struct ld_config *cfg)
{
    FUZZ_CHECK(cfg->lease_name && cfg->lease_name[0] != '\0');
    FUZZ_CHECK(strlen(cfg->lease_name) <= 253);
    FUZZ_CHECK(cfg->namespace_ == NULL ||
               (cfg->namespace_[0] != '\0' && strlen(cfg->namespace_) <= 63 &&
                strchr(cfg->namespace_, '.') == NULL && cfg->namespace_from));
    FUZZ_CHECK(cfg->identity == NULL ||
               (cfg->identity[0] != '\0' &&
                strlen(cfg->identity) <= LD_LEASE_MAX_HOLDER && one_line(cfg->identity) &&
                fuzz_utf8_valid(cfg->identity, strlen(cfg->identity)) &&
                cfg->identity_from));
    FUZZ_CHECK(cfg->lease_duration_ms >= 1000 && cfg->lease_duration_ms % 1000 == 0);
    FUZZ_CHECK(cfg->lease_duration_ms <= (int64_t)INT32_MAX * 1000);
    FUZZ_CHECK(cfg->retry_period_ms >= 1000);
    FUZZ_CHECK(cfg->lease_duration_ms > cfg->renew_deadline_ms);
    FUZZ_CHECK(cfg->renew_deadline_ms * 10 > cfg->retry_period_ms * 12);
    FUZZ_CHECK(cfg->listen_host != NULL);
    FUZZ_CHECK(cfg->listen_port >= 1 && cfg->listen_port <= 65535);
    FUZZ_CHECK(cfg->kubeconfig_path == NULL ||
               (cfg->kubeconfig_path[0] != '\0' && cfg->kubeconfig_from));
    FUZZ_CHECK(cfg->service_account_dir && cfg->service_account_dir[0] != '\0');
    FUZZ_CHECK(cfg->log_format == LD_LOG_FORMAT_TEXT ||
               cfg->log_format == LD_LOG_FORMAT_JSON);
    FUZZ_CHECK(cfg->log_level >= LD_LOG_DEBUG && cfg->log_level <= LD_LOG_ERROR);
    /* The pure half never loads credentials. */
    FUZZ_CHECK(cfg->kube.server == NULL);
}

/* libFuzzer fixes the signature. */
/* NOLINTNEXTLINE(readability-non-const-parameter) */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    clear_env();
    /* --help and --version print on stdout; libFuzzer reports on stderr. */
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_strndup(data, size);
    char *argv[MAX_ARGS + 2];
    char prog[] = "leaderd";
    char err[LD_CONFIG_ERR_LEN];
    char desc[2048];
    struct ld_config cfg;
    int argc = 0;

    argv[argc++] = prog;
    for (size_t off = 0; off <= size && argc <= MAX_ARGS;) {
        char *tok = buf + off;
        size_t len = strlen(tok);
        bool env =
            tok[0] == '=' && tok[1] >= 'a' && set_env((size_t)(tok[1] - 'a'), tok + 2);
        if (!env && (off < size || len > 0))
            argv[argc++] = tok;
        off += len + 1;
    }
    argv[argc] = NULL;

    memset(err, 0x01, sizeof err);
    enum ld_err rc = ld_config_parse_args(&cfg, argc, argv, err, sizeof err);
    FUZZ_CHECK(rc == LD_OK || rc == LD_ECONFIG);
    if (rc == LD_ECONFIG) {
        FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
        FUZZ_CHECK(strncmp(err, "leaderd: ", 9) == 0);
        FUZZ_CHECK(one_line(err));
        FUZZ_CHECK(!cfg.printed_only);
    } else if (!cfg.printed_only) { /* --help and --version set nothing else */
        check_accepted(&cfg);
        ld_config_describe(&cfg, desc, sizeof desc);
        FUZZ_CHECK(memchr(desc, '\0', sizeof desc) != NULL && one_line(desc));
    }
    ld_config_clear(&cfg);
    ld_config_clear(&cfg);
    FUZZ_CHECK(cfg.lease_name == NULL && cfg.listen_host == NULL);
    clear_env();
    free(buf);
    return 0;
}
