package checkpoint_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/checkpoint"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/offsetsync"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/test/testkit"
)

// dial returns a ClientFunc for a plaintext bootstrap address.
func dial(bootstrap string) checkpoint.ClientFunc {
	return func(_ context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap)}, extra...)...)
	}
}

// flow is one test's replication flow with unique aliases, so that its
// internal topics (offset syncs, checkpoints) belong to the test alone.
type flow struct {
	c                  testkit.Clusters
	src, tgt           string // aliases
	syncsTopic         string // on the source
	checkpointsTopic   string // on the target
	topic, remoteTopic string
}

func newFlow(t *testing.T, partitions int32) *flow {
	t.Helper()
	c := testkit.Require(t)
	f := &flow{c: c, src: testkit.Name(t, "s"), tgt: testkit.Name(t, "t")}
	f.syncsTopic = "mm2-offset-syncs." + f.tgt + ".internal"
	f.checkpointsTopic = f.src + ".checkpoints.internal"
	compact := "compact"
	testkit.CreateTopic(t, c.Source.Bootstrap, f.syncsTopic, 1, map[string]*string{"cleanup.policy": &compact})
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, f.checkpointsTopic)
	f.topic = testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), partitions, nil)
	f.remoteTopic = testkit.CreateTopic(t, c.Target.Bootstrap, f.src+"."+f.topic, partitions, nil)
	return f
}

// job builds a checkpoint job for the flow, restricted to the given groups.
func (f *flow) job(t *testing.T, syncGroups bool, groups ...string) *checkpoint.Job {
	t.Helper()
	gf, err := filter.Groups(strings.Join(groups, ","), "")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	j, err := checkpoint.New(testkit.Context(t, time.Minute), checkpoint.Options{
		Flow:                              round.Flow{SourceAlias: f.src, TargetAlias: f.tgt, WriteConnectOffsets: true}, // only where the Connect offsets topic exists
		Groups:                            gf,
		CheckpointsTopicReplicationFactor: 1,
		SyncGroupOffsets:                  syncGroups,
	}, dial(f.c.Source.Bootstrap), dial(f.c.Target.Bootstrap), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

func runRound(t *testing.T, j *checkpoint.Job) *checkpoint.Summary {
	t.Helper()
	sum, err := j.Round(testkit.Context(t, 2*time.Minute))
	if err != nil {
		t.Fatalf("round: %v", err)
	}
	return sum
}

// writeSyncs writes offset syncs to the flow's offset-syncs topic, in order.
func (f *flow) writeSyncs(t *testing.T, syncs ...mm2.OffsetSync) {
	t.Helper()
	recs := make([]*kgo.Record, 0, len(syncs))
	for _, s := range syncs {
		k, v, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: f.syncsTopic, Partition: 0, Key: k, Value: v})
	}
	testkit.Produce(t, f.c.Source.Bootstrap, recs...)
}

// commit commits offsets of group on a cluster for the flow's topic (or
// another topic with topicOverride), partition -> offset.
func commit(t *testing.T, bootstrap, group, topic string, offsets map[int32]int64, metadata string) {
	t.Helper()
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1, Metadata: metadata})
	}
	if err := testkit.Admin(t, bootstrap).CommitAllOffsets(testkit.Context(t, 30*time.Second), group, os); err != nil {
		t.Fatalf("committing %v for group %s on %s: %v", offsets, group, bootstrap, err)
	}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteGroup(ctx, group)
	})
}

// committed returns a group's committed offsets of topic on a cluster.
func committed(t *testing.T, bootstrap, group, topic string) map[int32]int64 {
	t.Helper()
	resp, err := testkit.Admin(t, bootstrap).FetchOffsets(testkit.Context(t, 30*time.Second), group)
	if err != nil {
		t.Fatalf("fetching offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// cpKey identifies a checkpoint.
type cpKey struct {
	group, topic string
	partition    int32
}

// readCheckpoints decodes the checkpoints topic; the last record per key wins
// (as MirrorClient reads it), undecodable records are counted and skipped.
// It also checks partition 0 and no headers.
func (f *flow) readCheckpoints(t *testing.T) (cps map[cpKey]mm2.Checkpoint, records, undecodable int) {
	t.Helper()
	recs := testkit.ReadAll(t, f.c.Target.Bootstrap, f.checkpointsTopic)
	out := map[cpKey]mm2.Checkpoint{}
	for _, r := range recs {
		if r.Partition != 0 || len(r.Headers) != 0 {
			t.Errorf("checkpoint record in partition %d with %d headers, want partition 0 without headers", r.Partition, len(r.Headers))
		}
		c, err := mm2.DecodeCheckpoint(r.Key, r.Value)
		if err != nil {
			undecodable++
			continue
		}
		out[cpKey{c.Group, c.Topic, c.Partition}] = c
	}
	return out, len(recs), undecodable
}

// produceReplicated writes n source records per partition and their copies
// to the remote topic, each copy shifted by shift[p] filler records, and
// returns the offset syncs a writer with offset.lag.max=lag would have sent
// (one per lag records, plus the last record).
func (f *flow) produceReplicated(t *testing.T, n map[int32]int, shift map[int32]int, lag int) []mm2.OffsetSync {
	t.Helper()
	var src, dst []*kgo.Record
	var syncs []mm2.OffsetSync
	for p, cnt := range n {
		for i := 0; i < shift[p]; i++ {
			dst = append(dst, &kgo.Record{Topic: f.remoteTopic, Partition: p, Value: []byte("filler")})
		}
		for u := 0; u < cnt; u++ {
			v := []byte(fmt.Sprintf("p%d-u%d", p, u))
			src = append(src, &kgo.Record{Topic: f.topic, Partition: p, Value: v})
			dst = append(dst, &kgo.Record{Topic: f.remoteTopic, Partition: p, Value: v})
			if u%lag == 0 || u == cnt-1 {
				syncs = append(syncs, mm2.OffsetSync{Topic: f.topic, Partition: p, UpstreamOffset: int64(u), DownstreamOffset: int64(u + shift[p])})
			}
		}
	}
	testkit.Produce(t, f.c.Source.Bootstrap, src...)
	testkit.Produce(t, f.c.Target.Bootstrap, dst...)
	return syncs
}

// upstreamOf parses the upstream offset out of a replicated record value.
func upstreamOf(t *testing.T, v []byte) int64 {
	t.Helper()
	s := string(v)
	i := strings.LastIndex(s, "-u")
	if i < 0 {
		t.Fatalf("record %q is not a replicated record", s)
	}
	u, err := strconv.ParseInt(s[i+2:], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// resumeOnTarget consumes the remote topic as group on the target from its
// committed offsets until the end, and returns per partition the upstream
// offsets of the records read, in order.
func (f *flow) resumeOnTarget(t *testing.T, group string, want map[int32]int) map[int32][]int64 {
	t.Helper()
	cl := testkit.Client(t, f.c.Target.Bootstrap,
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(f.remoteTopic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	got := map[int32][]int64{}
	done := func() bool {
		for p, n := range want {
			if len(got[p]) == 0 || got[p][len(got[p])-1] != int64(n-1) {
				return false
			}
		}
		return true
	}
	ctx := testkit.Context(t, time.Minute)
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("resuming group %s on target: got %v", group, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], upstreamOf(t, r.Value))
		})
	}
	cl.LeaveGroup()
	return got
}

// TestRoundCheckpointsAndGroupSync writes offset syncs like the mirror
// function would, commits source groups at various positions and checks the
// checkpoints written and the offsets synced to the target.
func TestRoundCheckpointsAndGroupSync(t *testing.T) {
	f := newFlow(t, 2)
	n := map[int32]int{0: 200, 1: 50}
	syncs := f.produceReplicated(t, n, map[int32]int{0: 5, 1: 0}, 10)
	f.writeSyncs(t, syncs...)

	resume := testkit.Name(t, "resume")   // idle on target: offsets synced
	active := testkit.Name(t, "active")   // live consumer on target: left alone
	forward := testkit.Name(t, "forward") // target ahead on p0: not moved back
	commit(t, f.c.Source.Bootstrap, resume, f.topic, map[int32]int64{0: 157, 1: 49}, "meta-resume")
	commit(t, f.c.Source.Bootstrap, active, f.topic, map[int32]int64{0: 200, 1: 20}, "")
	commit(t, f.c.Source.Bootstrap, forward, f.topic, map[int32]int64{0: 100, 1: 49}, "")
	commit(t, f.c.Target.Bootstrap, forward, f.remoteTopic, map[int32]int64{0: 199, 1: 10}, "")

	// A live member of "active" on the target.
	assigned := make(chan struct{}, 1)
	live := testkit.Client(t, f.c.Target.Bootstrap, kgo.ConsumerGroup(active), kgo.ConsumeTopics(f.remoteTopic),
		kgo.DisableAutoCommit(), kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	liveCtx, stopLive := context.WithCancel(context.Background())
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		for liveCtx.Err() == nil {
			live.PollFetches(liveCtx)
		}
	}()
	t.Cleanup(func() { stopLive(); <-liveDone })
	select {
	case <-assigned:
	case <-time.After(time.Minute):
		t.Fatal("live consumer got no assignment")
	}

	// The Connect offsets topic exists (as the mirror function or MM2 creates it): the round
	// leaves MM2's checkpoint connector offsets there too.
	offsetsTopic := testkit.CreateTopic(t, f.c.Target.Bootstrap, "mm2-offsets."+f.src+".internal", 25, nil)

	j := f.job(t, true, resume, active, forward)
	sum := runRound(t, j)

	// Expected translations: from MM2's algorithm (offsetsync.Store, a port
	// checked against the real OffsetSyncStore) where slots matter, by hand
	// where they do not. p0 has syncs every 10 upstream offsets (downstream
	// +5), the newest 199->204; p1 every 10 and 49->49.
	ref := offsetsync.NewStore()
	for _, s := range syncs {
		ref.Add(s)
	}
	ref.ReadToEnd()
	tr := func(p int32, up int64) int64 {
		d, ok := ref.Translate(f.topic, p, up)
		if !ok {
			t.Fatalf("reference store cannot translate %d/%d", p, up)
		}
		return d
	}
	want := map[cpKey]mm2.Checkpoint{}
	add := func(g string, p int32, up, down int64, md string) {
		want[cpKey{g, f.remoteTopic, p}] = mm2.Checkpoint{Group: g, Topic: f.remoteTopic, Partition: p, UpstreamOffset: up, DownstreamOffset: down, Metadata: md}
	}
	add(resume, 0, 157, tr(0, 157), "meta-resume")
	add(resume, 1, 49, 49, "meta-resume") // exactly on the sync 49->49
	add(active, 0, 200, 205, "")          // one past the newest sync 199->204
	add(active, 1, 20, tr(1, 20), "")     // 20->20 is no longer retained
	add(forward, 0, 100, tr(0, 100), "")
	add(forward, 1, 49, 49, "")
	got, records, bad := f.readCheckpoints(t)
	if bad != 0 {
		t.Errorf("%d undecodable checkpoints", bad)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("checkpoint %v: got %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) || records != len(want) {
		t.Errorf("got %d checkpoints in %d records, want %d", len(got), records, len(want))
	}
	if sum.Groups != 3 || sum.CheckpointsWritten != 6 || sum.CheckpointsSkipped != 0 || sum.Untranslatable != 0 {
		t.Errorf("summary: groups %d written %d skipped %d untranslatable %d, want 3, 6, 0, 0",
			sum.Groups, sum.CheckpointsWritten, sum.CheckpointsSkipped, sum.Untranslatable)
	}

	// The round created the checkpoints topic as MM2 does: one partition, compacted.
	adm := testkit.Admin(t, f.c.Target.Bootstrap)
	td, err := adm.ListTopics(testkit.Context(t, 30*time.Second), f.checkpointsTopic)
	if err != nil || len(td[f.checkpointsTopic].Partitions) != 1 {
		t.Errorf("checkpoints topic: %+v %v, want 1 partition", td[f.checkpointsTopic], err)
	}
	rc, err := adm.DescribeTopicConfigs(testkit.Context(t, 30*time.Second), f.checkpointsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := rc.On(f.checkpointsTopic, nil); err != nil || !hasConfig(cfg.Configs, "cleanup.policy", "compact") {
		t.Errorf("checkpoints topic configs %+v (%v), want cleanup.policy=compact", cfg.Configs, err)
	}

	// MM2's Connect offsets of the checkpoint connector: key per checkpoint, value {"offset":0},
	// in the partition the Java producer would pick.
	connect := map[cpKey]bool{}
	for _, r := range testkit.ReadAll(t, f.c.Target.Bootstrap, offsetsTopic) {
		k, err := mm2.DecodeOffsetKey(r.Key)
		if err != nil || k.Connector != mm2.CheckpointConnector {
			t.Errorf("Connect offsets record %q: %+v %v", r.Key, k, err)
			continue
		}
		if v, err := mm2.DecodeOffsetValue(r.Value); err != nil || v != 0 || r.Partition != mm2.KeyPartition(r.Key, 25) {
			t.Errorf("Connect offset %q = %q in partition %d: %v", r.Key, r.Value, r.Partition, err)
		}
		connect[cpKey{k.Group, k.Topic, k.Partition}] = true
	}
	for k := range want {
		if !connect[k] {
			t.Errorf("no Connect offset for checkpoint %v", k)
		}
	}
	if len(connect) != len(want) {
		t.Errorf("%d Connect offsets, want %d", len(connect), len(want))
	}

	// Group sync: the idle group got both offsets, the active one nothing,
	// and the one ahead on p0 only p1.
	if c := committed(t, f.c.Target.Bootstrap, resume, f.remoteTopic); c[0] != tr(0, 157) || c[1] != 49 {
		t.Errorf("target offsets of %s: %v, want 0:%d 1:49", resume, c, tr(0, 157))
	}
	if c := committed(t, f.c.Target.Bootstrap, active, f.remoteTopic); len(c) != 0 {
		t.Errorf("target offsets of active group %s: %v, want none", active, c)
	}
	if c := committed(t, f.c.Target.Bootstrap, forward, f.remoteTopic); c[0] != 199 || c[1] != 49 {
		t.Errorf("target offsets of %s: %v, want 0:199 (not moved back) 1:49", forward, c)
	}
	for _, g := range sum.PerGroup {
		if g.Sync == nil {
			t.Errorf("group %s: no sync report", g.Group)
			continue
		}
		switch g.Group {
		case resume:
			if g.Sync.Committed != 2 || g.Sync.Skipped != 0 {
				t.Errorf("sync of %s: %+v", g.Group, *g.Sync)
			}
		case active:
			if g.Sync.Committed != 0 || g.Sync.Members == 0 || !strings.HasPrefix(g.Sync.Reason, "active") {
				t.Errorf("sync of active group: %+v", *g.Sync)
			}
		case forward:
			if g.Sync.Committed != 1 || g.Sync.Skipped != 1 {
				t.Errorf("sync of %s: %+v", g.Group, *g.Sync)
			}
		}
	}
	if sum.SyncedOffsets != 3 {
		t.Errorf("synced offsets %d, want 3", sum.SyncedOffsets)
	}

	// A consumer of "resume" on the target continues where the source group
	// stopped: no record skipped, and only the records between the sync used
	// and the source position read again.
	read := f.resumeOnTarget(t, resume, n)
	for p, committedUp := range map[int32]int64{0: 157, 1: 49} {
		us := read[p]
		if len(us) == 0 || us[0] > committedUp {
			t.Fatalf("p%d: resumed at %v, after the source position %d: records skipped", p, us, committedUp)
		}
		for i := 1; i < len(us); i++ {
			if us[i] != us[i-1]+1 {
				t.Fatalf("p%d: gap after upstream %d: %d", p, us[i-1], us[i])
			}
		}
		wantFirst := tr(p, committedUp) - map[int32]int64{0: 5, 1: 0}[p]
		if us[0] != wantFirst {
			t.Errorf("p%d: resumed at upstream %d, want %d", p, us[0], wantFirst)
		}
		t.Logf("p%d: source group at %d, target group resumed at upstream %d: %d records read again", p, committedUp, us[0], committedUp-us[0])
	}

	// Round 2 with nothing new: every checkpoint is a duplicate.
	sum = runRound(t, j)
	if sum.CheckpointsWritten != 0 || sum.CheckpointsSkipped != 6 || sum.CheckpointsLoaded != 6 {
		t.Errorf("round 2: written %d skipped %d loaded %d, want 0, 6, 6", sum.CheckpointsWritten, sum.CheckpointsSkipped, sum.CheckpointsLoaded)
	}
}

// TestRoundIncremental runs several rounds on one Job (serve mode): later rounds read only the
// offset syncs written since the previous round and translate exactly as a store fed every sync
// in order (MM2's long-running task); a recreated offset-syncs topic is read again from the
// start.
func TestRoundIncremental(t *testing.T) {
	f := newFlow(t, 1)
	syncs := f.produceReplicated(t, map[int32]int{0: 100}, map[int32]int{0: 2}, 10)
	half := 0
	for half < len(syncs) && syncs[half].UpstreamOffset < 50 {
		half++
	}
	f.writeSyncs(t, syncs[:half]...)
	g := testkit.Name(t, "g")
	commit(t, f.c.Source.Bootstrap, g, f.topic, map[int32]int64{0: 45}, "")
	j := f.job(t, false, g)
	sum := runRound(t, j)
	if sum.OffsetSyncsFrom != 0 || sum.OffsetSyncsRead != int64(half) || sum.CheckpointsWritten != 1 {
		t.Fatalf("round 1: from %d read %d written %d, want 0, %d, 1", sum.OffsetSyncsFrom, sum.OffsetSyncsRead, sum.CheckpointsWritten, half)
	}

	f.writeSyncs(t, syncs[half:]...)
	commit(t, f.c.Source.Bootstrap, g, f.topic, map[int32]int64{0: 95}, "")
	sum = runRound(t, j)
	if sum.OffsetSyncsFrom != int64(half) || sum.OffsetSyncsRead != int64(len(syncs)-half) || sum.CheckpointsWritten != 1 {
		t.Fatalf("round 2: from %d read %d written %d, want %d, %d, 1", sum.OffsetSyncsFrom, sum.OffsetSyncsRead, sum.CheckpointsWritten, half, len(syncs)-half)
	}
	ref := offsetsync.NewStore()
	for _, s := range syncs {
		ref.Add(s)
	}
	ref.ReadToEnd()
	want, _ := ref.Translate(f.topic, 0, 95)
	got, _, _ := f.readCheckpoints(t)
	if c := got[cpKey{g, f.remoteTopic, 0}]; c.UpstreamOffset != 95 || c.DownstreamOffset != want {
		t.Errorf("round 2 checkpoint %v, want 95 -> %d", c, want)
	}

	// The offset-syncs topic is deleted and recreated with fewer records.
	adm := testkit.Admin(t, f.c.Source.Bootstrap)
	ctx := testkit.Context(t, time.Minute)
	if _, err := adm.DeleteTopic(ctx, f.syncsTopic); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "recreating "+f.syncsTopic, func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, f.syncsTopic)
		return err == nil && resp.Err == nil
	})
	// More records than before: only the topic id tells it is another topic.
	var again []mm2.OffsetSync
	for u := int64(0); u < 100; u += 4 {
		again = append(again, mm2.OffsetSync{Topic: f.topic, Partition: 0, UpstreamOffset: u, DownstreamOffset: u + 2})
	}
	again = append(again, mm2.OffsetSync{Topic: f.topic, Partition: 0, UpstreamOffset: 99, DownstreamOffset: 101})
	if len(again) <= len(syncs) {
		t.Fatalf("test needs more syncs in the new topic (%d) than in the old (%d)", len(again), len(syncs))
	}
	f.writeSyncs(t, again...)
	commit(t, f.c.Source.Bootstrap, g, f.topic, map[int32]int64{0: 100}, "")
	sum = runRound(t, j)
	if sum.OffsetSyncsFrom != 0 || sum.OffsetSyncsRead != int64(len(again)) || sum.CheckpointsWritten != 1 {
		t.Fatalf("round 3: from %d read %d written %d, want 0, %d, 1", sum.OffsetSyncsFrom, sum.OffsetSyncsRead, sum.CheckpointsWritten, len(again))
	}
	got, _, _ = f.readCheckpoints(t)
	if c := got[cpKey{g, f.remoteTopic, 0}]; c.UpstreamOffset != 100 || c.DownstreamOffset != 102 {
		t.Errorf("round 3 checkpoint %v, want 100 -> 102", c)
	}
}

func hasConfig(cs []kadm.Config, key, value string) bool {
	for _, c := range cs {
		if c.Key == key && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// TestRoundPreciseTranslation compares MM2's translation with PreciseTranslation on the same
// syncs: the precise checkpoint is closer to the group's position and a target consumer still
// skips nothing.
func TestRoundPreciseTranslation(t *testing.T) {
	f := newFlow(t, 1)
	n := map[int32]int{0: 200}
	syncs := f.produceReplicated(t, n, map[int32]int{0: 5}, 10)
	f.writeSyncs(t, syncs...)
	g := testkit.Name(t, "g")
	commit(t, f.c.Source.Bootstrap, g, f.topic, map[int32]int64{0: 157}, "")
	ref := offsetsync.NewStore()
	for _, s := range syncs {
		ref.Add(s)
	}
	ref.ReadToEnd()
	mm2Down, _ := ref.Translate(f.topic, 0, 157)

	gf, err := filter.Groups(g, "")
	if err != nil {
		t.Fatal(err)
	}
	j, err := checkpoint.New(context.Background(), checkpoint.Options{
		Flow:                              round.Flow{SourceAlias: f.src, TargetAlias: f.tgt},
		Groups:                            gf,
		CheckpointsTopicReplicationFactor: 1,
		SyncGroupOffsets:                  true,
		PreciseTranslation:                true,
	}, dial(f.c.Source.Bootstrap), dial(f.c.Target.Bootstrap), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sum := runRound(t, j)
	const want = 156 // one past the sync 150->155, the closest one before 157
	got, _, _ := f.readCheckpoints(t)
	if c := got[cpKey{g, f.remoteTopic, 0}]; c.DownstreamOffset != want || c.UpstreamOffset != 157 {
		t.Errorf("precise checkpoint %v, want 157 -> %d", c, want)
	}
	if sum.Translation != "precise" || len(sum.PerGroup) != 1 || sum.PerGroup[0].PreciseGain != want-mm2Down {
		t.Errorf("summary translation %q, groups %+v, want precise with a gain of %d", sum.Translation, sum.PerGroup, want-mm2Down)
	}
	read := f.resumeOnTarget(t, g, n)
	if us := read[0]; len(us) == 0 || us[0] > 157 || us[0] != want-5 {
		t.Errorf("resumed at %v, want upstream %d (no skip)", us, want-5)
	}
	t.Logf("group at 157: MM2 translation %d (%d records read again), precise %d (%d read again)",
		mm2Down, 157-(mm2Down-5), want, 157-(want-5))
}
