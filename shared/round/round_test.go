package round

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/serve"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("listing groups: %w", kerr.CoordinatorLoadInProgress), true},
		{fmt.Errorf("fetch: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}), true},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("creating topic: %w", kerr.TopicAuthorizationFailed), false},
		{errors.New("encoding checkpoint: string too long"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

type summary struct {
	Written int `json:"written"`
}

// TestHandleAnswers: the answers to an authenticated sender (TestServerAnswersStrangers has the
// others).
func TestHandleAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"ok", nil, http.StatusOK, `{"written":3}`},
		{"unavailable", &UnavailableError{Cluster: "target", Alias: "t", Err: errors.New("dial refused")}, http.StatusServiceUnavailable, `target cluster "t" unavailable`},
		{"transient", kerr.NotLeaderForPartition, http.StatusServiceUnavailable, "heartbeat round failed, retry later"},
		{"permanent", kerr.TopicAuthorizationFailed, http.StatusInternalServerError, "heartbeat round failed: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate("heartbeat", nil)
			g.ServeBackoff = fastBackoff
			res := Handle(serve.WithSender(context.Background()), g, func(context.Context) (summary, error) { return summary{Written: 3}, tc.err })
			var r *serve.Reply
			if !errors.As(res, &r) {
				t.Fatalf("result %v is not a serve.Reply", res)
			}
			if r.Status != tc.status || !strings.Contains(string(r.Body), tc.body) {
				t.Errorf("got %d %q, want %d containing %q", r.Status, r.Body, tc.status, tc.body)
			}
		})
	}
}

func TestHandleOneRoundAtATime(t *testing.T) {
	g := NewGate("checkpoint", nil)
	inRound, release := make(chan struct{}), make(chan struct{})
	go Handle(context.Background(), g, func(context.Context) (summary, error) {
		close(inRound)
		<-release
		return summary{}, nil
	})
	<-inRound
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Handle(ctx, g, func(context.Context) (summary, error) {
		t.Error("a second round ran while the first was running")
		return summary{}, nil
	})
	close(release)
	var r *serve.Reply
	if !errors.As(res, &r) || r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "still running") {
		t.Errorf("waiting request whose context ended: %v", res)
	}
}

func TestOnceWritesSummaryAndWrapsError(t *testing.T) {
	var out bytes.Buffer
	g := NewGate("checkpoint", nil)
	g.RunBackoff = fastBackoff
	err := Once(context.Background(), g, &out, func(context.Context) (summary, error) {
		return summary{Written: 1}, kerr.TopicAuthorizationFailed
	}, errRunAgain)
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.HasPrefix(err.Error(), "checkpoint round: ") {
		t.Errorf("error %v", err)
	}
	if out.String() != "{\"written\":1}\n" {
		t.Errorf("stdout %q", out.String())
	}
}

// fastBackoff keeps the tests' retries short.
var fastBackoff = cluster.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Budget: 50 * time.Millisecond}

// TestOnceRetriesTransient: a round failing with COORDINATOR_NOT_AVAILABLE (a brand-new
// cluster creating its offsets topic) is run again and its success is the run's; a round
// still failing when the budget ends exits 3 (errRunAgain), a permanent failure at once.
func TestOnceRetriesTransient(t *testing.T) {
	g := NewGate("checkpoint", nil)
	g.RunBackoff = cluster.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Budget: time.Minute}
	calls := 0
	var out bytes.Buffer
	err := Once(context.Background(), g, &out, func(context.Context) (summary, error) {
		calls++
		if calls < 3 {
			return summary{}, fmt.Errorf("fetching offsets of group \"app1\": %w", kerr.CoordinatorNotAvailable)
		}
		return summary{Written: 2}, nil
	}, errRunAgain)
	if err != nil || calls != 3 || out.String() != "{\"written\":2}\n" {
		t.Errorf("err %v after %d calls, stdout %q; want success on the third", err, calls, out.String())
	}

	g.RunBackoff = fastBackoff
	err = Once(context.Background(), g, io.Discard, func(context.Context) (summary, error) {
		return summary{}, kerr.CoordinatorLoadInProgress
	}, errRunAgain)
	var rb *cluster.RetryBudgetError
	if !errors.Is(err, errRunAgain) || !errors.Is(err, kerr.CoordinatorLoadInProgress) || !errors.As(err, &rb) {
		t.Errorf("budget ran out: %v; want ErrMoreToDo wrapping the Kafka error", err)
	}

	calls = 0
	err = Once(context.Background(), g, io.Discard, func(context.Context) (summary, error) {
		calls++
		return summary{}, kerr.TopicAuthorizationFailed
	}, errRunAgain)
	if calls != 1 || errors.Is(err, errRunAgain) {
		t.Errorf("permanent error: %d calls, %v; want one call, no ErrMoreToDo", calls, err)
	}
}

// errRunAgain stands for the caller's "run again later" (cli.ErrMoreToDo in shared/app).
var errRunAgain = errors.New("run again later")

type fakeJob struct {
	g     *Gate
	err   error
	calls int
}

func (j *fakeJob) Ready(context.Context) error { return nil }
func (j *fakeJob) Round(context.Context) (summary, error) {
	j.calls++
	return summary{Written: 3}, j.err
}
func (j *fakeJob) Gate() *Gate { return j.g }
func (j *fakeJob) Close()      {}

// TestServerAnswersStrangers: as the mirror's serve, a periodic job's serve runs a round for
// PingSource's type and the types of Gate.EventTypes, for any other type only when the sender
// is authenticated (and the list empty); an unauthenticated sender's answer carries neither the
// round's summary nor a cluster's error (the log has it).
func TestServerAnswersStrangers(t *testing.T) {
	var logs bytes.Buffer
	g := NewGate("checkpoint", nil)
	g.ServeBackoff = fastBackoff
	g.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	j := &fakeJob{g: g}
	srv := serve.NewHTTPHandler(serve.Config{}, slog.New(slog.DiscardHandler), Server[summary](j))
	post := func(typ string, authenticated bool) (int, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/apis/v1/namespaces/ns/pingsources/p", "ce-type": typ} {
			req.Header.Set(k, v)
		}
		if authenticated {
			req = req.WithContext(serve.WithSender(req.Context()))
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	if code, body := post("com.example.other", false); code != http.StatusBadRequest || j.calls != 0 {
		t.Errorf("unauthenticated event of another type: answer %d %q after %d rounds, want 400 and no round", code, body, j.calls)
	}
	if code, body := post(serve.TypePing, false); code != http.StatusOK || strings.Contains(body, "written") || j.calls != 1 {
		t.Errorf("unauthenticated PingSource tick: answer %d %q after %d rounds, want 200 without the summary after one round", code, body, j.calls)
	}
	if code, body := post("com.example.other", true); code != http.StatusOK || !strings.Contains(body, `"written":3`) {
		t.Errorf("authenticated event of another type: answer %d %q, want 200 with the summary", code, body)
	}
	g.EventTypes = []string{"com.example.tick"}
	if code, body := post("com.example.tick", false); code != http.StatusOK {
		t.Errorf("unauthenticated event of a listed type: answer %d %q, want 200", code, body)
	}
	if code, body := post("com.example.other", true); code != http.StatusBadRequest {
		t.Errorf("authenticated event of a type not listed: answer %d %q, want 400", code, body)
	}
	const secret = "dial tcp 10.1.2.3:9093"
	for _, err := range []error{&UnavailableError{Cluster: "target", Alias: "backup", Err: errors.New(secret)}, fmt.Errorf("%s: %w", secret, kerr.TopicAuthorizationFailed)} {
		j.err = err
		logs.Reset()
		if code, body := post(serve.TypePing, false); code < 500 || strings.Contains(body, secret) {
			t.Errorf("unauthenticated tick, round failing with %v: answer %d %q, want 5xx without the cluster's error", err, code, body)
		}
		if !strings.Contains(logs.String(), secret) {
			t.Errorf("the log lacks the round's error %q: %s", secret, logs.String())
		}
		if code, body := post(serve.TypePing, true); code < 500 || !strings.Contains(body, secret) {
			t.Errorf("authenticated tick, round failing with %v: answer %d %q, want 5xx with the error", err, code, body)
		}
	}
}
