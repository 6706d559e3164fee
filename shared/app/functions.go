package app

import "github.com/mm2go/mm2go/shared/cli"

// serveExits are the exit codes of every function's serve.
var serveExits = []cli.Exit{
	{Code: cli.ExitOK, Meaning: "stopped by SIGTERM or SIGINT after answering the events in flight"},
	{Code: cli.ExitFailed, Meaning: "could not serve (the port is taken, a cluster refused the function's credentials)"},
	{Code: cli.ExitConfig, Meaning: "invalid settings or command line"},
}

// roundExits are the exit codes of checkpoint run and heartbeat run.
var roundExits = []cli.Exit{
	{Code: cli.ExitOK, Meaning: "the round is done"},
	{Code: cli.ExitFailed, Meaning: "the round failed and running it again unchanged will not help (the ERROR line says what failed where)"},
	{Code: cli.ExitConfig, Meaning: "invalid settings or command line; nothing read or written"},
	{Code: cli.ExitMore, Meaning: "run again later: stopped by a signal, or a cluster stayed unavailable for the round's retry budget (MM2_BURST_MAX_DURATION)"},
}

// Mirror is the mirror function (MM2's MirrorSourceConnector) for cli.Main.
func Mirror() cli.App {
	cmds := OpsCommands()
	cmds["run"] = cli.Command{
		Summary: "one burst: copy until caught up or a budget is reached, then exit",
		About: "One burst: copies every selected partition from its stored position to the end offset seen at the start\n" +
			"(or until MM2_BURST_MAX_DURATION or MM2_BURST_MAX_RECORDS), stores the positions and offset syncs, prints the\n" +
			"summary as one JSON line on stdout and exits. An MM2 file that enables several flows runs them all.",
		Exits: []cli.Exit{
			{Code: cli.ExitOK, Meaning: "done: caught up, or a budget ended a burst that copied records (the rest is its lag)"},
			{Code: cli.ExitFailed, Meaning: "failed, and running it again unchanged will not help (the ERROR line says what failed where)"},
			{Code: cli.ExitConfig, Meaning: "invalid settings or command line; nothing read or written"},
			{Code: cli.ExitMore, Meaning: "run again later: stopped by a signal, a cluster unreachable, or a budget ended a burst that copied nothing"},
		},
		Run: MirrorRun,
	}
	cmds["serve"] = cli.Command{
		Summary: "HTTP server for CloudEvents: KafkaSource record events and burst triggers (PingSource)",
		About: "Serves CloudEvents on PORT (with /healthz, /readyz and /metrics): a KafkaSource record event copies its partition\n" +
			"up to that record (MM2_EVENT_MODE fetch) or writes the record it carries (payload); a PingSource event, or a type\n" +
			"in MM2_BURST_EVENT_TYPES, runs a burst. Answers 200 with the summary, 400, 401/403, or 503 to be retried.",
		Exits: serveExits,
		Run:   MirrorServe,
	}
	return cli.App{Name: "mirror", Commands: cmds,
		About: "mm2go's mirror function: MM2's MirrorSourceConnector, copying topics from the source cluster to the target, with\n" +
			"positions and offset syncs in MM2's own internal topics."}
}

// Checkpoint is the checkpoint function (MM2's MirrorCheckpointConnector) for cli.Main.
func Checkpoint() cli.App {
	return cli.App{Name: "checkpoint",
		About: "mm2go's checkpoint function: MM2's MirrorCheckpointConnector, translating consumer group offsets through the\n" +
			"offset syncs into checkpoints on the target (and, with MM2_SYNC_GROUP_OFFSETS_ENABLED, into idle target groups).",
		Commands: map[string]cli.Command{
			"run": {
				Summary: "one round: translate source group offsets, write checkpoints, sync idle target groups, then exit",
				Exits:   roundExits,
				Run:     CheckpointRun,
			},
			"serve": {
				Summary: "HTTP server: every CloudEvent (e.g. PingSource) runs one round and is answered with its summary",
				Exits:   serveExits,
				Run:     CheckpointServe,
			},
		}}
}

// Heartbeat is the heartbeat function (MM2's MirrorHeartbeatConnector) for cli.Main.
func Heartbeat() cli.App {
	return cli.App{Name: "heartbeat",
		About: "mm2go's heartbeat function: MM2's MirrorHeartbeatConnector, writing heartbeats on both clusters and reporting\n" +
			"the replication latency of those mirrored back.",
		Commands: map[string]cli.Command{
			"run": {
				Summary: "one round: write heartbeats, report the replication latency, then exit",
				Exits:   roundExits,
				Run:     HeartbeatRun,
			},
			"serve": {
				Summary: "HTTP server: every CloudEvent (e.g. PingSource) runs one round and is answered with its summary",
				Exits:   serveExits,
				Run:     HeartbeatServe,
			},
		}}
}
