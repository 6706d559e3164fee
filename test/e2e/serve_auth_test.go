package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/test/testkit"
	"github.com/mm2go/mm2go/test/testkit/oidcissuer"
)

// TestMirrorServeSenderAuth runs the real `mirror serve` process in payload mode with sender
// authentication against the real OIDC issuer: a payload event of a trusted sender becomes a
// record on the target; no token, another sender, or a token for another audience is refused and
// writes nothing; and payload mode without sender authentication does not start.
func TestMirrorServeSenderAuth(t *testing.T) {
	c := testkit.Require(t)
	// Payload mode needs an https issuer: the real issuer behind an HTTPS front.
	iss := oidcissuer.Start(t, oidcissuer.Options{}).StartTLSFront(t, oidcissuer.FrontOptions{})
	const sender = kafkaSourceSubject
	topic := createTopic(t, c.Source.Bootstrap, testkit.Name(t, "auth"), 1, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+topic)
	// The record the events stand for, at offset 0 (the first event of a partition is copied
	// from the source, the gap rule of payload mode).
	testkit.Produce(t, c.Source.Bootstrap, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("key"), Value: []byte("payload-value")})

	t.Run("payload mode needs sender authentication", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, MirrorBinary(t), "serve")
		cmd.Env = MirrorEnv(c, topic, "MM2_EVENT_MODE=payload", "MM2_EVENT_KEY_TYPE=byte-array", "PORT=8089") // refused before it listens
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "MM2_SERVE_OIDC_ALLOWED_SUBJECTS") {
			t.Fatalf("mirror serve in payload mode without sender auth: %v, want exit 2 naming the settings:\n%s", err, out)
		}
	})

	t.Run("payload mode needs an https issuer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, MirrorBinary(t), "serve")
		cmd.Env = MirrorEnv(c, topic, "MM2_EVENT_MODE=payload", "MM2_EVENT_KEY_TYPE=byte-array", "PORT=8089",
			"MM2_SERVE_OIDC_ISSUER=http://127.0.0.1:1/default", "MM2_SERVE_OIDC_AUDIENCE=mm2go", "MM2_SERVE_OIDC_ALLOWED_SUBJECTS="+sender)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "MM2_SERVE_OIDC_ISSUER must be an https URL") {
			t.Fatalf("mirror serve in payload mode with an http issuer: %v, want exit 2 naming MM2_SERVE_OIDC_ISSUER:\n%s", err, out)
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, MirrorBinary(t), "serve")
	cmd.Env = MirrorEnv(c, topic, "MM2_EVENT_MODE=payload", "MM2_EVENT_KEY_TYPE=byte-array", fmt.Sprintf("PORT=%d", port),
		"MM2_SERVE_OIDC_ISSUER="+iss.Issuer(oidcissuer.DefaultIssuer), "MM2_SERVE_OIDC_CA_FILE="+iss.CAFile, "MM2_SERVE_OIDC_AUDIENCE=mm2go",
		"MM2_SERVE_OIDC_ALLOWED_SUBJECTS="+sender)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	testkit.WaitFor(t, 60*time.Second, "mirror serve answers /readyz", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// post sends the record event of source offset 0 of the topic, postAt that of another offset.
	var postAt func(t *testing.T, token string, off int) (int, string)
	post := func(t *testing.T, token string) (int, string) { return postAt(t, token, 0) }
	postAt = func(t *testing.T, token string, off int) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader("payload-value"))
		for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": fmt.Sprintf("partition:0/offset:%d", off), "ce-type": "dev.knative.kafka.event",
			"ce-source": "/apis/v1/namespaces/mm2go/kafkasources/mm2go-mirror#" + topic, "ce-subject": fmt.Sprintf("partition:0#%d", off),
			"ce-partition": "0", "ce-offset": strconv.Itoa(off), "ce-key": "a2V5", "Content-Type": "text/plain"} {
			req.Header.Set(k, v)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"other audience", iss.Token(oidcissuer.DefaultIssuer, sender, "other-sink"), http.StatusUnauthorized},
		{"other sender", iss.Token(oidcissuer.DefaultIssuer, "system:serviceaccount:default:curl", "mm2go"), http.StatusForbidden},
	} {
		if code, body := post(t, tc.token); code != tc.status {
			t.Errorf("%s: answer %d %q, want %d", tc.name, code, body, tc.status)
		}
	}
	if n := EndOffsetsSum(testkit.Context(t, 30*time.Second), c.Target.Bootstrap, "source."+topic); n != 0 {
		t.Fatalf("refused events wrote %d records to the target", n)
	}
	if code, body := post(t, iss.Token(oidcissuer.DefaultIssuer, sender, "mm2go")); code != http.StatusOK {
		t.Fatalf("trusted sender: answer %d %q, want 200\n%s", code, body, lastLines(logs.String(), 20))
	}
	got := testkit.ReadAll(t, c.Target.Bootstrap, "source."+topic)
	if len(got) != 1 || string(got[0].Value) != "payload-value" || string(got[0].Key) != "key" {
		t.Fatalf("target holds %d records, want the trusted event's record (key \"key\", value \"payload-value\")", len(got))
	}
	// A trusted sender's event for an offset the source does not hold (its end, 1) is refused
	// for good and writes nothing: it could not be the copy of a source record.
	if code, body := postAt(t, iss.Token(oidcissuer.DefaultIssuer, sender, "mm2go"), 1); code != http.StatusBadRequest ||
		!strings.Contains(body, "no such record in the source partition") {
		t.Fatalf("payload event beyond the source's end: answer %d %q, want 400 naming the missing record", code, body)
	}
	if got := testkit.ReadAll(t, c.Target.Bootstrap, "source."+topic); len(got) != 1 {
		t.Fatalf("target holds %d records after the event beyond the source's end, want 1", len(got))
	}
}
