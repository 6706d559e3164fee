package ops

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/policy"
)

// Plan is what a `mirror run` would do now, worked out without writing anything.
type Plan struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Topics lists every source topic, selected or not, sorted by name.
	Topics []TopicPlan `json:"topics"`
	// Internal lists the internal topics the flow's functions use.
	Internal []InternalTopic `json:"internal_topics"`
	// Create, Grow and SyncConfigs name the remote topics the run creates, grows and
	// alters; Records is the number of records it would copy (without budgets).
	Create      []string `json:"create"`
	Grow        []string `json:"grow"`
	SyncConfigs []string `json:"sync_configs"`
	Records     int64    `json:"records"`
	// EventHubs reports the Event Hubs budgets of clusters whose Event Hubs profile is on.
	EventHubs []EventHubsBudget `json:"event_hubs,omitempty"`
	// Notes are warnings (e.g. a remote topic with more partitions than its source).
	Notes []string `json:"notes,omitempty"`
}

// EventHubsBudget is one Event Hubs namespace's budget check for the run.
type EventHubsBudget struct {
	Cluster string `json:"cluster"`
	Tier    string `json:"tier"`
	// MaxTopics and MaxPartitions are the namespace's limits (0: unlimited).
	MaxTopics     int   `json:"max_topics"`
	MaxPartitions int32 `json:"max_partitions_per_topic"`
	// Topics are the topics the run would create or grow there, with partition counts.
	Topics map[string]int32 `json:"topics"`
	// Notice is what the profile changes; Error says why the run would stop before creating
	// anything ("" when it fits).
	Notice string `json:"notice"`
	Error  string `json:"error,omitempty"`
	// Later are the internal topics the checkpoint and heartbeat functions create there when
	// they first run; LaterError says why they would not fit next to Topics ("" when they do).
	Later      map[string]int32 `json:"later,omitempty"`
	LaterError string           `json:"later_error,omitempty"`
}

// TopicPlan is one source topic.
type TopicPlan struct {
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
	Selected   bool   `json:"selected"`
	// Reason says why the topic is or is not replicated (filter rule, heartbeats, internal,
	// cycle).
	Reason string `json:"reason"`
	// Remote is the remote topic name (selected topics only).
	Remote string `json:"remote,omitempty"`
	// Action is "create", "grow" or "exists" (selected topics only).
	Action string `json:"action,omitempty"`
	// TargetPartitions is the remote topic's partition count now, 0 if it does not exist.
	TargetPartitions int32 `json:"target_partitions,omitempty"`
	// ReplicationFactor of a created remote topic (-1: the target broker's default).
	ReplicationFactor int16 `json:"replication_factor,omitempty"`
	// Configs are the topic configs set on a created remote topic.
	Configs map[string]string `json:"configs,omitempty"`
	// ConfigChanges are the changes config sync makes to an existing remote topic.
	ConfigChanges []ConfigChange `json:"config_changes,omitempty"`
	// Copy lists, per partition, the source offsets the run would copy: [from, to).
	Copy []CopyRange `json:"copy,omitempty"`
	// Records is the number of offsets in Copy.
	Records int64 `json:"records,omitempty"`
}

// ConfigChange is one topic config change.
type ConfigChange struct {
	Name  string  `json:"name"`
	Op    string  `json:"op"` // "set" or "delete"
	Value *string `json:"value,omitempty"`
	Was   *string `json:"was,omitempty"`
}

// CopyRange is one partition's copy.
type CopyRange struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

// InternalTopic is one internal topic of the flow.
type InternalTopic struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	Purpose string `json:"purpose"`
	// CreatedBy is the function that creates it when missing.
	CreatedBy string `json:"created_by"`
	Exists    bool   `json:"exists"`
	// Partitions is its partition count (when it exists) or the count it is created with.
	Partitions int32 `json:"partitions"`
}

// Plan works out what a run would do. It only reads metadata, configs, offsets and positions.
func (o *Ops) Plan(ctx context.Context) (*Plan, error) {
	pl := &Plan{Source: o.opts.SourceAlias, Target: o.opts.TargetAlias, Topics: []TopicPlan{}, Create: []string{}, Grow: []string{}, SyncConfigs: []string{}}
	md, err := o.srcAdm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing source topics: %w", err)
	}
	names := make([]string, 0, len(md.Topics))
	for n := range md.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	var selected []*TopicPlan
	for _, n := range names {
		d := md.Topics[n]
		if d.Err != nil {
			continue
		}
		tp := TopicPlan{Topic: n, Partitions: int32(len(d.Partitions))}
		tp.Selected, tp.Reason = o.explain(n, d.IsInternal)
		if tp.Selected && tp.Partitions == 0 {
			tp.Selected, tp.Reason = false, "no partitions"
		}
		pl.Topics = append(pl.Topics, tp)
	}
	for i := range pl.Topics {
		if pl.Topics[i].Selected {
			selected = append(selected, &pl.Topics[i])
		}
	}
	if err := o.planTargets(ctx, pl, selected); err != nil {
		return nil, err
	}
	if err := o.planCopy(ctx, pl, selected); err != nil {
		return nil, err
	}
	if err := o.planInternal(ctx, pl); err != nil {
		return nil, err
	}
	if err := o.planBudgets(ctx, pl, selected); err != nil {
		return nil, err
	}
	return pl, nil
}

// explain is MirrorSourceConnector's topic selection with the reason for a dry run.
func (o *Ops) explain(topic string, kafkaInternal bool) (bool, string) {
	p := o.opts.Policy
	if kafkaInternal {
		return false, "Kafka internal topic"
	}
	ok, reason := o.opts.Topics.Explain(topic)
	if !ok && o.opts.HeartbeatsReplication && p.IsHeartbeatsTopic(topic) {
		ok, reason = true, "heartbeats topic (heartbeats.replication.enabled)"
	}
	if !ok {
		return false, reason
	}
	if p.IsInternalTopic(topic) {
		return false, "internal topic (MM2 or Kafka internal name)"
	}
	if policy.IsCycle(p, o.opts.TargetAlias, topic) {
		return false, fmt.Sprintf("replication cycle: the topic came from %q", o.opts.TargetAlias)
	}
	return true, reason
}

// planTargets decides create/grow/sync for the remote topics.
func (o *Ops) planTargets(ctx context.Context, pl *Plan, sel []*TopicPlan) error {
	if len(sel) == 0 {
		return nil
	}
	remotes := make([]string, len(sel))
	for i, t := range sel {
		t.Remote = o.opts.Policy.FormatRemoteTopic(o.opts.SourceAlias, t.Topic)
		remotes[i] = t.Remote
	}
	md, err := o.tgtAdm.Metadata(ctx, remotes...)
	if err != nil {
		return fmt.Errorf("describing remote topics on target: %w", err)
	}
	var srcNames, create, existing []string
	for _, t := range sel {
		srcNames = append(srcNames, t.Topic)
		d, ok := md.Topics[t.Remote]
		switch {
		case !ok || d.Err != nil:
			if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("describing remote topic %q on target: %w", t.Remote, d.Err)
			}
			t.Action = "create"
			t.ReplicationFactor = o.opts.ReplicationFactor
			create = append(create, t.Topic)
			pl.Create = append(pl.Create, t.Remote)
		default:
			t.TargetPartitions = int32(len(d.Partitions))
			t.Action = "exists"
			if t.TargetPartitions < t.Partitions {
				t.Action = "grow"
				pl.Grow = append(pl.Grow, t.Remote)
			} else if t.TargetPartitions > t.Partitions {
				pl.Notes = append(pl.Notes, fmt.Sprintf("remote topic %s has %d partitions, more than its source's %d", t.Remote, t.TargetPartitions, t.Partitions))
			}
			existing = append(existing, t.Topic)
		}
	}
	if !o.copyConfigs() {
		pl.Notes = append(pl.Notes, "topic configs are neither copied nor synced: a cluster of the flow is Event Hubs")
		return nil
	}
	if len(create) == 0 && !(o.opts.SyncTopicConfigs && len(existing) > 0) {
		return nil
	}
	srcCfg, err := describeConfigs(ctx, o.src, srcNames)
	if err != nil {
		return err
	}
	var tgtCfg map[string][]topicConfig
	if o.opts.SyncTopicConfigs && len(existing) > 0 {
		var tnames []string
		for _, t := range sel {
			if t.Action != "create" {
				tnames = append(tnames, t.Remote)
			}
		}
		if tgtCfg, err = describeConfigs(ctx, o.tgt, tnames); err != nil {
			return err
		}
	}
	for _, t := range sel {
		if t.Action == "create" {
			t.Configs = map[string]string{}
			for _, c := range srcCfg[t.Topic] {
				if o.copyable(c) && c.Source != kmsg.ConfigSourceDefaultConfig && c.Value != nil {
					t.Configs[c.Name] = *c.Value
				}
			}
			continue
		}
		if tgtCfg == nil {
			continue
		}
		have := map[string]topicConfig{}
		for _, c := range tgtCfg[t.Remote] {
			have[c.Name] = c
		}
		for _, c := range srcCfg[t.Topic] {
			h, ok := have[c.Name]
			if !o.copyable(c) || !ok || h.ReadOnly {
				continue
			}
			if c.Source == kmsg.ConfigSourceDefaultConfig {
				if h.Source == kmsg.ConfigSourceDynamicTopicConfig {
					t.ConfigChanges = append(t.ConfigChanges, ConfigChange{Name: c.Name, Op: "delete", Was: h.Value})
				}
				continue
			}
			if !sameValue(c.Value, h.Value) {
				t.ConfigChanges = append(t.ConfigChanges, ConfigChange{Name: c.Name, Op: "set", Value: c.Value, Was: h.Value})
			}
		}
		if len(t.ConfigChanges) > 0 {
			pl.SyncConfigs = append(pl.SyncConfigs, t.Remote)
		}
	}
	return nil
}

// planCopy works out the offsets each partition's copy would cover.
func (o *Ops) planCopy(ctx context.Context, pl *Plan, sel []*TopicPlan) error {
	var tps []engine.TP
	for _, t := range sel {
		for p := int32(0); p < t.Partitions; p++ {
			tps = append(tps, engine.TP{Topic: t.Topic, Partition: p})
		}
	}
	st := &Status{}
	positions, err := o.positions(ctx, tps, st)
	if err != nil {
		return err
	}
	for _, t := range sel {
		starts, ends, err := o.offsets(ctx, engine.Source, t.Topic)
		if err != nil {
			return err
		}
		for p := int32(0); p < t.Partitions; p++ {
			from, to := starts[p], ends[p]
			pos, has := positions[engine.TP{Topic: t.Topic, Partition: p}]
			switch {
			case has && pos >= 0 && pos+1 <= to:
				from = max(pos+1, from)
			case has && pos >= 0:
				pl.Notes = append(pl.Notes, fmt.Sprintf("%s-%d: stored position %d is beyond the source end %d (topic recreated or truncated?): the run starts at the log start", t.Topic, p, pos, to))
			case o.opts.AutoOffsetResetLatest:
				from = to
			}
			if to > from {
				t.Copy = append(t.Copy, CopyRange{Partition: p, From: from, To: to})
				t.Records += to - from
			}
		}
		pl.Records += t.Records
	}
	return nil
}

// planInternal lists the internal topics and whether they exist.
func (o *Ops) planInternal(ctx context.Context, pl *Plan) error {
	p := o.opts.Policy
	syncs, syncSide := o.eng.OffsetSyncsTopic()
	list := []InternalTopic{
		{Name: o.eng.OffsetsTopic(), Cluster: engine.Target.String(), Purpose: "positions (MM2's Connect offsets topic)", CreatedBy: "mirror", Partitions: o.opts.OffsetStoragePartitions},
		{Name: syncs, Cluster: syncSide.String(), Purpose: "offset syncs", CreatedBy: "mirror", Partitions: 1},
		{Name: p.CheckpointsTopic(o.opts.SourceAlias), Cluster: engine.Target.String(), Purpose: "consumer group checkpoints", CreatedBy: "checkpoint", Partitions: 1},
		{Name: p.HeartbeatsTopic(), Cluster: engine.Target.String(), Purpose: "heartbeats", CreatedBy: "heartbeat", Partitions: 1},
	}
	for i := range list {
		side := engine.Target
		if list[i].Cluster == engine.Source.String() {
			side = engine.Source
		}
		n, err := o.partitionCount(ctx, side, list[i].Name)
		if err != nil {
			return err
		}
		if n > 0 {
			list[i].Exists, list[i].Partitions = true, n
		}
	}
	pl.Internal = list
	return nil
}

// topicConfig is one entry of a DescribeConfigs answer.
type topicConfig struct {
	Name      string
	Value     *string
	ReadOnly  bool
	Sensitive bool
	Source    kmsg.ConfigSource
}

// copyable is MM2's shouldReplicateSourceTopicConfig: not read-only, not sensitive, not a
// static broker config, not excluded by config.properties.exclude.
func (o *Ops) copyable(c topicConfig) bool {
	return !c.ReadOnly && !c.Sensitive && c.Source != kmsg.ConfigSourceStaticBrokerConfig &&
		!o.opts.ConfigPropertiesExclude.Match(c.Name)
}

func describeConfigs(ctx context.Context, cl *kgo.Client, topics []string) (map[string][]topicConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = t
		req.Resources = append(req.Resources, r)
	}
	out := map[string][]topicConfig{}
	for _, sh := range cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			return nil, fmt.Errorf("describing topic configs: %w", sh.Err)
		}
		for _, r := range sh.Resp.(*kmsg.DescribeConfigsResponse).Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return nil, fmt.Errorf("describing configs of topic %q: %w", r.ResourceName, err)
			}
			for _, c := range r.Configs {
				out[r.ResourceName] = append(out[r.ResourceName], topicConfig{Name: c.Name, Value: c.Value, ReadOnly: c.ReadOnly, Sensitive: c.IsSensitive, Source: c.Source})
			}
		}
	}
	return out, nil
}

func sameValue(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// copyConfigs is the engine's rule: no config copy or sync where a side is Event Hubs without
// config support.
func (o *Ops) copyConfigs() bool {
	allows := func(p cluster.Profile) bool { return !p.EventHubs || p.SyncConfigs }
	return allows(o.opts.SourceProfile) && allows(o.opts.TargetProfile)
}

// planBudgets checks the topics the run would create or grow against Event Hubs budgets
// (cluster.Profile.CheckBudget only lists topics).
func (o *Ops) planBudgets(ctx context.Context, pl *Plan, sel []*TopicPlan) error {
	for _, side := range []engine.Side{engine.Source, engine.Target} {
		prof := o.opts.SourceProfile
		if side == engine.Target {
			prof = o.opts.TargetProfile
		}
		if !prof.EventHubs {
			continue
		}
		want := map[string]int32{}
		if side == engine.Target {
			for _, t := range sel {
				if t.Action == "create" || t.Action == "grow" {
					want[t.Remote] = t.Partitions
				}
			}
		}
		later := map[string]int32{}
		for _, it := range pl.Internal {
			if it.Cluster != side.String() || it.Exists {
				continue
			}
			if it.CreatedBy == "mirror" {
				want[it.Name] = it.Partitions
			} else {
				later[it.Name] = it.Partitions
			}
		}
		b := EventHubsBudget{Cluster: side.String(), Tier: prof.Tier, MaxTopics: prof.MaxTopics, MaxPartitions: prof.MaxPartitionsPerTopic, Topics: want, Notice: prof.Notice()}
		_, adm := o.client(side)
		check := func(topics map[string]int32) (string, error) {
			err := prof.CheckBudget(ctx, adm, topics)
			var be *cluster.BudgetError
			if err == nil || errors.As(err, &be) {
				if err != nil {
					return err.Error(), nil
				}
				return "", nil
			}
			return "", err
		}
		var err error
		if b.Error, err = check(want); err != nil {
			return err
		}
		if len(later) > 0 {
			b.Later = later
			all := map[string]int32{}
			for n, p := range want {
				all[n] = p
			}
			for n, p := range later {
				all[n] = p
			}
			if b.LaterError, err = check(all); err != nil {
				return err
			}
		}
		pl.EventHubs = append(pl.EventHubs, b)
	}
	return nil
}
