#!/bin/sh
# `make image`: weft's container image for amd64 and arm64, built with buildah from a Debian base
# that debootstrap makes (no registry involved; the arm64 base from the same packages' arm64 builds,
# deploy/arm64-base.sh), saved under dist/ as one OCI archive holding an image index of the two
# (the platform a runtime pulls is its own). Each image holds the
# single executable (dist/cni/weft: Node and weft in one file, also flanneld), the host's static CNI
# plugin (dist/cni/flannel, for the init container to copy), weft's runtime JavaScript and native addons, its production dependencies, and
# iptables, nftables, iproute2, libcrypto and the CA certificates (which weft, as flanneld, trusts
# when no CA file is given: src/cli/system-roots.ts): no compiler, no TypeScript, no devDependencies, no systemd.
set -eu
cd "$(dirname "$0")/.."
version=$(node -p "require('./package.json').version")
tag="localhost/weft:v$version"
work=${WEFT_IMAGE_WORK:-/var/tmp/weft-image}
rootfs="$work/rootfs-bookworm-3"
start=$(date +%s)

# The base: Debian's minimal system with the agent's tools, cached between builds; what a running
# agent never reads (package lists and caches, documentation, locales, iconv's charset modules, the
# time zone database: Node carries its own) is left out.
if [ ! -f "$work/rootfs-bookworm-3.done" ]; then
  rm -rf "$rootfs"
  mkdir -p "$work"
  debootstrap --variant=minbase --include=iptables,nftables,iproute2,libssl3,ca-certificates bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/usr/lib/*-linux-gnu/gconv "$rootfs"/usr/share/zoneinfo
  touch "$work/rootfs-bookworm-3.done"
fi

# The same base for arm64, and what deploy/build-arm64.sh built (make arm64).
arm_rootfs="$work/rootfs-bookworm-arm64-2"
if [ ! -f "$arm_rootfs.done" ]; then
  deploy/arm64-base.sh "$rootfs" "$arm_rootfs"
  rm -rf "$arm_rootfs"/usr/share/doc/* "$arm_rootfs"/usr/share/man/* "$arm_rootfs"/usr/share/info/* "$arm_rootfs"/usr/share/locale/* \
    "$arm_rootfs"/usr/lib/*-linux-gnu/gconv "$arm_rootfs"/usr/share/zoneinfo
  touch "$arm_rootfs.done"
fi

one_image() { # ARCH ROOTFS STAGE TAG
  ctr=$(buildah from scratch)
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  buildah add --quiet "$ctr" "$2" /
  buildah add --quiet "$ctr" "$3/opt" /opt
  buildah config --arch "$1" --os linux --entrypoint '["/opt/weft/bin/flanneld"]' --cmd '' --workingdir / \
    --label "org.opencontainers.image.title=weft" --label "org.opencontainers.image.version=$version" "$ctr"
  buildah commit --quiet --rm "$ctr" "$4" >/dev/null
  trap - EXIT
}

stage="$work/stage"
deploy/stage.sh "$stage"
one_image amd64 "$rootfs" "$stage" "$tag-amd64"
WEFT_BUILD=dist/arm64 deploy/stage.sh "$stage-arm64"
one_image arm64 "$arm_rootfs" "$stage-arm64" "$tag-arm64"

buildah manifest rm "$tag" >/dev/null 2>&1 || true
buildah rmi "$tag" >/dev/null 2>&1 || true
buildah manifest create "$tag" >/dev/null
for arch in amd64 arm64; do buildah manifest add --arch "$arch" --os linux "$tag" "containers-storage:$tag-$arch" >/dev/null; done
mkdir -p dist
rm -f "dist/weft-v$version.oci.tar"
buildah manifest push --quiet --all "$tag" "oci-archive:dist/weft-v$version.oci.tar:weft:v$version"
echo "built $tag (amd64, arm64) in $(($(date +%s) - start)) s: dist/weft-v$version.oci.tar ($(du -m "dist/weft-v$version.oci.tar" | cut -f1) MB archive)"
for arch in amd64 arm64; do buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag-$arch"; done
