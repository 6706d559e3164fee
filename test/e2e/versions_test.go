package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mm2go/mm2go/test/testkit"
)

// brokerVersions are the Kafka releases, besides the pinned one (test/kafka/pom.xml) that the
// whole suite runs on, that a subset of the mirror tests runs on: each has its broker jars in
// test/kafka/versions/<version>/pom.xml. docs/supported-versions.md lists them.
var brokerVersions = []string{"3.9.1", "4.4.0"}

// TestMirrorOnBrokerVersions runs the mirror subset with source and target both on each of
// brokerVersions' brokers (started here, one pair per version, the versions side by side):
// a byte-exact copy, an idle rerun, a record budget and the run that resumes after it
// (copyAndResume); an exactly-once copy SIGKILLed twice and run to its end, each record once
// (killAndRerun, as TestMirrorSIGKILL).
func TestMirrorOnBrokerVersions(t *testing.T) {
	c := testkit.Require(t)
	for _, v := range brokerVersions {
		t.Run("kafka="+v, func(t *testing.T) {
			t.Parallel()
			src, tgt := versionPair(t, c, v)
			vc := c
			vc.Source = testkit.Cluster{Name: "source", Bootstrap: src.bootstrap, SASLSSL: src.eb.Addr(2)}
			vc.Target = testkit.Cluster{Name: "target", Bootstrap: tgt.bootstrap, SASLSSL: tgt.eb.Addr(2)}
			t.Run("copy_and_resume", func(t *testing.T) { copyAndResume(t, vc) })
			t.Run("sigkill_exactly_once", func(t *testing.T) { killAndRerun(t, src, tgt, 20000, 2, true) })
		})
	}
}

// versionPair starts a source and a target cluster on Kafka version v (kafka.sh with
// MM2GO_KAFKA_VERSION) with the fault clusters' quota windows, stopped when the test ends, and
// checks from the brokers' logs that both run that version.
func versionPair(t *testing.T, c testkit.Clusters, v string) (src, tgt *faultBroker) {
	t.Helper()
	name := "v" + strings.ReplaceAll(v, ".", "") + "-"
	began := time.Now()
	// C1 only: half the CPU of a broker's start (3 s against 6 s measured), which these small
	// copies do not miss.
	b := testkit.StartExtraBrokers(t, c, []string{name + "src-", name + "tgt-"}, 3, func(int) []string { return faultBrokerProps },
		"MM2GO_KAFKA_VERSION="+v, "MM2GO_KAFKA_OPTS=-XX:TieredStopAtLevel=1")
	fb := make([]*faultBroker, len(b))
	for i, eb := range b {
		if !strings.Contains(eb.Log(), "Kafka version: "+v+" ") {
			t.Fatalf("broker %s does not log \"Kafka version: %s\" at start:\n%s", eb.Name, v, tail(eb.Log(), 40))
		}
		fb[i] = &faultBroker{eb: eb, name: eb.Name, bootstrap: eb.Plain, home: eb.Home, lib: c.KafkaLib}
	}
	t.Logf("Kafka %s: source %s, target %s, started in %s", v, fb[0].bootstrap, fb[1].bootstrap, time.Since(began).Round(time.Millisecond))
	return fb[0], fb[1]
}
