#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs buildah, podman or skopeo with the project's private container configuration:
# storage (overlay) and run state under $LEADERD_IMAGE_DIR, runc, chroot isolation for
# builds, no default network. Usage: tools/image/ctr.sh buildah|podman|skopeo ARGS...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${LEADERD_IMAGE_DIR:?set LEADERD_IMAGE_DIR to the storage directory}
mkdir -p "$dir/storage" "$dir/run" "$dir/tmp"
dir=$(cd "$dir" && pwd)
conf="$dir/storage.conf"
if [ ! -f "$conf" ]; then
    cat >"$conf.tmp" <<CONF
[storage]
driver = "overlay"
graphroot = "$dir/storage"
runroot = "$dir/run"
CONF
    mv "$conf.tmp" "$conf"
fi
export CONTAINERS_CONF="$here/containers.conf"
export CONTAINERS_STORAGE_CONF="$conf"
export CONTAINERS_REGISTRIES_CONF="$here/registries.conf"
export BUILDAH_ISOLATION=chroot
export TMPDIR="$dir/tmp"
case "${1:-}" in
buildah | podman | skopeo) exec "$@" ;;
*)
    echo "ctr.sh: expected buildah, podman or skopeo, got '${1:-}'" >&2
    exit 2
    ;;
esac
