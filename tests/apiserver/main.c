/* SPDX-License-Identifier: Apache-2.0 */
/*
 * leaderd-apiserver: a small Kubernetes Lease API server for `make demo` and
 * the leaderd tests. It speaks enough of kube-apiserver (coordination.k8s.io/v1
 * Leases over HTTPS with bearer tokens or client certificates, discovery for
 * kubectl, watch) for leaderd and kubectl to work against it, plus an
 * admin-only /_control/ API for fault injection. NOT FOR PRODUCTION:
 * throw-away CA, unencrypted keys, no RBAC, no etcd, loopback only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "api.h"
#include "auth.h"
#include "certs.h"
#include "faults.h"
#include "stats.h"
#include "store.h"
#include "util.h"

#ifndef LEADERD_VERSION
#define LEADERD_VERSION "dev"
#endif

#define MAX_CLIENTS 64
#define CONNECTION_LIMIT 256

static const char usage[] =
    "Usage: leaderd-apiserver --dir DIR [--listen 127.0.0.1:PORT] [--clients "
    "NAME[,NAME...]]\n"
    "                         [--rsa-clients NAME[,NAME...]] [--state-file PATH]\n"
    "                         [--port-file PATH] [--verbose]\n"
    "\n"
    "A small Kubernetes Lease API server (coordination.k8s.io/v1) for `make demo` and "
    "the\n"
    "leaderd tests. NOT FOR PRODUCTION: it generates a throw-away CA, keeps keys\n"
    "unencrypted, has no RBAC and no etcd, and only listens on loopback addresses.\n"
    "\n"
    "Options:\n"
    "  --dir DIR          working directory (created if missing). Written there:\n"
    "                       ca.crt, ca.key      test CA (EC P-256, 1 day; reused if "
    "valid)\n"
    "                       server.crt/.key     cert for 127.0.0.1, ::1, localhost\n"
    "                       tokens/NAME         bearer token of each client (reused)\n"
    "                       admin-token         token for the /_control/ API (reused)\n"
    "                       kubeconfig-NAME     kubeconfig with the token inline,\n"
    "                                           namespace default\n"
    "                       kubeconfig-NAME-tokenfile  same with tokenFile: tokens/NAME\n"
    "                       certs/NAME.crt/.key client certificate of each client\n"
    "                                           (CN=NAME, signed by ca.crt; reused if\n"
    "                                           valid)\n"
    "                       kubeconfig-NAME-cert       kubeconfig with the client\n"
    "                                           certificate and key inline (-data)\n"
    "                       kubeconfig-NAME-certfile   same naming certs/NAME.crt/.key\n"
    "                       kubeconfig-admin    kubeconfig for the admin token\n"
    "  --listen ADDR      127.x.x.x:PORT, localhost:PORT or [::1]:PORT (default\n"
    "                     127.0.0.1:0; port 0 picks a free port). Other addresses are\n"
    "                     refused.\n"
    "  --clients LIST     comma-separated client names ([A-Za-z0-9._-], not \"admin\")\n"
    "  --rsa-clients LIST these clients get an RSA-2048 key (PKCS#1 PEM) instead of\n"
    "                     EC P-256 (PKCS#8 PEM); each must be one of --clients\n"
    "  --state-file PATH  load Leases and resourceVersions from PATH at start and\n"
    "                     rewrite it atomically after every write\n"
    "  --port-file PATH   write the bound port there once listening\n"
    "  --verbose          log every request (and libmicrohttpd errors) to stderr\n"
    "  --help, --version\n"
    "\n"
    "When ready it prints one line `listening on https://HOST:PORT` on stdout.\n"
    "SIGTERM or SIGINT stops it with exit status 0.\n"
    "\n"
    "API: /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME] (GET, LIST, watch,\n"
    "POST, PUT, PATCH merge/strategic-as-merge, DELETE), "
    "/apis/coordination.k8s.io/v1/leases,\n"
    "discovery (/version, /api, /api/v1, /apis, /apis/coordination.k8s.io[/v1]) and\n"
    "/healthz. Requests need `Authorization: Bearer TOKEN` of a client or the admin,\n"
    "or a client certificate signed by ca.crt whose CN names a client (asked for in\n"
    "the TLS handshake, not required; it wins over a token, as in kube-apiserver).\n"
    "\n"
    "Control API (admin token only, JSON):\n"
    "  POST /_control/faults        {\"client\":NAME, "
    "\"partition\":\"hang\"|\"reset\"|null,\n"
    "                                \"latency_ms\":N, "
    "\"commit\":\"admitted\"|\"connected\"\n"
    "                                (what a hang-up during the latency does to the\n"
    "                                request, which the server has read: admitted, as\n"
    "                                in kube-apiserver, executes it at the end and only\n"
    "                                its reply is lost, counted as late-CODE; "
    "connected,\n"
    "                                the default, drops it; \"apply_late\":true is the\n"
    "                                older name of admitted; a \"hang\" partition\n"
    "                                always drops: the request was never read),\n"
    "                                \"error_rate\":0..1, \"error_code\":500,\n"
    "                                \"throttle\":{\"rate\":0..1,\"retry_after\":S},\n"
    "                                \"lose_reply_rate\":0..1 (a committed write's\n"
    "                                reply is lost: the connection is closed),\n"
    "                                \"verbs\":[\"get\",\"update\",...]}  (replaces "
    "NAME's faults)\n"
    "  POST /_control/faults/clear  {\"client\":NAME} or {} for everyone\n"
    "  GET  /_control/faults        current faults by client\n"
    "  POST /_control/pause | /_control/resume   hold every API request / release them\n"
    "  POST /_control/rotate        {\"client\":NAME, \"grace_ms\":N} -> "
    "{\"client\",\"token\"}\n"
    "  POST /_control/revoke        {\"client\":NAME}: all of NAME's tokens get 401;\n"
    "                                with \"previous\":true only the token a rotation\n"
    "                                left in its grace period does\n"
    "  GET  /_control/tokens        {client:{\"current\":N,\"stale\":N}}: requests that\n"
    "                                presented the current token, or an older one\n"
    "  PUT  /_control/raw/NS/NAME[?stamp=1]  store the body verbatim as a Lease (no\n"
    "                                validation); stamp=1 writes the assigned version\n"
    "                                into metadata.resourceVersion of a JSON object\n"
    "  GET  /_control/log[?since=SEQ]  {\"entries\":[{seq, mono_ms, clock_us, wall,\n"
    "                                client, verb, namespace, name, holderIdentity,\n"
    "                                leaseTransitions, resourceVersion}]}: successful\n"
    "                                writes; mono_ms counts from the server's start,\n"
    "                                clock_us is CLOCK_MONOTONIC itself; a holder\n"
    "                                over 256 bytes is cut to its head and length\n"
    "  GET  /_control/held          {client:{verb:{\"partition\"|\"latency\":N}}}: "
    "requests\n"
    "                                a fault holds now (to wait for one, not sleep)\n"
    "  GET  /_control/stats         "
    "{client:{verb:{code|\"late-\"code|\"reset\"|\"disconnected\"|\n"
    "                                \"lost-reply\":count}}}\n"
    "  POST /_control/stats/reset\n";

struct options {
    const char *dir;
    const char *listen;
    const char *state_file;
    const char *port_file;
    char *clients[MAX_CLIENTS];
    size_t nclients;
    char *rsa[MAX_CLIENTS]; /* the clients whose keys are RSA */
    size_t nrsa;
    bool verbose;
};

static bool has_name(char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* Adds the names in the comma-separated list to names[*n], skipping
 * duplicates. */
static int parse_names(char **names, size_t *n, const char *list)
{
    char *copy = strdup(list);
    char *save = NULL;
    int rc = -1;
    if (!copy)
        return -1;
    for (char *name = strtok_r(copy, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        if (!as_valid_client_name(name)) {
            fprintf(stderr, "leaderd-apiserver: bad client name \"%s\"\n", name);
            goto out;
        }
        if (has_name(names, *n, name))
            continue;
        if (*n == MAX_CLIENTS) {
            fprintf(stderr, "leaderd-apiserver: at most %d clients\n", MAX_CLIENTS);
            goto out;
        }
        names[*n] = strdup(name);
        if (!names[*n])
            goto out;
        (*n)++;
    }
    rc = 0;
out:
    free(copy);
    return rc;
}

/* Parses ADDR into a loopback socket address; refuses anything else. */
static int parse_listen(const char *addr, struct sockaddr_storage *ss, socklen_t *sslen,
                        char *host, size_t hostlen)
{
    char buf[128];
    long long port;
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof buf ||
        !as_parse_ll(colon + 1, 0, 65535, &port))
        return -1;
    memcpy(buf, addr, (size_t)(colon - addr));
    buf[colon - addr] = '\0';
    memset(ss, 0, sizeof *ss);
    if (strcmp(buf, "localhost") == 0)
        snprintf(buf, sizeof buf, "127.0.0.1");
    size_t bl = strlen(buf);
    if (bl > 2 && buf[0] == '[' && buf[bl - 1] == ']') {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        buf[bl - 1] = '\0';
        if (inet_pton(AF_INET6, buf + 1, &s6->sin6_addr) != 1 ||
            !IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
            return -1;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *sslen = sizeof *s6;
        snprintf(host, hostlen, "[::1]");
        return 0;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    if (inet_pton(AF_INET, buf, &s4->sin_addr) != 1 ||
        (ntohl(s4->sin_addr.s_addr) >> 24) != 127)
        return -1;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    *sslen = sizeof *s4;
    snprintf(host, hostlen, "%s", buf);
    return 0;
}

static int open_listener(struct sockaddr_storage *ss, socklen_t sslen, int *port)
{
    int one = 1;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* A restarted server must get its old port back while the previous
     * connections sit in TIME_WAIT. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)ss, sslen) != 0 || listen(fd, 128) != 0)
        goto fail;
    struct sockaddr_storage bound = {0};
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) != 0)
        goto fail;
    if (bound.ss_family == AF_INET6) {
        struct sockaddr_in6 a6;
        memcpy(&a6, &bound, sizeof(a6));
        *port = ntohs(a6.sin6_port);
    } else {
        struct sockaddr_in a4;
        memcpy(&a4, &bound, sizeof(a4));
        *port = ntohs(a4.sin_port);
    }
    return fd;
fail : {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}
}

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* The first --rsa-clients name that is not a client, or NULL. */
static const char *unknown_rsa_client(const struct options *o)
{
    for (size_t i = 0; i < o->nrsa; i++)
        if (!has_name(o->clients, o->nclients, o->rsa[i]))
            return o->rsa[i];
    return NULL;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"listen", required_argument, NULL, 'l'},
        {"clients", required_argument, NULL, 'c'},
        {"rsa-clients", required_argument, NULL, 'r'},
        {"state-file", required_argument, NULL, 's'},
        {"port-file", required_argument, NULL, 'p'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    o->listen = "127.0.0.1:0";
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            o->dir = optarg;
            break;
        case 'l':
            o->listen = optarg;
            break;
        case 'c':
            if (parse_names(o->clients, &o->nclients, optarg) != 0)
                return 2;
            break;
        case 'r':
            if (parse_names(o->rsa, &o->nrsa, optarg) != 0)
                return 2;
            break;
        case 's':
            o->state_file = optarg;
            break;
        case 'p':
            o->port_file = optarg;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("leaderd-apiserver %s (test server, not for production)\n",
                   LEADERD_VERSION);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind != argc || !o->dir || !*o->dir) {
        fprintf(stderr,
                "leaderd-apiserver: --dir is required and no positional arguments "
                "are accepted\n%s",
                usage);
        return 2;
    }
    const char *stray = unknown_rsa_client(o);
    if (stray) {
        fprintf(stderr, "leaderd-apiserver: --rsa-clients: %s is not in --clients\n",
                stray);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct options o = {0};
    struct as_api api = {0};
    struct as_store *store = NULL;
    struct as_faults *faults = NULL;
    struct as_pods *pods = NULL;
    struct as_events *events = NULL;
    struct as_stats *stats = NULL;
    struct as_auth *auth = NULL;
    struct MHD_Daemon *d = NULL;
    struct as_certs certs = {0};
    struct as_cert_client cert_clients[MAX_CLIENTS];
    char *dir = NULL;
    char err[512], host[128], url[192];
    struct sockaddr_storage ss;
    socklen_t sslen;
    int lfd = -1, port = 0, rc = 1, sig;
    sigset_t set;

    as_mono_ms(); /* the write log's mono_ms counts from here */
    int prc = parse_args(argc, argv, &o);
    if (prc >= 0) {
        rc = prc;
        goto out;
    }
    if (parse_listen(o.listen, &ss, &sslen, host, sizeof host) != 0) {
        fprintf(stderr,
                "leaderd-apiserver: --listen %s refused: want a loopback address "
                "(127.x.x.x:PORT, localhost:PORT or [::1]:PORT)\n",
                o.listen);
        rc = 2;
        goto out;
    }
    if (mkdir_p(o.dir) != 0 || !(dir = realpath(o.dir, NULL))) {
        fprintf(stderr, "leaderd-apiserver: %s: %s\n", o.dir, strerror(errno));
        goto out;
    }
    /* Block the stop signals before any thread exists so that only
     * sigwait() below sees them. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    for (size_t i = 0; i < o.nclients; i++) {
        cert_clients[i].name = o.clients[i];
        cert_clients[i].key =
            has_name(o.rsa, o.nrsa, o.clients[i]) ? AS_KEY_RSA : AS_KEY_EC;
    }
    if (!as_certs_setup(dir, cert_clients, o.nclients, &certs, err, sizeof err) ||
        !(auth = as_auth_new(dir, o.clients, o.nclients, err, sizeof err)) ||
        !(store = as_store_new(o.state_file, err, sizeof err))) {
        fprintf(stderr, "leaderd-apiserver: %s\n", err);
        goto out;
    }
    pods = as_pods_new();
    events = as_events_new();
    faults = as_faults_new();
    stats = as_stats_new();
    if (!faults || !stats || !pods || !events) {
        fprintf(stderr, "leaderd-apiserver: out of memory\n");
        goto out;
    }
    lfd = open_listener(&ss, sslen, &port);
    if (lfd < 0) {
        fprintf(stderr, "leaderd-apiserver: listen on %s: %s\n", o.listen,
                strerror(errno));
        goto out;
    }
    api.store = store;
    api.faults = faults;
    api.pods = pods;
    api.events = events;
    api.stats = stats;
    api.auth = auth;
    api.verbose = o.verbose;
    atomic_init(&api.stopping, false);
    snprintf(api.server_addr, sizeof api.server_addr, "%s:%d", host, port);
    snprintf(url, sizeof url, "https://%s:%d", host, port);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_TLS | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) |
                     (o.verbose ? MHD_USE_ERROR_LOG : 0);
    d = MHD_start_daemon(flags, 0, NULL, NULL, as_api_access, &api,
                         MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_HTTPS_MEM_KEY,
                         certs.server_key, MHD_OPTION_HTTPS_MEM_CERT, certs.server_cert,
                         /* Makes GnuTLS ask for (not require) a client
                          * certificate and trust the CA for it. */
                         MHD_OPTION_HTTPS_MEM_TRUST, certs.ca,
                         MHD_OPTION_NOTIFY_COMPLETED, as_api_completed, NULL,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTION_LIMIT,
                         MHD_OPTION_END);
    if (!d) {
        fprintf(stderr,
                "leaderd-apiserver: cannot start the HTTPS server (libmicrohttpd)\n");
        goto out;
    }
    lfd = -1; /* MHD owns it now */
    if (!as_auth_set_server(auth, url, err, sizeof err)) {
        fprintf(stderr, "leaderd-apiserver: %s\n", err);
        goto out;
    }
    if (o.port_file) {
        char pbuf[16];
        int n = snprintf(pbuf, sizeof pbuf, "%d\n", port);
        if (as_write_file_atomic(o.port_file, pbuf, (size_t)n, 0644) != 0) {
            fprintf(stderr, "leaderd-apiserver: %s: %s\n", o.port_file, strerror(errno));
            goto out;
        }
    }
    printf("listening on %s\n", url);
    fflush(stdout);
    while (sigwait(&set, &sig) != 0)
        ;
    if (o.verbose)
        fprintf(stderr, "leaderd-apiserver: signal %d, stopping\n", sig);
    rc = 0;
out:
    atomic_store(&api.stopping, true);
    if (store)
        as_store_close(store);
    if (d)
        MHD_stop_daemon(d);
    if (lfd >= 0)
        close(lfd);
    as_store_free(store);
    as_auth_free(auth);
    as_faults_free(faults);
    as_pods_free(pods);
    as_events_free(events);
    as_stats_free(stats);
    as_certs_clear(&certs);
    free(dir);
    for (size_t i = 0; i < o.nclients; i++)
        free(o.clients[i]);
    for (size_t i = 0; i < o.nrsa; i++)
        free(o.rsa[i]);
    return rc;
}
