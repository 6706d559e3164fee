package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Retriable reports whether err is worth trying again a moment later: Kafka errors the protocol
// marks retriable (COORDINATOR_NOT_AVAILABLE while a new cluster creates __consumer_offsets,
// COORDINATOR_LOAD_IN_PROGRESS, NOT_LEADER_OR_FOLLOWER, ...), a refused or reset connection (a
// broker restarting), a request that timed out (a hung broker), and a connection closed mid-way.
//
// Mistakes in the settings are never retriable, even when they show up as network errors: TLS
// certificate and handshake failures, a connection the broker closes on the first read (a
// TLS/SASL mismatch), and every non-retriable Kafka error (authentication, authorization, an
// invalid request). A canceled context is not retriable either.
func Retriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || SettingsMistake(err) {
		return false
	}
	var (
		kafkaError *kerr.Error
		shards     *kadm.ShardErrors
		rf         *ReplicationFactorError
	)
	switch {
	case errors.As(err, &rf):
		return false
	case errors.As(err, &shards) && shardsRetriable(shards):
		return true
	case errors.As(err, &kafkaError):
		// A KRaft broker that restarted or hung is fenced until it has caught up with the
		// controller; meanwhile CreateTopics answers INVALID_REPLICATION_FACTOR ("larger than the
		// number of available brokers") although nothing is wrong with the request.
		return kafkaError.Retriable || kafkaError == kerr.InvalidReplicationFactor
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// SettingsMistake reports the network errors that come from wrong settings: TLS certificate
// and handshake failures, and a connection the broker closes on the first read (a TLS/SASL
// mismatch).
func SettingsMistake(err error) bool {
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		recordHdr tls.RecordHeaderError
		alert     tls.AlertError
		verify    *tls.CertificateVerificationError
		firstRead *kgo.ErrFirstReadEOF
	)
	return errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &recordHdr) || errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &firstRead)
}

// shardsRetriable reports whether every failed piece of a kadm request is worth trying again:
// its error is retriable, or the piece failed before it was mapped to a broker (node -1) with
// a client-side error such as franz-go's "unknown broker", which a partition gets while its
// leader (a broker that hung or restarts) is out of the metadata. A Kafka error on such a piece
// still counts as itself (an authorization failure in the metadata is not retried).
func shardsRetriable(se *kadm.ShardErrors) bool {
	for _, s := range se.Errs {
		var ke *kerr.Error
		if Retriable(s.Err) || (s.Broker.NodeID == -1 && !errors.As(s.Err, &ke)) {
			continue
		}
		return false
	}
	return len(se.Errs) > 0
}

// Backoff is a bounded exponential backoff: the first wait is Initial, each next one doubles up
// to Max, each with up to 20 % jitter, and no attempt starts after Budget has passed since the
// first one (0: only the context bounds the attempts).
type Backoff struct {
	Initial, Max, Budget time.Duration
}

// firstReadRetries is how many times Retry tries again after a connection the broker closed on
// its first read (about 3 s with DefaultBackoff).
const firstReadRetries = 3

// DefaultBackoff starts at 200 ms, waits at most 5 s between attempts, and gives up after 2
// minutes: long enough to ride out a broker restart or a hang of half a minute.
var DefaultBackoff = Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Budget: 2 * time.Minute}

// Retry calls fn until it returns nil or an error Retriable says is final, waiting between
// attempts as b says, and returns fn's last error. It stops early when ctx ends (returning the
// last error of fn if there was one, else ctx's) and when the next attempt would start after
// b.Budget. Every retry is logged at INFO with what, the attempt and the error, so a run that
// rides out a fault says so; logger may be nil.
func Retry(ctx context.Context, logger *slog.Logger, what string, b Backoff, fn func(context.Context) error) error {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max < b.Initial {
		b.Max = max(DefaultBackoff.Max, b.Initial)
	}
	start := time.Now()
	wait := b.Initial
	firstReads := 0
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !Retriable(err) {
			// A connection closed by the broker on its first read is a TLS/SASL mismatch, or a
			// broker shutting down or starting up (a restart): it is tried again a few times
			// only, so that a mismatch still ends with its own error within seconds.
			var firstRead *kgo.ErrFirstReadEOF
			if !errors.As(err, &firstRead) || firstReads >= firstReadRetries {
				return err
			}
			firstReads++
		}
		d := wait + time.Duration(rand.Int64N(int64(wait)/5+1))
		if b.Budget > 0 && time.Since(start)+d > b.Budget {
			return &RetryBudgetError{What: what, Attempts: attempt, Elapsed: time.Since(start), Err: err}
		}
		if logger != nil {
			logger.Info("retriable error; retrying", "what", what, "attempt", attempt, "in", d.Round(time.Millisecond).String(), "err", err.Error())
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, b.Max)
	}
}

// RetryBudgetError is Retry's answer when the retry budget ran out while the error was still
// retriable: a later run may succeed. It unwraps to the last error.
type RetryBudgetError struct {
	What     string
	Attempts int
	Elapsed  time.Duration
	Err      error
}

func (e *RetryBudgetError) Error() string {
	return fmt.Sprintf("%s: still failing after %s (%d attempts), retry later: %v",
		e.What, e.Elapsed.Round(time.Second), e.Attempts, e.Err)
}

func (e *RetryBudgetError) Unwrap() error { return e.Err }
