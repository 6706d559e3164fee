# mm2go: the two commands at the top of README.md are `make demo` and `make test`.
GO ?= go
BIN := bin

.PHONY: all build demo test vet bench soak clean

all: build

build:
	$(GO) build -o $(BIN)/ ./functions/...

## demo: start two local Kafka clusters, mirror a topic from one to the other, print a summary.
demo:
	test/demo.sh

## test: start two real Kafka clusters, run the whole suite with -race, stop them.
test:
	test/run.sh

## bench: mm2go vs real MirrorMaker 2 vs the brokers' limits (not part of `make test`).
## The freshness table (latency at steady rates, every trigger) alone: make bench BENCH_ARGS=-only=freshness
bench:
	$(GO) run ./test/bench -out test/bench/results $(BENCH_ARGS)

## soak: 10 minutes of steady produce with a SIGKILL of the function every minute and one target
## broker restart, for `mirror run` on a schedule and `mirror serve` under the genuine KafkaSource
## dispatcher: 0 lost, duplicates counted, RSS first vs last minute (not part of `make test`).
## MM2GO_SOAK_DURATION=3m make soak for a shorter one.
SOAK_TIMEOUT ?= 40m
soak:
	test/kafka/kafka.sh install
	$(GO) test -tags soak -count=1 -v -timeout $(SOAK_TIMEOUT) -run TestSoak ./test/soak

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
	test/kafka/kafka.sh stop source >/dev/null 2>&1 || true
	test/kafka/kafka.sh stop target >/dev/null 2>&1 || true

## image: build the container image WITHOUT Docker or emulation: the functions cross-compiled for
## each of IMAGE_PLATFORMS (Go only), then dist/mm2go-oci (an OCI layout: an image index of every
## platform, with the SPDX SBOM attached to it), dist/mm2go-image.tar (this machine's platform,
## for `docker load -i` / `podman load -i`) and dist/mm2go.spdx.json (every Go module in the
## binaries). gzip layers; IMAGE_COMPRESSION=zstd for smaller ones. Offline. Same layout as the
## Dockerfile; the tool lives in the separate deploy/ module. IMAGE_TAG=mm2go:1.2.3 make image
## Reproducible: file and creation times are the last commit's, so one commit gives one digest.
.PHONY: image
IMAGE_TAG ?= mm2go:dev
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_COMPRESSION ?= gzip
image:
	rm -rf dist/bin dist/mm2go-oci
	for p in $(IMAGE_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags "-s -w" -o dist/bin/$${p%/*}_$${p#*/}/ ./functions/... || exit 1; \
	done
	cd deploy && $(GO) run ./cmd/mkimage -bin ../dist/bin -platforms "$$(echo $(IMAGE_PLATFORMS) | tr ' ' ,)" \
		-o ../dist/mm2go-image.tar -oci-layout ../dist/mm2go-oci -sbom ../dist/mm2go.spdx.json -compression $(IMAGE_COMPRESSION) \
		-tag $(IMAGE_TAG) -revision "$$(git rev-parse HEAD 2>/dev/null)" -created "$$(git log -1 --format=%ct 2>/dev/null)"

## chart: package the Helm chart (lint --strict first) into dist/mm2go-<version>.tgz, the file
## `helm push dist/mm2go-0.1.0.tgz oci://registry.example.com/charts` publishes. Offline.
.PHONY: chart
chart:
	cd deploy && $(GO) run ./cmd/mkchart -chart helm/mm2go -o ../dist -created "$$(git log -1 --format=%ct 2>/dev/null)"
