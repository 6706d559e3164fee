package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// testDialer dials the harness clusters over PLAINTEXT.
func testDialer(c testkit.Clusters) DialFunc {
	return func(_ context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
		addr := c.Source.Bootstrap
		if side == Target {
			addr = c.Target.Bootstrap
		}
		opts := []kgo.Opt{kgo.SeedBrokers(addr)}
		if os.Getenv("MM2GO_TEST_KGO_DEBUG") != "" {
			opts = append(opts, kgo.WithLogger(kslog.New(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("side", side.String()))))
		}
		return kgo.NewClient(append(opts, extra...)...)
	}
}

// flow is one test flow with a source alias unique to the test, so its remote topics and
// offsets topic are its own.
type flow struct {
	t      *testing.T
	c      testkit.Clusters
	opts   Options
	alias  string
	topics []string
	log    io.Writer // the engines' logs, printed if the test fails
}

func newFlow(t *testing.T, topics ...string) *flow {
	t.Helper()
	c := testkit.Require(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	alias := "s" + hex.EncodeToString(b)
	f := &flow{t: t, c: c, alias: alias, topics: topics, log: testkit.FailureLog(t)}
	f.opts = Options{
		SourceAlias: alias, TargetAlias: "t" + alias,
		OffsetStoragePartitions: 25,
	}
	f.setTopics(topics...)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "mm2-offsets."+alias+".internal")
	testkit.DeleteTopicsAtEnd(t, c.Source.Bootstrap, "mm2-offset-syncs.t"+alias+".internal")
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "mm2-offset-syncs."+alias+".internal")
	return f
}

func (f *flow) setTopics(topics ...string) {
	f.t.Helper()
	f.topics = topics
	flt, err := filter.Topics(strings.Join(topics, ","), filter.DefaultTopicsExclude)
	if err != nil {
		f.t.Fatal(err)
	}
	f.opts.Topics = flt
	for _, tp := range topics {
		testkit.DeleteTopicsAtEnd(f.t, f.c.Target.Bootstrap, f.remote(tp))
	}
}

func (f *flow) remote(topic string) string { return f.alias + "." + topic }

func (f *flow) engine() *Engine { return f.engineWith() }

// engineWithHooks is engine with franz-go hooks on every source client.
func (f *flow) engineWithHooks(hooks ...kgo.Hook) *Engine {
	return f.engineWith(kgo.WithHooks(hooks...))
}

// engineWith is engine with extra options on every source client.
func (f *flow) engineWith(sourceOpts ...kgo.Opt) *Engine {
	f.t.Helper()
	return f.engineSides(sourceOpts, nil)
}

// engineSides is engine with extra options on every source and every target client.
func (f *flow) engineSides(sourceOpts, targetOpts []kgo.Opt) *Engine {
	f.t.Helper()
	var out io.Writer = f.log
	if testing.Verbose() {
		out = io.MultiWriter(os.Stderr, f.log)
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dial := testDialer(f.c)
	if len(sourceOpts)+len(targetOpts) > 0 {
		inner := dial
		dial = func(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
			if side == Source {
				extra = append(extra, sourceOpts...)
			} else {
				extra = append(extra, targetOpts...)
			}
			return inner(ctx, side, extra...)
		}
	}
	e, err := New(testkit.Context(f.t, time.Minute), f.opts, dial, logger)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(e.Close)
	return e
}

func (f *flow) burst(bo BurstOptions) Summary {
	f.t.Helper()
	s, err := f.engine().Burst(testkit.Context(f.t, 2*time.Minute), bo)
	if err != nil {
		f.t.Fatalf("burst: %v (summary %+v)", err, s)
	}
	f.t.Logf("burst: %d records, reason %s, lag %d, %s (first record after %d ms)", s.Records, s.Reason, s.Lag, s.Duration, s.FirstRecordMS)
	return s
}

// positions reads every position record of this flow's offsets topic: newest value per key,
// and checks each sits in the partition a Connect worker would use.
func (f *flow) positions() map[TP]int64 {
	f.t.Helper()
	topic := "mm2-offsets." + f.alias + ".internal"
	recs := testkit.ReadAll(f.t, f.c.Target.Bootstrap, topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	md, err := kadm.NewClient(testkit.Client(f.t, f.c.Target.Bootstrap)).Metadata(testkit.Context(f.t, 10*time.Second), topic)
	if err != nil {
		f.t.Fatal(err)
	}
	n := int32(len(md.Topics[topic].Partitions))
	out := map[TP]int64{}
	for _, r := range recs {
		k, err := mm2.DecodeOffsetKey(r.Key)
		if err != nil {
			f.t.Fatalf("offsets record %d/%d: key %q: %v", r.Partition, r.Offset, r.Key, err)
		}
		if k.Connector != mm2.SourceConnector || k.Cluster != f.alias {
			continue
		}
		if want := mm2.KeyPartition(r.Key, n); r.Partition != want {
			f.t.Errorf("position of %s-%d in partition %d, Connect would use %d", k.Topic, k.Partition, r.Partition, want)
		}
		if string(r.Key) != string(mm2.SourceOffsetKey(f.alias, k.Topic, k.Partition)) {
			f.t.Errorf("position key %q is not the canonical Connect key", r.Key)
		}
		v, err := mm2.DecodeOffsetValue(r.Value)
		if err != nil {
			f.t.Fatalf("offsets record value %q: %v", r.Value, err)
		}
		out[TP{k.Topic, k.Partition}] = v
	}
	return out
}

// syncs reads the offset-syncs topic (source location) and returns the syncs of topic.
func (f *flow) syncs(topic string) []mm2.OffsetSync {
	f.t.Helper()
	name := "mm2-offset-syncs.t" + f.alias + ".internal"
	bootstrap := f.c.Source.Bootstrap
	if f.opts.OffsetSyncsTopicLocation == SyncsOnTarget {
		name = "mm2-offset-syncs." + f.alias + ".internal"
		bootstrap = f.c.Target.Bootstrap
	}
	var out []mm2.OffsetSync
	for _, r := range testkit.ReadAll(f.t, bootstrap, name) {
		if r.Partition != 0 {
			f.t.Errorf("offset sync in partition %d", r.Partition)
		}
		s, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err != nil {
			f.t.Fatalf("offset sync %x/%x: %v", r.Key, r.Value, err)
		}
		if s.Topic == topic {
			out = append(out, s)
		}
	}
	return out
}

// dataOnly drops records of other topics and control records (ReadAll keeps none).
func sourceRecords(t *testing.T, bootstrap, topic string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	return testkit.ReadAll(t, bootstrap, topic, opts...)
}

// bareEngine is an Engine with opts as given (no defaults) and no clients, for tests of the
// engine's logic; its parts are wired as New wires them.
func bareEngine(opts Options) *Engine {
	e := &Engine{core: core{opts: opts, log: slog.New(slog.DiscardHandler)}}
	e.wire()
	return e
}

// setLogger makes logger the log of e and of its parts (e not used yet), as if New had got it.
func setLogger(e *Engine, logger *slog.Logger) {
	e.log = logger
	e.wire()
}

// plannedCopy discovers the flow's topics, prepares them on the target, makes sure of the
// offsets topic and plans the copies of tps (each topic to src.<topic>) as a burst does: where
// a test that drives a copier directly starts. It returns the works, the offsets topic's
// partition count and the remote topic names.
func (f *fakeFlow) plannedCopy(e *Engine, tps ...TP) ([]*work, int32, map[string]string) {
	f.t.Helper()
	ctx := context.Background()
	topics, err := e.planner.discover(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := e.PrepareTargets(ctx, topics); err != nil {
		f.t.Fatal(err)
	}
	parts, _, err := e.positions.ensure(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	remote := map[string]string{}
	for _, tp := range tps {
		remote[tp.Topic] = "src." + tp.Topic
	}
	works, err := e.planner.plan(ctx, tps, remote, nil, parts)
	if err != nil {
		f.t.Fatal(err)
	}
	return works, parts, remote
}

// plannedCopier is a copier of tps as a burst makes it (plannedCopy, its own offset-sync
// emitter, a 10 s grace), for the tests that run one directly.
func (f *fakeFlow) plannedCopier(e *Engine, tps ...TP) *copier {
	f.t.Helper()
	works, parts, remote := f.plannedCopy(e, tps...)
	syncs, err := e.newSyncEmitter(context.Background(), false)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(syncs.close)
	c := newCopier(&e.core, BurstOptions{Grace: 10 * time.Second}, works, readyTopic(parts), syncs)
	c.remote = remote
	return c
}

// listOffsetsAnswer is a kfake control's answer to req: each partition asked, filled by fill
// (Timestamp and LeaderEpoch -1 unless it sets them).
func listOffsetsAnswer(req *kmsg.ListOffsetsRequest, fill func(topic string, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition)) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp, sp.LeaderEpoch = rp.Partition, -1, -1
			fill(rt.Topic, rp, &sp)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
