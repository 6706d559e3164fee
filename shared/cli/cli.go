// Package cli is the command line shared by mm2go's three functions (mirror, checkpoint,
// heartbeat): sub-command dispatch (`run`, `serve`, `-h`/`help`), logging setup, signal
// handling and exit codes. Every sub-command answers -h with its own usage, flags, exit
// codes and the settings it reads, before it reads any setting.
//
// Exit codes (ExitCodes, docs/summary-and-exit-codes.md): 0 the job is done, or a budget
// (MM2_BURST_MAX_DURATION, MM2_BURST_MAX_RECORDS) ended a burst that copied records; 3 run
// again later: a stop signal, a cluster unreachable for longer than the run waits, or a budget
// that ended a burst before it copied anything; 1 the job failed; 2 the configuration is
// invalid (or the command line is), or a cluster's limit refuses it (a replication factor,
// transactions, positions lost to retention): refused before copying, but for the offsets
// topic's replication factor on a flow's first run.
//
// SIGTERM and SIGINT cancel the job's context: a run stops fetching, finishes in-flight writes,
// commits its positions and exits within a few seconds. A second signal exits at once.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/metrics"
)

// Exit codes of Main.
const (
	ExitOK     = 0 // done, or a budget ended a burst that made progress
	ExitFailed = 1 // the job failed
	ExitConfig = 2 // invalid configuration or command line, or a cluster's limit refusing it
	ExitMore   = 3 // run again later: stopped, a cluster unreachable, or no progress
)

// ErrMoreToDo is returned (possibly wrapped) by a Run that stopped with work left and should
// run again soon: a stop signal, an unreachable cluster, a budget reached with no progress.
// Main exits with ExitMore.
var ErrMoreToDo = errors.New("budget reached, more to do")

// ErrNotImplemented is what a missing sub-command returns.
var ErrNotImplemented = errors.New("not yet implemented")

// ExitError makes Main exit with Code (a sub-command with its own codes, like verify). Err, if
// set, is logged.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// ConfigError marks an error caused by the settings; Main exits with ExitConfig.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Env is what a sub-command gets: loaded settings, the process environment (for settings not
// in config.Config yet), a logger and the output streams.
type Env struct {
	Config    *config.Config
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger
	Stdout    io.Writer
	// Progress is where a live progress line may be drawn (with '\r'); nil when stderr is not
	// a terminal.
	Progress io.Writer
	// Metrics records the function's metrics (OTLP when OTEL_EXPORTER_OTLP_* ask for it; the
	// Prometheus handler for serve's /metrics). Execute flushes it before returning.
	Metrics *metrics.Recorder
	// Args are the command-line arguments after the sub-command.
	Args []string
}

// Command is one sub-command of a function (run, serve, status, ...).
type Command struct {
	// Summary is its line in the function's usage.
	Summary string
	// Synopsis is what follows the sub-command on its usage line ("-groups a,b [-o text|json]");
	// empty: it takes no flags.
	Synopsis string
	// About says what it does, for its -h; empty: Summary.
	About string
	// Flags declares its flags on fs; nil: it takes none. Execute parses the command line
	// before it reads any setting: -h, -help and --help print the usage (exit 0), an unknown
	// flag or a stray argument is a command-line error naming it (exit 2).
	Flags func(fs *flag.FlagSet)
	// Exits are the exit codes it returns, in order, with what each means for it.
	Exits []Exit
	// Run runs it with its flags parsed.
	Run func(ctx context.Context, env Env) error
}

// Exit is one exit code of a sub-command and what it means there.
type Exit struct {
	Code    int
	Meaning string
}

// App is one function and its sub-commands.
type App struct {
	// Name is the function's name ("mirror").
	Name string
	// About says what the function is, for its -h.
	About string
	// Commands are its sub-commands by name. `run` runs every flow an MM2 file enables, each
	// with its own settings; `serve` exports its metrics for Prometheus at /metrics.
	Commands map[string]Command
}

// Main runs app with the process's arguments, environment and streams and returns the exit
// code: os.Exit(cli.Main(app)).
//
// Unless the environment sets GOMEMLIMIT, Main sets the Go runtime's soft memory limit to
// DefaultMemoryLimit, so the garbage collector keeps a function's resident memory small
// (serverless memory is billed and capped) instead of letting the heap double between
// collections; and unless it also sets GOGC, the collector's GOGC to DefaultGCPercent, so the
// limit, not the small live heap, decides when it runs; and unless it sets GOMAXPROCS, Go's
// GOMAXPROCS to DefaultMaxProcs (see docs/performance.md). MM2_CPU_PROFILE and
// MM2_ALLOC_PROFILE write profiles of the process (startProfiles).
func Main(app App) int {
	setMemoryLimit(os.LookupEnv)
	setMaxProcs(os.LookupEnv)
	stopProfiles := startProfiles(os.LookupEnv, os.Stderr)
	defer stopProfiles()
	return ExecuteEnviron(context.Background(), app, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
}

// ExecuteEnviron is Execute with the environment as os.Environ gives it ("NAME=value"): it also
// names, in a WARN line each, the MM2_* variables that no function reads.
func ExecuteEnviron(ctx context.Context, app App, args []string, environ []string, stdout, stderr io.Writer) int {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	lookupEnv := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	return execute(ctx, app, args, lookupEnv, unreadNames(environ), stdout, stderr)
}

// DefaultMemoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit) Main sets when
// GOMEMLIMIT is not set. The engine's buffers are bounded well below it (a few MiB in flight
// per burst); the limit only makes the collector return garbage before the heap doubles.
const DefaultMemoryLimit = 40 << 20

// DefaultGCPercent is the GOGC Main sets with DefaultMemoryLimit when GOGC is not set. A copy's
// live heap is a few MiB (records in flight, fetch buffers) while it allocates about its
// bytes copied (franz-go reads every fetch response into a new buffer): at Go's GOGC=100 the
// collector ran every few MiB allocated, some 100 times per GB, and took a fifth of a burst's
// CPU. At 400 it runs about every 5x the live heap, and the memory limit still collects
// earlier whenever the heap nears it.
const DefaultGCPercent = 400

// DefaultMaxProcs is the GOMAXPROCS Main sets when GOMAXPROCS is not set and the runtime's own
// default is at most SmallMaxProcs. A copy is bound by the brokers and the network, not by its
// own CPU: with one P its goroutines (fetch loop, franz-go's connections and promises) hand
// records to each other on one thread, without the wake-ups of idle threads, work stealing and
// locks bouncing between cores that a second P brings. On 1M x 512 B (plain and zstd) that cut
// the CPU per GB by a sixth with no loss of rate (docs/performance.md).
const DefaultMaxProcs = 1

// SmallMaxProcs is the largest runtime default GOMAXPROCS that Main lowers to DefaultMaxProcs.
// Go's container-aware default is the cgroup CPU limit rounded up, but never below 2: a
// function given 1 vCPU (or half of one) runs with 2 Ps and pays for the second. A process with
// more than two cores, by its limit or its machine, keeps Go's default: a wide, compressed or
// TLS flow there may use them.
const SmallMaxProcs = 2

// setMaxProcs applies DefaultMaxProcs unless GOMAXPROCS is set (the runtime applied that one)
// or the runtime's default is above SmallMaxProcs. It returns the GOMAXPROCS set, or -1 if it
// left the runtime's alone.
func setMaxProcs(lookupEnv func(string) (string, bool)) int {
	if _, ok := lookupEnv("GOMAXPROCS"); ok || runtime.GOMAXPROCS(0) > SmallMaxProcs {
		return -1
	}
	runtime.GOMAXPROCS(DefaultMaxProcs)
	return DefaultMaxProcs
}

// setMemoryLimit applies DefaultMemoryLimit unless GOMEMLIMIT is set (the runtime already
// applied that one), and then DefaultGCPercent unless GOGC is set. It returns the limit set,
// or -1 if it left the runtime's alone (GOGC too: a limit of one's own keeps Go's GOGC).
func setMemoryLimit(lookupEnv func(string) (string, bool)) int64 {
	if _, ok := lookupEnv("GOMEMLIMIT"); ok {
		return -1
	}
	debug.SetMemoryLimit(DefaultMemoryLimit)
	if _, ok := lookupEnv("GOGC"); !ok {
		debug.SetGCPercent(DefaultGCPercent)
	}
	return DefaultMemoryLimit
}

// Execute is Main with explicit inputs (for tests).
func Execute(ctx context.Context, app App, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	return execute(ctx, app, args, lookupEnv, nil, stdout, stderr)
}

// execute runs app; unread are the MM2_* variables set that no function reads.
func execute(ctx context.Context, app App, args []string, lookupEnv func(string) (string, bool), unread []string, stdout, stderr io.Writer) int {
	name := ""
	if len(args) > 0 {
		name = args[0]
	}
	switch name {
	case "-h", "-help", "--help":
		return writeAppUsage(app, stdout, stderr)
	case "help":
		if len(args) == 1 {
			return writeAppUsage(app, stdout, stderr)
		}
		if c, ok := app.Commands[args[1]]; ok && len(args) == 2 {
			return writeCommandUsage(app, args[1], c, stdout, stderr)
		}
		fmt.Fprintf(stderr, "%s help: no sub-command %q\n%s\n", app.Name, strings.Join(args[1:], " "), usageLine(app))
		return ExitConfig
	}
	cmd, ok := app.Commands[name]
	if !ok {
		if name == "" {
			fmt.Fprintf(stderr, "%s: name a sub-command\n%s\n", app.Name, usageLine(app))
		} else {
			fmt.Fprintf(stderr, "%s: no sub-command %q\n%s\n", app.Name, name, usageLine(app))
		}
		return ExitConfig
	}
	// The command line first: -h needs no setting and touches no cluster.
	fs := flag.NewFlagSet(app.Name+" "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if cmd.Flags != nil {
		cmd.Flags(fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return writeCommandUsage(app, name, cmd, stdout, stderr)
		}
		fmt.Fprintf(stderr, "%s %s: %v\nusage: %s %s\n(%s %s -h: its flags, exit codes and settings)\n", app.Name, name, err, app.Name, synopsis(name, cmd), app.Name, name)
		return ExitConfig
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s %s: unexpected argument %q\nusage: %s %s\n", app.Name, name, fs.Arg(0), app.Name, synopsis(name, cmd))
		return ExitConfig
	}

	// The loader logs (e.g. the MM2 properties it ignores) before the logger it configures
	// exists: keep its records and replay them through that logger.
	early := &recorder{}
	var cfgs []*config.Config
	var cfgErr error
	if name == "run" {
		// run runs every flow the file enables, as MM2 dedicated mode does.
		cfgs, cfgErr = config.LoadFlows(lookupEnv, slog.New(early))
	} else {
		var cfg *config.Config
		cfg, cfgErr = config.Load(lookupEnv, slog.New(early))
		cfgs = []*config.Config{cfg}
	}
	level, format := "info", "auto"
	if cfgErr == nil {
		level, format = cfgs[0].LogLevel, cfgs[0].LogFormat
	}
	logger, err := NewLogger(stderr, level, format)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitConfig
	}
	logger = logger.With("function", app.Name)
	early.replay(ctx, logger)
	for _, name := range unread {
		msg := "environment variable " + name + " is not an mm2go setting and is ignored (see " + app.Name + " -h)"
		if alt := suggestion(name); alt != "" {
			msg += "; the setting exists for the other cluster: " + alt
		}
		logger.Warn(msg, "variable", name)
	}
	if cfgErr != nil {
		logger.Error("invalid configuration", "err", cfgErr.Error())
		return ExitConfig
	}

	ctx, stop := signalContext(ctx, logger)
	defer stop()
	if len(cfgs) > 1 {
		return runFlows(ctx, app.Name, cmd, cfgs, lookupEnv, logger, stdout)
	}
	cfg := cfgs[0]
	rec, err := metrics.New(ctx, metrics.Options{Function: app.Name, SourceAlias: cfg.SourceAlias, TargetAlias: cfg.TargetAlias,
		Prometheus: name == "serve", LookupEnv: lookupEnv, Logger: logger})
	if err != nil {
		logger.Error("invalid metrics settings", "err", err.Error())
		return ExitConfig
	}
	defer func() {
		// Short jobs exit right after this: push their metrics first.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := rec.Shutdown(fctx); err != nil {
			logger.Warn("metrics not exported", "err", err.Error())
		}
	}()
	env := Env{Config: cfg, LookupEnv: lookupEnv, Logger: logger, Stdout: stdout, Metrics: rec, Args: fs.Args()}
	if isTerminal(stderr) {
		env.Progress = stderr
	}
	if cmd.Run == nil {
		return exitCode(fmt.Errorf("%s %s: %w", app.Name, name, ErrNotImplemented), logger)
	}
	return exitCode(cmd.Run(ctx, env), logger)
}

func exitCode(err error, logger *slog.Logger) int {
	var ce *ConfigError
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		if ee.Err != nil {
			logger.Error("failed", "err", err.Error(), "exit_code", ee.Code)
		}
		return ee.Code
	case errors.Is(err, ErrMoreToDo):
		logger.Warn("not done; run again later", "err", err.Error(), "exit_code", ExitMore)
		return ExitMore
	case errors.As(err, &ce):
		logger.Error("invalid configuration", "err", err.Error())
		return ExitConfig
	default:
		logger.Error("failed", "err", err.Error())
		return ExitFailed
	}
}

// signalContext is canceled by the first SIGTERM/SIGINT; a second one exits at once.
func signalContext(parent context.Context, logger *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			logger.Info("signal received: stopping (finishing in-flight writes, committing positions)", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-ch:
			logger.Warn("second signal: exiting now", "signal", s.String())
			os.Exit(ExitFailed)
		case <-time.After(30 * time.Second):
			logger.Error("did not stop within 30s of the signal: exiting")
			os.Exit(ExitFailed)
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		signal.Stop(ch)
		cancel()
	}
}

// NewLogger returns the functions' logger on w: level is debug, info, warn or error; format
// json, text or auto (text if w is a terminal, json otherwise).
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "debug":
		lv = slog.LevelDebug
	case "", "info":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, &ConfigError{fmt.Errorf("MM2_LOG_LEVEL %q: want debug, info, warn or error", level)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", "auto":
		if isTerminal(w) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, &ConfigError{fmt.Errorf("MM2_LOG_FORMAT %q: want auto, json or text", format)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
