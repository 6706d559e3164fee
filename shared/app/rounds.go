package app

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/mm2go/mm2go/shared/checkpoint"
	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/heartbeat"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/policy"
	"github.com/mm2go/mm2go/shared/round"
	"github.com/mm2go/mm2go/shared/serve"
)

// CheckpointJob builds a checkpoint Job from loaded settings, with clients from
// shared/cluster, recording metrics with rec (nil: none). The caller closes the Job.
func CheckpointJob(ctx context.Context, cfg *config.Config, logger *slog.Logger, rec *metrics.Recorder) (*checkpoint.Job, error) {
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
	opts := checkpoint.Options{
		Flow: flow(cfg, pol, rec), Topics: topics, Groups: groups,
		OffsetSyncsTopicLocation:          cfg.OffsetSyncsTopicLocation,
		CheckpointsTopicReplicationFactor: int16(cfg.CheckpointsTopicReplicationFactor),
		DisableCheckpoints:                !cfg.EmitCheckpointsEnabled,
		SyncGroupOffsets:                  cfg.SyncGroupOffsetsEnabled,
	}
	// MM2_CHECKPOINT_TRANSLATION: "precise" (the default: Options.PreciseTranslation) or "mm2"
	// (MM2's OffsetSyncStore alone, checkpoints identical to MM2's); config validated the value.
	opts.PreciseTranslation = cfg.CheckpointTranslation == "precise"
	srcProfile, tgtProfile, err := profiles(cfg)
	if err != nil {
		return nil, err
	}
	opts.CheckpointsTopicConfigs = tgtProfile.InternalTopicConfigs()
	if err := opts.Validate(); err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	if n := tgtProfile.Notice(); n != "" {
		logger.Info(n)
	}
	return checkpoint.New(ctx, opts, cluster.Dialer(cfg.Source, srcProfile, logger), cluster.Dialer(cfg.Target, tgtProfile, logger), logger)
}

// flow is what a checkpoint or heartbeat job takes from the flow's settings: aliases, naming,
// the Connect offsets topic (written to as MM2's connectors write it), metrics and the
// connect-error explanation.
func flow(cfg *config.Config, pol policy.Policy, rec *metrics.Recorder) round.Flow {
	return round.Flow{
		SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias, Policy: pol,
		WriteConnectOffsets: true, OffsetStorageTopic: cfg.OffsetStorageTopic,
		Metrics: rec, ExplainConnectError: cfg.ConnectError,
	}
}

// HeartbeatJob builds a heartbeat Job from loaded settings, with clients from
// shared/cluster, recording metrics with rec (nil: none). The caller closes the Job.
func HeartbeatJob(ctx context.Context, cfg *config.Config, logger *slog.Logger, rec *metrics.Recorder) (*heartbeat.Job, error) {
	pol, err := cfg.Policy()
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	opts := heartbeat.Options{
		Flow:                             flow(cfg, pol, rec),
		HeartbeatsTopicReplicationFactor: int16(cfg.HeartbeatsTopicReplicationFactor),
		DisableHeartbeats:                !cfg.EmitHeartbeatsEnabled,
		DisableReverse:                   !cfg.ReverseHeartbeatsEnabled,
	}
	srcProfile, tgtProfile, err := profiles(cfg)
	if err != nil {
		return nil, err
	}
	opts.SourceTopicConfigs, opts.TargetTopicConfigs = srcProfile.InternalTopicConfigs(), tgtProfile.InternalTopicConfigs()
	if err := opts.Validate(); err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	return heartbeat.New(ctx, opts, cluster.Dialer(cfg.Source, srcProfile, logger), cluster.Dialer(cfg.Target, tgtProfile, logger), logger)
}

// CheckpointRun is `checkpoint run`: one round, its summary logged and printed as JSON on
// stdout.
func CheckpointRun(ctx context.Context, env cli.Env) error { return runRound(ctx, env, checkpointJob) }

// CheckpointServe is `checkpoint serve`: every CloudEvent runs one round (see
// round.Server).
func CheckpointServe(ctx context.Context, env cli.Env) error {
	return serveRound(ctx, env, checkpointJob)
}

// HeartbeatRun is `heartbeat run`: one round, its summary logged and printed as JSON on
// stdout.
func HeartbeatRun(ctx context.Context, env cli.Env) error { return runRound(ctx, env, heartbeatJob) }

// HeartbeatServe is `heartbeat serve`: every CloudEvent runs one round (see
// round.Server).
func HeartbeatServe(ctx context.Context, env cli.Env) error {
	return serveRound(ctx, env, heartbeatJob)
}

func checkpointJob(ctx context.Context, env cli.Env) (*checkpoint.Job, error) {
	return CheckpointJob(ctx, env.Config, env.Logger, env.Metrics)
}

func heartbeatJob(ctx context.Context, env cli.Env) (*heartbeat.Job, error) {
	return HeartbeatJob(ctx, env.Config, env.Logger, env.Metrics)
}

// runRound is the `run` sub-command of the job that build makes: one round, its summary
// printed as JSON on stdout. MM2_BURST_MAX_DURATION, when set, is the round's retry budget.
func runRound[S any, J round.Job[S]](ctx context.Context, env cli.Env, build func(context.Context, cli.Env) (J, error)) error {
	j, err := build(ctx, env)
	if err != nil {
		return err
	}
	defer j.Close()
	if d := env.Config.BurstMaxDuration; d > 0 {
		// MM2_BURST_MAX_DURATION bounds the invocation: the retries stop within it.
		j.Gate().RunBackoff.Budget = d
	}
	return limitError(env.Config, round.Once(ctx, j.Gate(), env.Stdout, j.Round, cli.ErrMoreToDo))
}

// serveRound is the `serve` sub-command of the job that build makes: every CloudEvent runs one
// round (see round.Server), on PORT, with /healthz, /readyz and /metrics.
func serveRound[S any, J round.Job[S]](ctx context.Context, env cli.Env, build func(context.Context, cli.Env) (J, error)) error {
	if err := env.Config.SenderAuth().Validate(); err != nil {
		return &cli.ConfigError{Err: err}
	}
	j, err := build(ctx, env)
	if err != nil {
		return err
	}
	defer j.Close()
	j.Gate().EventTypes = env.Config.BurstEventTypes
	sc := serve.Config{Addr: serve.AddrFromPort(strconv.Itoa(env.Config.Port)), Metrics: env.Metrics.Handler(),
		SenderAuth: env.Config.SenderAuth()}
	return serve.Run(ctx, sc, env.Logger, round.Server[S](j))
}

// profiles returns what each cluster of the flow allows (cluster.SettingsProfile).
func profiles(cfg *config.Config) (src, tgt cluster.Profile, err error) {
	if src, err = cluster.SettingsProfile(cfg.Source); err != nil {
		return src, tgt, &cli.ConfigError{Err: err}
	}
	if tgt, err = cluster.SettingsProfile(cfg.Target); err != nil {
		return src, tgt, &cli.ConfigError{Err: err}
	}
	return src, tgt, nil
}
