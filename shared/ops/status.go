package ops

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/offsetsync"
)

// heartbeatTail is how many records from the end of each heartbeats partition status reads.
const heartbeatTail = 64

// Status is the state of one flow as its internal topics tell it.
type Status struct {
	Source string    `json:"source"`
	Target string    `json:"target"`
	At     time.Time `json:"at"`
	// Topics holding the state read.
	OffsetsTopic       string `json:"offsets_topic"`
	OffsetSyncsTopic   string `json:"offset_syncs_topic"`
	OffsetSyncsCluster string `json:"offset_syncs_cluster"`
	CheckpointsTopic   string `json:"checkpoints_topic"`

	Partitions []PartitionStatus `json:"partitions"`
	Groups     []GroupStatus     `json:"groups"`
	Heartbeats HeartbeatStatus   `json:"heartbeats"`
	// TotalLag is the sum of the partitions' lag.
	TotalLag int64 `json:"total_lag"`
	// Notes are things worth knowing that are not errors (a topic missing, a tail compacted).
	Notes []string `json:"notes,omitempty"`
}

// PartitionStatus is one source partition of the flow.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Remote    string `json:"remote"`
	Partition int32  `json:"partition"`
	// Position is the stored position (upstream offset of the last copied record); nil when
	// none is stored (nothing copied yet).
	Position    *int64 `json:"position"`
	SourceStart int64  `json:"source_start"`
	SourceEnd   int64  `json:"source_end"`
	// Lag is SourceEnd minus the next offset to copy (position+1, or SourceStart).
	Lag int64 `json:"lag"`
	// LagMS is the age of the oldest record not copied yet (now minus its timestamp), the lag
	// in time; nil when nothing is left to copy.
	LagMS *int64 `json:"lag_ms"`
	// TargetEnd is the remote partition's end offset, -1 when it does not exist.
	TargetEnd int64 `json:"target_end"`
	// LastSync is the newest offset sync for the partition; nil when none.
	LastSync *SyncInfo `json:"last_sync"`
	// Gap is set when the stored position is outside the source log: records deleted before
	// they were mirrored, or a recreated topic (see engine.Gap). The burst that copies around
	// it reports it too (summary, log, metrics); once it has, the position is back in the log.
	Gap *engine.Gap `json:"gap,omitempty"`
}

// SyncInfo is one offset sync and its record's timestamp.
type SyncInfo struct {
	Upstream   int64     `json:"upstream"`
	Downstream int64     `json:"downstream"`
	Timestamp  time.Time `json:"timestamp"`
	AgeMS      int64     `json:"age_ms"`
}

// GroupStatus is one consumer group's partition of a replicated topic.
type GroupStatus struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`  // source topic
	Remote    string `json:"remote"` // target topic
	Partition int32  `json:"partition"`
	// SourceCommitted is the group's committed offset on the source, -1 when none.
	SourceCommitted int64 `json:"source_committed"`
	// TargetCommitted is the group's committed offset on the remote topic, -1 when none.
	TargetCommitted int64 `json:"target_committed"`
	// Checkpoint is the newest checkpoint; nil when none.
	Checkpoint *CheckpointInfo `json:"checkpoint"`
	// ReReads is how many source records a consumer failing over now (starting at the
	// checkpoint's downstream offset) would read again: SourceCommitted minus the upstream
	// offset the checkpoint's downstream offset maps back to through the offset syncs. -1 when
	// unknown (no checkpoint or no source commit).
	ReReads int64 `json:"rereads"`
	// ReReadsBound is true when no offset sync maps the downstream offset back, so ReReads
	// only counts the commits since the checkpoint (a lower bound).
	ReReadsBound bool `json:"rereads_lower_bound,omitempty"`
}

// CheckpointInfo is one checkpoint and its record's timestamp.
type CheckpointInfo struct {
	Upstream   int64     `json:"upstream"`
	Downstream int64     `json:"downstream"`
	Metadata   string    `json:"metadata,omitempty"`
	Timestamp  time.Time `json:"timestamp"`
	AgeMS      int64     `json:"age_ms"`
}

// HeartbeatStatus reports the heartbeats of the flow.
type HeartbeatStatus struct {
	// ReplicatedTopic is <source>.heartbeats on the target (heartbeats that crossed the flow).
	ReplicatedTopic string `json:"replicated_topic"`
	// Replicated is the newest heartbeat found there that was written into the source cluster
	// (target alias = the flow's source alias); LatencyMS is now minus its timestamp.
	Replicated *HeartbeatInfo `json:"replicated"`
	LatencyMS  *int64         `json:"latency_ms"`
	// Emitted is the newest source->target heartbeat in "heartbeats" on the target.
	Emitted *HeartbeatInfo `json:"emitted"`
}

// HeartbeatInfo is one heartbeat.
type HeartbeatInfo struct {
	SourceAlias string    `json:"source_cluster_alias"`
	TargetAlias string    `json:"target_cluster_alias"`
	Timestamp   time.Time `json:"timestamp"`
	AgeMS       int64     `json:"age_ms"`
}

type gtp struct {
	group, topic string
	partition    int32
}

// Status reads the flow's state. It fails only when a cluster cannot be read; missing internal
// topics are reported as notes.
func (o *Ops) Status(ctx context.Context) (*Status, error) {
	now := o.now()
	syncTopic, syncSide := o.eng.OffsetSyncsTopic()
	st := &Status{
		Source: o.opts.SourceAlias, Target: o.opts.TargetAlias, At: now,
		OffsetsTopic: o.eng.OffsetsTopic(), OffsetSyncsTopic: syncTopic, OffsetSyncsCluster: syncSide.String(),
		CheckpointsTopic: o.opts.Policy.CheckpointsTopic(o.opts.SourceAlias),
		Partitions:       []PartitionStatus{}, Groups: []GroupStatus{},
	}
	topics, err := o.eng.DiscoverTopics(ctx)
	if err != nil {
		return nil, err
	}
	remote := map[string]string{}
	var tps []engine.TP
	for _, t := range topics {
		remote[t.Source] = t.Remote
		for p := int32(0); p < t.Partitions; p++ {
			tps = append(tps, engine.TP{Topic: t.Source, Partition: p})
		}
	}

	positions, err := o.positions(ctx, tps, st)
	if err != nil {
		return nil, err
	}
	syncs, store, err := o.readSyncs(ctx)
	if err != nil {
		return nil, err
	}
	if len(syncs) == 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("no offset syncs in %s on %s", syncTopic, syncSide))
	}

	for _, t := range topics {
		off, err := o.bothOffsets(ctx, t)
		if err != nil {
			return nil, err
		}
		if off.tgtEnds == nil {
			st.Notes = append(st.Notes, fmt.Sprintf("remote topic %s does not exist on the target yet", t.Remote))
		}
		for p := int32(0); p < t.Partitions; p++ {
			ps := PartitionStatus{Topic: t.Source, Remote: t.Remote, Partition: p, SourceStart: off.srcStarts[p], SourceEnd: off.srcEnds[p], TargetEnd: -1}
			next := ps.SourceStart
			if pos, ok := positions[engine.TP{Topic: t.Source, Partition: p}]; ok {
				ps.Position = &pos
				next = max(next, pos+1)
				if ps.Gap = engine.PositionGap(engine.TP{Topic: t.Source, Partition: p}, pos, ps.SourceStart, ps.SourceEnd); ps.Gap != nil {
					next = ps.SourceStart // the next run copies from the log start
					st.Notes = append(st.Notes, ps.Gap.String()+": the next run copies from the log start")
				}
			}
			ps.Lag = max(0, ps.SourceEnd-next)
			st.TotalLag += ps.Lag
			if e, ok := off.tgtEnds[p]; ok {
				ps.TargetEnd = e
			}
			if s, ok := syncs[engine.TP{Topic: t.Source, Partition: p}]; ok {
				ps.LastSync = &SyncInfo{Upstream: s.sync.UpstreamOffset, Downstream: s.sync.DownstreamOffset, Timestamp: s.ts, AgeMS: now.Sub(s.ts).Milliseconds()}
			}
			st.Partitions = append(st.Partitions, ps)
		}
		if err := o.lagAges(ctx, t.Source, st.Partitions[len(st.Partitions)-int(t.Partitions):], now); err != nil {
			return nil, err
		}
	}

	if err := o.groupStatus(ctx, st, remote, store, now); err != nil {
		return nil, err
	}
	if err := o.heartbeatStatus(ctx, st, now); err != nil {
		return nil, err
	}
	o.ages(st)
	return st, nil
}

// ages computes the ages of syncs, checkpoints and heartbeats against the time the reads
// ended: records written while status was reading are then not "from the future".
func (o *Ops) ages(st *Status) {
	now := o.now()
	for i := range st.Partitions {
		if s := st.Partitions[i].LastSync; s != nil {
			s.AgeMS = now.Sub(s.Timestamp).Milliseconds()
		}
	}
	for i := range st.Groups {
		if c := st.Groups[i].Checkpoint; c != nil {
			c.AgeMS = now.Sub(c.Timestamp).Milliseconds()
		}
	}
	hb := &st.Heartbeats
	for _, h := range []*HeartbeatInfo{hb.Replicated, hb.Emitted} {
		if h != nil {
			h.AgeMS = now.Sub(h.Timestamp).Milliseconds()
		}
	}
	if hb.Replicated != nil {
		l := hb.Replicated.AgeMS
		hb.LatencyMS = &l
	}
}

// positions reads the stored positions of tps, if the offsets topic exists.
func (o *Ops) positions(ctx context.Context, tps []engine.TP, st *Status) (map[engine.TP]int64, error) {
	n, err := o.partitionCount(ctx, engine.Target, o.eng.OffsetsTopic())
	if err != nil {
		return nil, err
	}
	if n == 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("offsets topic %s does not exist on the target: nothing was copied yet", o.eng.OffsetsTopic()))
		return map[engine.TP]int64{}, nil
	}
	return o.eng.ReadPositions(ctx, tps, n)
}

type syncRecord struct {
	sync mm2.OffsetSync
	ts   time.Time
}

// readSyncs reads the whole offset-syncs topic: the newest sync per partition with its record
// timestamp, and MM2's translation index (64 slots per partition) for mapping back.
func (o *Ops) readSyncs(ctx context.Context) (map[engine.TP]syncRecord, *offsetsync.Store, error) {
	topic, side := o.eng.OffsetSyncsTopic()
	newest := map[engine.TP]syncRecord{}
	store := offsetsync.NewStore()
	err := o.readAll(ctx, side, topic, func(r *kgo.Record) error {
		s, err := mm2.DecodeOffsetSync(r.Key, r.Value)
		if err != nil {
			return nil // MM2 skips what it cannot decode too
		}
		store.Add(s)
		newest[engine.TP{Topic: s.Topic, Partition: s.Partition}] = syncRecord{s, r.Timestamp}
		return nil
	})
	store.ReadToEnd()
	return newest, store, err
}

// mapBack returns the upstream offset of the record a consumer starting at downstream offset
// down reads first, as far as the offset syncs tell: from the retained sync with the largest
// downstream offset <= down, upstream + (down - downstream) (a lower bound where the source
// has gaps). ok is false when no sync is old enough.
func mapBack(store *offsetsync.Store, topic string, partition int32, down int64) (int64, bool) {
	var best *mm2.OffsetSync
	for _, s := range store.Slots(topic, partition) {
		if s.DownstreamOffset <= down && (best == nil || s.DownstreamOffset > best.DownstreamOffset) {
			s := s
			best = &s
		}
	}
	if best == nil {
		return 0, false
	}
	return best.UpstreamOffset + (down - best.DownstreamOffset), true
}

func (o *Ops) groupStatus(ctx context.Context, st *Status, remote map[string]string, store *offsetsync.Store, now time.Time) error {
	// Checkpoints: last record per (group, topic, partition) wins, as in MM2's CheckpointStore.
	cps := map[gtp]CheckpointInfo{}
	if err := o.readAll(ctx, engine.Target, st.CheckpointsTopic, func(r *kgo.Record) error {
		c, err := mm2.DecodeCheckpoint(r.Key, r.Value)
		if err != nil {
			return nil
		}
		cps[gtp{c.Group, c.Topic, c.Partition}] = CheckpointInfo{Upstream: c.UpstreamOffset, Downstream: c.DownstreamOffset,
			Metadata: c.Metadata, Timestamp: r.Timestamp, AgeMS: now.Sub(r.Timestamp).Milliseconds()}
		return nil
	}); err != nil {
		return err
	}

	listed, err := o.srcAdm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("listing source consumer groups: %w", err)
	}
	var names []string
	for _, g := range listed.Groups() {
		if o.groups.Accept(g) {
			names = append(names, g)
		}
	}
	for k := range cps {
		if o.groups.Accept(k.group) {
			names = append(names, k.group)
		}
	}
	sort.Strings(names)
	names = compactStrings(names)
	if len(names) == 0 {
		return nil
	}
	srcOff := o.srcAdm.FetchManyOffsets(ctx, names...)
	tgtOff := o.tgtAdm.FetchManyOffsets(ctx, names...)
	upstreamOf := map[string]string{}
	for src, rem := range remote {
		upstreamOf[rem] = src
	}
	rows := map[gtp]*GroupStatus{}
	row := func(group, source string, p int32) *GroupStatus {
		k := gtp{group, source, p}
		if r := rows[k]; r != nil {
			return r
		}
		r := &GroupStatus{Group: group, Topic: source, Remote: remote[source], Partition: p, SourceCommitted: -1, TargetCommitted: -1, ReReads: -1}
		rows[k] = r
		return r
	}
	for _, g := range names {
		if r, ok := srcOff[g]; ok && r.Err == nil {
			r.Fetched.Each(func(c kadm.OffsetResponse) {
				if c.Err == nil && c.At >= 0 && o.eng.Selected(c.Topic) {
					row(g, c.Topic, c.Partition).SourceCommitted = c.At
				}
			})
		}
		if r, ok := tgtOff[g]; ok && r.Err == nil {
			r.Fetched.Each(func(c kadm.OffsetResponse) {
				if src, ok := upstreamOf[c.Topic]; ok && c.Err == nil && c.At >= 0 {
					row(g, src, c.Partition).TargetCommitted = c.At
				}
			})
		}
	}
	for k, c := range cps {
		src, ok := upstreamOf[k.topic]
		if !ok || !o.groups.Accept(k.group) {
			continue
		}
		c := c
		row(k.group, src, k.partition).Checkpoint = &c
	}
	for _, r := range rows {
		if r.Checkpoint == nil || r.SourceCommitted < 0 {
			continue
		}
		back, ok := mapBack(store, r.Topic, r.Partition, r.Checkpoint.Downstream)
		if ok {
			back = min(back, r.Checkpoint.Upstream)
		} else {
			back, r.ReReadsBound = r.Checkpoint.Upstream, true
		}
		r.ReReads = max(0, r.SourceCommitted-back)
		st.Groups = append(st.Groups, *r)
	}
	for _, r := range rows {
		if r.Checkpoint == nil || r.SourceCommitted < 0 {
			st.Groups = append(st.Groups, *r)
		}
	}
	sort.Slice(st.Groups, func(i, j int) bool {
		a, b := st.Groups[i], st.Groups[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return nil
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func (o *Ops) heartbeatStatus(ctx context.Context, st *Status, now time.Time) error {
	hbTopic := o.opts.Policy.HeartbeatsTopic()
	st.Heartbeats.ReplicatedTopic = o.opts.Policy.FormatRemoteTopic(o.opts.SourceAlias, hbTopic)
	newest := func(topic string, want func(mm2.Heartbeat) bool) (*HeartbeatInfo, error) {
		starts, ends, err := o.offsets(ctx, engine.Target, topic)
		if err != nil || starts == nil {
			return nil, err
		}
		ranges := map[int32]partRange{}
		for p, s := range starts {
			ranges[p] = partRange{max(s, ends[p]-heartbeatTail), ends[p]}
		}
		var best *HeartbeatInfo
		_, err = o.scan(ctx, engine.Target, topic, ranges, func(r *kgo.Record) error {
			h, err := mm2.DecodeHeartbeat(r.Key, r.Value)
			if err != nil || !want(h) {
				return nil
			}
			ts := time.UnixMilli(h.Timestamp)
			if best == nil || ts.After(best.Timestamp) {
				best = &HeartbeatInfo{SourceAlias: h.SourceAlias, TargetAlias: h.TargetAlias, Timestamp: ts, AgeMS: now.Sub(ts).Milliseconds()}
			}
			return nil
		})
		return best, err
	}
	var err error
	// Heartbeats written into the source cluster (by the reverse flow target->source, or further
	// upstream hops) are the ones that crossed this flow; others may share a test cluster.
	st.Heartbeats.Replicated, err = newest(st.Heartbeats.ReplicatedTopic, func(h mm2.Heartbeat) bool { return h.TargetAlias == o.opts.SourceAlias })
	if err != nil {
		return err
	}
	if st.Heartbeats.Replicated != nil {
		l := st.Heartbeats.Replicated.AgeMS
		st.Heartbeats.LatencyMS = &l
	} else {
		st.Notes = append(st.Notes, fmt.Sprintf("no heartbeat written into cluster %q found in %s on the target (a reverse heartbeat flow %s->%s writes them)",
			o.opts.SourceAlias, st.Heartbeats.ReplicatedTopic, o.opts.TargetAlias, o.opts.SourceAlias))
	}
	st.Heartbeats.Emitted, err = newest(hbTopic, func(h mm2.Heartbeat) bool {
		return h.SourceAlias == o.opts.SourceAlias && h.TargetAlias == o.opts.TargetAlias
	})
	return err
}

// lagAges sets LagMS of the lagging partitions of topic: it reads the first record not copied
// yet of each (one fetch per partition).
func (o *Ops) lagAges(ctx context.Context, topic string, parts []PartitionStatus, now time.Time) error {
	ranges := map[int32]partRange{}
	idx := map[int32]int{}
	for i, p := range parts {
		if p.Lag > 0 {
			next := p.SourceEnd - p.Lag
			ranges[p.Partition] = partRange{next, next + 1}
			idx[p.Partition] = i
		}
	}
	if len(ranges) == 0 {
		return nil
	}
	_, err := o.scan(ctx, engine.Source, topic, ranges, func(r *kgo.Record) error {
		if i, ok := idx[r.Partition]; ok && parts[i].LagMS == nil {
			ms := now.Sub(r.Timestamp).Milliseconds()
			parts[i].LagMS = &ms
		}
		return nil
	})
	return err
}
