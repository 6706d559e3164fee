# syntax=docker/dockerfile:1
#
# mm2go: one image with the three functions. The container command picks the function:
#   /usr/local/bin/mirror     serve | run    (default: mirror serve)
#   /usr/local/bin/checkpoint serve | run
#   /usr/local/bin/heartbeat  serve | run
# `make image` builds the same file layout without Docker (deploy/cmd/mkimage).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
# Set by BuildKit from --platform (e.g. docker buildx build --platform linux/arm64).
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/ ./functions/...
# The final stage has no shell, so its skeleton (non-root user, /tmp, home) is made here.
RUN mkdir -p /rootfs/etc /rootfs/tmp /rootfs/home/nonroot \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group \
 && chmod 1777 /rootfs/tmp \
 && chown 65532:65532 /rootfs/home/nonroot && chmod 700 /rootfs/home/nonroot

FROM scratch
COPY --from=build /rootfs/ /
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/mirror /out/checkpoint /out/heartbeat /usr/local/bin/
ENV PATH=/usr/local/bin:/usr/bin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PORT=8080
LABEL org.opencontainers.image.source="https://github.com/mm2go/mm2go" \
      org.opencontainers.image.url="https://github.com/mm2go/mm2go" \
      org.opencontainers.image.title="mm2go" \
      org.opencontainers.image.description="Kafka MirrorMaker 2 as three serverless functions: mirror, checkpoint, heartbeat (choose one with the container command)"
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mirror"]
CMD ["serve"]
