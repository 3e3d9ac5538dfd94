#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compares name resolution of a static glibc and a static musl program the way a
# pod sees it: the kubelet's resolv.conf (search list of the namespace, ndots:5)
# and /etc/hosts, against a fake DNS server on 127.0.0.1:53 that logs every query.
# Everything runs in a new network and mount namespace (root only): nothing leaves
# the machine, and the bind mounts over /etc vanish with the namespace.
# Usage: tools/image/resolver-check.sh MUSL_CC   (MUSL_CC: /opt/dep-musl/musl/bin/cc)
# Prints each libc's answers and queries, then whether both sent the same queries.
set -eu
musl_cc=${1:?usage: resolver-check.sh MUSL_CC}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -static -o "$work/gai-glibc" "$here/resolver-check.c" 2>/dev/null
"$musl_cc" -static-pie -fPIE -o "$work/gai-musl" "$here/resolver-check.c"
printf 'nameserver 127.0.0.1\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n' \
    >"$work/resolv.conf"
printf '127.0.0.1 localhost\n192.0.2.7 myhost.example\n' >"$work/hosts"
export WORK=$work HERE=$here
timeout 120 unshare --net --mount bash -eu -c '
ip link set lo up
mount --bind "$WORK/resolv.conf" /etc/resolv.conf
mount --bind "$WORK/hosts" /etc/hosts
for libc in glibc musl; do
    python3 "$HERE/resolver-check-dns.py" 20 "$WORK/q-$libc.log" & pid=$!
    for _ in $(seq 200); do [ -s "$WORK/q-$libc.log" ] && break; sleep 0.05; done
    echo "== $libc answers"
    "$WORK/gai-$libc" kubernetes.default.svc kubernetes.default kubernetes myhost.example \
        kubernetes.default.svc.cluster.local. nosuch.example | sed "s/: .*[a-z].*$/: no address/"
    kill "$pid"; wait "$pid" 2>/dev/null || true
done'
for libc in glibc musl; do
    echo "== $libc queries"
    tail -n +2 "$work/q-$libc.log"
done
if cmp -s <(tail -n +2 "$work/q-glibc.log") <(tail -n +2 "$work/q-musl.log"); then
    echo "resolver-check: the same queries in the same order"
else
    echo "resolver-check: the queries differ"
    exit 1
fi
