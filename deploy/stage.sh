#!/bin/sh
# What the image and the release tarball ship under /opt (deploy/build-image.sh, deploy/make-dist.sh):
# the single executable (dist/cni/weft: Node and weft in one file, also flanneld), the host's static
# CNI plugin (dist/cni/flannel, which the DaemonSet copies to /opt/cni/bin), weft's runtime JavaScript without tests, test tools, the demo and build scripts, its
# native addons, its production dependencies, and flannel's mk-docker-opts.sh. Usage: stage.sh DIR
# (DIR/opt is made). WEFT_BUILD names where another architecture's executables and addons are
# (dist/arm64, deploy/build-arm64.sh); by default, this machine's (dist/cni, native/).
set -eu
cd "$(dirname "$0")/.."
stage=$1
cni=${WEFT_BUILD:+$WEFT_BUILD/cni}
cni=${cni:-dist/cni}
native=${WEFT_BUILD:+$WEFT_BUILD/native}
native=${native:-native}
rm -rf "$stage"
mkdir -p "$stage/opt/weft/bin"
cp "$cni/weft" "$stage/opt/weft/bin/weft"
ln -s weft "$stage/opt/weft/bin/flanneld"
cp "$cni/flannel" "$stage/opt/weft/bin/flannel"
(cd dist && find src \( -name '*.js' -o -name '*.cjs' -o -name 'bundle.cache' \) ! -name '*.test.js' ! -path 'src/testing/*' ! -path 'src/e2e/*' ! -path 'src/demo/*' ! -path 'src/deploy/*' ! -path 'src/bundle-test-*') |
  while read -r f; do mkdir -p "$stage/opt/weft/dist/$(dirname "$f")" && cp "dist/$f" "$stage/opt/weft/dist/$f"; done
# It is V8's for this machine's Node; another architecture's agent writes its own at its first start.
[ -z "${WEFT_BUILD:-}" ] || rm -f "$stage/opt/weft/dist/src/cli/bundle.cache"
# The commit it was built from (make build writes it), for `weft version`.
cp dist/build.json "$stage/opt/weft/dist/build.json" 2>/dev/null || printf '{"commit":"unknown"}\n' > "$stage/opt/weft/dist/build.json"
# weft's addons: sd_notify (READY=1 without systemd), udp_tun (the udp backend's packet path),
# resident (drops start-up code from the resident set, maps the agent's bundle), nl_socket (the rtnetlink socket),
# spawn (the rule tools started without forking the agent) and wireguard (WireGuard where the kernel has none; it
# links libssl3's libcrypto).
for addon in sd-notify/build/Release/sd_notify.node udp-tun/build/Release/udp_tun.node resident/build/Release/resident.node nl-socket/build/Release/nl_socket.node spawn/build/Release/spawn.node wireguard/build/Release/wireguard.node; do
  mkdir -p "$stage/opt/weft/native/$(dirname "$addon")"
  cp "$native/$addon" "$stage/opt/weft/native/$addon"
done
# flannel's helper for Docker hosts, weft's own, where flannel's image has it.
mkdir -p "$stage/opt/bin"
cp deploy/mk-docker-opts.sh "$stage/opt/bin/mk-docker-opts.sh"
cp package.json package-lock.json "$stage/opt/weft/"
(cd "$stage/opt/weft" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error && rm package-lock.json)
