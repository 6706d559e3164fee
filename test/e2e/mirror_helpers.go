package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// MirrorBinary builds functions/mirror once per test process and returns its path.
func MirrorBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mm2go-e2e-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, "mirror"), "./functions/mirror")
		cmd.Dir = testkit.RepoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out) + err.Error())
		}
	})
	if buildErr != nil {
		t.Fatalf("building functions/mirror: %v", buildErr)
	}
	return filepath.Join(buildDir, "mirror")
}

// MirrorEnv is the environment of a `mirror run` on the harness clusters (aliases source and
// target, like MM2Properties) replicating the given topics regex list.
func MirrorEnv(c testkit.Clusters, topics string, extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + c.Target.Bootstrap,
		"MM2_TOPICS=" + topics,
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_LOG_FORMAT=json",
	}
	return append(env, extra...)
}

// MirrorResult is the outcome of one `mirror run` process.
type MirrorResult struct {
	Code    int
	Summary map[string]any
	Stdout  string
	Stderr  string
}

// Records returns the summary's record count.
func (r MirrorResult) Records() int64 {
	n, _ := r.Summary["records"].(float64)
	return int64(n)
}

// RunMirror runs `mirror run` to its end and returns its exit code and summary.
func RunMirror(t testing.TB, env []string) MirrorResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, MirrorBinary(t), "run")
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := MirrorResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	default:
		t.Fatalf("running mirror: %v", err)
	}
	res.Summary = RunMirrorSummary(t, stdout.Bytes())
	return res
}

// RunMirrorSummary decodes the JSON summary a `mirror run` printed on stdout (nil if none).
func RunMirrorSummary(t testing.TB, stdout []byte) map[string]any {
	t.Helper()
	line := bytes.TrimSpace(stdout)
	if len(line) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Errorf("summary on stdout is not JSON: %v\n%s", err, line)
	}
	return m
}

// EndOffsetsSum returns the sum of a topic's end offsets (0 if it does not exist).
func EndOffsetsSum(ctx context.Context, bootstrap, topic string) int64 {
	return offsetsSum(ctx, bootstrap, topic, (*kadm.Client).ListEndOffsets)
}

// StableOffsetsSum is EndOffsetsSum as a read_committed reader sees it: the sum of the last
// stable offsets (records of open transactions are not counted).
func StableOffsetsSum(ctx context.Context, bootstrap, topic string) int64 {
	return offsetsSum(ctx, bootstrap, topic, (*kadm.Client).ListCommittedOffsets)
}

func offsetsSum(ctx context.Context, bootstrap, topic string, list func(*kadm.Client, context.Context, ...string) (kadm.ListedOffsets, error)) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ends, err := list(kadm.NewClient(cl), ctx, topic)
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}
