/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resolver-check: prints the addresses getaddrinfo gives for each name on the
 * command line (or that it gave none), built once against glibc and once against
 * musl by tools/image/resolver-check.sh to compare the two resolvers.
 */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int rc = getaddrinfo(argv[i], "443", &hints, &res);
        if (rc) {
            printf("%s: %s\n", argv[i], gai_strerror(rc));
            continue;
        }
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            char buf[64];
            void *p = a->ai_family == AF_INET
                          ? (void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                          : (void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            inet_ntop(a->ai_family, p, buf, sizeof buf);
            printf("%s: %s\n", argv[i], buf);
        }
        freeaddrinfo(res);
    }
    return 0;
}
