#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Makes sure Debian packages are present. As root it installs what is
# missing (apt-get); otherwise it prints the exact line to run and fails.
#
#   tools/deps.sh build|test      the packages leaderd builds with (build), and
#                                 tests with (test: also promtool, from prometheus)
#   tools/deps.sh [--as NAME] [--no-install-recommends] PACKAGE...
#                                 these packages; NAME starts the messages
#                                 (default "deps")
set -euo pipefail
as=deps
install=(apt-get install -y)
while [ $# -gt 0 ]; do
    case $1 in
    --as) as=$2; shift 2 ;;
    --no-install-recommends) install+=("$1"); shift ;;
    *) break ;;
    esac
done
case ${1:-build} in
build | test)
    want=(build-essential pkg-config libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev
          libyaml-dev libssl-dev check openssl curl python3 valgrind groff-base
          nghttp2-proxy)
    [ "${1:-build}" = test ] && want+=(prometheus) ;;
*) want=("$@") ;;
esac
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "$as: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! "${install[@]}" -qq "${missing[@]}" >/dev/null; then
        apt-get update -qq
        "${install[@]}" -qq "${missing[@]}" >/dev/null
    fi
    exit 0
fi
echo "$as: missing packages; run as root: ${install[*]} ${missing[*]}" >&2
exit 1
