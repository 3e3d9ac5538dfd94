#!/usr/bin/env bash
# Makes sure the Debian packages leaderd needs are present. As root it
# installs what is missing (apt-get); otherwise it prints the exact line to
# run and fails. Usage: tools/deps.sh build|test
set -euo pipefail
want=(build-essential pkg-config libcurl4-openssl-dev libmicrohttpd-dev libjansson-dev
      libyaml-dev libssl-dev check openssl curl python3 valgrind)
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
line="apt-get install -y ${missing[*]}"
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing ${missing[*]}" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    exit 0
fi
echo "deps: missing packages; run as root: $line" >&2
exit 1
