package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/mirrorevents"
	"github.com/mm2go/mm2go/shared/serve"
)

// EnvAutoOffsetReset names the source consumer's auto.offset.reset setting in messages.
const EnvAutoOffsetReset = "MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET"

// Dialer returns the DialFunc building clients from the two clusters' settings. Each cluster's
// clients share one cluster.Dialer, hence one Azure AD token cache.
func Dialer(cfg *config.Config, logger *slog.Logger) engine.DialFunc {
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
	return func(ctx context.Context, sd engine.Side, extra ...kgo.Opt) (*kgo.Client, error) {
		d := src
		if sd == engine.Target {
			d = tgt
		}
		if d.err != nil {
			return nil, d.err
		}
		// The user's client overrides (producer.max.request.size, request.timeout.ms, ...) go
		// first. The engine's own options are the ones no setting of the user's names
		// (partitioner, acks, buffer bounds, linger of its internal producers), so none is
		// overridden (engine.TestFakeUserDeliveryTimeoutHonoured).
		return d.dial(ctx, append(cfg.ClientOpts(sd.String()), extra...)...)
	}
}

// EngineOptions maps loaded settings to engine Options. The source cluster's
// consumer.auto.offset.reset and consumer.isolation.level apply to the copy; its producer
// settings (compression, linger) come with the target's clients. lookupEnv is unused for now.
func EngineOptions(cfg *config.Config, lookupEnv func(string) (string, bool)) (engine.Options, error) {
	pol, err := cfg.Policy()
	if err != nil {
		return engine.Options{}, err
	}
	topics, err := cfg.TopicFilter()
	if err != nil {
		return engine.Options{}, err
	}
	exclude, err := filter.NewList(filter.Setting{Property: "config.properties.exclude", Env: "MM2_CONFIG_PROPERTIES_EXCLUDE"}, cfg.ConfigPropertiesExclude)
	if err != nil {
		return engine.Options{}, err
	}
	o := engine.Options{
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
		SyncTopicACLs:                     cfg.SyncTopicAclsEnabled,
		FetchMaxBytes:                     int32(cfg.SourceConsumer.FetchMaxBytes), // consumer.fetch.max.bytes (0: default)
		MaxBufferedBytes:                  int(cfg.InflightMaxBytes),               // inflight.max.bytes (0: default)
		DecodeRecords:                     !cfg.ForwardBatches,
	}
	if o.SourceProfile, err = cluster.SettingsProfile(cfg.Source); err != nil {
		return engine.Options{}, err
	}
	if o.TargetProfile, err = cluster.SettingsProfile(cfg.Target); err != nil {
		return engine.Options{}, err
	}
	switch cfg.Source.ConsumerAutoOffsetReset {
	case "latest":
		o.AutoOffsetResetLatest = true
	case "none":
		return engine.Options{}, fmt.Errorf("%s=none is not supported by mirror: use earliest or latest", EnvAutoOffsetReset)
	}
	o.ReadCommitted = cfg.Source.ConsumerIsolationLevel == "read_committed"
	return o, nil
}

// Engine builds an Engine from loaded settings with clients from shared/cluster. The caller
// closes it.
func Engine(ctx context.Context, cfg *config.Config, lookupEnv func(string) (string, bool), logger *slog.Logger) (*engine.Engine, error) {
	o, err := EngineOptions(cfg, lookupEnv)
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	warnIgnored(cfg, logger)
	return engine.New(ctx, o, Dialer(cfg, logger), logger)
}

// warnIgnored says which parsed settings have no effect.
func warnIgnored(cfg *config.Config, logger *slog.Logger) {
	if !cfg.RefreshTopicsEnabled {
		logger.Warn("MM2_REFRESH_TOPICS_ENABLED=false (refresh.topics.enabled) has no effect: every mirror run, and every event of mirror serve, looks for new topics and partitions as MM2 does at start-up")
	}
}

// MirrorRun is `mirror run`: one burst bounded by MM2_BURST_MAX_DURATION and
// MM2_BURST_MAX_RECORDS. It logs the summary as one line, writes it as JSON to env.Stdout and
// returns what burstOutcome says of it.
func MirrorRun(ctx context.Context, env cli.Env) error {
	e, err := meteredEngine(ctx, env)
	if err != nil {
		return err
	}
	defer e.Close()
	bo := engine.BurstOptions{MaxDuration: env.Config.BurstMaxDuration, MaxRecords: env.Config.BurstMaxRecords, Group: env.Config.BurstGroup}
	if env.Progress != nil {
		bo.Progress = func(p engine.Progress) {
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
	return limitError(env.Config, burstOutcome(ctx, s, err))
}

// burstOutcome maps a finished burst to MirrorRun's result, hence its exit code
// (docs/summary-and-exit-codes.md):
//   - a burst done with nothing left (every selected partition at its end, or owned by another
//     member of its burst group now) is a success (exit 0);
//   - a budget (MM2_BURST_MAX_DURATION, MM2_BURST_MAX_RECORDS) that ended a burst which copied
//     records is a success (exit 0): the time or record box was asked for, the positions are
//     stored, the next scheduled run continues, and what is left shows as the summary's lag
//     and the mm2go_lag_records gauge. A scheduler (Kubernetes Job, Container Apps job) must
//     not mark it failed and retry it;
//   - a burst done with records left (partitions given up: fenced, not settled, stalled; the
//     summary's given_up names them), a budget that ended a burst which copied nothing while
//     records were left, a stop signal, or a cluster unreachable for longer than the burst
//     waits is "run again later" (cli.ErrMoreToDo, exit 3);
//   - any other error fails the run (exit 1).
func burstOutcome(ctx context.Context, s engine.Summary, err error) error {
	if err != nil && ctx.Err() != nil && s.Records == 0 {
		// A stop signal during set-up: nothing was copied, nothing is lost; more to do.
		return fmt.Errorf("stopped before copying (%v): %w", err, cli.ErrMoreToDo)
	}
	if err != nil && cluster.Retriable(err) {
		// A cluster restarting, hung or unreachable for longer than the burst waits for it:
		// what was copied is stored; the next run continues from there.
		return fmt.Errorf("burst: %w (%w)", err, cli.ErrMoreToDo)
	}
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	if !s.MoreToDo() {
		return nil
	}
	switch s.Reason {
	case engine.ReasonDone:
		return fmt.Errorf("done with %d records copied and %d left in partitions given up (%s): %w", s.Records, s.Lag, givenUp(s), cli.ErrMoreToDo)
	case engine.ReasonMaxDuration, engine.ReasonMaxRecords:
		if s.Records > 0 {
			return nil
		}
	}
	return fmt.Errorf("%s with %d records copied and %d left: %w", s.Reason, s.Records, s.Lag, cli.ErrMoreToDo)
}

// givenUp lists the partitions a summary names as given up, with why, in order.
func givenUp(s engine.Summary) string {
	if len(s.GivenUp) == 0 {
		return "none named"
	}
	names := make([]string, 0, len(s.GivenUp))
	for tp, why := range s.GivenUp {
		names = append(names, tp+": "+why)
	}
	slices.Sort(names)
	return strings.Join(names, "; ")
}

func logSummary(logger *slog.Logger, s engine.Summary) {
	topics := make([]any, 0, len(s.Topics))
	for name, t := range s.Topics {
		topics = append(topics, slog.Group(name, "remote", t.Remote, "records", t.Records, "bytes", t.Bytes, "lag", t.Lag))
	}
	rate := 0.0
	if s.Duration > 0 {
		rate = float64(s.Records) / s.Duration.Seconds()
	}
	logger.Info("burst summary",
		"reason", s.Reason, "error", s.Error, "records", s.Records, "bytes", s.Bytes, "lag", s.Lag,
		"partitions", s.Partitions, "duration", s.Duration.Round(time.Millisecond).String(),
		"records_per_second", int64(rate), "first_record_ms", s.FirstRecordMS, "topics_ready_ms", s.TopicsReadyMS,
		"exactly_once", s.ExactlyOnce, "gaps", len(s.Gaps), "offset_syncs_unconfirmed", s.SyncsUnconfirmed, slog.Group("topics", topics...))
}

// meteredEngine is Engine recording env's metrics.
func meteredEngine(ctx context.Context, env cli.Env, adjust ...func(*engine.Options)) (*engine.Engine, error) {
	o, err := EngineOptions(env.Config, env.LookupEnv)
	if err != nil {
		return nil, &cli.ConfigError{Err: err}
	}
	o.Metrics = env.Metrics
	for _, f := range adjust {
		f(&o)
	}
	warnIgnored(env.Config, env.Logger)
	dial := Dialer(env.Config, env.Logger)
	if err := checkTransactions(ctx, env.Config, dial); err != nil {
		return nil, err
	}
	return engine.New(ctx, o, dial, env.Logger)
}

// MirrorServe is `mirror serve`: the mirror function driven by KafkaSource record events and
// burst triggers (MM2_EVENT_MODE, MM2_BURST_EVENT_TYPES, MM2_EVENT_KEY_TYPE, PORT).
func MirrorServe(ctx context.Context, env cli.Env) error {
	cfg := env.Config
	kt, err := mirrorevents.ParseKeyType(cfg.EventKeyType)
	if err != nil {
		return &cli.ConfigError{Err: err}
	}
	if mirrorevents.Mode(cfg.EventMode) == mirrorevents.ModePayload && cfg.ExactlyOnce {
		// Payload writes are plain produces; next to the engine's transactional copies they
		// would break exactly-once for read_committed readers of the remote topics.
		return &cli.ConfigError{Err: errors.New("MM2_EVENT_MODE=payload cannot be combined with MM2_EXACTLY_ONCE: payload writes are not transactional; use fetch mode")}
	}
	if err := cfg.SenderAuth().Validate(); err != nil {
		return &cli.ConfigError{Err: err}
	}
	if mirrorevents.Mode(cfg.EventMode) == mirrorevents.ModePayload {
		if err := serve.CheckPayloadAuth(cfg.SenderAuth()); err != nil {
			return &cli.ConfigError{Err: err}
		}
	}
	e, err := meteredEngine(ctx, env, func(o *engine.Options) {
		// Payload records come from events: shared copies take only the partitions asked for.
		o.NoSweep = mirrorevents.Mode(cfg.EventMode) == mirrorevents.ModePayload
	})
	if err != nil {
		return err
	}
	defer e.Close()
	c := mirrorevents.NewEngineCopier(e, e.Dial,
		engine.BurstOptions{MaxDuration: cfg.BurstMaxDuration, MaxRecords: cfg.BurstMaxRecords}, env.Logger)
	c.SetMetrics(env.Metrics)
	defer c.Close()
	h, err := mirrorevents.New(c, mirrorevents.Options{Mode: mirrorevents.Mode(cfg.EventMode), BurstEventTypes: cfg.BurstEventTypes, KeyType: kt,
		MaxRecordBytes: int64(cfg.TargetProducer.MaxRequestSize), FollowEvents: true}, env.Logger)
	if err != nil {
		return &cli.ConfigError{Err: err}
	}
	defer h.Close()
	env.Logger.Info("mirror serve", "event_mode", string(h.Mode()), "key_type", string(kt), "burst_event_types", cfg.BurstEventTypes)
	// Remote and internal topics are readied beside serving; copies wait for it.
	wctx, stopWarm := context.WithCancel(ctx)
	var warm sync.WaitGroup
	warm.Add(1)
	e.WarmInBackground(wctx, func(err error) {
		defer warm.Done()
		if err != nil && wctx.Err() == nil {
			env.Logger.Warn("preparing the remote topics at start failed; each event prepares its own", "err", err)
		}
	})
	defer warm.Wait() // before the engine closes
	defer stopWarm()
	sc := h.ServeConfig(serve.Config{Addr: serve.AddrFromPort(strconv.Itoa(cfg.Port)), SenderAuth: cfg.SenderAuth()})
	if env.Metrics != nil {
		sc.Metrics = env.Metrics.Handler()
	}
	return serve.Run(ctx, sc, env.Logger, h)
}
