package engine

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Side names one of the two clusters of a flow.
type Side int

// The two clusters of a flow.
const (
	Source Side = iota
	Target
)

func (s Side) String() string {
	if s == Source {
		return "source"
	}
	return "target"
}

// DialFunc builds a franz-go client for one cluster of the flow. extra options are the
// engine's own (consumer, producer, transactional settings) and must be applied last.
// shared/cluster.NewClient fits it once bound to the cluster's settings.
type DialFunc func(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error)

// TP is a source topic-partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }
