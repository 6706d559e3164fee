package mirrorevents

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/serve"
)

// ServeCommand is `mirror serve`: the mirror function driven by KafkaSource record events and
// burst triggers (MM2_EVENT_MODE, MM2_BURST_EVENT_TYPES, MM2_EVENT_KEY_TYPE, PORT).
func ServeCommand(ctx context.Context, env cli.Env) error {
	cfg := env.Config
	kt, err := ParseKeyType(cfg.EventKeyType)
	if err != nil {
		return &cli.ConfigError{Err: err}
	}
	if Mode(cfg.EventMode) == ModePayload && cfg.ExactlyOnce {
		// Payload writes are plain produces; next to the engine's transactional copies they
		// would break exactly-once for read_committed readers of the remote topics.
		return &cli.ConfigError{Err: errors.New("MM2_EVENT_MODE=payload cannot be combined with MM2_EXACTLY_ONCE: payload writes are not transactional; use fetch mode")}
	}
	o, err := engine.OptionsFromConfig(cfg, env.LookupEnv)
	if err != nil {
		return &cli.ConfigError{Err: err}
	}
	o.Metrics = env.Metrics
	// Payload records come from events: shared copies take only the partitions asked for.
	o.NoSweep = Mode(cfg.EventMode) == ModePayload
	e, err := engine.New(ctx, o, engine.Dialer(cfg, env.Logger), env.Logger)
	if err != nil {
		return err
	}
	defer e.Close()
	c := NewEngineCopier(e, e.Dial,
		engine.BurstOptions{MaxDuration: cfg.BurstMaxDuration, MaxRecords: cfg.BurstMaxRecords}, env.Logger)
	c.metrics = env.Metrics
	defer c.Close()
	h, err := New(c, Options{Mode: Mode(cfg.EventMode), BurstEventTypes: cfg.BurstEventTypes, KeyType: kt}, env.Logger)
	if err != nil {
		return &cli.ConfigError{Err: err}
	}
	defer h.Close()
	env.Logger.Info("mirror serve", "event_mode", string(h.opts.Mode), "key_type", string(kt), "burst_event_types", cfg.BurstEventTypes)
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
	sc := serve.Config{Addr: serve.AddrFromPort(strconv.Itoa(cfg.Port))}
	if env.Metrics != nil {
		sc.Metrics = env.Metrics.Handler()
	}
	return serve.Run(ctx, sc, env.Logger, h)
}
