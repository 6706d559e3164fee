// Command checkpoint is mm2go's checkpoint function (MM2's MirrorCheckpointConnector):
// `checkpoint run` runs one round (translate source group offsets, write checkpoints, sync
// idle target groups) and exits; `checkpoint serve` runs a round per CloudEvent.
package main

import (
	"os"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/cli"
)

func main() {
	os.Exit(cli.Main(app.Checkpoint()))
}
