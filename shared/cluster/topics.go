package cluster

import (
	"context"
	"errors"
	"fmt"
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
	Led        bool // every partition has a leader
}

// DescribeTopic asks a broker about topic name directly. kadm's Metadata answers from
// franz-go's metadata cache for up to MetadataMinAge (5 s by default), so a topic created a
// moment ago can look absent there for seconds; this request is never answered from the cache
// (and refreshes it for later kadm calls on cl).
func DescribeTopic(ctx context.Context, cl *kgo.Client, name string) (TopicState, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(name)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return TopicState{}, fmt.Errorf("describing topic %q: %w", name, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != name {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return TopicState{}, nil
		case errors.Is(err, kerr.LeaderNotAvailable):
			return TopicState{Exists: true}, nil // still being created
		case err != nil:
			return TopicState{}, fmt.Errorf("describing topic %q: %w", name, err)
		}
		st := TopicState{Exists: true, Partitions: int32(len(t.Partitions)), Led: len(t.Partitions) > 0}
		for _, p := range t.Partitions {
			if p.Leader < 0 || p.ErrorCode != 0 {
				st.Led = false
			}
		}
		return st, nil
	}
	return TopicState{}, nil
}

// WaitForTopic waits until a just-created topic has a leader for every partition (a broker
// learns of a new topic a moment after CreateTopics answers) and returns its partition count.
func WaitForTopic(ctx context.Context, cl *kgo.Client, name string) (int32, error) {
	for i := 0; ; i++ {
		st, err := DescribeTopic(ctx, cl, name)
		if err != nil {
			return 0, err
		}
		if st.Led {
			return st.Partitions, nil
		}
		if i >= 200 {
			return 0, fmt.Errorf("topic %q still lacks a leader for some partition %d checks after its creation", name, i)
		}
		wait := 100 * time.Millisecond
		if i < 50 {
			wait = 5 * time.Millisecond // usually ready within a few ms
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for topic %q: %w", name, ctx.Err())
		case <-time.After(wait):
		}
	}
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
			return 0, false, fmt.Errorf("creating topic %q: %w", name, err)
		}
	}
	n, err = WaitForTopic(ctx, cl, name)
	return n, created, err
}
