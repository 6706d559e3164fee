// Command mirror is mm2go's replication function: `mirror run` copies one burst (MM2's
// MirrorSourceConnector work) and exits; `mirror serve` answers CloudEvents; `mirror -h`
// lists the settings it reads; `mirror status`, `mirror verify` and `mirror plan` inspect the flow;
// `mirror cutover` moves consumer groups to the target at exactly their next record.
package main

import (
	"os"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/cli"
)

func main() {
	os.Exit(cli.Main(app.Mirror()))
}
