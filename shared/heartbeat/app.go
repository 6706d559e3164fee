package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/serve"
)

// FromConfig builds a Job from loaded settings, with clients from
// shared/cluster. The caller closes the Job.
func FromConfig(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Job, error) {
	pol, err := cfg.Policy()
	if err != nil {
		return nil, err
	}
	opts := Options{
		SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias, Policy: pol,
		HeartbeatsTopicReplicationFactor: int16(cfg.HeartbeatsTopicReplicationFactor),
		DisableHeartbeats:                !cfg.EmitHeartbeatsEnabled,
		DisableReverse:                   !cfg.ReverseHeartbeatsEnabled,
		WriteConnectOffsets:              true,
	}
	j, err := New(ctx, opts, clientFunc(cfg.Source, logger), clientFunc(cfg.Target, logger), logger)
	if err != nil {
		return nil, err
	}
	j.describe = func(clusterName string, err error) error {
		if clusterName == "source" {
			return cluster.ConnectError(cfg.Source, err)
		}
		return cluster.ConnectError(cfg.Target, err)
	}
	return j, nil
}

func clientFunc(s cluster.Settings, logger *slog.Logger) ClientFunc {
	return func(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
		return cluster.NewClient(ctx, s, logger, extra...)
	}
}

// Ready implements serve.Readier: both clusters answer a metadata request.
func (j *Job) Ready(ctx context.Context) error { return j.ping(ctx) }

// Handle implements serve.Handler: any CloudEvent (a PingSource tick, a
// cron's request) runs one round. The answer is 200 with the round's JSON
// summary, 503 with a one-line reason when a cluster is unavailable (the
// sender retries), 500 on any other failure.
func (j *Job) Handle(ctx context.Context, _ event.Event) protocol.Result {
	select {
	case j.running <- struct{}{}:
		defer func() { <-j.running }()
	case <-ctx.Done():
		return serve.Text(http.StatusServiceUnavailable, "a heartbeat round is still running")
	}
	sum, err := j.Round(ctx)
	var ue *UnavailableError
	switch {
	case err == nil:
		return serve.JSON(http.StatusOK, sum)
	case errors.As(err, &ue):
		return serve.Text(http.StatusServiceUnavailable, "%v", err)
	case ctx.Err() != nil:
		return serve.Text(http.StatusServiceUnavailable, "heartbeat round interrupted: %v", err)
	}
	return serve.Text(http.StatusInternalServerError, "heartbeat round failed: %v", err)
}

// Run runs one round and logs its summary; it is the `run` sub-command.
func (j *Job) Run(ctx context.Context) error {
	if _, err := j.Round(ctx); err != nil {
		return fmt.Errorf("heartbeat round: %w", err)
	}
	return nil
}
