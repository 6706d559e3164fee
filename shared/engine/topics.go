package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mm2go/mm2go/shared/policy"
)

// topicPlanner owns the flow's topics: which source topics are selected, the plan (remote
// topics to create, grow or reconfigure; the copy of each partition; the gaps found), its
// execution on the target (created in batches with concurrent callers), Event Hubs profile
// rules and budgets, and the topic ACL sync. Engine.Plan, a burst and serve's copies all plan
// through it, so a dry run and a run cannot disagree.
//
// Ownership: every field above mu is set by newTopicPlanner and read-only afterwards
// (creates has its own lock, a leaf). mu guards gaps only: written by planning (putGap, any
// run), read and cleared by the finishSummary of the run reporting the partition (takeGaps);
// a partition is copied by one run at a time, so the gap taken is the one its own planning
// found. mu is a leaf, never held across network I/O.
type topicPlanner struct {
	opts           Options
	src, tgt       *kgo.Client
	srcAdm, tgtAdm *kadm.Client
	log            *slog.Logger
	positions      *positionStore // stored positions a plan starts from
	creates        topicBatcher   // remote topics asked for at the same time go in one request

	mu   sync.Mutex
	gaps map[TP]Gap // gaps planning found, until the run's summary reports them
}

// Topic is one replicated source topic and its remote topic on the target.
type Topic struct {
	Source     string // source topic name
	Remote     string // remote topic name on the target
	Partitions int32  // source partition count
}

// selected is Engine.Selected.
func (pn *topicPlanner) selected(t string) bool {
	ok, _ := pn.explain(t, false)
	return ok
}

// explain is Engine.Explain.
func (pn *topicPlanner) explain(topic string, kafkaInternal bool) (bool, string) {
	p := pn.opts.Policy
	if kafkaInternal {
		return false, "Kafka internal topic"
	}
	ok, reason := pn.opts.Topics.Explain(topic)
	if !ok && pn.opts.HeartbeatsReplication && p.IsHeartbeatsTopic(topic) {
		ok, reason = true, "heartbeats topic (heartbeats.replication.enabled)"
	}
	if !ok {
		return false, reason
	}
	if p.IsInternalTopic(topic) {
		return false, "internal topic (MM2 or Kafka internal name)"
	}
	if policy.IsCycle(p, pn.opts.TargetAlias, topic) {
		return false, fmt.Sprintf("replication cycle: the topic came from %q", pn.opts.TargetAlias)
	}
	return true, reason
}

// discover is Engine.DiscoverTopics.
func (pn *topicPlanner) discover(ctx context.Context) ([]Topic, error) {
	md, err := pn.srcAdm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing source topics: %w", err)
	}
	var out []Topic
	for name, d := range md.Topics {
		if d.Err != nil || d.IsInternal || !pn.selected(name) || len(d.Partitions) == 0 {
			continue
		}
		out = append(out, Topic{Source: name, Remote: pn.opts.Policy.FormatRemoteTopic(pn.opts.SourceAlias, name), Partitions: int32(len(d.Partitions))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out, nil
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
func (pn *topicPlanner) copyableConfig(c topicConfig) bool {
	return !c.ReadOnly && !c.Sensitive && c.Source != kmsg.ConfigSourceStaticBrokerConfig &&
		!pn.opts.ConfigPropertiesExclude.Match(c.Name)
}

func (pn *topicPlanner) describeConfigs(ctx context.Context, cl *kgo.Client, topics []string) (map[string][]topicConfig, error) {
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
