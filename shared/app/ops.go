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
	"github.com/mm2go/mm2go/shared/round"
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

// opsExits are the exit codes of status and plan.
var opsExits = []cli.Exit{
	{Code: cli.ExitOK, Meaning: "the report is written"},
	{Code: cli.ExitFailed, Meaning: "a cluster could not be read (the ERROR line says which and why)"},
	{Code: cli.ExitConfig, Meaning: "invalid settings or command line"},
}

// OpsCommands returns the mirror sub-commands status, verify, plan and cutover for
// cli.App.Commands.
func OpsCommands() map[string]cli.Command {
	return map[string]cli.Command{
		"status":  statusCommand(),
		"plan":    planCommand(),
		"verify":  verifyCommand(),
		"cutover": cutoverCommand(),
	}
}

// outputFlag declares -o on fs.
func outputFlag(fs *flag.FlagSet, format *string) {
	fs.StringVar(format, "o", "text", "output format: text or json")
}

func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return &cli.ConfigError{Err: fmt.Errorf("-o %q: want text or json", format)}
	}
	return nil
}

func statusCommand() cli.Command {
	var format string
	return cli.Command{
		Summary:  "positions, lag, offset syncs, checkpoints and heartbeats of the flow",
		Synopsis: "[-o text|json]",
		About:    "Reads the flow's stored positions, the end offsets of the source partitions (lag), the newest offset syncs,\ncheckpoints and heartbeats, and writes them as text or JSON. Reads only; writes nothing.",
		Flags:    func(fs *flag.FlagSet) { outputFlag(fs, &format) },
		Exits:    opsExits,
		Run: func(ctx context.Context, env cli.Env) error {
			return report(ctx, env, "status", format, func(ctx context.Context, o *ops.Ops) (writerText, error) { return o.Status(ctx) })
		},
	}
}

func planCommand() cli.Command {
	var format string
	return cli.Command{
		Summary:  "dry run: what `run` would select, create, grow, sync and copy",
		Synopsis: "[-o text|json]",
		About:    "A dry run of `mirror run`: the topics it would select, the remote topics it would create or grow, the configs\nand ACLs it would sync and the records it would copy. Reads only; writes nothing.",
		Flags:    func(fs *flag.FlagSet) { outputFlag(fs, &format) },
		Exits:    opsExits,
		Run: func(ctx context.Context, env cli.Env) error {
			return report(ctx, env, "plan", format, func(ctx context.Context, o *ops.Ops) (writerText, error) { return o.Plan(ctx) })
		},
	}
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

// report is a read-only sub-command: build the Ops, write what get returns in format.
func report(ctx context.Context, env cli.Env, name, format string, get func(context.Context, *ops.Ops) (writerText, error)) error {
	if err := checkFormat(format); err != nil {
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
	return write(env.Stdout, format, v)
}

// verifyFlags are mirror verify's flags.
type verifyFlags struct {
	format, topics string
	last           int64
	listed         int
}

func verifyCommand() cli.Command {
	var f verifyFlags
	return cli.Command{
		Summary:  "compare source and target records partition by partition",
		Synopsis: "[-topics a,b] [-last N] [-max-listed N] [-o text|json]",
		About:    "Reads each replicated partition on the source and its remote partition on the target, aligned by the stored\npositions and offset syncs, and compares the records byte for byte (key, value, headers, timestamp). Reads only.",
		Flags: func(fs *flag.FlagSet) {
			outputFlag(fs, &f.format)
			fs.StringVar(&f.topics, "topics", "", "source topics to check, comma separated (default: every replicated topic)")
			fs.Int64Var(&f.last, "last", 0, "check only about the last N copied records of each partition (0: everything alignable)")
			fs.IntVar(&f.listed, "max-listed", 20, "differences listed per partition")
		},
		Exits: []cli.Exit{
			{Code: ops.VerifyComplete, Meaning: "every copied record is on the target unchanged and nothing is left to copy"},
			{Code: ops.VerifyDifferences, Meaning: "records missing, extra or differing, or records not copied yet"},
			{Code: ops.VerifyError, Meaning: "the check could not be done: invalid settings or command line, or a cluster could not be read"},
		},
		Run: func(ctx context.Context, env cli.Env) error { return verify(ctx, env, f) },
	}
}

// verify is `mirror verify`. Its exit code is ops.VerifyComplete, ops.VerifyDifferences or
// ops.VerifyError.
func verify(ctx context.Context, env cli.Env, f verifyFlags) error {
	if err := checkFormat(f.format); err != nil {
		return &cli.ExitError{Code: ops.VerifyError, Err: err}
	}
	vo := ops.VerifyOptions{Last: f.last, MaxListed: f.listed}
	vo.Topics = splitList(f.topics)
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
	if err := write(env.Stdout, f.format, v); err != nil {
		return &cli.ExitError{Code: ops.VerifyError, Err: err}
	}
	env.Logger.Info("verify summary", "complete", v.Complete, "differences", v.Differences, "lag", v.Lag, "partitions", len(v.Partitions))
	if !v.Complete {
		return &cli.ExitError{Code: ops.VerifyDifferences}
	}
	return nil
}

// cutoverFlags are mirror cutover's flags.
type cutoverFlags struct {
	format, groups, topics string
	timeout, watch         time.Duration
	dry, live              bool
}

func cutoverCommand() cli.Command {
	var f cutoverFlags
	return cli.Command{
		Summary:  "move consumer groups to the target at exactly their next record",
		Synopsis: "-groups a,b [-topics t1,t2] [-timeout 5m] [-watch 3s] [-dry-run] [-allow-live] [-o text|json]",
		About: "Checks that the groups have no members and that no producer still writes to their topics, copies what is left,\n" +
			"translates each group's committed offsets to the target's copy of its next record, and commits them there.\n" +
			"Safe to run again: the same offsets are translated and written.",
		Flags: func(fs *flag.FlagSet) {
			outputFlag(fs, &f.format)
			fs.StringVar(&f.groups, "groups", "", "consumer groups to move, comma separated (required)")
			fs.StringVar(&f.topics, "topics", "", "source topics to move them on, comma separated (default: every replicated topic they committed on)")
			fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "bound of the whole cutover, drain included")
			fs.DurationVar(&f.watch, "watch", 3*time.Second, "how long the source end offsets are watched for producers still writing")
			fs.BoolVar(&f.dry, "dry-run", false, "check the preconditions and work out the translation; copy and write nothing")
			fs.BoolVar(&f.live, "allow-live", false, "only report producers still writing (and members on the source) instead of refusing")
		},
		Exits: []cli.Exit{
			{Code: ops.CutoverGo, Meaning: "GO: every partition of every group is committed on the target at exactly its next record (-dry-run: would be)"},
			{Code: ops.CutoverError, Meaning: "the cutover could not be done: a permission, a topic not in the flow, an error retrying will not mend"},
			{Code: cli.ExitConfig, Meaning: "invalid settings or command line (-groups missing)"},
			{Code: cli.ExitMore, Meaning: "run again later: a cluster still failed with a retriable error (unreachable, a coordinator loading) when -timeout ended, or a stop signal came"},
			{Code: ops.CutoverNoGo, Meaning: "NO-GO: a partition is not exact (not copied, a gap, no offset sync, records differ); nothing written"},
			{Code: ops.CutoverLive, Meaning: "NO-GO: producers are still writing to the groups' topics; nothing written"},
			{Code: ops.CutoverInUse, Meaning: "NO-GO: a group has members on the target, or still on the source; nothing written"},
		},
		Run: func(ctx context.Context, env cli.Env) error { return cutover(ctx, env, f) },
	}
}

// cutover is `mirror cutover`. Its exit code is ops.CutoverGo, ops.CutoverNoGo,
// ops.CutoverLive, ops.CutoverInUse, ops.CutoverError, cli.ExitConfig or cli.ExitMore.
func cutover(ctx context.Context, env cli.Env, f cutoverFlags) error {
	if err := checkFormat(f.format); err != nil {
		return &cli.ExitError{Code: cli.ExitConfig, Err: err}
	}
	co := ops.CutoverOptions{Groups: splitList(f.groups), Topics: splitList(f.topics), Timeout: f.timeout, Watch: f.watch,
		DryRun: f.dry, AllowLive: f.live, Metrics: env.Metrics,
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
	// -timeout bounds the retries too; a failure still retriable when it ends, or when a stop
	// signal came, is "run again later" (cli.ExitMore).
	var c *ops.Cutover
	backoff := cluster.DefaultBackoff
	if f.timeout > 0 {
		backoff.Budget = f.timeout
	}
	err = cluster.Retry(ctx, env.Logger, "cutover", backoff, func(ctx context.Context) (err error) { c, err = o.Cutover(ctx, co); return err })
	if err != nil && (round.Transient(err) || ctx.Err() != nil) {
		return &cli.ExitError{Code: cli.ExitMore, Err: fmt.Errorf("cutover not done within -timeout %v, run it again later: %w", f.timeout, err)}
	}
	if err != nil {
		return &cli.ExitError{Code: ops.CutoverError, Err: fmt.Errorf("cutover: %w", err)}
	}
	if err := write(env.Stdout, f.format, c); err != nil {
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
