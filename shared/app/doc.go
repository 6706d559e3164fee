// Package app is mm2go's composition layer: it maps loaded settings (shared/config) to each
// domain package's options, builds the engine, jobs and ops with clients from shared/cluster,
// and provides the sub-commands the functions' main packages hand to cli.Main (mirror run and
// serve, status, verify and plan; checkpoint and heartbeat run and serve). Domain packages
// (engine, mirrorevents, checkpoint, heartbeat, ops, round) import neither cli nor config.
package app
