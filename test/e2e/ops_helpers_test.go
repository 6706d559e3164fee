package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/ops"
	"github.com/mm2go/mm2go/test/testkit"
)

// envMap turns KEY=VALUE pairs into a lookup function like os.LookupEnv.
func envMap(env []string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// opsFor returns an ops.Ops for the flow the environment env describes (MirrorEnv style).
func opsFor(t *testing.T, env []string) *ops.Ops {
	t.Helper()
	cfg, err := config.Load(envMap(env), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	o, err := app.Ops(testkit.Context(t, time.Minute), cfg, envMap(env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("ops: %v", err)
	}
	t.Cleanup(o.Close)
	return o
}

// runMirrorCmd runs `mirror <args...>` with env and returns its exit code and stdout.
func runMirrorCmd(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, MirrorBinary(t), args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("running mirror %v: %v", args, err)
	return 0, "", ""
}

// decodeJSON decodes a command's JSON output into v.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
}

// writePosition stores pos as the position of source topic/partition for alias source, as
// MM2's Connect worker would (tampering for tests).
func writePosition(t *testing.T, c testkit.Clusters, offsetsTopic, topic string, partition int32, pos int64) {
	t.Helper()
	ctx := testkit.Context(t, 30*time.Second)
	md, err := testkit.Admin(t, c.Target.Bootstrap).Metadata(ctx, offsetsTopic)
	if err != nil || md.Topics[offsetsTopic].Err != nil {
		t.Fatalf("describing %s: %v %v", offsetsTopic, err, md.Topics[offsetsTopic].Err)
	}
	n := int32(len(md.Topics[offsetsTopic].Partitions))
	key := mm2.SourceOffsetKey("source", topic, partition)
	testkit.Produce(t, c.Target.Bootstrap, &kgo.Record{Topic: offsetsTopic, Partition: mm2.KeyPartition(key, n), Key: key, Value: mm2.OffsetValue(pos)})
}

// partitionStatus returns the status row of topic/partition.
func partitionStatus(t *testing.T, st *ops.Status, topic string, p int32) ops.PartitionStatus {
	t.Helper()
	for _, ps := range st.Partitions {
		if ps.Topic == topic && ps.Partition == p {
			return ps
		}
	}
	t.Fatalf("status has no row for %s-%d: %+v", topic, p, st.Partitions)
	return ops.PartitionStatus{}
}
