// Command heartbeat is mm2go's heartbeat function (MM2's MirrorHeartbeatConnector):
// `heartbeat run` writes one round of heartbeats and reports the replication latency;
// `heartbeat serve` runs a round per CloudEvent.
package main

import (
	"os"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/cli"
)

func main() {
	os.Exit(cli.Main(app.Heartbeat()))
}
