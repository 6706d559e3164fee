// Package round runs the periodic jobs (checkpoint, heartbeat) the same way under their two
// sub-commands: `run` does one round and prints its JSON summary; `serve` runs one round per
// CloudEvent and answers with the summary, or with a status code that tells the sender whether
// to retry.
package round

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/serve"
)

// UnavailableError reports that a cluster of the flow could not be reached: the round did
// nothing and should be retried later (serve answers 503).
type UnavailableError struct {
	Cluster string // "source" or "target"
	Alias   string
	Err     error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s cluster %q unavailable: %v", e.Cluster, e.Alias, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Transient reports failures worth retrying later (the answer is then 503, the exit code 3):
// see cluster.Retriable (the network, timeouts, Kafka errors the protocol marks retriable such
// as leader moves and coordinator loading; never a TLS or authentication mistake).
func Transient(err error) bool {
	var rb *cluster.RetryBudgetError
	return errors.As(err, &rb) || cluster.Retriable(err)
}

// ServeBackoff bounds the retries of a round run for a CloudEvent: short, since the sender
// (PingSource, KafkaSource) retries a 503 with its own backoff and the round must not hold the
// request for minutes.
var ServeBackoff = cluster.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second, Budget: 5 * time.Second}

// Gate lets one round run at a time: concurrent events wait for the running round.
type Gate struct {
	// Name is the job's name in answers and errors ("checkpoint", "heartbeat").
	Name    string
	Metrics *metrics.Recorder
	// Logger logs the retries of a round (nil: none).
	Logger *slog.Logger
	// RunBackoff bounds the retries of `run` (default cluster.DefaultBackoff) and
	// ServeBackoff those of a round run for an event (default round.ServeBackoff): a round
	// that fails with a Transient error is run again from its start after a wait, until it
	// succeeds, fails for good, or the budget or the context ends.
	RunBackoff, ServeBackoff cluster.Backoff
	// EventTypes are the CloudEvent types that run a round under `serve` besides PingSource's
	// (MM2_BURST_EVENT_TYPES); empty: any type, from authenticated senders only
	// (serve.TriggerAllowed).
	EventTypes []string
	running    chan struct{}
}

// NewGate returns a Gate for the job called name; rec may be nil.
func NewGate(name string, rec *metrics.Recorder) *Gate {
	return &Gate{Name: name, Metrics: rec, RunBackoff: cluster.DefaultBackoff, ServeBackoff: ServeBackoff, running: make(chan struct{}, 1)}
}

// retry runs round until it succeeds or fails for good (see cluster.Retry), returning the last
// summary and error.
func retry[S any](ctx context.Context, g *Gate, b cluster.Backoff, round func(context.Context) (S, error)) (S, error) {
	var sum S
	err := cluster.Retry(ctx, g.Logger, g.Name+" round", b, func(ctx context.Context) error {
		var err error
		sum, err = round(ctx)
		return err
	})
	return sum, err
}

// Handle runs round once and maps its outcome to an answer: 200 with the JSON summary; 503
// with a one-line reason when a cluster is unavailable, the request ended or the failure is
// transient (the sender retries); 500 otherwise. A sender whose token was not verified
// (serve.Authenticated) gets neither the summary nor the error (addresses, client ids): only
// the outcome, the error going to the log.
func Handle[S any](ctx context.Context, g *Gate, round func(context.Context) (S, error)) protocol.Result {
	select {
	case g.running <- struct{}{}:
		defer func() { <-g.running }()
	case <-ctx.Done():
		return serve.Text(http.StatusServiceUnavailable, "a %s round is still running", g.Name)
	}
	sum, err := retry(ctx, g, g.ServeBackoff, round)
	if err != nil {
		g.Metrics.Error(ctx, metrics.ErrorKind(err))
	}
	auth := serve.Authenticated(ctx)
	if err != nil && !auth && g.Logger != nil {
		g.Logger.Warn("round failed", "round", g.Name, "err", serve.OneLine(err.Error()))
	}
	var ue *UnavailableError
	switch {
	case err == nil && auth:
		return serve.JSON(http.StatusOK, sum)
	case err == nil:
		return serve.JSON(http.StatusOK, map[string]any{"round": g.Name, "done": true})
	case !auth:
		status, what := http.StatusInternalServerError, "failed"
		switch {
		case errors.As(err, &ue):
			// Which side, as /readyz says it: no alias, address or error text.
			status, what = http.StatusServiceUnavailable, "not done: the "+ue.Cluster+" cluster is unavailable, retry later"
		case ctx.Err() != nil || Transient(err):
			status, what = http.StatusServiceUnavailable, "not done, retry later"
		}
		return serve.Text(status, "%s round %s (the function's log says why; answers carry the reason to authenticated senders only)", g.Name, what)
	case errors.As(err, &ue):
		return serve.Text(http.StatusServiceUnavailable, "%v", err)
	case ctx.Err() != nil:
		return serve.Text(http.StatusServiceUnavailable, "%s round interrupted: %v", g.Name, err)
	case Transient(err):
		return serve.Text(http.StatusServiceUnavailable, "%s round failed, retry later: %v", g.Name, err)
	}
	return serve.Text(http.StatusInternalServerError, "%s round failed: %v", g.Name, err)
}

// Once is the `run` sub-command's body: one round, retried while it fails with a Transient
// error (within g.RunBackoff), its summary written as JSON to stdout (also when the round
// failed part-way), the error wrapped with the job's name. An error that is still transient
// when the budget or the context ends also wraps runAgain (the caller's "run again later", e.g.
// cli.ErrMoreToDo, exit code 3).
func Once[S any](ctx context.Context, g *Gate, stdout io.Writer, round func(context.Context) (S, error), runAgain error) error {
	sum, err := retry(ctx, g, g.RunBackoff, round)
	if b, jerr := json.Marshal(sum); jerr == nil {
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if err == nil {
		return nil
	}
	g.Metrics.Error(ctx, metrics.ErrorKind(err))
	if Transient(err) || ctx.Err() != nil {
		if g.Logger != nil {
			g.Logger.Error("round not done; run again later (exit code 3)", "round", g.Name, "err", err.Error())
		}
		return fmt.Errorf("%s round: %w (%w)", g.Name, err, runAgain)
	}
	return fmt.Errorf("%s round: %w", g.Name, err)
}

// Job is a periodic job built from settings: Server hands it the CloudEvents.
type Job[S any] interface {
	// Ready reports whether the clusters a round needs answer (serve.Readier).
	Ready(context.Context) error
	Round(context.Context) (S, error)
	Gate() *Gate
	Close()
}

// Server returns the serve.Handler (and serve.Readier) of a periodic job: a CloudEvent of a
// type that may start a run (serve.TriggerAllowed with the Gate's EventTypes: a PingSource
// tick, a listed type) runs one round (see Handle for the answers), any other type is a 400;
// concurrent events wait for the running round.
func Server[S any](j Job[S]) serve.Handler { return server[S]{j} }

type server[S any] struct{ j Job[S] }

func (s server[S]) Ready(ctx context.Context) error { return s.j.Ready(ctx) }

func (s server[S]) Handle(ctx context.Context, e event.Event) protocol.Result {
	g := s.j.Gate()
	if !serve.TriggerAllowed(ctx, e.Type(), g.EventTypes) {
		return serve.Text(http.StatusBadRequest, "event type %q does not start a %s round (%s or MM2_BURST_EVENT_TYPES %v; an empty list means any type only with sender authentication)",
			serve.OneLine(e.Type()), g.Name, serve.TypePing, g.EventTypes)
	}
	return Handle(ctx, g, s.j.Round)
}
