package engine

import (
	"context"
	"errors"
	"time"
)

// groupBurst splits partitions between concurrent bursts through a source consumer group.
func (e *Engine) groupBurst(ctx context.Context, start time.Time, bo BurstOptions, tps []TP, remote map[string]string) (Summary, error) {
	return e.failed(start, errors.New("burst groups are not implemented yet"))
}
