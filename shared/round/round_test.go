package round

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
			res := Handle(context.Background(), g, func(context.Context) (summary, error) { return summary{Written: 3}, tc.err })
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
