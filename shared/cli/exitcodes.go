package cli

// ExitCodeDoc describes one exit code of the functions' sub-commands, and what the schedulers
// mm2go is deployed on make of it. docs/summary-and-exit-codes.md is generated from ExitCodes
// (test/doccheck), so the code and the page cannot disagree.
type ExitCodeDoc struct {
	Code int
	// Name is the constant's name (ExitOK).
	Name string
	// Meaning says when a `run` exits with Code.
	Meaning string
	// Kubernetes is what a Kubernetes Job (CronJob, KEDA ScaledJob) records.
	Kubernetes string
	// ContainerApps is what an Azure Container Apps job execution shows.
	ContainerApps string
}

// ExitCodes are the exit codes of `run` (and of status, plan, verify where they say so), in
// order. mirror cutover's and verify's own are shared/ops' Cutover* and Verify*.
var ExitCodes = []ExitCodeDoc{
	{ExitOK, "ExitOK",
		"the run is done: every selected partition reached the end offsets seen at its start (or another instance owns it now: in a burst group another member, in exactly-once mode the run that fenced this one's transactional id); or a budget (`MM2_BURST_MAX_DURATION`, `MM2_BURST_MAX_RECORDS`) ended a burst that copied records (`reason` `max-duration` / `max-records`, what is left in `lag` and the `mm2go_lag_records` gauge)",
		"Job Complete; not retried", "execution Succeeded"},
	{ExitFailed, "ExitFailed",
		"the run failed and running it again unchanged will not help (a record larger than the target accepts, an authorization error, a broken internal topic); the ERROR line says what failed where. `mirror verify`: differences found",
		"a failed Pod; retried up to `backoffLimit`, then Job Failed", "execution Failed; retried up to `replicaRetryLimit`"},
	{ExitConfig, "ExitConfig",
		"invalid settings or command line, refused before any cluster is asked; or a limit of a cluster that every run meets the same way, refused after reading the clusters' metadata (and stored positions) and before copying: a replication factor above the cluster's broker count, `MM2_EXACTLY_ONCE` on a target without transactions, positions lost to the offsets topic's retention. One exception: on a flow's first run the offsets topic is created while the copy starts, so a factor it cannot get is refused after records were copied (the summary's `records`), with no position stored, and the run after the fix copies them again. The ERROR line names the setting (variable and MM2 property)",
		"a failed Pod; retried up to `backoffLimit` (it fails the same way), then Job Failed", "execution Failed"},
	{ExitMore, "ExitMore",
		"run again later: a stop signal (SIGTERM) ended the run after committing its positions, a cluster stayed unreachable for longer than the run waits (`reason` `failed`, the error in `error`), a burst gave partitions up before their end (`reason` `done` with `lag`; `given_up` names them: not settled, stalled), a checkpoint or heartbeat round's retry budget ran out, or a budget ended a burst before it copied anything while records were left",
		"a failed Pod; retried up to `backoffLimit`, then Job Failed (the next scheduled run continues from the stored positions)", "execution Failed (the next scheduled execution continues)"},
}
