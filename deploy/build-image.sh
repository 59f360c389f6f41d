#!/bin/sh
# `make image`: weft's container image, built with buildah from a Debian base that debootstrap
# makes (no registry involved), saved as an OCI archive under dist/. The runtime image holds the
# single executable (dist/cni/weft: Node and weft in one file, also flanneld), the host's static CNI
# plugin (dist/cni/flannel, for the init container to copy), weft's runtime JavaScript and native addons, its production dependencies, and
# iptables, nftables, iproute2 and libcrypto: no compiler, no TypeScript, no devDependencies, no systemd.
set -eu
cd "$(dirname "$0")/.."
version=$(node -p "require('./package.json').version")
tag="localhost/weft:v$version"
work=${WEFT_IMAGE_WORK:-/var/tmp/weft-image}
rootfs="$work/rootfs-bookworm-2"
start=$(date +%s)

# The base: Debian's minimal system with the agent's tools, cached between builds; what a running
# agent never reads (package lists and caches, documentation, locales, iconv's charset modules, the
# time zone database: Node carries its own) is left out.
if [ ! -f "$work/rootfs-bookworm-2.done" ]; then
  rm -rf "$rootfs"
  mkdir -p "$work"
  debootstrap --variant=minbase --include=iptables,nftables,iproute2,libssl3 bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/usr/lib/*-linux-gnu/gconv "$rootfs"/usr/share/zoneinfo
  touch "$work/rootfs-bookworm-2.done"
fi

stage="$work/stage"
deploy/stage.sh "$stage"

ctr=$(buildah from scratch)
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah add --quiet "$ctr" "$rootfs" /
buildah add --quiet "$ctr" "$stage/opt" /opt
buildah config --entrypoint '["/opt/weft/bin/flanneld"]' --cmd '' --workingdir / \
  --label "org.opencontainers.image.title=weft" --label "org.opencontainers.image.version=$version" "$ctr"
buildah commit --quiet --rm "$ctr" "$tag" >/dev/null
trap - EXIT
mkdir -p dist
rm -f "dist/weft-v$version.oci.tar"
buildah push --quiet "$tag" "oci-archive:dist/weft-v$version.oci.tar:weft:v$version"
size=$(buildah inspect --type image --format '{{.Docker.Size}}' "$tag" 2>/dev/null || echo '?')
echo "built $tag in $(($(date +%s) - start)) s: dist/weft-v$version.oci.tar ($(du -m "dist/weft-v$version.oci.tar" | cut -f1) MB archive)"
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag"
