package engine

import (
	"context"
	"fmt"
	"sort"

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
	ok, _ := e.Explain(t, false)
	return ok
}

// Explain is Selected with the reason, for a dry run; kafkaInternal is the broker's flag for
// its own internal topics (__consumer_offsets, __transaction_state), never replicated.
func (e *Engine) Explain(topic string, kafkaInternal bool) (bool, string) {
	p := e.opts.Policy
	if kafkaInternal {
		return false, "Kafka internal topic"
	}
	ok, reason := e.opts.Topics.Explain(topic)
	if !ok && e.opts.HeartbeatsReplication && p.IsHeartbeatsTopic(topic) {
		ok, reason = true, "heartbeats topic (heartbeats.replication.enabled)"
	}
	if !ok {
		return false, reason
	}
	if p.IsInternalTopic(topic) {
		return false, "internal topic (MM2 or Kafka internal name)"
	}
	if policy.IsCycle(p, e.opts.TargetAlias, topic) {
		return false, fmt.Sprintf("replication cycle: the topic came from %q", e.opts.TargetAlias)
	}
	return true, reason
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
	return e.prepareServed(ctx, topics)
}

// prepareServed is prepareTargets followed by a brief wait for the new partitions to be
// served (awaitServing).
func (e *Engine) prepareServed(ctx context.Context, topics []Topic) error {
	news, err := e.prepareTargets(ctx, topics)
	if err == nil {
		e.awaitServing(ctx, news)
	}
	return err
}

// prepareTargets is PrepareTargets after the budget check: the remote topic part of the plan,
// computed then executed. It returns the topics it created, whose partitions the target may
// not serve yet (awaitServing).
func (e *Engine) prepareTargets(ctx context.Context, topics []Topic) ([]cluster.NewTopic, error) {
	plans, _, err := e.planTargets(ctx, topics)
	if err != nil {
		return nil, err
	}
	return e.applyTargets(ctx, plans)
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

func sameValue(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func strp(s string) *string { return &s }
