#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what `make image`, `make image-test` and `make deploy-test` need: buildah,
# podman, runc, debootstrap, yamllint and qemu-user-static (it runs the arm64 binary
# in `make image-test`) from Debian (as root with apt-get; otherwise prints the line
# to run), and dockerfilelint from npm into BUILD/tools (never global).
# Usage: tools/image/tools.sh BUILD image|deploy   (deploy: only yamllint)
set -euo pipefail
build=${1:-build}
mode=${2:-image}
if [ "$mode" = deploy ]; then
    want=(yamllint python3)
else
    want=(buildah podman runc skopeo debootstrap yamllint curl python3 qemu-user-static)
    command -v npm >/dev/null || want+=(npm)
fi
bash "$(dirname "${BASH_SOURCE[0]}")/../deps.sh" --as image --no-install-recommends "${want[@]}"
[ "$mode" = deploy ] && exit 0
tooldir="$build/tools"
if [ ! -x "$tooldir/node_modules/.bin/dockerfilelint" ]; then
    mkdir -p "$tooldir"
    echo "image: npm install dockerfilelint into $tooldir" >&2
    npm install --prefix "$tooldir" --no-audit --no-fund --silent dockerfilelint@1.8.0 >/dev/null
fi
