package e2e

import (
	"os"
	"testing"
)

// TestMain stops the clusters the fault tests share (faultPair) once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	stopFaultClusters(code != 0)
	os.Exit(code)
}
