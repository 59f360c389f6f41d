#!/bin/sh
# `make arm64`: weft for arm64, built on this machine with Debian's cross compiler, into dist/arm64:
# cni/flannel (the static CNI plugin) and cni/weft (the single executable from the arm64 Node
# binary), both from src/deploy/cni-plugin.ts, and native/*/build/Release/*.node, weft's addons,
# built by node-gyp against the arm64 Node's headers and linked against .tools/arm64's libcrypto
# (make arm64-tools). deploy/stage.sh and deploy/make-dist.sh take them from there (ARCH=arm64).
set -eu
cd "$(dirname "$0")/.."
root=$PWD
tools=$root/.tools/arm64
out=$root/dist/arm64
node_gyp=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js
node dist/src/deploy/cni-plugin.js --arch=arm64 >/dev/null 2>"$out.log" || { cat "$out.log" >&2; exit 1; }
rm -f "$out.log"
rm -rf "$out/native" && mkdir -p "$out/native"
# A copy of the sources, so that the arm64 build directories do not replace this machine's.
(cd native && tar --exclude='*/build' -cf - .) | (cd "$out/native" && tar -xf -)
sysroot=$tools/sysroot
for addon in sd-notify resident nl-socket spawn udp-tun wireguard; do
  (cd "$out/native/$addon" &&
    CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ LINK=aarch64-linux-gnu-g++ AR=aarch64-linux-gnu-ar \
    CFLAGS="-I$sysroot/usr/include -I$sysroot/usr/include/aarch64-linux-gnu" LDFLAGS="-L$sysroot/usr/lib/aarch64-linux-gnu" \
    node "$node_gyp" rebuild --arch=arm64 --nodedir="$tools/node" --loglevel=warn)
done
for f in "$out"/native/*/build/Release/*.node "$out/cni/flannel" "$out/cni/weft"; do
  file -b "$f" | grep -q 'ARM aarch64' || { echo "build-arm64: $f is not an arm64 executable" >&2; exit 1; }
done
echo "built $out: cni/flannel, cni/weft and the addons for arm64"
