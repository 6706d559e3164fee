#!/usr/bin/env bash
# test/demo.sh: the README's first command. Starts two local Kafka clusters and prints their
# addresses. (The mirror engine turns this into a full replication demo.)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export MM2GO_KAFKA_HOME="${MM2GO_KAFKA_HOME:-$root/test/kafka/state-demo}"
kafka="$root/test/kafka/kafka.sh"
"$kafka" stop source >/dev/null 2>&1 || true
"$kafka" stop target >/dev/null 2>&1 || true
"$kafka" start source 59092 & s=$!
"$kafka" start target 59192 & t=$!
wait "$s"; wait "$t"
"$kafka" env
echo "stop them with: MM2GO_KAFKA_HOME=$MM2GO_KAFKA_HOME $kafka stop source; ... stop target"
