#!/usr/bin/env bash
# test/run.sh: the whole test suite against real Kafka. Starts two fresh KRaft clusters
# ("source" and "target") with the harness, runs every Go test with -race, and stops the
# clusters even when tests fail. Used by `make test` and by CI.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export MM2GO_KAFKA_HOME="${MM2GO_KAFKA_HOME:-$root/test/kafka/state-test}"
kafka="$root/test/kafka/kafka.sh"
# Below Linux's ephemeral port range (32768-60999 by default): a port in it can be taken at any
# moment as the local end of some outgoing connection, and a broker then fails to bind.
src_port="${MM2GO_TEST_SOURCE_PORT:-17092}"
tgt_port="${MM2GO_TEST_TARGET_PORT:-27092}"

cleanup() {
  "$kafka" stop source >/dev/null 2>&1 || true
  "$kafka" stop target >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

# step prints a section header with the time since the start, so a CI log says where its time went.
step() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

step "checks: tracked files, gofmt, go vet, staticcheck"
test/tracked-files.sh # no built binaries, no file over 1 MiB but listed test data
unformatted="$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)"
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
(cd deploy && GOFLAGS=-mod=mod go vet ./... && GOFLAGS=-mod=mod go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...)

step "fuzz: every fuzz target for a count of runs beyond its seed corpus (testdata/fuzz)"
# Every Fuzz* of the module (test/run.sh's fuzz list is checked against them by
# TestRunShFuzzesEveryTarget in test/doccheck).
for target in "FuzzEventRoute ./shared/serve" "FuzzHandler ./shared/mirrorevents" "FuzzParseProperties ./shared/config" \
  "FuzzProviders ./shared/config" "FuzzParseJAAS ./shared/cluster" "FuzzStore ./shared/offsetsync" \
  "FuzzDecodeOffsetSync ./shared/mm2" "FuzzDecodeCheckpoint ./shared/mm2" "FuzzDecodeHeartbeat ./shared/mm2" \
  "FuzzDecodeOffsetKey ./shared/mm2" "FuzzDecodeOffsetValue ./shared/mm2" "FuzzRoundTripRecords ./shared/mm2" \
  "FuzzRoundTripOffsetKeys ./shared/mm2"; do
  read -r name pkg <<<"$target" # not set --: "$@" is go test's below
  # A count, not a duration: with a duration Go 1.26's fuzz coordinator can fail a target with a
  # bare "context deadline exceeded" as the time ends on a loaded machine (go.dev/issue/75804,
  # fixed in Go 1.27; no crasher is written). 2000 runs take 1-3 s per target here.
  go test -run='^$' -fuzz="^$name\$" -fuzztime=2000x "$pkg"
done

step "starting Kafka clusters (first run downloads the jars with Maven)"
"$kafka" install
"$kafka" install-version # test/kafka/versions/*: the brokers TestMirrorOnBrokerVersions starts
"$kafka" stop source >/dev/null 2>&1 || true
"$kafka" stop target >/dev/null 2>&1 || true
"$kafka" start source "$src_port" & s=$!
"$kafka" start target "$tgt_port" & t=$!
wait "$s"; wait "$t"
eval "$("$kafka" env)"

step "go test: test/e2e in two halves, the other packages (all -race) and the deploy module, side by side"
# testsummary prints what plain go test prints and tallies the tests; its report, the last
# lines, lists the slowest tests and counts the skipped tests by reason.
work="$(mktemp -d)"; summary="$work/testsummary"; go build -o "$summary" ./test/testsummary
# Four go test runs at once, as they mostly wait on brokers and processes: test/e2e in two
# halves (the tests on clusters of their own: broker faults, kills, other broker versions; and
# the rest, on the shared clusters; the Event Hubs journeys, about 2.5 minutes each with genuine
# MM2 and a Java consumer, run in the first half to even them out), the main module's other
# packages, and the deploy module
# (manifest checks, platform replay). In one ./... run, go test's package scheduling (-p, the
# core count) started test/e2e, the long pole (13-17 minutes alone), only once the shared/
# packages were done; the deploy module after the main one left a core idle for minutes. The
# first run's output is printed as it comes, the others' after it, so they do not interleave.
own_clusters='^(TestFaults.*|TestMirrorSIGKILL|TestMirrorSIGTERM|TestMirrorOnBrokerVersions|TestServeGenuineDispatcherFaults|TestEventHubsJourney.*)$'
others=$(go list ./... | grep -vx 'github.com/mm2go/mm2go/test/e2e')
"$summary" -record "$work/tally-e2e-faults" go test -race -json -count=1 -timeout 20m -run "$own_clusters" "$@" ./test/e2e >"$work/e2e-faults.out" 2>&1 &
e2e_faults_pid=$!
"$summary" -record "$work/tally-e2e" go test -race -json -count=1 -timeout 20m -skip "$own_clusters" "$@" ./test/e2e >"$work/e2e.out" 2>&1 &
e2e_pid=$!
(cd deploy && GOFLAGS=-mod=mod "$summary" -record "$work/tally-deploy" go test -json -count=1 -timeout 20m ./... >"$work/deploy.out" 2>&1) &
deploy_pid=$!
status=0
# shellcheck disable=SC2086 # one package path per word
"$summary" -record "$work/tally" go test -race -json -count=1 -timeout 20m "$@" $others || status=$?
for run in e2e-faults e2e deploy; do
  pid_var="${run//-/_}_pid"
  wait "${!pid_var}" || status=$?
  step "the $run tests:"
  cat "$work/$run.out"
  cat "$work/tally-$run" >>"$work/tally" 2>/dev/null || true
done
step "tests done"
"$summary" -report "$work/tally"
exit "$status"
