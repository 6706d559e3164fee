package ops

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/engine"
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
	// Gaps are the source data losses the run would copy around (see engine.Gap).
	Gaps []engine.Gap `json:"gaps,omitempty"`
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
	// MM2 are the event hubs genuine MirrorMaker 2 (dedicated mode) would create on the target
	// beside Topics and Later for the same flow: its Connect worker's configs and status
	// topics. MM2Error says why all of them would not fit ("" when they do).
	MM2      map[string]int32 `json:"mm2,omitempty"`
	MM2Error string           `json:"mm2_error,omitempty"`
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
type ConfigChange = engine.ConfigChange

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

// Plan works out what a run would do: the engine's plan (engine.Engine.Plan, the plan a
// burst computes and executes) with every source topic's selection reason, the internal
// topics and the Event Hubs budgets. It only reads metadata, configs, offsets and positions.
func (o *Ops) Plan(ctx context.Context) (*Plan, error) {
	pl := &Plan{Source: o.opts.SourceAlias, Target: o.opts.TargetAlias, Topics: []TopicPlan{}, Create: []string{}, Grow: []string{}, SyncConfigs: []string{}}
	md, err := o.srcAdm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing source topics: %w", err)
	}
	ep, err := o.eng.Plan(ctx)
	if err != nil {
		return nil, err
	}
	planned := make(map[string]engine.TopicPlan, len(ep.Topics))
	for _, t := range ep.Topics {
		planned[t.Source] = t
	}
	names := make([]string, 0, len(md.Topics))
	for n := range md.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	index := map[string]int{}
	for _, n := range names {
		d := md.Topics[n]
		if d.Err != nil {
			continue
		}
		tp := TopicPlan{Topic: n, Partitions: int32(len(d.Partitions))}
		tp.Selected, tp.Reason = o.eng.Explain(n, d.IsInternal)
		if tp.Selected && tp.Partitions == 0 {
			tp.Selected, tp.Reason = false, "no partitions"
		}
		if et, ok := planned[n]; ok && tp.Selected {
			tp.Partitions, tp.Remote, tp.Action, tp.TargetPartitions = et.Partitions, et.Remote, et.Action, et.TargetPartitions
			switch et.Action {
			case engine.ActionCreate:
				tp.ReplicationFactor = et.ReplicationFactor
				pl.Create = append(pl.Create, et.Remote)
			case engine.ActionGrow:
				pl.Grow = append(pl.Grow, et.Remote)
			}
			if et.Configs != nil {
				tp.Configs = map[string]string{}
				for k, v := range et.Configs {
					if v != nil {
						tp.Configs[k] = *v
					}
				}
			}
			tp.ConfigChanges = et.ConfigChanges
			if len(tp.ConfigChanges) > 0 {
				pl.SyncConfigs = append(pl.SyncConfigs, et.Remote)
			}
		}
		index[n] = len(pl.Topics)
		pl.Topics = append(pl.Topics, tp)
	}
	pl.Notes = append(pl.Notes, ep.Notes...)
	for _, pp := range ep.Partitions {
		if pp.Gap != nil {
			pl.Gaps = append(pl.Gaps, *pp.Gap)
			pl.Notes = append(pl.Notes, pp.Gap.String()+": the run starts at the log start")
		}
		i, ok := index[pp.Topic]
		if !ok || pp.Records() == 0 {
			continue
		}
		t := &pl.Topics[i]
		t.Copy = append(t.Copy, CopyRange{Partition: pp.Partition, From: pp.Start, To: pp.End})
		t.Records += pp.Records()
		pl.Records += pp.Records()
	}
	var selected []*TopicPlan
	for i := range pl.Topics {
		if pl.Topics[i].Selected {
			selected = append(selected, &pl.Topics[i])
		}
	}
	if err := o.planInternal(ctx, pl); err != nil {
		return nil, err
	}
	if err := o.planBudgets(ctx, pl, selected); err != nil {
		return nil, err
	}
	return pl, nil
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
		if side == engine.Target {
			// MM2's worker topics, with MM2's default partition counts (config.storage: 1,
			// status.storage.partitions: 5).
			b.MM2 = map[string]int32{"mm2-configs." + o.opts.SourceAlias + ".internal": 1, "mm2-status." + o.opts.SourceAlias + ".internal": 5}
			all := map[string]int32{}
			for _, m := range []map[string]int32{want, later, b.MM2} {
				for n, p := range m {
					all[n] = p
				}
			}
			if b.MM2Error, err = check(all); err != nil {
				return err
			}
		}
		pl.EventHubs = append(pl.EventHubs, b)
	}
	return nil
}
