#!/bin/sh
# Installs weft from its release tarball on a systemd node: run from the unpacked directory, as root.
#   tar -xzf weft-<version>-linux-<arch>.tar.gz && sudo weft-<version>-linux-<arch>/install.sh
# Puts the agent under /opt/weft (PREFIX), flannel's mk-docker-opts.sh under /opt/bin, the unit
# under /etc/systemd/system and, unless there is one, /etc/default/weft for its FLANNELD_*
# settings; the CNI plugin as flannel in /opt/cni/bin (CNI_BIN_DIR) when the node has that
# directory; then enables and starts the unit (NO_START=1: neither). Nothing else on the host is
# touched: no Node, compiler or package is needed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=${DESTDIR:-}
prefix=${PREFIX:-/opt/weft}
[ "$(id -u)" = 0 ] || [ -n "$root" ] || { echo "install.sh: run as root" >&2; exit 1; }
mkdir -p "$root$prefix" "$root/opt/bin" "$root/etc/systemd/system" "$root/etc/default"
# A new copy beside the old one, then put in place: a running agent keeps the files it loaded.
rm -rf "$root$prefix.new"
cp -a "$here/opt/weft" "$root$prefix.new"
rm -rf "$root$prefix.old"
[ -d "$root$prefix" ] && mv "$root$prefix" "$root$prefix.old"
mv "$root$prefix.new" "$root$prefix"
rm -rf "$root$prefix.old"
cp "$here/opt/bin/mk-docker-opts.sh" "$root/opt/bin/mk-docker-opts.sh"
# The static plugin, put in place by a rename: a runtime starting it meanwhile gets the old or the new.
cni_bin=${CNI_BIN_DIR:-/opt/cni/bin}
if [ -d "$root$cni_bin" ]; then
  cp "$here/opt/weft/bin/flannel" "$root$cni_bin/.flannel.tmp" && mv -f "$root$cni_bin/.flannel.tmp" "$root$cni_bin/flannel"
  echo "CNI plugin installed as $root$cni_bin/flannel"
fi
sed "s|/opt/weft/|$prefix/|g" "$here/weft.service" > "$root/etc/systemd/system/weft.service"
[ -e "$root/etc/default/weft" ] || cat > "$root/etc/default/weft" <<'CONF'
# weft's settings, as flanneld's FLANNELD_* variables (see `weft agent --help`), for example:
#FLANNELD_ETCD_ENDPOINTS=http://etcd1:2379,http://etcd2:2379
#FLANNELD_IFACE=eth0
#FLANNELD_IP_MASQ=true
#FLANNELD_HEALTHZ_IP=127.0.0.1
#FLANNELD_HEALTHZ_PORT=8471
CONF
echo "weft installed in $root$prefix"
if [ -z "$root" ] && [ "${NO_START:-}" != 1 ] && command -v systemctl >/dev/null 2>&1; then
  systemctl daemon-reload
  systemctl enable --now weft.service
  echo "weft.service enabled and started; settings in /etc/default/weft (then: systemctl restart weft)"
fi
