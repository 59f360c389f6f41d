#!/bin/sh
# The image's Debian base for arm64, made on an amd64 machine without running arm64 code (which
# debootstrap's second stage would, through binfmt handlers this machine must not get): the arm64
# builds of exactly the packages of the amd64 base (deploy/build-image.sh), unpacked over the same
# merged-/usr layout; then what those packages' maintainer scripts made in the amd64 base and no
# package ships (/etc: users, groups, configuration, the alternatives; the symlinks to the
# alternatives and /bin/sh), taken from it. Usage: arm64-base.sh AMD64_ROOTFS ARM64_ROOTFS
set -eu
cd "$(dirname "$0")/.."
amd=$1
arm=$2
apt_state=$(mktemp -d)
trap 'rm -rf "$apt_state"' EXIT
. deploy/apt-arm64.sh
apt_arm64_init
rm -rf "$arm" && mkdir -p "$arm"
for link in bin lib sbin; do ln -s "usr/$link" "$arm/$link"; done
mkdir -p "$arm/usr/bin" "$arm/usr/lib" "$arm/usr/sbin"
packages=$(awk '/^Package:/{p=$2} /^Architecture:/{print p}' "$amd/var/lib/dpkg/status")
(cd "$apt_state" && apt_arm64 download -qq $packages)
for deb in "$apt_state"/*.deb; do
  # Unpacked through the merged-/usr symlinks, as dpkg does.
  dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$arm"
done
# What maintainer scripts made: /etc as the amd64 base has it (but the amd64 loader's cache).
(cd "$amd" && tar -cf - etc) | tar -x --keep-directory-symlink -C "$arm"
rm -f "$arm/etc/ld.so.cache"
# And the symlinks no package ships (the alternatives', /bin/sh), where the arm64 base has nothing.
(cd "$amd" && find usr var -type l) | while read -r l; do
  [ -e "$arm/$l" ] || [ -L "$arm/$l" ] || { mkdir -p "$arm/$(dirname "$l")" && ln -s "$(readlink "$amd/$l")" "$arm/$l"; }
done
for d in dev proc sys run tmp root home mnt media opt srv boot var/tmp var/log; do mkdir -p "$arm/$d"; done
chmod 1777 "$arm/tmp" "$arm/var/tmp"
echo "arm64 base: $(echo $packages | wc -w) packages in $arm"
