#!/bin/sh
# `make dist`: dist/weft-<version>-linux-<arch>.tar.gz and its .sha256, for a systemd node with no
# Node, compiler or checkout: /opt/weft as the image has it (deploy/stage.sh: the one executable,
# weft's JavaScript, addons and production dependencies), mk-docker-opts.sh, the unit and
# install.sh. The executable needs the host's glibc (2.28 or later) and libstdc++; the wireguard
# addon libssl3's libcrypto. ARCH=arm64 packs the arm64 build (deploy/build-arm64.sh).
set -eu
cd "$(dirname "$0")/.."
version=$(node -p "require('./package.json').version")
case $(uname -m) in x86_64) own=amd64 ;; aarch64) own=arm64 ;; *) own=$(uname -m) ;; esac
# ARCH=arm64 on another machine: what deploy/build-arm64.sh built (make dist-arm64).
arch=${ARCH:-$own}
if [ "$arch" != "$own" ]; then
  [ "$arch" = arm64 ] || { echo "make-dist: this machine builds $own and arm64, not $arch" >&2; exit 1; }
  export WEFT_BUILD=dist/arm64
fi
name="weft-$version-linux-$arch"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deploy/stage.sh "$work/$name"
cp deploy/release/weft.service deploy/release/install.sh "$work/$name/"
cp README.md "$work/$name/opt/weft/README.md"
mkdir -p dist
# Owned by root, in a fixed order and time: the same tree gives the same archive.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' -C "$work" -czf "dist/$name.tar.gz" "$name"
(cd dist && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "built dist/$name.tar.gz ($(du -m "dist/$name.tar.gz" | cut -f1) MB) and its .sha256"
