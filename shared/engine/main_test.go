package engine

import (
	"flag"
	"os"
	"testing"
)

// fakeParallel is how many kfake tests (each on clusters of its own: newFakeFlow) run at once
// unless -test.parallel is given. Many of them wait more than they compute (a held request, a
// fetch's max wait, a group member's heartbeat: 50 ms in the group tests, see fastGroups), so
// go test's default of GOMAXPROCS (2 on the CI machine) would leave the package's wall time near
// the sum of their waits. The broker tests do not run in parallel.
const fakeParallel = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", fakeParallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
