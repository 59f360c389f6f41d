#!/bin/sh
# `make image`: weft's container image, built with buildah from a Debian base that debootstrap
# makes (no registry involved), saved as an OCI archive under dist/. The runtime image holds the
# single executable (dist/cni/flannel: Node and the CNI plugin in one file, also the image's weft
# and flanneld), weft's runtime JavaScript and native addons, its production dependencies, and
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
rm -rf "$stage"
mkdir -p "$stage/opt/weft/bin"
cp dist/cni/flannel "$stage/opt/weft/bin/flannel"
ln -s flannel "$stage/opt/weft/bin/flanneld"
ln -s flannel "$stage/opt/weft/bin/weft"
# The agent's JavaScript, without tests, test tools, the demo and the build scripts.
(cd dist && find src \( -name '*.js' -o -name '*.cjs' \) ! -name '*.test.js' ! -path 'src/testing/*' ! -path 'src/e2e/*' ! -path 'src/demo/*' ! -path 'src/deploy/*') |
  while read -r f; do mkdir -p "$stage/opt/weft/dist/$(dirname "$f")" && cp "dist/$f" "$stage/opt/weft/dist/$f"; done
# weft's addons: sd_notify (READY=1 without systemd), udp_tun (the udp backend's packet path),
# resident (drops start-up code from the resident set), nl_socket (the rtnetlink socket) and
# wireguard (WireGuard where the kernel has none; it links libssl3's libcrypto).
for addon in sd-notify/build/Release/sd_notify.node udp-tun/build/Release/udp_tun.node resident/build/Release/resident.node nl-socket/build/Release/nl_socket.node wireguard/build/Release/wireguard.node; do
  mkdir -p "$stage/opt/weft/native/$(dirname "$addon")"
  cp "native/$addon" "$stage/opt/weft/native/$addon"
done
# flannel's helper for Docker hosts, weft's own, where flannel's image has it.
mkdir -p "$stage/opt/bin"
cp deploy/mk-docker-opts.sh "$stage/opt/bin/mk-docker-opts.sh"
cp package.json package-lock.json "$stage/opt/weft/"
(cd "$stage/opt/weft" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error && rm package-lock.json)

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
