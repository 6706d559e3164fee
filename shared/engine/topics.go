package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/policy"
)

// Topic is one replicated source topic and its remote topic on the target.
type Topic struct {
	Source     string // source topic name
	Remote     string // remote topic name on the target
	Partitions int32  // source partition count
}

// Selected reports whether MirrorSourceConnector would replicate source topic t: accepted by
// the topic filter (or a heartbeats topic with heartbeats replication on), not internal and
// not a replication cycle back to the target.
func (e *Engine) Selected(t string) bool {
	p := e.opts.Policy
	if !(e.opts.Topics.Accept(t) || (e.opts.HeartbeatsReplication && p.IsHeartbeatsTopic(t))) {
		return false
	}
	return !p.IsInternalTopic(t) && !policy.IsCycle(p, e.opts.TargetAlias, t)
}

// DiscoverTopics lists the source topics this flow replicates, sorted by name.
func (e *Engine) DiscoverTopics(ctx context.Context) ([]Topic, error) {
	md, err := e.srcAdm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing source topics: %w", err)
	}
	var out []Topic
	for name, d := range md.Topics {
		if d.Err != nil || d.IsInternal || !e.Selected(name) || len(d.Partitions) == 0 {
			continue
		}
		out = append(out, Topic{Source: name, Remote: e.opts.Policy.FormatRemoteTopic(e.opts.SourceAlias, name), Partitions: int32(len(d.Partitions))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out, nil
}

// PrepareTargets creates missing remote topics (same partition count, replication.factor,
// the source's copyable non-default configs), adds partitions where the source grew and, with
// SyncTopicConfigs, syncs the configs of existing remote topics.
func (e *Engine) PrepareTargets(ctx context.Context, topics []Topic) error {
	if err := e.checkBudgets(ctx, topics); err != nil {
		return err
	}
	return e.prepareTargets(ctx, topics)
}

// prepareTargets is PrepareTargets after the budget check.
func (e *Engine) prepareTargets(ctx context.Context, topics []Topic) error {
	if len(topics) == 0 {
		return nil
	}
	remotes := make([]string, len(topics))
	for i, t := range topics {
		remotes[i] = t.Remote
	}
	md, err := e.tgtAdm.Metadata(ctx, remotes...)
	if err != nil {
		return fmt.Errorf("describing remote topics on target: %w", err)
	}
	var missing, existing []Topic
	for _, t := range topics {
		d, ok := md.Topics[t.Remote]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, t)
		case d.Err != nil:
			return fmt.Errorf("describing remote topic %q on target: %w", t.Remote, d.Err)
		default:
			existing = append(existing, t)
			if have := int32(len(d.Partitions)); have < t.Partitions {
				e.log.Info("growing remote topic", "topic", t.Remote, "from", have, "to", t.Partitions)
				resp, err := e.tgtAdm.UpdatePartitions(ctx, int(t.Partitions), t.Remote)
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					return fmt.Errorf("adding partitions to remote topic %q (%d -> %d): %w", t.Remote, have, t.Partitions, err)
				}
			}
		}
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, t := range missing {
			names[i] = t.Source
		}
		srcConfigs := map[string][]topicConfig{}
		if e.copyConfigs() {
			if srcConfigs, err = e.describeConfigs(ctx, e.src, names); err != nil {
				return err
			}
		}
		news := make([]cluster.NewTopic, 0, len(missing))
		created := make([]string, 0, len(missing))
		for _, t := range missing {
			configs := map[string]*string{}
			for _, c := range srcConfigs[t.Source] {
				if e.copyableConfig(c) && c.Source != kmsg.ConfigSourceDefaultConfig {
					configs[c.Name] = c.Value
				}
			}
			e.log.Info("creating remote topic", "topic", t.Remote, "partitions", t.Partitions, "configs", len(configs))
			news = append(news, cluster.NewTopic{Name: t.Remote, Partitions: t.Partitions, ReplicationFactor: e.opts.ReplicationFactor, Configs: configs})
			created = append(created, t.Remote)
		}
		if err := e.creates.create(ctx, e.tgt, news); err != nil {
			return fmt.Errorf("creating remote topics: %w", err)
		}
		if _, err := cluster.WaitForTopics(ctx, e.tgt, created...); err != nil {
			return err
		}
	}
	if e.opts.SyncTopicConfigs && e.copyConfigs() && len(existing) > 0 {
		if err := e.syncConfigs(ctx, existing); err != nil {
			return err
		}
	}
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

// copyableConfig is MM2's shouldReplicateSourceTopicConfig: not read-only, not sensitive,
// not a static broker config, not excluded by config.properties.exclude.
func (e *Engine) copyableConfig(c topicConfig) bool {
	return !c.ReadOnly && !c.Sensitive && c.Source != kmsg.ConfigSourceStaticBrokerConfig &&
		!e.opts.ConfigPropertiesExclude.Match(c.Name)
}

func (e *Engine) describeConfigs(ctx context.Context, cl *kgo.Client, topics []string) (map[string][]topicConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range topics {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = t
		req.Resources = append(req.Resources, r)
	}
	shards := cl.RequestSharded(ctx, req)
	out := map[string][]topicConfig{}
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("describing topic configs: %w", sh.Err)
		}
		resp := sh.Resp.(*kmsg.DescribeConfigsResponse)
		for _, r := range resp.Resources {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return nil, fmt.Errorf("describing configs of topic %q: %w", r.ResourceName, err)
			}
			for _, c := range r.Configs {
				out[r.ResourceName] = append(out[r.ResourceName], topicConfig{
					Name: c.Name, Value: c.Value, ReadOnly: c.ReadOnly, Sensitive: c.IsSensitive, Source: c.Source,
				})
			}
		}
	}
	return out, nil
}

// syncConfigs is MM2's topic config sync with use.defaults.from=target: set copyable
// non-default source values that differ on the target, and delete target overrides of
// properties the source leaves at their default.
func (e *Engine) syncConfigs(ctx context.Context, topics []Topic) error {
	var srcNames, tgtNames []string
	for _, t := range topics {
		srcNames = append(srcNames, t.Source)
		tgtNames = append(tgtNames, t.Remote)
	}
	srcCfg, err := e.describeConfigs(ctx, e.src, srcNames)
	if err != nil {
		return err
	}
	tgtCfg, err := e.describeConfigs(ctx, e.tgt, tgtNames)
	if err != nil {
		return err
	}
	for _, t := range topics {
		have := map[string]topicConfig{}
		for _, c := range tgtCfg[t.Remote] {
			have[c.Name] = c
		}
		var alters []kadm.AlterConfig
		for _, c := range srcCfg[t.Source] {
			if !e.copyableConfig(c) {
				continue
			}
			h, ok := have[c.Name]
			if !ok || h.ReadOnly {
				continue
			}
			if c.Source == kmsg.ConfigSourceDefaultConfig {
				if h.Source == kmsg.ConfigSourceDynamicTopicConfig {
					alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: c.Name})
				}
				continue
			}
			if !sameValue(c.Value, h.Value) {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: c.Name, Value: c.Value})
			}
		}
		if len(alters) == 0 {
			continue
		}
		e.log.Info("syncing remote topic configs", "topic", t.Remote, "changes", len(alters))
		resp, err := e.tgtAdm.AlterTopicConfigs(ctx, alters, t.Remote)
		if err == nil {
			for _, r := range resp {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			return fmt.Errorf("syncing configs of remote topic %q: %w", t.Remote, err)
		}
	}
	return nil
}

func sameValue(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func strp(s string) *string { return &s }
