package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRetriable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("fetching offsets: %w", kerr.CoordinatorNotAvailable), true},
		{kerr.CoordinatorLoadInProgress, true},
		{kerr.NotLeaderForPartition, true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{context.Canceled, false},
		{kerr.SaslAuthenticationFailed, false},
		{kerr.TopicAuthorizationFailed, false},
		{&net.OpError{Op: "remote error", Err: x509.UnknownAuthorityError{}}, false},
		{errors.New("encoding: too long"), false},
		{nil, false},
		// kadm's shard errors: a piece with no broker (its leader out of the metadata while a
		// broker hangs) is retried; a piece refused by a broker counts as its own error.
		{fmt.Errorf("listing start offsets of t: %w", shardErrs(kadm.ShardError{Err: errors.New("unknown broker"), Broker: kadm.BrokerDetail{NodeID: -1}})), true},
		{shardErrs(kadm.ShardError{Err: kerr.NotLeaderForPartition, Broker: kadm.BrokerDetail{NodeID: 1}}), true},
		{shardErrs(kadm.ShardError{Err: errors.New("unknown broker"), Broker: kadm.BrokerDetail{NodeID: -1}},
			kadm.ShardError{Err: kerr.TopicAuthorizationFailed, Broker: kadm.BrokerDetail{NodeID: 1}}), false},
		{shardErrs(kadm.ShardError{Err: kerr.TopicAuthorizationFailed, Broker: kadm.BrokerDetail{NodeID: -1}}), false},
		{shardErrs(kadm.ShardError{Err: errors.New("boom"), Broker: kadm.BrokerDetail{NodeID: 2}}), false},
	} {
		if got := Retriable(tc.err); got != tc.want {
			t.Errorf("Retriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func shardErrs(errs ...kadm.ShardError) error {
	return &kadm.ShardErrors{Name: "ListOffsets", AllFailed: true, Errs: errs}
}

func TestRetry(t *testing.T) {
	b := Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond, Budget: time.Minute}
	calls := 0
	err := Retry(context.Background(), nil, "x", b, func(context.Context) error {
		calls++
		if calls < 4 {
			return kerr.CoordinatorNotAvailable
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Errorf("%v after %d calls, want nil after 4", err, calls)
	}

	calls = 0
	err = Retry(context.Background(), nil, "x", b, func(context.Context) error { calls++; return kerr.InvalidRequest })
	if calls != 1 || !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("permanent: %v after %d calls", err, calls)
	}

	b.Budget = 20 * time.Millisecond
	err = Retry(context.Background(), nil, "fetching offsets", b, func(context.Context) error { return kerr.CoordinatorNotAvailable })
	var rb *RetryBudgetError
	if !errors.As(err, &rb) || !errors.Is(err, kerr.CoordinatorNotAvailable) || rb.Attempts < 2 {
		t.Errorf("budget: %v", err)
	}

	// A connection closed on its first read (a restarting broker, or a TLS/SASL mismatch) is
	// tried again a few times, then its own error ends the retries.
	b.Budget = time.Minute
	calls = 0
	err = Retry(context.Background(), nil, "x", b, func(context.Context) error {
		calls++
		return fmt.Errorf("describing: %w", &kgo.ErrFirstReadEOF{})
	})
	var fr *kgo.ErrFirstReadEOF
	if calls != 1+firstReadRetries || !errors.As(err, &fr) || errors.As(err, &rb) {
		t.Errorf("first read EOF: %v after %d calls, want itself after %d", err, calls, 1+firstReadRetries)
	}
	calls = 0
	err = Retry(context.Background(), nil, "x", b, func(context.Context) error {
		if calls++; calls < 3 {
			return &kgo.ErrFirstReadEOF{}
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("first read EOF then success: %v after %d calls", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	b.Budget = 0
	calls = 0
	err = Retry(ctx, nil, "x", b, func(context.Context) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return kerr.NotLeaderForPartition
	})
	if calls != 3 || !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("canceled: %v after %d calls", err, calls)
	}
}
