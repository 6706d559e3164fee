package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/policy"
	"github.com/mm2go/mm2go/test/testkit"
)

// namesToCompare are topic and group names on which MM2 3.x and 4.x, or a careless port, differ.
var namesToCompare = []string{
	"orders", "orders.internal", "orders-internal", "connect-offsets-internal", "connect-configs",
	"mm2-offsets.A.internal", "mm2-offsets-internal", "mm2-configs.A.internal", "mm2-status.B.internal",
	"mm2-offset-syncs.B.internal", "mm2", "mm2.internal", "mm2x.internal", "Mm2-offsets.A.internal",
	"A.checkpoints.internal", "checkpoints.internal", "x.checkpoints.internal", "A.orders.internal",
	"__consumer_offsets", "__transaction_state", "_schemas", ".hidden", "a__b", "heartbeats",
	"A.heartbeats", "x.replica", "x.replicas", "replica", "internal", ".internal", "-internal",
	"console-consumer-123", "connect-my-sink", "connect", "my-group", "__share", "a.b.c",
}

// TestInternalAndFiltersAsMM2 compares, name by name, DefaultReplicationPolicy.isInternalTopic,
// DefaultTopicFilter and DefaultGroupFilter of the genuine MM2 4.1.1 jars (test/java/MM2Rules)
// with mm2go's policy and filters at their defaults.
func TestInternalAndFiltersAsMM2(t *testing.T) {
	out := testkit.Java(t, "MM2Rules", strings.Join(namesToCompare, "\n")+"\n", "names")
	p := policy.NewDefault(".", true)
	topics, err := filter.Topics(filter.DefaultTopics, filter.DefaultTopicsExclude)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := filter.Groups(filter.DefaultGroups, filter.DefaultGroupsExclude)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(namesToCompare) {
		t.Fatalf("MM2Rules answered %d lines for %d names:\n%s", len(lines), len(namesToCompare), out)
	}
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			t.Fatalf("bad line %q", l)
		}
		name := f[0]
		want := strings.Join(f[1:], " ")
		got := fmt.Sprintf("%v %v %v", p.IsInternalTopic(name), topics.Accept(name), groups.Accept(name))
		if got != want {
			t.Errorf("%q: mm2go internal/topic filter/group filter = %s, MM2 4.1.1 = %s", name, got, want)
		}
	}
	// The example of the issue: MM2 4.1.1 mirrors orders.internal.
	if p.IsInternalTopic("orders.internal") || !topics.Accept("orders.internal") {
		t.Error("orders.internal is not mirrored")
	}
}
