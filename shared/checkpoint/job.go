package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/offsetsync"
	"github.com/mm2go/mm2go/shared/round"
)

// UnavailableError reports that a cluster of the flow could not be reached:
// the round did nothing and should be retried later (serve answers 503).
type UnavailableError = round.UnavailableError

// Job runs checkpoint rounds for one flow. Its admin and producer clients are
// kept between rounds; readers are created per round. A Job runs one round
// at a time.
type Job struct {
	opts             Options
	source, target   ClientFunc
	log              *slog.Logger
	round.Clients    // kept between rounds; Close releases them
	checkpointsTopic string
	syncsTopic       string
	syncsOnTarget    bool
	gate             *round.Gate // one round at a time (Handle)

	// Kept between rounds (serve mode), as a long-running MM2 task keeps
	// them: the checkpoint and offset-sync stores and where reading their
	// topics continues. A nil store is read from the start.
	cps       *checkpointStore
	cpsNext   int64
	cpsID     kadm.TopicID
	syncs     *offsetsync.Store
	syncsNext int64
	syncsID   kadm.TopicID
	syncKeys  map[string]mm2.OffsetSync
	// hist is the recent sync history of PreciseTranslation (nil when off
	// or when the stores were built without the checkpoints: latestOnly).
	hist *history
}

// New returns a Job for the flow described by opts. source and target build
// clients for the two clusters; nothing is sent before the first round.
func New(ctx context.Context, opts Options, source, target ClientFunc, logger *slog.Logger) (*Job, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// A short metadata cache: kadm answers from it, and a topic created a
	// moment ago (by this job, the mirror function or MM2) must be seen.
	fresh := kgo.MetadataMinAge(100 * time.Millisecond)
	clients, err := round.Dial(ctx, "checkpoint", source, target, opts.SourceAlias, opts.TargetAlias,
		[]kgo.Opt{fresh}, []kgo.Opt{fresh, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)})
	if err != nil {
		return nil, err
	}
	j := &Job{
		opts: opts, source: source, target: target, log: logger, Clients: clients,
		checkpointsTopic: opts.Policy.CheckpointsTopic(opts.SourceAlias),
		gate:             round.NewGate("checkpoint", opts.Metrics),
	}
	j.gate.Logger = logger
	if opts.OffsetSyncsTopicLocation == SyncsOnTarget {
		j.syncsTopic, j.syncsOnTarget = opts.Policy.OffsetSyncsTopic(opts.SourceAlias), true
	} else {
		j.syncsTopic = opts.Policy.OffsetSyncsTopic(opts.TargetAlias)
	}
	return j, nil
}

// CheckpointsTopic is the checkpoints topic the job writes on the target.
func (j *Job) CheckpointsTopic() string { return j.checkpointsTopic }

// OffsetSyncsTopic is the offset-syncs topic the job reads and the cluster
// ("source" or "target") it lives on.
func (j *Job) OffsetSyncsTopic() (topic, cluster string) {
	if j.syncsOnTarget {
		return j.syncsTopic, "target"
	}
	return j.syncsTopic, "source"
}

// syncBackoff bounds the retries of the group offset sync within a round.
var syncBackoff = cluster.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Budget: 30 * time.Second}

// ping checks that both clusters answer a metadata request.
func (j *Job) ping(ctx context.Context) error { return j.Clients.Ping(ctx, &j.opts.Flow, true) }

// Round runs one checkpoint round and reports what it did. A non-nil error
// means the round stopped early; the summary then says how far it got.
func (j *Job) Round(ctx context.Context) (*Summary, error) {
	start := j.opts.Now()
	sum := &Summary{
		Source: j.opts.SourceAlias, Target: j.opts.TargetAlias,
		Started: start.UTC(), CheckpointsTopic: j.checkpointsTopic,
		OffsetSyncsTopic: j.syncsTopic, PerGroup: []GroupSummary{},
		Translation: "mm2",
	}
	defer func() { sum.DurationMS = j.opts.Now().Sub(start).Milliseconds() }()
	if j.opts.DisableCheckpoints {
		sum.Disabled = true
		j.log.Info("checkpoints disabled (emit.checkpoints.enabled=false): nothing to do")
		return sum, nil
	}
	if err := j.ping(ctx); err != nil {
		return sum, err
	}
	if _, _, err := cluster.EnsureTopic(ctx, j.Tgt, j.checkpointsTopic, 1, j.opts.CheckpointsTopicReplicationFactor, j.opts.CheckpointsTopicConfigs); err != nil {
		return sum, fmt.Errorf("checkpoints topic on target %q: %w", j.opts.TargetAlias, err)
	}

	cps, err := j.loadCheckpoints(ctx, sum)
	if err != nil {
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
		// MM2 3.8+: start with an empty store and only trust the newest syncs.
		sum.CheckpointsLoadError = err.Error()
		j.log.Warn("could not load existing checkpoints; starting empty and translating from the newest offset syncs only",
			"topic", j.checkpointsTopic, "err", err)
		cps = newCheckpointStore()
	}
	syncs, err := j.loadOffsetSyncs(ctx, sum, sum.CheckpointsLoadError != "")
	if err != nil {
		return sum, err
	}
	if j.hist != nil {
		sum.Translation = "precise"
	}

	groups, err := j.listGroups(ctx, cps.groupNames())
	if err != nil {
		return sum, err
	}
	offsetsRead := time.Now()
	sum.Groups = len(groups)
	var out []*kgo.Record
	var emitted []mm2.Checkpoint
	for _, g := range groups {
		gs, recs, cs, err := j.checkpointGroup(g, syncs, cps)
		if err != nil {
			return sum, err
		}
		out = append(out, recs...)
		emitted = append(emitted, cs...)
		sum.add(gs)
	}
	if len(out) > 0 {
		if err := j.Tgt.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return sum, fmt.Errorf("writing %d checkpoints to %s on target %q: %w", len(out), j.checkpointsTopic, j.opts.TargetAlias, err)
		}
		latency := time.Since(offsetsRead)
		for _, c := range emitted {
			j.opts.Metrics.CheckpointLatency(ctx, c.Group, c.Topic, c.Partition, latency)
		}
		for _, c := range emitted {
			cps.put(c)
		}
		if j.opts.WriteConnectOffsets {
			j.writeConnectOffsets(ctx, emitted)
		}
	}
	sum.CheckpointsWritten = len(out)

	if j.opts.SyncGroupOffsets {
		// Retried here, not only with the whole round (round.Once), so that the summary still
		// counts the checkpoints written above: a brand-new target answers
		// COORDINATOR_NOT_AVAILABLE until it has created __consumer_offsets.
		err := cluster.Retry(ctx, j.log, "syncing group offsets to target "+j.opts.TargetAlias, syncBackoff, func(ctx context.Context) error {
			sum.SyncedOffsets = 0
			return j.syncGroupOffsets(ctx, groups, cps, sum)
		})
		if err != nil {
			return sum, err
		}
	}
	j.log.Info("checkpoint round done",
		"groups", sum.Groups, "checkpoints_written", sum.CheckpointsWritten,
		"checkpoints_skipped", sum.CheckpointsSkipped, "untranslatable", sum.Untranslatable,
		"synced_offsets", sum.SyncedOffsets, "offset_syncs_read", sum.OffsetSyncsRead)
	return sum, nil
}

// loadCheckpoints brings the checkpoint store up to date with the
// checkpoints topic: a full read in the first round (MM2's CheckpointStore at
// task start), then only what was added since the previous round (the
// checkpoints a long-running MM2 task would hold in memory, plus any written
// by another instance).
func (j *Job) loadCheckpoints(ctx context.Context, sum *Summary) (*checkpointStore, error) {
	store, from := j.cps, j.cpsNext
	if store == nil {
		store, from = newCheckpointStore(), -1
	}
	bad := 0
	res, err := readPartition(ctx, j.target, j.checkpointsTopic, 0, from, j.cpsID, func(r *kgo.Record) error {
		c, err := mm2.DecodeCheckpoint(r.Key, r.Value)
		if err != nil {
			bad++ // MM2 skips undecodable records too
			return nil
		}
		store.put(c)
		return nil
	})
	if bad > 0 {
		j.log.Warn("skipped undecodable records in the checkpoints topic", "topic", j.checkpointsTopic, "records", bad)
	}
	switch {
	case errors.Is(err, errTopicMissing):
		j.cps = nil
		return newCheckpointStore(), nil
	case errors.Is(err, errPositionGone) && j.cps != nil:
		j.log.Warn("checkpoints topic changed under the job; reading it again from the start", "topic", j.checkpointsTopic, "err", err)
		j.cps = nil
		return j.loadCheckpoints(ctx, sum)
	case err != nil && j.cps != nil:
		// Keep what is known (as MM2's in-memory store would); continue
		// after what was read.
		j.log.Warn("could not read new checkpoints; using those already known", "topic", j.checkpointsTopic, "err", err)
		j.cpsNext = res.Next
		sum.CheckpointsLoaded = j.cps.len()
		return j.cps, nil
	case err != nil:
		return nil, err
	case res.Incomplete && j.cps == nil:
		return nil, fmt.Errorf("read of %s ended at offset %d before its end offset %d", j.checkpointsTopic, res.Next, res.End)
	}
	j.cps, j.cpsNext, j.cpsID = store, res.Next, res.TopicID
	sum.CheckpointsLoaded = store.len()
	return store, nil
}

// loadOffsetSyncs brings the offset-sync store up to date with the
// offset-syncs topic: the first round reads it from the start to its end
// (MM2's OffsetSyncStore at task start; latestOnly is MM2's
// initializationMustReadToEnd), later rounds add only the syncs written
// since, exactly as the long-running MM2 task keeps adding them.
func (j *Job) loadOffsetSyncs(ctx context.Context, sum *Summary, latestOnly bool) (*offsetsync.Store, error) {
	dial, cluster := j.source, "source"
	if j.syncsOnTarget {
		dial, cluster = j.target, "target"
	}
	fresh := j.syncs == nil
	if fresh {
		j.syncs = offsetsync.NewStore(offsetsync.WithInitializationMustReadToEnd(latestOnly))
		j.syncsNext = -1
		j.syncKeys = map[string]mm2.OffsetSync{}
		j.hist = nil
		if j.opts.PreciseTranslation && !latestOnly {
			j.hist = newHistory(j.opts.HistorySyncs)
		}
	}
	store, keys, hist := j.syncs, j.syncKeys, j.hist
	// Decoding a key allocates its topic string; keys repeat (one per source
	// partition), so decode each distinct key once and parse the fixed-size
	// value (two int64s, MM2's OffsetSync value schema) in place.
	bad := 0
	res, err := readPartition(ctx, dial, j.syncsTopic, 0, j.syncsNext, j.syncsID, func(r *kgo.Record) error {
		base, ok := keys[string(r.Key)]
		if !ok || len(r.Value) < 16 {
			s, err := mm2.DecodeOffsetSync(r.Key, r.Value)
			if err != nil {
				bad++
				return nil
			}
			keys[string(r.Key)] = mm2.OffsetSync{Topic: s.Topic, Partition: s.Partition}
			store.Add(s)
			if hist != nil {
				hist.add(s)
			}
			return nil
		}
		base.UpstreamOffset = int64(binary.BigEndian.Uint64(r.Value[0:8]))
		base.DownstreamOffset = int64(binary.BigEndian.Uint64(r.Value[8:16]))
		store.Add(base)
		if hist != nil {
			hist.add(base)
		}
		return nil
	})
	if bad > 0 {
		j.log.Warn("skipped undecodable offset syncs", "topic", j.syncsTopic, "records", bad)
	}
	sum.OffsetSyncsFrom, sum.OffsetSyncsRead = res.From, res.Records
	switch {
	case errors.Is(err, errTopicMissing):
		j.log.Warn("offset-syncs topic not found: nothing can be translated until the mirror function writes offset syncs",
			"topic", j.syncsTopic, "cluster", cluster)
		j.syncs = nil
		empty := offsetsync.NewStore()
		empty.ReadToEnd()
		return empty, nil
	case errors.Is(err, errPositionGone) && !fresh:
		j.log.Warn("offset-syncs topic changed under the job; reading it again from the start", "topic", j.syncsTopic, "err", err)
		j.syncs = nil
		return j.loadOffsetSyncs(ctx, sum, latestOnly)
	case err != nil:
		if fresh {
			j.syncs = nil
		} else {
			j.syncsNext = res.Next // every sync before it was added
		}
		return nil, fmt.Errorf("reading offset syncs from %s on %s: %w", j.syncsTopic, cluster, err)
	case res.Incomplete:
		// Translations from a partial read are older, hence safe (never skip).
		j.log.Warn("offset-syncs read ended before the end offset", "topic", j.syncsTopic, "next", res.Next, "end", res.End)
	}
	j.syncsNext, j.syncsID = res.Next, res.TopicID
	if fresh {
		store.ReadToEnd()
	}
	return store, nil
}

// group is a source consumer group with its committed offsets on accepted
// topics.
type group struct {
	name    string
	offsets []kadm.Offset // sorted by topic, partition
}

// listGroups lists the source's consumer groups accepted by the group filter
// that have at least one committed offset on a topic accepted by the topic
// filter (MirrorCheckpointConnector.findConsumerGroups).
//
// The groups in known (those with a checkpoint on the target) are fetched even when the
// listing leaves them out. A broker lists only the groups of the __consumer_offsets
// partitions it has taken up, and a broker that has just restarted answers ListGroups with an
// empty list and no error until it leads them again; fetching such a group's offsets then
// fails with a retriable coordinator error, so the round is retried instead of ending with
// nothing done. A known group deleted on the source has no committed offsets and is skipped.
func (j *Job) listGroups(ctx context.Context, known []string) ([]group, error) {
	listed, err := j.SrcAdm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing consumer groups on source %q: %w", j.opts.SourceAlias, err)
	}
	var names []string
	for name, g := range listed {
		if !isConsumerGroup(g) || !j.opts.Groups.Accept(name) {
			continue
		}
		names = append(names, name)
	}
	for _, name := range known {
		if _, ok := listed[name]; ok || !j.opts.Groups.Accept(name) {
			continue
		}
		j.log.Debug("group with checkpoints not listed on the source; fetching its offsets anyway", "group", name)
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, nil
	}
	fetched := j.SrcAdm.FetchManyOffsets(ctx, names...)
	var out []group
	for _, name := range names {
		f, ok := fetched[name]
		if !ok {
			continue
		}
		if f.Err != nil {
			if cluster.Retriable(f.Err) {
				// The coordinator is loading or moving: retry the round (round.Once) rather
				// than skip the group's checkpoints.
				return nil, fmt.Errorf("fetching committed offsets of group %q on source %q: %w", name, j.opts.SourceAlias, f.Err)
			}
			if !errors.Is(f.Err, kerr.GroupIDNotFound) {
				// One group's failure (e.g. no DESCRIBE right on it) must not
				// stop the others' checkpoints.
				j.log.Warn("cannot fetch committed offsets of a group; skipping it", "group", name, "err", f.Err)
			}
			continue
		}
		g := group{name: name}
		f.Fetched.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil || o.At < 0 || !j.opts.Topics.Accept(o.Topic) {
				return
			}
			g.offsets = append(g.offsets, o.Offset)
		})
		if len(g.offsets) == 0 {
			continue
		}
		sort.Slice(g.offsets, func(a, b int) bool {
			if g.offsets[a].Topic != g.offsets[b].Topic {
				return g.offsets[a].Topic < g.offsets[b].Topic
			}
			return g.offsets[a].Partition < g.offsets[b].Partition
		})
		out = append(out, g)
	}
	return out, nil
}

// isConsumerGroup keeps what Java's Admin.listConsumerGroups returns: classic
// groups using the consumer protocol (or none: offsets-only groups) and
// KIP-848 consumer groups; not Connect, share or streams groups.
func isConsumerGroup(g kadm.ListedGroup) bool {
	switch g.GroupType {
	case "", "classic", "consumer":
	default:
		return false
	}
	return g.ProtocolType == "consumer" || g.ProtocolType == ""
}

// renameTopic is MirrorCheckpointTask.renameTopicPartition: a topic that came
// from the target keeps its original name, any other gets the remote name.
func (j *Job) renameTopic(topic string) string {
	if src, ok := j.opts.Policy.TopicSource(topic); ok && src == j.opts.TargetAlias {
		return j.opts.Policy.OriginalTopic(topic)
	}
	return j.opts.Policy.FormatRemoteTopic(j.opts.SourceAlias, topic)
}

// checkpointGroup computes the checkpoints of one group that are worth
// writing.
func (j *Job) checkpointGroup(g group, syncs *offsetsync.Store, cps *checkpointStore) (GroupSummary, []*kgo.Record, []mm2.Checkpoint, error) {
	gs := GroupSummary{Group: g.name, Partitions: len(g.offsets)}
	now := j.opts.Now()
	var recs []*kgo.Record
	var emitted []mm2.Checkpoint
	for _, o := range g.offsets {
		down, ok := syncs.Translate(o.Topic, o.Partition, o.At)
		if j.hist != nil {
			// Both answers never skip a record; the larger re-reads less.
			if pd, pok := j.hist.translate(o.Topic, o.Partition, o.At); pok && (!ok || pd > down) {
				if ok && down >= 0 {
					gs.PreciseGain += pd - down
				}
				down, ok = pd, true
			}
		}
		if !ok {
			gs.NoSync++
			continue
		}
		if down < 0 {
			gs.OlderThanSyncs++
			continue
		}
		c := mm2.Checkpoint{
			Group: g.name, Topic: j.renameTopic(o.Topic), Partition: o.Partition,
			UpstreamOffset: o.At, DownstreamOffset: down, Metadata: o.Metadata,
		}
		last, stored := cps.get(c.Group, c.Topic, c.Partition)
		if !moreRecent(last, stored, c) {
			gs.Skipped++
			continue
		}
		key, value, err := c.Encode()
		if err != nil {
			return gs, nil, nil, fmt.Errorf("encoding checkpoint %v: %w", c, err)
		}
		recs = append(recs, &kgo.Record{Topic: j.checkpointsTopic, Partition: 0, Key: key, Value: value, Timestamp: now})
		emitted = append(emitted, c)
		gs.Written++
		j.log.Debug("checkpoint", "group", g.name, "topic", c.Topic, "partition", c.Partition,
			"upstream", c.UpstreamOffset, "downstream", c.DownstreamOffset)
	}
	return gs, recs, emitted, nil
}

// writeConnectOffsets writes the Connect source offsets MM2's checkpoint task
// leaves behind for every emitted checkpoint, when the Connect offsets topic
// exists (it is created by the mirror function or by MM2). MM2 never reads
// them back, so failures are only logged.
func (j *Job) writeConnectOffsets(ctx context.Context, emitted []mm2.Checkpoint) {
	topic := j.opts.OffsetStorageTopic
	md, err := j.TgtAdm.Metadata(ctx, topic)
	if err != nil {
		j.log.Warn("Connect offsets not written", "topic", topic, "err", err)
		return
	}
	d, ok := md.Topics[topic]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		j.log.Debug("Connect offsets topic absent; checkpoint source offsets not written", "topic", topic)
		return
	}
	n := int32(len(d.Partitions))
	recs := make([]*kgo.Record, 0, len(emitted))
	for _, c := range emitted {
		p := mm2.CheckpointPosition(c.Topic, c.Partition, c.Group, n)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p.Partition, Key: p.Key, Value: p.Value})
	}
	if err := j.Tgt.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		j.log.Warn("Connect offsets not written", "topic", topic, "err", err)
	}
}

// Ready reports whether both clusters answer a metadata request (serve.Readier).
func (j *Job) Ready(ctx context.Context) error { return j.ping(ctx) }

// Gate is the job's round gate: one round at a time.
func (j *Job) Gate() *round.Gate { return j.gate }
