package engine

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cluster"
)

// Planning: what a burst does, as data. Plan computes it without writing anything (`mirror
// plan` renders it); a burst computes the same parts with the same functions and executes
// them: planTargets then applyTargets for the remote topics, planCopies for the partitions.

// Remote topic actions (TopicPlan.Action).
const (
	ActionCreate = "create" // the remote topic does not exist: created
	ActionGrow   = "grow"   // the remote topic has fewer partitions than its source: grown
	ActionExists = "exists" // the remote topic exists with enough partitions
)

// Plan is what a burst would do now.
type Plan struct {
	// Topics are the replicated source topics and their remote topics, sorted by name.
	Topics []TopicPlan `json:"topics"`
	// Partitions are the copies, per source partition, in the order of Topics.
	Partitions []PartitionPlan `json:"partitions"`
	// Notes are warnings (e.g. a remote topic with more partitions than its source).
	Notes []string `json:"notes,omitempty"`
}

// TopicPlan is what a burst does to one remote topic.
type TopicPlan struct {
	Topic
	// Action is ActionCreate, ActionGrow or ActionExists.
	Action string `json:"action"`
	// TargetPartitions is the remote topic's partition count now, 0 if it does not exist.
	TargetPartitions int32 `json:"target_partitions"`
	// ReplicationFactor of a created remote topic (-1: the target broker's default).
	ReplicationFactor int16 `json:"replication_factor"`
	// Configs are the topic configs set on a created remote topic.
	Configs map[string]*string `json:"configs,omitempty"`
	// ConfigChanges are the changes config sync makes to an existing remote topic.
	ConfigChanges []ConfigChange `json:"config_changes,omitempty"`
}

// ConfigChange is one topic config change of config sync.
type ConfigChange struct {
	Name  string  `json:"name"`
	Op    string  `json:"op"` // "set" or "delete"
	Value *string `json:"value,omitempty"`
	Was   *string `json:"was,omitempty"`
}

// PartitionPlan is the copy of one source partition: offsets [Start, End).
type PartitionPlan struct {
	TP
	Remote string `json:"remote"`
	// Position is the stored position (last copied offset), -1 when none.
	Position int64 `json:"position"`
	// LogStart is the partition's first offset; End is the end the copy stops at: the last
	// stable offset when the source is read read_committed (exactly-once or
	// consumer.isolation.level), the high watermark otherwise.
	LogStart int64 `json:"log_start"`
	Start    int64 `json:"start"`
	End      int64 `json:"end"`
	// Gap is set when source records are lost to the flow (see Gap).
	Gap *Gap `json:"gap,omitempty"`
}

// Records is the number of offsets the copy covers.
func (p PartitionPlan) Records() int64 { return max(0, p.End-p.Start) }

// dryRun is Engine.Plan: what a burst would do now, read without writing anything.
func (pn *topicPlanner) dryRun(ctx context.Context) (*Plan, error) {
	topics, err := pn.discover(ctx)
	if err != nil {
		return nil, err
	}
	pl := &Plan{Topics: []TopicPlan{}, Partitions: []PartitionPlan{}}
	if pl.Topics, pl.Notes, err = pn.planTargets(ctx, topics); err != nil {
		return nil, err
	}
	tps, remote := partitionsOf(topics)
	var positions map[TP]int64
	st, err := cluster.DescribeTopic(ctx, pn.tgt, pn.opts.OffsetStorageTopic)
	if err != nil {
		return nil, fmt.Errorf("describing offsets topic %q on target: %w", pn.opts.OffsetStorageTopic, err)
	}
	if st.Exists && st.Partitions > 0 {
		if positions, err = pn.positions.read(ctx, tps, st.Partitions); err != nil {
			return nil, err
		}
	}
	works, err := pn.planCopies(ctx, tps, remote, nil, positions, false)
	if err != nil {
		return nil, err
	}
	for _, w := range works {
		pl.Partitions = append(pl.Partitions, w.plan())
	}
	return pl, nil
}

// plan reads positions and end offsets and returns the partitions with work.
// Positions this process made durable (positionStore.known) are taken from memory; only the others
// are read from the offsets topic.
func (pn *topicPlanner) plan(ctx context.Context, tps []TP, remote map[string]string, limit map[TP]int64, offsetsParts int32) ([]*work, error) {
	return pn.planFrom(ctx, tps, remote, limit, offsetsParts, true)
}

// planStored is plan with every position read from the offsets topic, none taken from memory:
// for partitions that others may have copied since this process stored their positions. A
// burst group member's assignment is such: a partition revoked from it can be copied further by
// another member and then come back, and its position in memory would copy those records again.
func (pn *topicPlanner) planStored(ctx context.Context, tps []TP, remote map[string]string, limit map[TP]int64, offsetsParts int32) ([]*work, error) {
	return pn.planFrom(ctx, tps, remote, limit, offsetsParts, false)
}

// planFrom is plan, taking positions known to this process from memory only with fromMemory.
func (pn *topicPlanner) planFrom(ctx context.Context, tps []TP, remote map[string]string, limit map[TP]int64, offsetsParts int32, fromMemory bool) ([]*work, error) {
	positions := make(map[TP]int64, len(tps))
	var unknown []TP
	for _, tp := range tps {
		if n, ok := pn.positions.known.get(tp); fromMemory && ok && n > 0 {
			positions[tp] = n - 1
		} else {
			unknown = append(unknown, tp)
		}
	}
	read, err := pn.positions.read(ctx, unknown, offsetsParts)
	if err != nil {
		return nil, err
	}
	maps.Copy(positions, read)
	if err := pn.checkLost(ctx, tps, remote, positions, offsetsParts); err != nil {
		return nil, err
	}
	return pn.planCopies(ctx, tps, remote, limit, positions, true)
}

// planCopies plans the copy of each of tps from its stored position (positions; nil: none)
// to the end offset seen now (lowered by limit). With report (a run, not a dry run) it
// reports the gaps found: a WARN line, the gap metrics, and the run's summary.
func (pn *topicPlanner) planCopies(ctx context.Context, tps []TP, remote map[string]string, limit map[TP]int64, positions map[TP]int64, report bool) ([]*work, error) {
	topicSet := map[string]bool{}
	for _, tp := range tps {
		topicSet[tp.Topic] = true
	}
	names := make([]string, 0, len(topicSet))
	for t := range topicSet {
		names = append(names, t)
	}
	sort.Strings(names)
	starts, ends, err := listOffsets(ctx, pn.srcAdm, pn.opts.ExactlyOnce || pn.opts.ReadCommitted, names...)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	out := make([]*work, 0, len(tps))
	for _, tp := range tps {
		s, ok1 := starts.Lookup(tp.Topic, tp.Partition)
		en, ok2 := ends.Lookup(tp.Topic, tp.Partition)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("no offsets for source partition %s", tp)
		}
		pos, has := positions[tp]
		if !has {
			pos = -1
		}
		l, hasLimit := limit[tp]
		if !hasLimit {
			l = -1
		}
		w := pn.planPartition(tp, remote[tp.Topic], pos, s.Offset, en.Offset, l)
		if w.gap != nil && report {
			if w.gap.Kind == GapRecreated {
				pn.positions.known.forget(tp) // what this process stored belongs to the old partition
			}
			pn.reportGap(ctx, *w.gap)
		}
		out = append(out, w)
	}
	return out, nil
}

// planPartition is the copy rule of one partition: stored position pos (-1: none), source log
// [logStart, end), limit (< 0: none) lowering the end.
//   - a position in the log: copy from the next offset;
//   - a position behind the log start (records deleted before they were mirrored): copy from
//     the log start, a GapDeleted;
//   - a position beyond the end (topic recreated or truncated): copy from the log start, a
//     GapRecreated (MM2's consumer resets to auto.offset.reset, earliest by default);
//   - no position: the log start, or with auto.offset.reset=latest the end, stored at once so
//     later bursts do not skip what arrives in between.
func (pn *topicPlanner) planPartition(tp TP, remote string, pos, logStart, end, limit int64) *work {
	w := &work{tp: tp, remote: remote, position: pos, logStart: logStart, start: logStart, end: end, initPos: -2}
	if limit >= 0 && limit < w.end {
		w.end = limit
	}
	w.gap = PositionGap(tp, pos, logStart, end)
	switch {
	case pos >= 0 && w.gap == nil:
		w.start = pos + 1
		if w.start >= w.end && pn.opts.refreshPositions() {
			w.initPos = pos // idle: store it again so it outlives the topic's retention
		}
	case pos >= 0:
		w.start = logStart
	case pn.opts.AutoOffsetResetLatest && end > logStart:
		w.start = end
		w.initPos = end - 1
	}
	return w
}

// plan is the exported form of w.
func (w *work) plan() PartitionPlan {
	return PartitionPlan{TP: w.tp, Remote: w.remote, Position: w.position, LogStart: w.logStart, Start: w.start, End: w.end, Gap: w.gap}
}

// reportGap logs a gap, counts it in the metrics and keeps it for the summary of the run
// that copies the partition.
func (pn *topicPlanner) reportGap(ctx context.Context, g Gap) {
	pn.log.Warn("source records lost before they were mirrored; copying from the log start",
		"partition", fmt.Sprintf("%s-%d", g.Topic, g.Partition), "kind", g.Kind, "position", g.Position,
		"missing_from", g.From, "missing_to", g.To, "missing_records", g.Records, "detail", g.String())
	pn.opts.Metrics.SourceGap(ctx, g.Topic, g.Partition, g.Kind, g.Records)
	pn.putGap(g)
}

// putGap keeps g until the summary of the run copying its partition takes it (takeGaps).
func (pn *topicPlanner) putGap(g Gap) {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	if pn.gaps == nil {
		pn.gaps = map[TP]Gap{}
	}
	pn.gaps[TP{g.Topic, g.Partition}] = g
}

// takeGaps removes and returns the gaps of parts' partitions, sorted by partition.
func (pn *topicPlanner) takeGaps(parts []partResult) []Gap {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	var out []Gap
	for _, p := range parts {
		if g, ok := pn.gaps[p.tp]; ok {
			out = append(out, g)
			delete(pn.gaps, p.tp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// planTargets works out, without writing, what prepareTargets does to the remote topics of
// topics: create the missing ones (source partition count, replication.factor, the source's
// copyable non-default configs), grow those with fewer partitions, and with SyncTopicConfigs
// sync the configs of the existing ones. Notes are warnings for a dry run.
func (pn *topicPlanner) planTargets(ctx context.Context, topics []Topic) ([]TopicPlan, []string, error) {
	plans := make([]TopicPlan, 0, len(topics))
	if len(topics) == 0 {
		return plans, nil, nil
	}
	remotes := make([]string, len(topics))
	for i, t := range topics {
		remotes[i] = t.Remote
	}
	md, err := pn.tgtAdm.Metadata(ctx, remotes...)
	if err != nil {
		return nil, nil, fmt.Errorf("describing remote topics on target: %w", err)
	}
	var notes []string
	var create, existing []string
	for _, t := range topics {
		tp := TopicPlan{Topic: t, Action: ActionExists}
		d, ok := md.Topics[t.Remote]
		switch {
		case !ok || cluster.TopicMissing(d.Err):
			tp.Action, tp.ReplicationFactor = ActionCreate, pn.opts.ReplicationFactor
			create = append(create, t.Source)
		case d.Err != nil:
			return nil, nil, fmt.Errorf("describing remote topic %q on target: %w", t.Remote, d.Err)
		default:
			tp.TargetPartitions = int32(len(d.Partitions))
			if tp.TargetPartitions < t.Partitions {
				tp.Action = ActionGrow
			} else if tp.TargetPartitions > t.Partitions {
				notes = append(notes, fmt.Sprintf("remote topic %s has %d partitions, more than its source's %d", t.Remote, tp.TargetPartitions, t.Partitions))
			}
			existing = append(existing, t.Remote)
		}
		plans = append(plans, tp)
	}
	if !pn.copyConfigs() {
		notes = append(notes, "topic configs are neither copied nor synced: a cluster of the flow is Event Hubs")
		return plans, notes, nil
	}
	sync := pn.opts.SyncTopicConfigs && len(existing) > 0
	if len(create) == 0 && !sync {
		return plans, notes, nil
	}
	srcNames := create
	if sync {
		srcNames = make([]string, len(topics))
		for i, t := range topics {
			srcNames[i] = t.Source
		}
	}
	srcCfg, err := pn.describeConfigs(ctx, pn.src, srcNames)
	if err != nil {
		return nil, nil, err
	}
	var tgtCfg map[string][]topicConfig
	if sync {
		if tgtCfg, err = pn.describeConfigs(ctx, pn.tgt, existing); err != nil {
			return nil, nil, err
		}
	}
	for i := range plans {
		tp := &plans[i]
		if tp.Action == ActionCreate {
			tp.Configs = map[string]*string{}
			for _, c := range srcCfg[tp.Source] {
				if pn.copyableConfig(c) && c.Source != kmsg.ConfigSourceDefaultConfig {
					tp.Configs[c.Name] = c.Value
				}
			}
		} else if sync {
			tp.ConfigChanges = pn.configChanges(srcCfg[tp.Source], tgtCfg[tp.Remote])
		}
	}
	return plans, notes, nil
}

// configChanges is MM2's topic config sync with use.defaults.from=target: set copyable
// non-default source values that differ on the target, and delete target overrides of
// properties the source leaves at their default.
func (pn *topicPlanner) configChanges(src, tgt []topicConfig) []ConfigChange {
	have := make(map[string]topicConfig, len(tgt))
	for _, c := range tgt {
		have[c.Name] = c
	}
	var out []ConfigChange
	for _, c := range src {
		h, ok := have[c.Name]
		if !pn.copyableConfig(c) || !ok || h.ReadOnly {
			continue
		}
		if c.Source == kmsg.ConfigSourceDefaultConfig {
			if h.Source == kmsg.ConfigSourceDynamicTopicConfig {
				out = append(out, ConfigChange{Name: c.Name, Op: "delete", Was: h.Value})
			}
			continue
		}
		if !sameValue(c.Value, h.Value) {
			out = append(out, ConfigChange{Name: c.Name, Op: "set", Value: c.Value, Was: h.Value})
		}
	}
	return out
}

// applyTargets executes the remote topic part of a plan: grows, then creates (in one request
// with other concurrent callers, waiting until the topics are usable), then config changes.
// It returns the topics it created: their partitions may not be served yet (awaitServing).
func (pn *topicPlanner) applyTargets(ctx context.Context, plans []TopicPlan) ([]cluster.NewTopic, error) {
	var news []cluster.NewTopic
	var created []string
	for _, tp := range plans {
		switch tp.Action {
		case ActionGrow:
			pn.log.Info("growing remote topic", "topic", tp.Remote, "from", tp.TargetPartitions, "to", tp.Partitions)
			resp, err := pn.tgtAdm.UpdatePartitions(ctx, int(tp.Partitions), tp.Remote)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return nil, fmt.Errorf("adding partitions to remote topic %q (%d -> %d): %w", tp.Remote, tp.TargetPartitions, tp.Partitions, err)
			}
		case ActionCreate:
			configs := tp.Configs
			if configs == nil {
				configs = map[string]*string{}
			}
			pn.log.Info("creating remote topic", "topic", tp.Remote, "partitions", tp.Partitions, "configs", len(configs))
			news = append(news, cluster.NewTopic{Name: tp.Remote, Partitions: tp.Partitions, ReplicationFactor: tp.ReplicationFactor, Configs: configs})
			created = append(created, tp.Remote)
		}
	}
	if len(news) > 0 {
		if err := pn.creates.create(ctx, pn.tgt, news); err != nil {
			return nil, fmt.Errorf("creating remote topics: %w", err)
		}
		if _, err := cluster.WaitForTopics(ctx, pn.tgt, created...); err != nil {
			return nil, err
		}
	}
	for _, tp := range plans {
		if len(tp.ConfigChanges) == 0 {
			continue
		}
		alters := make([]kadm.AlterConfig, len(tp.ConfigChanges))
		for i, c := range tp.ConfigChanges {
			alters[i] = kadm.AlterConfig{Op: kadm.SetConfig, Name: c.Name, Value: c.Value}
			if c.Op == "delete" {
				alters[i] = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: c.Name}
			}
		}
		pn.log.Info("syncing remote topic configs", "topic", tp.Remote, "changes", len(alters))
		resp, err := pn.tgtAdm.AlterTopicConfigs(ctx, alters, tp.Remote)
		if err == nil {
			for _, r := range resp {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("syncing configs of remote topic %q: %w", tp.Remote, err)
		}
	}
	return news, nil
}

// partitionsOf lists the partitions of topics and maps each source topic to its remote topic.
func partitionsOf(topics []Topic) ([]TP, map[string]string) {
	var tps []TP
	remote := make(map[string]string, len(topics))
	for _, t := range topics {
		remote[t.Source] = t.Remote
		for p := int32(0); p < t.Partitions; p++ {
			tps = append(tps, TP{t.Source, p})
		}
	}
	return tps, remote
}

// servingWait bounds awaitServing, and servingWaitPartitions is the most new partitions it
// waits for.
const (
	servingWait           = 150 * time.Millisecond
	servingWaitPartitions = 16
)

// awaitServing waits, at most servingWait, until the leaders of just-created remote topics serve
// them. A KRaft broker names a new partition's leader some 20-30 ms before it accepts produce
// requests for it; a batch sent in between fails with NOT_LEADER_FOR_PARTITION and waits out the
// clients' first retry backoff (100 ms): the first acknowledged record of a new 8-partition
// flow took over 100 ms in 8 of 21 runs (up to 435 ms), with this wait in 2 of 17 (78-112 ms,
// docs/design.md). Past servingWaitPartitions new partitions it does not wait: the broker
// takes longer to serve them all than the first of them, and copies that start on the
// partitions that are ready while the producer retries the others reach their first record
// sooner (50 new topics: 298 ms with the wait, 193 ms without, one bench run each; 1,000 new
// partitions: 3.0-3.6 s with an unbounded wait, 0.2-1.6 s without).
func (pn *topicPlanner) awaitServing(ctx context.Context, news []cluster.NewTopic) {
	var names []string
	parts := int32(0)
	for _, t := range news {
		names = append(names, t.Name)
		parts += t.Partitions
	}
	if parts > servingWaitPartitions {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, servingWait)
	defer cancel()
	start := time.Now()
	err := cluster.WaitForServing(wctx, pn.tgt, names...)
	pn.log.Debug("new remote topics served", "topics", len(names), "partitions", parts, "elapsed", time.Since(start).String(), "err", err)
}

// work is one partition to copy in a burst.
type work struct {
	tp     TP
	remote string
	start  int64 // first offset to copy
	end    int64 // copy offsets < end
	// initPos, if >= 0, is a position to store even if nothing is copied (auto.offset.reset
	// latest on a partition without position).
	initPos int64
	// What planning saw (see PartitionPlan): the stored position (-1: none), the log start,
	// and the gap between them, if any.
	position, logStart int64
	gap                *Gap
}

// prepare is Engine.PrepareTargets.
func (pn *topicPlanner) prepare(ctx context.Context, topics []Topic) error {
	if err := pn.checkBudgets(ctx, topics); err != nil {
		return err
	}
	return pn.prepareServed(ctx, topics)
}

// prepareServed is prepareTargets followed by a brief wait for the new partitions to be
// served (awaitServing).
func (pn *topicPlanner) prepareServed(ctx context.Context, topics []Topic) error {
	news, err := pn.prepareTargets(ctx, topics)
	if err == nil {
		pn.awaitServing(ctx, news)
	}
	return err
}

// prepareTargets is Engine.PrepareTargets after the budget check: the remote topic part of the plan,
// computed then executed. It returns the topics it created, whose partitions the target may
// not serve yet (awaitServing).
func (pn *topicPlanner) prepareTargets(ctx context.Context, topics []Topic) ([]cluster.NewTopic, error) {
	plans, _, err := pn.planTargets(ctx, topics)
	if err != nil {
		return nil, err
	}
	return pn.applyTargets(ctx, plans)
}
