package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicState is what a broker's metadata says about one topic at the moment it is asked.
type TopicState struct {
	Exists     bool
	Partitions int32
	Led        bool            // every partition has a leader
	Leaders    map[int32]int32 // partition -> leader broker id, for the partitions that have one
}

// DescribeTopic asks a broker about topic name directly. kadm's Metadata answers from
// franz-go's metadata cache for up to MetadataMinAge (5 s by default), so a topic created a
// moment ago can look absent there for seconds; this request is never answered from the cache
// (and refreshes it for later kadm calls on cl).
func DescribeTopic(ctx context.Context, cl *kgo.Client, name string) (TopicState, error) {
	st, err := DescribeTopics(ctx, cl, name)
	return st[name], err
}

// DescribeTopics is DescribeTopic for several topics in one request.
func DescribeTopics(ctx context.Context, cl *kgo.Client, names ...string) (map[string]TopicState, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("describing topics %s: %w", strings.Join(names, ", "), err)
	}
	out := make(map[string]TopicState, len(names))
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			continue
		case errors.Is(err, kerr.LeaderNotAvailable):
			out[name] = TopicState{Exists: true} // still being created
			continue
		case err != nil:
			return nil, fmt.Errorf("describing topic %q: %w", name, err)
		}
		st := TopicState{Exists: true, Partitions: int32(len(t.Partitions)), Led: len(t.Partitions) > 0,
			Leaders: make(map[int32]int32, len(t.Partitions))}
		for _, p := range t.Partitions {
			if p.Leader < 0 || p.ErrorCode != 0 {
				st.Led = false
				continue
			}
			st.Leaders[p.Partition] = p.Leader
		}
		out[name] = st
	}
	return out, nil
}

// WaitForTopic waits until a just-created topic has a leader for every partition (a broker
// learns of a new topic a moment after CreateTopics answers) and returns its partition count.
func WaitForTopic(ctx context.Context, cl *kgo.Client, name string) (int32, error) {
	n, err := WaitForTopics(ctx, cl, name)
	return n[name], err
}

// topicLeaderWait bounds WaitForTopics: a loaded broker that has just created a thousand
// partitions can take well over 15 s to elect the leaders of the next topic's.
const topicLeaderWait = 2 * time.Minute

// WaitForTopics is WaitForTopic for several topics, one request per check, for up to
// topicLeaderWait.
func WaitForTopics(ctx context.Context, cl *kgo.Client, names ...string) (map[string]int32, error) {
	out := make(map[string]int32, len(names))
	pending := names
	start := time.Now()
	for i := 0; ; i++ {
		st, err := DescribeTopics(ctx, cl, pending...)
		if err != nil {
			return nil, err
		}
		var still []string
		for _, name := range pending {
			if s := st[name]; s.Led {
				out[name] = s.Partitions
			} else {
				still = append(still, name)
			}
		}
		if pending = still; len(pending) == 0 {
			return out, nil
		}
		if waited := time.Since(start); waited >= topicLeaderWait {
			return nil, fmt.Errorf("topics %s still lack a leader for some partition %v after their creation (%d checks)", strings.Join(pending, ", "), waited.Round(time.Second), i+1)
		}
		if err := pause(ctx, i, 50, 100*time.Millisecond); err != nil {
			return nil, fmt.Errorf("waiting for topics %s: %w", strings.Join(pending, ", "), err)
		}
	}
}

// pause waits before check i+1 of a readiness poll: 5 ms after each of the first fastChecks
// checks (a new topic is usually ready within a few), slow after later ones.
func pause(ctx context.Context, i, fastChecks int, slow time.Duration) error {
	wait := slow
	if i < fastChecks {
		wait = 5 * time.Millisecond
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// NewTopic is one topic to create.
type NewTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]*string
}

// CreateTopicsEach creates topics in one request (the controller handles them together, where
// one request per topic would queue) and returns each topic's failure (nil when created or
// already there); err is a failure of the request as a whole. A name given twice is asked for
// once. It does not wait for the new topics' leaders: see WaitForTopics.
func CreateTopicsEach(ctx context.Context, cl *kgo.Client, topics ...NewTopic) (map[string]error, error) {
	errs := make(map[string]error, len(topics))
	if len(topics) == 0 {
		return errs, nil
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60_000
	seen := map[string]bool{}
	for _, t := range topics {
		if seen[t.Name] {
			continue // Kafka refuses a request naming a topic twice
		}
		seen[t.Name] = true
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Name, t.Partitions, t.ReplicationFactor
		keys := make([]string, 0, len(t.Configs))
		for k := range t.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, t.Configs[k]
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("creating topics: %w", err)
	}
	rf := make(map[string]int16, len(topics))
	for _, t := range topics {
		rf[t.Name] = t.ReplicationFactor
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			if t.ErrorMessage != nil && *t.ErrorMessage != "" {
				err = fmt.Errorf("%w: %s", err, *t.ErrorMessage)
			}
			errs[t.Topic] = fmt.Errorf("creating topic %q: %w", t.Topic, replicationFactorCheck(ctx, cl, t.Topic, rf[t.Topic], err))
		}
	}
	return errs, nil
}

// ReplicationFactorError is a topic asked for with more replicas than the cluster has brokers:
// the cluster answered INVALID_REPLICATION_FACTOR and its metadata lists fewer brokers than the
// factor. Trying again cannot help (Retriable says no); the setting that gave the factor must
// change. It unwraps to the broker's error.
type ReplicationFactorError struct {
	Topic   string
	Factor  int16
	Brokers int
	Err     error
}

func (e *ReplicationFactorError) Error() string {
	return fmt.Sprintf("replication factor %d for topic %q cannot be met: the cluster lists %d broker(s); use at most %d, or -1 for the broker's default.replication.factor (%v)",
		e.Factor, e.Topic, e.Brokers, e.Brokers, e.Err)
}

func (e *ReplicationFactorError) Unwrap() error { return e.Err }

// replicationFactorCheck turns an INVALID_REPLICATION_FACTOR answer to the creation of topic
// with rf replicas into a ReplicationFactorError when the cluster's metadata lists at least
// one broker and fewer than rf. A cluster listing no broker at all is a KRaft broker fenced
// while it catches up after a restart (it answers INVALID_REPLICATION_FACTOR then too): err is
// returned as it is, retriable. Other errors are returned as they are.
func replicationFactorCheck(ctx context.Context, cl *kgo.Client, topic string, rf int16, err error) error {
	if rf <= 0 || !errors.Is(err, kerr.InvalidReplicationFactor) {
		return err
	}
	resp, merr := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if merr != nil || len(resp.Brokers) == 0 || len(resp.Brokers) >= int(rf) {
		return err
	}
	return &ReplicationFactorError{Topic: topic, Factor: rf, Brokers: len(resp.Brokers), Err: err}
}

// EnsureTopic creates topic name with the given partitions, replication factor and configs if
// it does not exist, waits until every partition has a leader and returns the partition count
// and whether this call created it. When the topic exists it needs no right to create topics.
func EnsureTopic(ctx context.Context, cl *kgo.Client, name string, partitions int32, rf int16, configs map[string]*string) (n int32, created bool, err error) {
	st, err := DescribeTopic(ctx, cl, name)
	if err != nil {
		return 0, false, err
	}
	if st.Led {
		return st.Partitions, false, nil
	}
	if !st.Exists {
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, rf, configs, name)
		if err == nil {
			err = resp.Err
		}
		created = err == nil
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return 0, false, fmt.Errorf("creating topic %q: %w", name, replicationFactorCheck(ctx, cl, name, rf, err))
		}
	}
	n, err = WaitForTopic(ctx, cl, name)
	return n, created, err
}

// WaitForServing waits until every partition of topics answers a ListOffsets request at its
// leader. A KRaft broker names a new partition's leader in metadata some milliseconds before it
// serves the partition, and a request in between fails with NOT_LEADER_FOR_PARTITION;
// franz-go's own retries of such a request back off exponentially (100 ms doubling to 1 s with
// the engine's settings), which turned a 300 ms wait into up to 2 s. This polls every few
// milliseconds instead, each check one metadata request and one ListOffsets request per
// leader, sent without retries.
func WaitForServing(ctx context.Context, cl *kgo.Client, topics ...string) error {
	what := strings.Join(topics, ", ")
	for i := 0; ; i++ {
		ok, err := serving(ctx, cl, topics)
		if ok {
			return nil
		}
		if i >= 400 {
			return fmt.Errorf("topics %s: partitions not served %d checks after their leaders appeared: %w", what, i, err)
		}
		if err := pause(ctx, i, 100, 50*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for topics %s to be served: %w", what, err)
		}
	}
}

// serving asks each leader of topics' partitions once for their end offsets.
func serving(ctx context.Context, cl *kgo.Client, topics []string) (bool, error) {
	st, err := DescribeTopics(ctx, cl, topics...)
	if err != nil {
		return false, err
	}
	byLeader := map[int32]map[string][]int32{}
	for _, topic := range topics {
		if !st[topic].Led {
			return false, fmt.Errorf("topic %q: not every partition has a leader", topic)
		}
		for p, leader := range st[topic].Leaders {
			if byLeader[leader] == nil {
				byLeader[leader] = map[string][]int32{}
			}
			byLeader[leader][topic] = append(byLeader[leader][topic], p)
		}
	}
	for leader, led := range byLeader {
		errs, err := ServedBy(ctx, cl, leader, led)
		if err != nil {
			return false, err
		}
		for topic, ps := range errs {
			for p, err := range ps {
				if err != nil {
					return false, fmt.Errorf("topic %q partition %d: %w", topic, p, err)
				}
			}
		}
	}
	return true, nil
}

// ServedBy asks leader once, without retries, for the end offsets of parts (partitions by
// topic) and returns each answered partition's error: nil where leader serves it. A partition
// missing from the answer is missing from the result. err is the request's.
func ServedBy(ctx context.Context, cl *kgo.Client, leader int32, parts map[string][]int32) (map[string]map[int32]error, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	for topic, ps := range parts {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[int32]error, len(resp.Topics))
	for _, t := range resp.Topics {
		if out[t.Topic] == nil {
			out[t.Topic] = make(map[int32]error, len(t.Partitions))
		}
		for _, p := range t.Partitions {
			out[t.Topic][p.Partition] = kerr.ErrorForCode(p.ErrorCode)
		}
	}
	return out, nil
}

// ListOffsets returns the start and end offsets of every partition of topics. With committed
// the end is the last stable offset (what a read_committed consumer can reach), else the high
// watermark. A missing topic fails with an error that matches kerr.UnknownTopicOrPartition
// (errors.Is); so does every partition error, wrapped with what was listed.
func ListOffsets(ctx context.Context, adm *kadm.Client, committed bool, topics ...string) (starts, ends kadm.ListedOffsets, err error) {
	what := strings.Join(topics, ", ")
	starts, err = adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing start offsets of %s: %w", what, err)
	}
	if committed {
		ends, err = adm.ListCommittedOffsets(ctx, topics...)
	} else {
		ends, err = adm.ListEndOffsets(ctx, topics...)
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing end offsets of %s: %w", what, err)
	}
	return starts, ends, nil
}

// TopicMissing reports whether err says a topic (or its partition) does not exist:
// UNKNOWN_TOPIC_OR_PARTITION from a metadata, list-offsets or fetch answer.
func TopicMissing(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }
