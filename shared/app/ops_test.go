package app

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/mm2go/mm2go/shared/cli"
)

// TestCutoverUnreachableRunAgainLater: a cutover whose clusters refuse every connection until
// -timeout ends exits 3 ("run again later", as the cutover is safe to repeat) with the refusal
// in its ERROR line, not 1 ("could not be done"), and writes no result.
func TestCutoverUnreachableRunAgainLater(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the port now refuses connections, as a cluster that is down
	env := map[string]string{"MM2_SOURCE_BOOTSTRAP_SERVERS": addr, "MM2_TARGET_BOOTSTRAP_SERVERS": addr, "MM2_LOG_FORMAT": "json"}
	var stdout, stderr bytes.Buffer
	code := cli.Execute(context.Background(), Mirror(), []string{"cutover", "-groups", "g", "-timeout", "2s"}, envOf(env), &stdout, &stderr)
	if code != cli.ExitMore || !strings.Contains(stderr.String(), "run it again later") || !strings.Contains(stderr.String(), "connection refused") {
		t.Errorf("cutover with both clusters refusing connections: exit %d, want %d naming the refusal and saying to run it again later\nstderr: %s", code, cli.ExitMore, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("cutover that was not done wrote a result: %s", stdout.String())
	}
}
