package heartbeat

import (
	"context"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/round"
)

// FromConfig builds a Job from loaded settings, with clients from
// shared/cluster. The caller closes the Job.
func FromConfig(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Job, error) {
	return fromConfig(ctx, cfg, logger, nil)
}

// fromConfig is FromConfig recording metrics with rec (nil: none).
func fromConfig(ctx context.Context, cfg *config.Config, logger *slog.Logger, rec *metrics.Recorder) (*Job, error) {
	pol, err := cfg.Policy()
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	opts := Options{
		SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias, Policy: pol,
		HeartbeatsTopicReplicationFactor: int16(cfg.HeartbeatsTopicReplicationFactor),
		DisableHeartbeats:                !cfg.EmitHeartbeatsEnabled,
		DisableReverse:                   !cfg.ReverseHeartbeatsEnabled,
		WriteConnectOffsets:              true,
		OffsetStorageTopic:               cfg.OffsetStorageTopic,
		Metrics:                          rec,
	}
	srcProfile, err := cluster.SettingsProfile(cfg.Source)
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	tgtProfile, err := cluster.SettingsProfile(cfg.Target)
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	opts.SourceTopicConfigs, opts.TargetTopicConfigs = srcProfile.InternalTopicConfigs(), tgtProfile.InternalTopicConfigs()
	if err := opts.withDefaults(); err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	j, err := New(ctx, opts, cluster.Dialer(cfg.Source, srcProfile, logger), cluster.Dialer(cfg.Target, tgtProfile, logger), logger)
	if err != nil {
		return nil, err
	}
	j.describe = cfg.ConnectError
	return j, nil
}

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

func build(ctx context.Context, env cli.Env) (*Job, error) {
	return fromConfig(ctx, env.Config, env.Logger, env.Metrics)
}

// RunCommand is the `run` sub-command: one round, its summary logged and
// printed as JSON on stdout.
func RunCommand(ctx context.Context, env cli.Env) error {
	return round.RunCommand[*Summary](build)(ctx, env)
}

// ServeCommand is the `serve` sub-command: every CloudEvent runs one round
// (see Job.Handle).
func ServeCommand(ctx context.Context, env cli.Env) error {
	return round.ServeCommand[*Summary](build)(ctx, env)
}
