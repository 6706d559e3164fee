package e2e

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"net"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/mirrorevents"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/serve"
	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/kafkasource"
)

// serveFunc is an in-process `mirror serve` (engine + mirrorevents + serve.Run on loopback).
type serveFunc struct {
	URL    string
	copier *countingCopier
	stop   func()
}

type serveOpts struct {
	mode           mirrorevents.Mode
	keyType        mirrorevents.KeyType
	requestTimeout time.Duration
	copyTimeout    time.Duration
}

// countingCopier counts the payload writes the handler asks the engine for, and the copies the
// engine runs (copies: its source consumers, counted by a franz-go hook, since the engine
// answers most copy requests from memory and coalesces the rest).
type countingCopier struct {
	mirrorevents.Copier
	copies, writes atomic.Int64
}

// OnNewClient implements kgo.HookNewClient: a client consuming assigned partitions is a copy.
func (c *countingCopier) OnNewClient(cl *kgo.Client) {
	if m, _ := cl.OptValue(kgo.ConsumePartitions).(map[string]map[int32]kgo.Offset); len(m) > 0 {
		c.copies.Add(1)
	}
}

func (c *countingCopier) WriteAt(ctx context.Context, topic string, p int32, r *kgo.Record) error {
	c.writes.Add(1)
	return c.Copier.WriteAt(ctx, topic, p, r)
}

func serveLogger(t testing.TB) *slog.Logger {
	if os.Getenv("MM2GO_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startServeMirror starts the mirror function for topics (regex) between two bootstraps.
func startServeMirror(t testing.TB, source, target, topics string, o serveOpts) *serveFunc {
	t.Helper()
	logger := serveLogger(t)
	cc := &countingCopier{}
	dial := func(ctx context.Context, side engine.Side, extra ...kgo.Opt) (*kgo.Client, error) {
		bs := source
		if side == engine.Target {
			bs = target
		}
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bs), kgo.RetryTimeout(5 * time.Second), kgo.WithHooks(cc)}, extra...)...)
	}
	f, err := filter.Topics(topics, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e, err := engine.New(ctx, engine.Options{
		SourceAlias: "source", TargetAlias: "target", Topics: f,
		ReplicationFactor: 1, OffsetSyncsTopicReplicationFactor: 1, OffsetStorageReplicationFactor: 1,
	}, dial, logger)
	if err != nil {
		t.Fatal(err)
	}
	cc.Copier = mirrorevents.NewEngineCopier(e, dial, engine.BurstOptions{}, logger)
	h, err := mirrorevents.New(cc, mirrorevents.Options{Mode: o.mode, KeyType: o.keyType, CopyTimeout: o.copyTimeout}, logger)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- serve.Run(ctx, serve.Config{Listener: ln, RequestTimeout: o.requestTimeout, ShutdownTimeout: 10 * time.Second}, logger, h)
	}()
	sf := &serveFunc{URL: "http://" + ln.Addr().String() + "/", copier: cc}
	stopped := false
	sf.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve.Run: %v", err)
		}
		h.Close()
		cc.Copier.(*mirrorevents.EngineCopier).Close()
		e.Close()
	}
	t.Cleanup(sf.stop)
	return sf
}

// runDriver starts a KafkaSource driver in the background; the returned stop ends it.
func runDriver(t testing.TB, cfg kafkasource.Config) (*kafkasource.Driver, func()) {
	t.Helper()
	d, err := kafkasource.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver: %v", err)
		}
	}
	t.Cleanup(stop)
	return d, stop
}

// endOffsets returns the end offset of every partition of topic.
func endOffsets(t testing.TB, bootstrap, topic string) map[int32]int64 {
	t.Helper()
	ends, err := testkit.Admin(t, bootstrap).ListEndOffsets(testkit.Context(t, 20*time.Second), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// waitDelivered waits until the driver's group committed ends.
func waitDelivered(t testing.TB, bootstrap, group, topic string, ends map[int32]int64, d time.Duration) {
	t.Helper()
	if err := kafkasource.WaitDelivered(testkit.Context(t, d), bootstrap, group, topic, ends); err != nil {
		t.Fatal(err)
	}
}

// payloadExpectation is the record payload mode writes for a source record delivered by
// KafkaSource with key-type byte-array, as documented in docs/events.md:
//   - key: exact bytes; an empty key becomes null (KafkaSource sends no key extension);
//   - value: exact bytes; an empty value becomes null (both arrive as an empty body);
//   - headers: content-type first (value lower-cased), then one header per sanitized name
//     (lower-case [a-z0-9] only; the last duplicate wins) in name order; values UTF-8 decoded
//     (each invalid byte becomes EF BF BD); a null value becomes empty;
//   - timestamp: milliseconds, as CreateTime.
func payloadExpectation(r *kgo.Record) *kgo.Record {
	out := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Timestamp: r.Timestamp.Truncate(time.Millisecond)}
	if len(r.Key) > 0 {
		out.Key = r.Key
	}
	if len(r.Value) > 0 {
		out.Value = r.Value
	}
	var ct *kgo.RecordHeader
	byName := map[string][]byte{}
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, "content-type") {
			ct = &kgo.RecordHeader{Key: "content-type", Value: []byte(strings.ToLower(toValidUTF8(h.Value)))}
			continue
		}
		var name strings.Builder
		for _, c := range strings.ToLower(h.Key) {
			if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
				name.WriteRune(c)
			}
		}
		byName[name.String()] = []byte(toValidUTF8(h.Value))
	}
	if ct != nil {
		out.Headers = append(out.Headers, *ct)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: n, Value: byName[n]})
	}
	return out
}

func toValidUTF8(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		sb.WriteRune(r)
		b = b[n:]
	}
	return sb.String()
}

// freePortBlock finds a port p with p, p+1 and p+2 free on loopback (a harness cluster uses all
// three).
func freePortBlock(t testing.TB) int {
	t.Helper()
	// Below Linux's ephemeral range (32768-60999): a port in it can be taken at any moment as
	// the local end of an outgoing connection, and the broker then fails to bind.
	for try := 0; try < 200; try++ {
		p := 20000 + mathrand.IntN(12000)
		ok := true
		for i := 0; i <= 2 && ok; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port block")
	return 0
}

// assertPositionsAndSyncs checks what the function left behind besides records, as MM2 would:
// the stored position of every partition is its source end - 1 (the offsets topic), and the
// offset-syncs topic (on the source) has syncs for the topic whose downstream offsets point at
// the copies of their upstream records.
func assertPositionsAndSyncs(t *testing.T, fn *serveFunc, sourceBootstrap, topic string, ends map[int32]int64, want, got []*kgo.Record) {
	t.Helper()
	ctx := testkit.Context(t, 30*time.Second)
	for p, end := range ends {
		next, ok, err := fn.copier.Position(ctx, topic, p)
		if err != nil || !ok || next != end {
			t.Errorf("stored position of %s[%d]: next %d (stored %v, %v), want %d", topic, p, next, ok, err, end)
		}
	}
	// Upstream offset -> index in the partition's records, to check the downstream offsets.
	syncs := testkit.ReadAll(t, sourceBootstrap, "mm2-offset-syncs.target.internal")
	found := map[int32]int{}
	for _, r := range syncs {
		s, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err != nil || s.Topic != topic {
			continue
		}
		found[s.Partition]++
		var gotRec *kgo.Record
		for _, g := range got {
			if g.Partition == s.Partition && g.Offset == s.DownstreamOffset {
				gotRec = g
			}
		}
		var wantRec *kgo.Record
		for _, w := range want {
			if w.Partition == s.Partition && w.Offset == s.UpstreamOffset {
				wantRec = w
			}
		}
		if gotRec == nil || wantRec == nil || !bytes.Equal(gotRec.Value, wantRec.Value) || !bytes.Equal(gotRec.Key, wantRec.Key) {
			t.Errorf("offset sync %+v does not map an upstream record to its copy", s)
		}
	}
	for p := range ends {
		if found[p] == 0 {
			t.Errorf("no offset sync for %s[%d]", topic, p)
		}
	}
}
