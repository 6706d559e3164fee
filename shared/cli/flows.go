package cli

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/metrics"
)

// runFlows is `run` for an MM2 file that enables several flows: run.Run runs once per flow,
// all at once (as MM2 dedicated mode runs a herder per flow), each with its own settings,
// metrics and a logger that names the flow. The exit code is the most serious of the flows':
// invalid configuration, then failure, then more to do.
func runFlows(ctx context.Context, function string, run Command, cfgs []*config.Config, lookupEnv func(string) (string, bool), logger *slog.Logger, stdout io.Writer) int {
	if run.Run == nil {
		return exitCode(ErrNotImplemented, logger)
	}
	out := &lockedWriter{w: stdout}
	codes := make([]int, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flog := logger.With("flow", cfg.SourceAlias+"->"+cfg.TargetAlias)
			rec, err := metrics.New(ctx, metrics.Options{Function: function, SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias,
				LookupEnv: lookupEnv, Logger: flog})
			if err != nil {
				flog.Error("invalid metrics settings", "err", err.Error())
				codes[i] = ExitConfig
				return
			}
			defer func() {
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				if err := rec.Shutdown(fctx); err != nil {
					flog.Warn("metrics not exported", "err", err.Error())
				}
			}()
			env := Env{Config: cfg, LookupEnv: lookupEnv, Logger: flog, Stdout: out, Metrics: rec}
			codes[i] = exitCode(run.Run(ctx, env), flog)
		}()
	}
	wg.Wait()
	rank := func(code int) int {
		switch code {
		case ExitOK:
			return 0
		case ExitMore:
			return 1
		case ExitConfig:
			return 3
		}
		return 2 // ExitFailed, or a command's own code
	}
	worst := ExitOK
	for _, c := range codes {
		if rank(c) > rank(worst) {
			worst = c
		}
	}
	return worst
}

// lockedWriter serializes the flows' writes to stdout (one JSON summary line each).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// recorder is a slog.Handler that keeps records until replay sends them to a logger.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
	attrs   []slog.Attr // from WithAttrs (groups are flattened)
	parent  *recorder
}

func (r *recorder) root() *recorder {
	for r.parent != nil {
		r = r.parent
	}
	return r
}

// Enabled implements slog.Handler: every level is kept; replay filters.
func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	root := r.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	root.records = append(root.records, rec)
	return nil
}

// WithAttrs implements slog.Handler.
func (r *recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorder{parent: r, attrs: append(append([]slog.Attr(nil), r.attrs...), attrs...)}
}

// WithGroup implements slog.Handler; groups are flattened.
func (r *recorder) WithGroup(string) slog.Handler { return r }

// replay sends the kept records, in order, to logger's handler at its level.
func (r *recorder) replay(ctx context.Context, logger *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.records {
		if logger.Enabled(ctx, rec.Level) {
			_ = logger.Handler().Handle(ctx, rec)
		}
	}
	r.records = nil
}
