package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/metrics"
)

// EnvAutoOffsetReset names the source consumer's auto.offset.reset setting in messages.
const EnvAutoOffsetReset = "MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET"

// Dialer returns the DialFunc building clients from the two clusters' settings. Each cluster's
// clients share one cluster.Dialer, hence one Azure AD token cache.
func Dialer(cfg *config.Config, logger *slog.Logger) DialFunc {
	type side struct {
		dial cluster.ClientFunc
		err  error
	}
	mk := func(s cluster.Settings) side {
		p, err := cluster.SettingsProfile(s)
		if err != nil {
			return side{err: err}
		}
		return side{dial: cluster.Dialer(s, p, logger)}
	}
	src, tgt := mk(cfg.Source), mk(cfg.Target)
	return func(ctx context.Context, sd Side, extra ...kgo.Opt) (*kgo.Client, error) {
		d := src
		if sd == Target {
			d = tgt
		}
		if d.err != nil {
			return nil, d.err
		}
		return d.dial(ctx, extra...)
	}
}

// OptionsFromConfig maps loaded settings to engine Options. The source cluster's
// consumer.auto.offset.reset and consumer.isolation.level apply to the copy; its producer
// settings (compression, linger) come with the target's clients. lookupEnv is unused for now.
func OptionsFromConfig(cfg *config.Config, lookupEnv func(string) (string, bool)) (Options, error) {
	pol, err := cfg.Policy()
	if err != nil {
		return Options{}, err
	}
	topics, err := cfg.TopicFilter()
	if err != nil {
		return Options{}, err
	}
	exclude, err := filter.NewList(filter.Setting{Property: "config.properties.exclude", Env: "MM2_CONFIG_PROPERTIES_EXCLUDE"}, cfg.ConfigPropertiesExclude)
	if err != nil {
		return Options{}, err
	}
	o := Options{
		SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias,
		Policy: pol, Topics: topics, HeartbeatsReplication: cfg.HeartbeatsReplicationEnabled,
		ReplicationFactor:                 int16(cfg.ReplicationFactor),
		ConfigPropertiesExclude:           exclude,
		SyncTopicConfigs:                  cfg.SyncTopicConfigsEnabled,
		OffsetSyncsTopicLocation:          cfg.OffsetSyncsTopicLocation,
		OffsetSyncsTopicReplicationFactor: int16(cfg.OffsetSyncsTopicReplicationFactor),
		OffsetLagMax:                      cfg.OffsetLagMax,
		EmitOffsetSyncs:                   new(cfg.EmitOffsetSyncsEnabled),
		OffsetStorageTopic:                cfg.OffsetStorageTopic,
		OffsetStoragePartitions:           int32(cfg.OffsetStoragePartitions),
		OffsetStorageReplicationFactor:    int16(cfg.OffsetStorageReplicationFactor),
		ExactlyOnce:                       cfg.ExactlyOnce,
		LagGroup:                          cfg.LagGroup,
	}
	if o.SourceProfile, err = cluster.SettingsProfile(cfg.Source); err != nil {
		return Options{}, err
	}
	if o.TargetProfile, err = cluster.SettingsProfile(cfg.Target); err != nil {
		return Options{}, err
	}
	switch cfg.Source.ConsumerAutoOffsetReset {
	case "latest":
		o.AutoOffsetResetLatest = true
	case "none":
		return Options{}, fmt.Errorf("%s=none is not supported by mirror: use earliest or latest", EnvAutoOffsetReset)
	}
	o.ReadCommitted = cfg.Source.ConsumerIsolationLevel == "read_committed"
	return o, nil
}

// FromConfig builds an Engine from loaded settings with clients from shared/cluster. The
// caller closes it.
func FromConfig(ctx context.Context, cfg *config.Config, lookupEnv func(string) (string, bool), logger *slog.Logger) (*Engine, error) {
	o, err := OptionsFromConfig(cfg, lookupEnv)
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	return New(ctx, o, Dialer(cfg, logger), logger)
}

// RunCommand is `mirror run`: one burst bounded by MM2_BURST_MAX_DURATION and
// MM2_BURST_MAX_RECORDS. It logs the summary as one line, writes it as JSON to env.Stdout and
// returns cli.ErrMoreToDo when a budget or a signal left records to copy.
func RunCommand(ctx context.Context, env cli.Env) error {
	o, err := OptionsFromConfig(env.Config, env.LookupEnv)
	if err != nil {
		return &cli.ConfigError{Err: err}
	}
	o.Metrics = env.Metrics
	e, err := New(ctx, o, Dialer(env.Config, env.Logger), env.Logger)
	if err != nil {
		return err
	}
	defer e.Close()
	bo := BurstOptions{MaxDuration: env.Config.BurstMaxDuration, MaxRecords: env.Config.BurstMaxRecords, Group: env.Config.BurstGroup}
	if env.Progress != nil {
		bo.Progress = func(p Progress) {
			rate := float64(p.Records) / max(p.Elapsed.Seconds(), 0.001)
			fmt.Fprintf(env.Progress, "\r\033[Kcopied %d records (%.1f MB), %.0f rec/s, lag %d", p.Records, float64(p.Bytes)/1e6, rate, p.Lag)
		}
	}
	s, err := e.Burst(ctx, bo)
	if env.Progress != nil {
		fmt.Fprint(env.Progress, "\r\033[K")
	}
	logSummary(env.Logger, s)
	env.Metrics.Burst(ctx, s.Reason, s.Duration)
	if err != nil {
		env.Metrics.Error(ctx, metrics.ErrorKind(err))
	}
	if b, jerr := json.Marshal(s); jerr == nil {
		fmt.Fprintf(env.Stdout, "%s\n", b)
	}
	if err != nil && ctx.Err() != nil && s.Records == 0 {
		// A stop signal during set-up: nothing was copied, nothing is lost; more to do.
		return fmt.Errorf("stopped before copying (%v): %w", err, cli.ErrMoreToDo)
	}
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	if s.MoreToDo() && s.Reason != ReasonDone {
		return fmt.Errorf("%s with %d records left: %w", s.Reason, s.Lag, cli.ErrMoreToDo)
	}
	return nil
}

func logSummary(logger *slog.Logger, s Summary) {
	topics := make([]any, 0, len(s.Topics))
	for name, t := range s.Topics {
		topics = append(topics, slog.Group(name, "remote", t.Remote, "records", t.Records, "bytes", t.Bytes, "lag", t.Lag))
	}
	rate := 0.0
	if s.Duration > 0 {
		rate = float64(s.Records) / s.Duration.Seconds()
	}
	logger.Info("burst summary",
		"reason", s.Reason, "records", s.Records, "bytes", s.Bytes, "lag", s.Lag,
		"partitions", s.Partitions, "duration", s.Duration.Round(time.Millisecond).String(),
		"records_per_second", int64(rate), "first_record_ms", s.FirstRecordMS,
		"exactly_once", s.ExactlyOnce, slog.Group("topics", topics...))
}
