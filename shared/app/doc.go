// Package app is mm2go's composition layer: it maps loaded settings (shared/config) to each
// domain package's options, builds the engine, jobs and ops with clients from shared/cluster,
// and provides the functions the main packages hand to cli.Main (Mirror: run, serve, status,
// verify, plan and cutover; Checkpoint and Heartbeat: run and serve), each sub-command with
// its flags, exit codes and usage. Domain packages
// (engine, mirrorevents, checkpoint, heartbeat, ops, round) import neither cli nor config.
package app
