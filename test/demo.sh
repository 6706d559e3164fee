#!/usr/bin/env bash
# test/demo.sh (`make demo`): mm2go end to end on a laptop. Starts two local Kafka clusters
# (genuine Apache Kafka from Maven Central jars), seeds a topic "orders", runs one
# `mirror run` burst from "source" to "target", prints its summary, verifies the copy byte for
# byte and stops the clusters. Needs Go, Java 17+ and Maven (first run downloads the jars).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export MM2GO_KAFKA_HOME="${MM2GO_KAFKA_HOME:-$root/test/kafka/state-demo}"
kafka="$root/test/kafka/kafka.sh"
# Below the ephemeral port range, like test/run.sh's.
src_port="${MM2GO_DEMO_SOURCE_PORT:-18092}"
tgt_port="${MM2GO_DEMO_TARGET_PORT:-28092}"
source="127.0.0.1:$src_port"
target="127.0.0.1:$tgt_port"

stop_clusters() {
  echo "== stopping the clusters"
  "$kafka" stop source >/dev/null 2>&1 || true
  "$kafka" stop target >/dev/null 2>&1 || true
}
trap stop_clusters EXIT

echo "== building mm2go's mirror function"
mkdir -p bin
go build -o bin/mirror ./functions/mirror

echo "== starting two Kafka clusters: source $source, target $target"
"$kafka" install
"$kafka" stop source >/dev/null 2>&1 || true
"$kafka" stop target >/dev/null 2>&1 || true
"$kafka" start source "$src_port" & s=$!
"$kafka" start target "$tgt_port" & t=$!
wait "$s"; wait "$t"

echo "== seeding topic orders on the source"
go run ./test/demo seed "$source"

echo "== mirror run (source -> target)"
export MM2_SOURCE_BOOTSTRAP_SERVERS="$source"
export MM2_TARGET_BOOTSTRAP_SERVERS="$target"
export MM2_TOPICS="orders"
# Single-broker clusters: every replication factor is 1.
export MM2_REPLICATION_FACTOR=1 MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1 MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1
export MM2_LOG_FORMAT="${MM2_LOG_FORMAT:-text}"
set +e
bin/mirror run >"$MM2GO_KAFKA_HOME/summary.json"
code=$?
set -e
echo "exit code: $code (0 = done, 3 = budget reached, more to do)"
echo "summary (JSON on stdout):"
cat "$MM2GO_KAFKA_HOME/summary.json"
[[ $code -eq 0 ]] || exit "$code"

echo "== a second run finds nothing new"
bin/mirror run | sed 's/^/  /'

echo "== verifying: source orders vs target source.orders"
go run ./test/demo verify "$source" "$target"
echo "== demo done"
