# The image deploy/kube-weft.yml runs: weft under /opt/weft with its pinned Node.js.
# Build on a machine with a container engine: `docker build -t weft:v0.1.0 .` (not built here:
# the development machines have no container engine).
FROM debian:bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends make ca-certificates npm && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/weft
COPY package.json package-lock.json Makefile tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY bench ./bench
RUN make node deps build cni-plugin

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends iptables iproute2 systemd && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/weft /opt/weft
ENTRYPOINT ["/opt/weft/bin/flanneld"]
