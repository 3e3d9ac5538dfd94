#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make image`: builds the Dockerfile with buildah once per architecture, each
# image named IMAGE-ARCH, then makes IMAGE the manifest list of them all (what
# `podman manifest push --all` publishes, and what a node pulls its own
# architecture's image from).
# One build per architecture, one after another, rather than one buildah build
# with several platforms: the second build finds the first one's build stages
# (they run on the build machine whatever the target) in the layer cache, and
# each architecture's image has a name the tests can run.
# Usage: tools/image/build-image.sh IMAGE 'amd64 arm64' [buildah build options...]
#   (LEADERD_IMAGE_DIR: the container storage, see tools/image/ctr.sh)
set -euo pipefail
image=${1:?usage: build-image.sh IMAGE ARCHS [OPTIONS...]}
archs=${2:?usage: build-image.sh IMAGE ARCHS [OPTIONS...]}
shift 2
ctr="$(dirname "$0")/ctr.sh"
# The Dockerfile's build stages are FROM --platform=$BUILDPLATFORM; buildah 1.28
# does not set that argument itself (BuildKit does), and without it they would
# look for a base image of the target's architecture.
native=$(dpkg --print-architecture)

for arch in $archs; do
    echo "image: building linux/$arch -> $image-$arch"
    start=$(date +%s)
    "$ctr" buildah build --pull=never --layers --force-rm --network host \
        --platform "linux/$arch" --build-arg "BUILDPLATFORM=linux/$native" "$@" \
        -t "$image-$arch" -f Dockerfile .
    echo "image: linux/$arch built in $(($(date +%s) - start)) s"
done

# A manifest list is not rebuilt in place: an earlier one (or a single-arch
# image of an older `make image`) under the same name goes first.
if "$ctr" podman manifest exists "$image" 2>/dev/null; then
    "$ctr" podman manifest rm "$image" >/dev/null
elif "$ctr" podman image exists "$image"; then
    "$ctr" podman untag "$image" "$image" >/dev/null
fi
"$ctr" buildah manifest create "$image" >/dev/null
for arch in $archs; do
    "$ctr" buildah manifest add "$image" "containers-storage:$image-$arch" >/dev/null
done
for arch in $archs; do
    "$ctr" podman image inspect --format "image: {{.RepoTags}} {{.Os}}/{{.Architecture}} {{.Size}} bytes" \
        "$image-$arch"
done
echo "image: manifest list $image ($archs)"
