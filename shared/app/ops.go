package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/mm2go/mm2go/shared/cli"
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/ops"
)

// Ops returns an ops.Ops for loaded settings, with clients from shared/cluster.
func Ops(ctx context.Context, cfg *config.Config, lookupEnv func(string) (string, bool), logger *slog.Logger) (*ops.Ops, error) {
	opts, err := EngineOptions(cfg, lookupEnv)
	if err != nil {
		return nil, err
	}
	groups, err := cfg.GroupFilter()
	if err != nil {
		return nil, err
	}
	return ops.New(ctx, opts, groups, Dialer(cfg, logger), logger)
}

// OpsCommands returns the mirror sub-commands status, verify and plan for cli.App.Commands.
func OpsCommands() map[string]cli.Command {
	return map[string]cli.Command{
		"status":  {Summary: "positions, lag, offset syncs, checkpoints and heartbeats of the flow (-o json)", Run: StatusCommand},
		"verify":  {Summary: "compare source and target records partition by partition (exit 0 complete, 1 differences, 2 error)", Run: VerifyCommand},
		"plan":    {Summary: "dry run: what `run` would select, create, grow, sync and copy (-o json)", Run: PlanCommand},
		"cutover": {Summary: "move consumer groups to the target at exactly their next record: -groups a,b [-topics t] [-dry-run] [-allow-live] (exit 0 go, 4 not exact, 5 producers writing, 6 groups in use, 1 error)", Run: CutoverCommand},
	}
}

func flags(name string, out io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	format := fs.String("o", "text", "output format: text or json")
	return fs, format
}

func parse(fs *flag.FlagSet, args []string, format *string) error {
	if err := fs.Parse(args); err != nil {
		return &cli.ConfigError{Err: err}
	}
	if *format != "text" && *format != "json" {
		return &cli.ConfigError{Err: fmt.Errorf("-o %q: want text or json", *format)}
	}
	if fs.NArg() > 0 {
		return &cli.ConfigError{Err: fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	return nil
}

// retry runs a read-only command again, from its start, while it fails with a retriable error
// (a coordinator loading, a leader moving, a broker restarting), within cluster.DefaultBackoff.
func retry(ctx context.Context, env cli.Env, what string, fn func(context.Context) error) error {
	return cluster.Retry(ctx, env.Logger, what, cluster.DefaultBackoff, fn)
}

type writerText interface{ WriteText(io.Writer) error }

func write(w io.Writer, format string, v writerText) error {
	if format == "json" {
		return ops.WriteJSON(w, v)
	}
	return v.WriteText(w)
}

// StatusCommand is `mirror status [-o json]`.
func StatusCommand(ctx context.Context, env cli.Env) error {
	return report(ctx, env, "status", func(ctx context.Context, o *ops.Ops) (writerText, error) { return o.Status(ctx) })
}

// PlanCommand is `mirror plan [-o json]`.
func PlanCommand(ctx context.Context, env cli.Env) error {
	return report(ctx, env, "plan", func(ctx context.Context, o *ops.Ops) (writerText, error) { return o.Plan(ctx) })
}

// report is a read-only sub-command: parse -o, build the Ops, write what get returns.
func report(ctx context.Context, env cli.Env, name string, get func(context.Context, *ops.Ops) (writerText, error)) error {
	fs, format := flags(name, env.Stdout)
	if err := parse(fs, env.Args, format); err != nil {
		return err
	}
	o, err := Ops(ctx, env.Config, env.LookupEnv, env.Logger)
	if err != nil {
		return &cli.ConfigError{Err: err}
	}
	defer o.Close()
	var v writerText
	err = retry(ctx, env, name, func(ctx context.Context) (err error) { v, err = get(ctx, o); return err })
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return write(env.Stdout, *format, v)
}

// VerifyCommand is `mirror verify [-o json] [-topics a,b] [-last N] [-max-listed N]`. Its exit
// code is ops.VerifyComplete, ops.VerifyDifferences or ops.VerifyError.
func VerifyCommand(ctx context.Context, env cli.Env) error {
	fs, format := flags("verify", env.Stdout)
	topics := fs.String("topics", "", "source topics to check, comma separated (default: every replicated topic)")
	last := fs.Int64("last", 0, "check only about the last N copied records of each partition (0: everything alignable)")
	listed := fs.Int("max-listed", 20, "differences listed per partition")
	if err := parse(fs, env.Args, format); err != nil {
		return &cli.ExitError{Code: ops.VerifyError, Err: err}
	}
	vo := ops.VerifyOptions{Last: *last, MaxListed: *listed}
	for _, t := range strings.Split(*topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			vo.Topics = append(vo.Topics, t)
		}
	}
	o, err := Ops(ctx, env.Config, env.LookupEnv, env.Logger)
	if err != nil {
		return &cli.ExitError{Code: ops.VerifyError, Err: err}
	}
	defer o.Close()
	var v *ops.Verification
	err = retry(ctx, env, "verify", func(ctx context.Context) (err error) { v, err = o.Verify(ctx, vo); return err })
	if err != nil {
		return &cli.ExitError{Code: ops.VerifyError, Err: fmt.Errorf("verify: %w", err)}
	}
	if err := write(env.Stdout, *format, v); err != nil {
		return &cli.ExitError{Code: ops.VerifyError, Err: err}
	}
	env.Logger.Info("verify summary", "complete", v.Complete, "differences", v.Differences, "lag", v.Lag, "partitions", len(v.Partitions))
	if !v.Complete {
		return &cli.ExitError{Code: ops.VerifyDifferences}
	}
	return nil
}

// CutoverCommand is `mirror cutover -groups a,b [-topics t1,t2] [-timeout 5m] [-watch 3s]
// [-dry-run] [-allow-live] [-o json]`. Its exit code is ops.CutoverGo, ops.CutoverNoGo,
// ops.CutoverLive, ops.CutoverInUse or ops.CutoverError.
func CutoverCommand(ctx context.Context, env cli.Env) error {
	fs, format := flags("cutover", env.Stdout)
	groups := fs.String("groups", "", "consumer groups to move, comma separated (required)")
	topics := fs.String("topics", "", "source topics to move them on, comma separated (default: every replicated topic they committed on)")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound of the whole cutover, drain included")
	watch := fs.Duration("watch", 3*time.Second, "how long the source end offsets are watched for producers still writing")
	dry := fs.Bool("dry-run", false, "check the preconditions and work out the translation; copy and write nothing")
	live := fs.Bool("allow-live", false, "only report producers still writing (and members on the source) instead of refusing")
	if err := parse(fs, env.Args, format); err != nil {
		return &cli.ExitError{Code: cli.ExitConfig, Err: err}
	}
	co := ops.CutoverOptions{Groups: splitList(*groups), Topics: splitList(*topics), Timeout: *timeout, Watch: *watch,
		DryRun: *dry, AllowLive: *live, Metrics: env.Metrics,
		CheckpointsTopicReplicationFactor: int16(env.Config.CheckpointsTopicReplicationFactor)}
	if len(co.Groups) == 0 {
		return &cli.ExitError{Code: cli.ExitConfig, Err: &cli.ConfigError{Err: fmt.Errorf("-groups: name the consumer groups to move")}}
	}
	if _, tgt, err := profiles(env.Config); err == nil {
		co.CheckpointsTopicConfigs = tgt.InternalTopicConfigs()
	}
	o, err := Ops(ctx, env.Config, env.LookupEnv, env.Logger)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitConfig, Err: &cli.ConfigError{Err: err}}
	}
	defer o.Close()
	// A retriable failure (a coordinator loading, a leader moving) runs the cutover again from
	// its start: every step is safe to repeat (the same offsets are translated and written).
	var c *ops.Cutover
	err = retry(ctx, env, "cutover", func(ctx context.Context) (err error) { c, err = o.Cutover(ctx, co); return err })
	if err != nil {
		return &cli.ExitError{Code: ops.CutoverError, Err: fmt.Errorf("cutover: %w", err)}
	}
	if err := write(env.Stdout, *format, c); err != nil {
		return &cli.ExitError{Code: ops.CutoverError, Err: err}
	}
	env.Logger.Info("cutover summary", "go", c.Go, "exit_code", c.ExitCode, "dry_run", c.DryRun, "partitions", len(c.Partitions),
		"live_partitions", len(c.Live), "groups_in_use", len(c.InUse), "verdict", c.Verdict)
	if c.ExitCode != ops.CutoverGo {
		return &cli.ExitError{Code: c.ExitCode, Err: errors.New(c.Verdict)}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
