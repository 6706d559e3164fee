package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/engine"
)

func load(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	env["MM2_SOURCE_BOOTSTRAP_SERVERS"], env["MM2_TARGET_BOOTSTRAP_SERVERS"] = "127.0.0.1:1", "127.0.0.1:2"
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestEngineOptions: the settings that reach the engine.
func TestEngineOptions(t *testing.T) {
	o, err := EngineOptions(load(t, map[string]string{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.EmitsOffsetSyncs() || o.AutoOffsetResetLatest || o.ReadCommitted {
		t.Errorf("defaults: %+v", o)
	}
	o, err = EngineOptions(load(t, map[string]string{"MM2_EMIT_OFFSET_SYNCS_ENABLED": "false", "MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET": "latest", "MM2_SOURCE_CONSUMER_ISOLATION_LEVEL": "read_committed"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.EmitsOffsetSyncs() || !o.AutoOffsetResetLatest || !o.ReadCommitted {
		t.Errorf("set: emit syncs %v, latest %v, read_committed %v", o.EmitsOffsetSyncs(), o.AutoOffsetResetLatest, o.ReadCommitted)
	}
	if _, err := EngineOptions(load(t, map[string]string{"MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET": "none"}), nil); err == nil || !strings.Contains(err.Error(), "MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET=none") {
		t.Errorf("auto.offset.reset=none: %v", err)
	}
}

// TestCheckpointNeedsOffsetSyncs: like MM2's MirrorCheckpointConnector, checkpoint refuses to
// run with emit.offset-syncs.enabled=false, naming the setting, before connecting anywhere.
func TestCheckpointNeedsOffsetSyncs(t *testing.T) {
	_, err := CheckpointJob(context.Background(), load(t, map[string]string{"MM2_EMIT_OFFSET_SYNCS_ENABLED": "false"}), slog.New(slog.DiscardHandler), nil)
	var ce *cli.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "MM2_EMIT_OFFSET_SYNCS_ENABLED=false (emit.offset-syncs.enabled)") {
		t.Fatalf("got %v, want a config error naming the setting", err)
	}
}

// TestRefreshTopicsWarn: refresh.topics.enabled=false has no effect and says so.
func TestRefreshTopicsWarn(t *testing.T) {
	var buf bytes.Buffer
	warnIgnored(load(t, map[string]string{"MM2_REFRESH_TOPICS_ENABLED": "false"}), slog.New(slog.NewTextHandler(&buf, nil)))
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "MM2_REFRESH_TOPICS_ENABLED=false (refresh.topics.enabled) has no effect") {
		t.Errorf("log: %q", buf.String())
	}
	buf.Reset()
	warnIgnored(load(t, map[string]string{}), slog.New(slog.NewTextHandler(&buf, nil)))
	if buf.Len() != 0 {
		t.Errorf("default logs %q", buf.String())
	}
}

// TestBurstOutcome: a burst done with nothing left, or one a budget ended after it copied
// records, is a success (exit 0, the reason and lag in the summary); one done with partitions
// given up and records left (fenced, not settled, stalled: named in the error as in the
// summary), one that copied nothing with records left, a stop signal or an unreachable cluster
// is "run again later" (exit 3); other errors fail (exit 1). A partition given up that another
// member of the burst group owns now leaves no lag: exit 0.
func TestBurstOutcome(t *testing.T) {
	live := context.Background()
	stopped, cancel := context.WithCancel(live)
	cancel()
	down := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		s    engine.Summary
		err  error
		want int
	}{
		{"done", live, engine.Summary{Records: 10, Reason: engine.ReasonDone}, nil, cli.ExitOK},
		{"done with a partition fenced", live, engine.Summary{Records: 10, Lag: 5, Reason: engine.ReasonDone,
			GivenUp: map[string]string{"orders-1": "fenced: another instance took it over"}}, nil, cli.ExitMore},
		{"done with a partition stalled", live, engine.Summary{Records: 20, Lag: 5, Reason: engine.ReasonDone,
			GivenUp: map[string]string{"orders-1": "stalled: the source yielded no record from offset 10 to its end offset 15"}}, nil, cli.ExitMore},
		{"done, a fenced partition owned by another member", live, engine.Summary{Records: 10, Reason: engine.ReasonDone,
			GivenUp: map[string]string{"orders-1": "fenced: another instance took it over; another member of the burst group owns it now"}}, nil, cli.ExitOK},
		{"max-duration with records left", live, engine.Summary{Records: 10, Lag: 90, Reason: engine.ReasonMaxDuration}, nil, cli.ExitOK},
		{"max-records with records left", live, engine.Summary{Records: 10, Lag: 90, Reason: engine.ReasonMaxRecords}, nil, cli.ExitOK},
		{"max-duration without progress", live, engine.Summary{Lag: 90, Reason: engine.ReasonMaxDuration}, nil, cli.ExitMore},
		{"stopped by a signal", stopped, engine.Summary{Records: 10, Lag: 90, Reason: engine.ReasonStopped}, nil, cli.ExitMore},
		{"stopped during set-up", stopped, engine.Summary{Reason: engine.ReasonFailed}, context.Canceled, cli.ExitMore},
		{"target unreachable", live, engine.Summary{Reason: engine.ReasonFailed}, down, cli.ExitMore},
		{"failed", live, engine.Summary{Reason: engine.ReasonFailed}, errors.New("record too large"), cli.ExitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := burstOutcome(tc.ctx, tc.s, tc.err)
			code := cli.ExitOK
			switch {
			case errors.Is(err, cli.ErrMoreToDo):
				code = cli.ExitMore
			case err != nil:
				code = cli.ExitFailed
			}
			if code != tc.want {
				t.Errorf("burstOutcome(%+v, %v) = %v: exit %d, want %d", tc.s, tc.err, err, code, tc.want)
			}
			for tp := range tc.s.GivenUp {
				if err != nil && !strings.Contains(err.Error(), tp) {
					t.Errorf("burstOutcome(%+v) = %v: does not name the partition given up, %s", tc.s, err, tp)
				}
			}
		})
	}
}
