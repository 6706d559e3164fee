package policy

import (
	"strings"
	"testing"
)

type opt struct {
	s  string
	ok bool
}

func TestDefaultTopicSource(t *testing.T) {
	p := NewDefault(".", true)
	for _, test := range []struct {
		topic    string
		src, up  opt
		original string
	}{
		{"a.b.c", opt{"a", true}, opt{"b.c", true}, "c"},
		{".a", opt{"", true}, opt{"a", true}, "a"},
		{"a.", opt{}, opt{}, "a."},
		{"a..b", opt{"a", true}, opt{".b", true}, "b"},
		{"..", opt{}, opt{}, ".."},
		{".", opt{}, opt{}, "."},
		{"", opt{}, opt{}, ""},
		{"orders", opt{}, opt{}, "orders"},
		{"A.orders", opt{"A", true}, opt{"orders", true}, "orders"},
		{"B.A.orders", opt{"B", true}, opt{"A.orders", true}, "orders"},
		{"my.topic", opt{"my", true}, opt{"topic", true}, "topic"},
		{"a.b.", opt{"a", true}, opt{"b.", true}, "b."},
	} {
		src, ok := p.TopicSource(test.topic)
		if (opt{src, ok}) != test.src {
			t.Errorf("TopicSource(%q) = %q, %v; want %q, %v", test.topic, src, ok, test.src.s, test.src.ok)
		}
		up, ok := p.UpstreamTopic(test.topic)
		if (opt{up, ok}) != test.up {
			t.Errorf("UpstreamTopic(%q) = %q, %v; want %q, %v", test.topic, up, ok, test.up.s, test.up.ok)
		}
		if got := p.OriginalTopic(test.topic); got != test.original {
			t.Errorf("OriginalTopic(%q) = %q, want %q", test.topic, got, test.original)
		}
	}
}

func TestCustomSeparator(t *testing.T) {
	for _, test := range []struct {
		name                  string
		sep                   string
		internal              bool
		remote, offsetSyncs   string
		checkpoints, srcTopic string
		src                   opt
	}{
		{"dash", "-", true, "A-t.x", "mm2-offset-syncs-B-internal", "A-checkpoints-internal", "A-t-x", opt{"A", true}},
		{"dash legacy internal", "-", false, "A-t.x", "mm2-offset-syncs.B.internal", "A.checkpoints.internal", "A-t-x", opt{"A", true}},
		{"multi-char", "__", true, "A__t.x", "mm2-offset-syncs__B__internal", "A__checkpoints__internal", "a.b__c", opt{"a.b", true}},
		{"empty means dot", "", true, "A.t.x", "mm2-offset-syncs.B.internal", "A.checkpoints.internal", "x.y", opt{"x", true}},
		{"regex metachar", "|", true, "A|t.x", "mm2-offset-syncs|B|internal", "A|checkpoints|internal", "a.b", opt{}},
	} {
		t.Run(test.name, func(t *testing.T) {
			p := NewDefault(test.sep, test.internal)
			if got := p.FormatRemoteTopic("A", "t.x"); got != test.remote {
				t.Errorf("FormatRemoteTopic = %q, want %q", got, test.remote)
			}
			if got := p.OffsetSyncsTopic("B"); got != test.offsetSyncs {
				t.Errorf("OffsetSyncsTopic = %q, want %q", got, test.offsetSyncs)
			}
			if got := p.CheckpointsTopic("A"); got != test.checkpoints {
				t.Errorf("CheckpointsTopic = %q, want %q", got, test.checkpoints)
			}
			if !p.IsCheckpointsTopic(test.checkpoints) || !p.IsMM2InternalTopic(test.offsetSyncs) || !p.IsInternalTopic(test.offsetSyncs) {
				t.Errorf("internal topic predicates fail on own names")
			}
			src, ok := p.TopicSource(test.srcTopic)
			if (opt{src, ok}) != test.src {
				t.Errorf("TopicSource(%q) = %q, %v", test.srcTopic, src, ok)
			}
			if p.HeartbeatsTopic() != "heartbeats" {
				t.Errorf("HeartbeatsTopic = %q", p.HeartbeatsTopic())
			}
		})
	}
}

func TestDefaultPredicates(t *testing.T) {
	p := NewDefault(".", true)
	for _, test := range []struct {
		topic                                  string
		heartbeats, checkpoints, mm2, internal bool
	}{
		{"heartbeats", true, false, false, false},
		{"A.heartbeats", true, false, false, false},
		{"B.A.heartbeats", true, false, false, false},
		{"myheartbeats", false, false, false, false},
		{"A.checkpoints.internal", false, true, true, true},
		{"mm2-offset-syncs.B.internal", false, false, true, true},
		{"mm2-offsets.A.internal", false, false, true, true},
		{"connect-offsets-internal", false, false, false, false},
		{"orders.internal", false, false, false, false},
		{"mm2-configs.A.internal", false, false, true, true},
		{"mm2x", false, false, false, false},
		{"__consumer_offsets", false, false, false, true},
		{".hidden", false, false, false, true},
		{"orders", false, false, false, false},
		{"A.orders", false, false, false, false},
	} {
		if got := p.IsHeartbeatsTopic(test.topic); got != test.heartbeats {
			t.Errorf("IsHeartbeatsTopic(%q) = %v", test.topic, got)
		}
		if got := p.IsCheckpointsTopic(test.topic); got != test.checkpoints {
			t.Errorf("IsCheckpointsTopic(%q) = %v", test.topic, got)
		}
		if got := p.IsMM2InternalTopic(test.topic); got != test.mm2 {
			t.Errorf("IsMM2InternalTopic(%q) = %v", test.topic, got)
		}
		if got := p.IsInternalTopic(test.topic); got != test.internal {
			t.Errorf("IsInternalTopic(%q) = %v", test.topic, got)
		}
	}
	// With a custom separator and the KIP-949 flag on, MM2's internal
	// names end with "-internal"; ".internal" names are ordinary topics.
	d := NewDefault("-", true)
	if d.IsInternalTopic("mm2-offsets.A.internal") || !d.IsInternalTopic("mm2-offset-syncs-B-internal") {
		t.Errorf("separator '-': mm2-offsets.A.internal internal=%v, mm2-offset-syncs-B-internal internal=%v",
			d.IsInternalTopic("mm2-offsets.A.internal"), d.IsInternalTopic("mm2-offset-syncs-B-internal"))
	}
}

func TestIdentity(t *testing.T) {
	p := NewIdentity("A", ".", true)
	for _, test := range []struct {
		topic, remote string
		src, up       opt
		original      string
		heartbeats    bool
	}{
		{"orders", "orders", opt{"A", true}, opt{"orders", true}, "orders", false},
		{"x.y", "x.y", opt{"A", true}, opt{"x.y", true}, "x.y", false},
		{"heartbeats", "A.heartbeats", opt{}, opt{}, "heartbeats", true},
		{"myheartbeats", "A.myheartbeats", opt{}, opt{}, "myheartbeats", false},
		{"B.heartbeats", "A.B.heartbeats", opt{"B", true}, opt{"heartbeats", true}, "heartbeats", true},
		{"C.B.heartbeats", "A.C.B.heartbeats", opt{"C", true}, opt{"B.heartbeats", true}, "heartbeats", true},
	} {
		if got := p.FormatRemoteTopic("A", test.topic); got != test.remote {
			t.Errorf("FormatRemoteTopic(A, %q) = %q, want %q", test.topic, got, test.remote)
		}
		src, ok := p.TopicSource(test.topic)
		if (opt{src, ok}) != test.src {
			t.Errorf("TopicSource(%q) = %q, %v", test.topic, src, ok)
		}
		up, ok := p.UpstreamTopic(test.topic)
		if (opt{up, ok}) != test.up {
			t.Errorf("UpstreamTopic(%q) = %q, %v", test.topic, up, ok)
		}
		if got := p.OriginalTopic(test.topic); got != test.original {
			t.Errorf("OriginalTopic(%q) = %q", test.topic, got)
		}
		if got := p.IsHeartbeatsTopic(test.topic); got != test.heartbeats {
			t.Errorf("IsHeartbeatsTopic(%q) = %v", test.topic, got)
		}
	}
	if src, ok := NewIdentity("", ".", true).TopicSource("orders"); ok {
		t.Errorf("identity without source alias: TopicSource = %q, true; want not remote", src)
	}
	if got := p.CheckpointsTopic("A"); got != "A.checkpoints.internal" {
		t.Errorf("CheckpointsTopic = %q", got)
	}
	if !p.IsInternalTopic("__x") || p.IsInternalTopic("orders") {
		t.Errorf("IsInternalTopic wrong")
	}
	// Separator "e" splits inside "heartbeats": Java's originalTopic then
	// calls Identity's upstreamTopic on the non-heartbeats remainder.
	e := NewIdentity("A", "e", true)
	if got := e.OriginalTopic("heartbeats"); got != "artbeats" {
		t.Errorf("OriginalTopic with separator e = %q, want artbeats", got)
	}
}

func TestIsCycle(t *testing.T) {
	def := NewDefault(".", true)
	id := NewIdentity("B", ".", true)
	for _, test := range []struct {
		name   string
		p      Policy
		target string
		topic  string
		want   bool
	}{
		{"local topic", def, "A", "orders", false},
		{"came from target", def, "A", "A.orders", true},
		{"two hops back", def, "A", "C.A.orders", true},
		{"other source", def, "A", "C.orders", false},
		{"dotted local", def, "A", "my.topic", false},
		{"heartbeats from target", def, "A", "A.heartbeats", true},
		{"leading separator", def, "", ".a", true},
		{"identity never cycles", id, "A", "A.orders", false},
		{"identity source is target", NewIdentity("A", ".", true), "A", "orders", true},
		{"identity heartbeats", id, "A", "A.heartbeats", true},
		{"identity local heartbeats", id, "A", "heartbeats", false},
	} {
		t.Run(test.name, func(t *testing.T) {
			if got := IsCycle(test.p, test.target, test.topic); got != test.want {
				t.Errorf("IsCycle(%s, %q) = %v, want %v", test.target, test.topic, got, test.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, test := range []struct {
		class    string
		identity bool
		err      bool
	}{
		{"", false, false},
		{DefaultClass, false, false},
		{IdentityClass, true, false},
		{"DefaultReplicationPolicy", false, false},
		{"IdentityReplicationPolicy", true, false},
		{"default", false, false},
		{"identity", true, false},
		{" Identity ", true, false},
		{"com.example.MyPolicy", false, true},
		{"org.apache.kafka.connect.mirror.LegacyReplicationPolicy", false, true},
	} {
		p, err := New(test.class, ".", true, "A")
		if test.err {
			if err == nil || !strings.Contains(err.Error(), "replication.policy.class") || !strings.Contains(err.Error(), test.class) {
				t.Errorf("New(%q) error = %v, want one naming replication.policy.class", test.class, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q): %v", test.class, err)
			continue
		}
		if _, ok := p.(*Identity); ok != test.identity {
			t.Errorf("New(%q) = %T", test.class, p)
		}
	}
	p, _ := New("identity", "_", false, "src")
	if src, _ := p.TopicSource("t"); src != "src" || p.FormatRemoteTopic("x", "heartbeats") != "x_heartbeats" || p.CheckpointsTopic("x") != "x.checkpoints.internal" {
		t.Errorf("New did not pass separator/alias through")
	}
}
