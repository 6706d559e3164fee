package checkpoint

import (
	"context"
	"errors"
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
	if !cfg.EmitOffsetSyncsEnabled {
		// MirrorCheckpointConfig.validate refuses the same: without syncs nothing translates.
		return nil, &cli.ConfigError{Err: errors.New("MM2_EMIT_OFFSET_SYNCS_ENABLED=false (emit.offset-syncs.enabled): checkpoint cannot run without offset syncs, as MM2's MirrorCheckpointConnector; turn it on or do not run checkpoint for this flow")}
	}
	pol, err := cfg.Policy()
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	topics, err := cfg.TopicFilter()
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	groups, err := cfg.GroupFilter()
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	opts := Options{
		SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias,
		Policy: pol, Topics: topics, Groups: groups,
		OffsetSyncsTopicLocation:          cfg.OffsetSyncsTopicLocation,
		CheckpointsTopicReplicationFactor: int16(cfg.CheckpointsTopicReplicationFactor),
		DisableCheckpoints:                !cfg.EmitCheckpointsEnabled,
		SyncGroupOffsets:                  cfg.SyncGroupOffsetsEnabled,
		WriteConnectOffsets:               true,
		OffsetStorageTopic:                cfg.OffsetStorageTopic,
		Metrics:                           rec,
	}
	// MM2_CHECKPOINT_TRANSLATION: "mm2" (MM2's OffsetSyncStore alone, checkpoints identical to
	// MM2's) or "precise" (Options.PreciseTranslation); config validated the value.
	opts.PreciseTranslation = cfg.CheckpointTranslation == "precise"
	srcProfile, err := cluster.SettingsProfile(cfg.Source)
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	tgtProfile, err := cluster.SettingsProfile(cfg.Target)
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	opts.CheckpointsTopicConfigs = tgtProfile.InternalTopicConfigs()
	if err := opts.withDefaults(); err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	if n := tgtProfile.Notice(); n != "" {
		logger.Info(n)
	}
	j, err := New(ctx, opts, cluster.Dialer(cfg.Source, srcProfile, logger), cluster.Dialer(cfg.Target, tgtProfile, logger), logger)
	if err != nil {
		return nil, err
	}
	j.describe = cfg.ConnectError
	return j, nil
}

// Ready implements serve.Readier: both clusters answer a metadata request.
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
