package replay

import (
	"flag"
	"os"
	"testing"
)

// replayParallel is how many replay cases run at once unless -test.parallel is given. A case
// mostly waits (the compressed clock's ticks, broker restarts, the dispatcher's back-off), so
// go test's default of GOMAXPROCS (2 on the CI machine) would leave the package's wall time at
// half the sum of its cases.
const replayParallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", replayParallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
