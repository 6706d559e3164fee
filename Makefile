# mm2go: the two commands at the top of README.md are `make demo` and `make test`.
GO ?= go
BIN := bin

.PHONY: all build demo test vet bench clean

all: build

build:
	$(GO) build -o $(BIN)/ ./functions/...

## demo: start two local Kafka clusters, mirror a topic from one to the other, print a summary.
demo:
	test/demo.sh

## test: start two real Kafka clusters, run the whole suite with -race, stop them.
test:
	test/run.sh

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
	test/kafka/kafka.sh stop source >/dev/null 2>&1 || true
	test/kafka/kafka.sh stop target >/dev/null 2>&1 || true
