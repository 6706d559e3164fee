package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/test/testkit"
)

// function is a function binary running `serve` as a process.
type function struct {
	url    string
	cmd    *exec.Cmd
	output *testkit.SyncBuffer
}

// buildFunction builds functions/<name> into a temporary directory.
func buildFunction(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, "./functions/"+name)
	cmd.Dir = testkit.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, out)
	}
	return bin
}

// serveFunction starts `bin serve` with env (plus PORT) and waits for /healthz. When the test
// ends it sends SIGTERM and checks that the process exits 0.
func serveFunction(t *testing.T, bin string, env map[string]string) *function {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	f := &function{url: fmt.Sprintf("http://127.0.0.1:%d", port), output: &testkit.SyncBuffer{}}
	f.cmd = exec.Command(bin, "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MM2_") && !strings.HasPrefix(kv, "PORT=") {
			f.cmd.Env = append(f.cmd.Env, kv)
		}
	}
	env["PORT"] = fmt.Sprint(port)
	env["MM2_LOG_FORMAT"] = "text"
	for k, v := range env {
		f.cmd.Env = append(f.cmd.Env, k+"="+v)
	}
	f.cmd.Stdout, f.cmd.Stderr = f.output, f.output
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	t.Cleanup(func() {
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s serve exited with %v after SIGTERM\n%s", filepath.Base(bin), err, f.output.String())
			}
		case <-time.After(60 * time.Second):
			_ = f.cmd.Process.Kill()
			t.Errorf("%s serve did not exit after SIGTERM", filepath.Base(bin))
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), tail(f.output.String(), 4000))
		}
	})
	testkit.WaitFor(t, 30*time.Second, filepath.Base(bin)+" /healthz", func() bool {
		resp, err := http.Get(f.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return f
}

// ping posts a PingSource-like CloudEvent (binary mode) and returns the status and body.
func (f *function) ping(t *testing.T) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+"/", strings.NewReader(`{"message":"tick"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Type", "dev.knative.sources.ping")
	req.Header.Set("Ce-Source", "/apis/v1/namespaces/mm2go/pingsources/tick")
	req.Header.Set("Ce-Id", fmt.Sprint(time.Now().UnixNano()))
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("posting an event: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func (f *function) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: time.Minute}).Get(f.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestCheckpointAndHeartbeatServe runs both functions as processes in serve mode: a PingSource
// tick runs a round and answers its JSON summary; with an unreachable target cluster the answer
// (and /readyz) is 503 with a one-line reason; SIGTERM stops the process cleanly.
func TestCheckpointAndHeartbeatServe(t *testing.T) {
	c := testkit.Require(t)
	src, tgt := testkit.Name(t, "s"), testkit.Name(t, "t")
	group := testkit.Name(t, "g")
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "orders"), 1, nil)
	syncs := "mm2-offset-syncs." + tgt + ".internal"
	testkit.CreateTopic(t, c.Source.Bootstrap, syncs, 1, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, src+".checkpoints.internal")
	k, v, err := mm2.OffsetSync{Topic: topic, Partition: 0, UpstreamOffset: 10, DownstreamOffset: 4}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	testkit.Produce(t, c.Source.Bootstrap, &kgo.Record{Topic: syncs, Key: k, Value: v})
	commitGroup(t, c.Source.Bootstrap, group, topic, map[int32]int64{0: 12}, "")

	env := func(target string) map[string]string {
		return map[string]string{
			"MM2_SOURCE_ALIAS": src, "MM2_TARGET_ALIAS": tgt,
			"MM2_SOURCE_BOOTSTRAP_SERVERS": c.Source.Bootstrap, "MM2_TARGET_BOOTSTRAP_SERVERS": target,
			"MM2_GROUPS": group, "MM2_TOPICS": topic,
			"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR": "1", "MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR": "1",
			"MM2_CHECKPOINT_TRANSLATION": "precise",
		}
	}
	cpBin, hbBin := buildFunction(t, "checkpoint"), buildFunction(t, "heartbeat")

	t.Run("checkpoint", func(t *testing.T) {
		f := serveFunction(t, cpBin, env(c.Target.Bootstrap))
		if code, body := f.get(t, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz: %d %s", code, body)
		}
		// Without sender authentication the answer says done, the log has the summary.
		if code, body := f.ping(t); code != http.StatusOK || strings.TrimSpace(string(body)) != `{"done":true,"round":"checkpoint"}` {
			t.Fatalf("event: %d %s", code, body)
		}
		// The log reaches the buffer through a pipe: it may come after the answer.
		testkit.WaitFor(t, 30*time.Second, "the round's summary in the log (1 checkpoint written)", func() bool {
			out := f.output.String()
			return strings.Contains(out, `msg="checkpoint round done"`) && strings.Contains(out, "checkpoints_written=1")
		})
		cps, err := groupCheckpoints(testkit.Context(t, 30*time.Second), c.Target.Bootstrap, src+".checkpoints.internal", group, src+"."+topic)
		if err != nil || cps[0].DownstreamOffset != 5 || cps[0].UpstreamOffset != 12 {
			t.Errorf("checkpoint %+v (%v), want 12 -> 5 (one past the sync 10 -> 4)", cps[0], err)
		}
		code, metrics := f.get(t, "/metrics")
		want := fmt.Sprintf(`mm2go_checkpoints_written_total{group="%s",`, group)
		if code != http.StatusOK || !strings.Contains(metrics, want) || !strings.Contains(metrics, "mm2go_checkpoint_latency_seconds_bucket{") {
			t.Errorf("/metrics: %d, want %s... and checkpoint latency:\n%s", code, want, metrics)
		}
	})
	t.Run("heartbeat", func(t *testing.T) {
		f := serveFunction(t, hbBin, env(c.Target.Bootstrap))
		if code, body := f.ping(t); code != http.StatusOK || strings.TrimSpace(string(body)) != `{"done":true,"round":"heartbeat"}` {
			t.Fatalf("event: %d %s", code, body)
		}
		testkit.WaitFor(t, 30*time.Second, "the round's summary in the log (2 heartbeats written, no latency yet)", func() bool {
			return strings.Contains(f.output.String(), `msg="heartbeat round done; no replicated heartbeat yet" function=heartbeat written=2 `)
		})
	})
	for _, bin := range []string{cpBin, hbBin} {
		t.Run(filepath.Base(bin)+"-unavailable", func(t *testing.T) {
			f := serveFunction(t, bin, env("127.0.0.1:1"))
			for _, check := range []func() (int, string){
				func() (int, string) { code, body := f.ping(t); return code, string(body) },
				func() (int, string) { return f.get(t, "/readyz") },
			} {
				code, body := check()
				if code != http.StatusServiceUnavailable || !strings.Contains(body, "target") || strings.Count(strings.TrimSpace(body), "\n") != 0 {
					t.Errorf("with the target down: %d %q, want 503 and one line naming the target", code, body)
				}
				t.Logf("%d %s", code, strings.TrimSpace(body))
			}
		})
	}
}
