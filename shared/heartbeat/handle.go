package heartbeat

import (
	"context"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"

	"github.com/mm2go/mm2go/shared/round"
)

// Ready implements serve.Readier: the target cluster answers a metadata
// request (a round needs only the target).
func (j *Job) Ready(ctx context.Context) error { return j.ping(ctx) }

// Handle implements serve.Handler: any CloudEvent (a PingSource tick, a
// cron's request) runs one round (see round.Handle for the answers).
// Concurrent events wait for the running round.
func (j *Job) Handle(ctx context.Context, _ event.Event) protocol.Result {
	return round.Handle(ctx, j.gate, j.Round)
}

// Gate implements round.Job: one round at a time.
func (j *Job) Gate() *round.Gate { return j.gate }
