package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/kafkasource"
)

// TestServeProcess runs the real `mirror serve` binary configured from the environment: it
// becomes ready, copies a topic byte for byte from KafkaSource-like events, answers a
// PingSource tick with a burst summary, rejects a malformed event with 400, and exits 0 on
// SIGTERM.
func TestServeProcess(t *testing.T) {
	c := testkit.Require(t)
	bin := filepath.Join(t.TempDir(), "mirror")
	build := exec.Command("go", "build", "-o", bin, "./functions/mirror")
	build.Dir = testkit.RepoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building functions/mirror: %v\n%s", err, out)
	}
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "sproc"), 2, nil)
	remote := "source." + topic
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, remote)
	want := testkit.SampleRecords(topic, 2, 100)
	testkit.Produce(t, c.Source.Bootstrap, want...)
	ends := endOffsets(t, c.Source.Bootstrap, topic)

	port := freePortBlock(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"PORT=" + fmt.Sprint(port),
		"MM2_SOURCE_BOOTSTRAP_SERVERS=" + c.Source.Bootstrap,
		"MM2_TARGET_BOOTSTRAP_SERVERS=" + c.Target.Bootstrap,
		"MM2_TOPICS=" + topic,
		"MM2_HEARTBEATS_REPLICATION_ENABLED=false",
		"MM2_REPLICATION_FACTOR=1",
		"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR=1",
		"MM2_OFFSET_STORAGE_REPLICATION_FACTOR=1",
		"MM2_LOG_FORMAT=json",
		"MM2_LOG_LEVEL=debug",
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("mirror serve stderr:\n%s", tail(stderr.String(), 6000))
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	testkit.WaitFor(t, 60*time.Second, "mirror serve to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	group := testkit.Name(t, "ks")
	_, stop := runDriver(t, kafkasource.Config{Bootstrap: c.Source.Bootstrap, Topics: []string{topic}, Group: group, Sink: base + "/",
		Source: kafkasource.Source{Namespace: "mirror", Name: "orders"}})
	waitDelivered(t, c.Source.Bootstrap, group, topic, ends, 2*time.Minute)
	stop()
	testkit.AssertSameRecords(t, want, testkit.ReadAll(t, c.Target.Bootstrap, remote))

	post := func(hdr map[string]string, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(map[string]string{"ce-specversion": "1.0", "ce-id": "tick-1", "ce-source": "/apis/v1/namespaces/mirror/pingsources/tick",
		"ce-type": "dev.knative.sources.ping"}, "")
	var sum map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &sum) != nil || sum["reason"] == nil {
		t.Fatalf("ping: %d %s", code, body)
	}
	code, body = post(map[string]string{"ce-specversion": "1.0", "ce-id": "partition:0/offset:x", "ce-source": "/apis/v1/namespaces/mirror/kafkasources/orders#" + topic,
		"ce-type": "dev.knative.kafka.event", "ce-knativekafkaoffset": "x", "ce-knativekafkapartition": "0"}, "")
	if code != 400 || !strings.Contains(body, "knativekafkaoffset") {
		t.Fatalf("malformed record event: %d %s", code, body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("mirror serve exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mirror serve did not exit after SIGTERM")
	}
}
