package engine

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClassify: each kind of error the sinks and admin paths meet gets its class, wrapped or not.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want errClass
	}{
		{nil, errNone},
		{kerr.NotLeaderForPartition, errRetriable},
		{kerr.UnknownTopicOrPartition, errRetriable},
		{kerr.CoordinatorLoadInProgress, errRetriable},
		{kerr.InvalidReplicationFactor, errRetriable},
		{syscall.ECONNREFUSED, errRetriable},
		{errors.New("unknown broker 3"), errRetriable},
		{kerr.RequestTimedOut, errOutcomeUnknown},
		{kerr.NetworkException, errOutcomeUnknown},
		{kgo.ErrRecordTimeout, errOutcomeUnknown},
		{context.DeadlineExceeded, errOutcomeUnknown},
		{io.EOF, errOutcomeUnknown},
		{syscall.ECONNRESET, errOutcomeUnknown},
		{&unsettledCommit{err: kerr.NotCoordinator}, errOutcomeUnknown},
		{kerr.ProducerFenced, errFenced},
		{kerr.InvalidProducerEpoch, errEpoch},
		{kerr.InvalidTxnState, errEpoch},
		{kerr.TransactionalIDAuthorizationFailed, errFatal},
		{kerr.TopicAuthorizationFailed, errFatal},
		{kerr.MessageTooLarge, errFatal},
		{context.Canceled, errFatal},
		{x509.UnknownAuthorityError{}, errFatal},
		{&kgo.ErrFirstReadEOF{}, errFatal},
	} {
		for _, err := range []error{c.err, fmt.Errorf("producing to t-0: %w", c.err)} {
			if c.err == nil && err != nil {
				continue
			}
			if got := classify(err); got != c.want {
				t.Errorf("classify(%v) = %s, want %s", err, got, c.want)
			}
		}
	}
}

// TestBackoffRetry: a retry series stops at its tries, on an error its caller does not accept,
// and when its context ends; it retries what it accepts, and waits from the first delay up.
func TestBackoffRetry(t *testing.T) {
	b := backoff{initial: time.Microsecond, max: 4 * time.Microsecond, tries: 5}
	calls, between := 0, 0
	err := b.retry(context.Background(), func() error { calls++; return kerr.NotLeaderForPartition }, nil, func(context.Context) { between++ })
	if !errors.Is(err, kerr.NotLeaderForPartition) || calls != 5 || between != 4 {
		t.Errorf("retriable every time: %v after %d calls, %d refreshes; want the error after 5 calls, 4 refreshes", err, calls, between)
	}
	calls = 0
	err = b.retry(context.Background(), func() error { calls++; return kerr.RequestTimedOut }, nil, nil)
	if calls != 1 || !errors.Is(err, kerr.RequestTimedOut) {
		t.Errorf("outcome unknown, retriable only: %d calls, want 1 (%v)", calls, err)
	}
	calls = 0
	err = b.retry(context.Background(), func() error {
		if calls++; calls < 3 {
			return kerr.RequestTimedOut
		}
		return nil
	}, func(c errClass) bool { return c != errFatal }, nil)
	if err != nil || calls != 3 {
		t.Errorf("unknown outcomes accepted: %v after %d calls, want success after 3", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = backoff{initial: time.Hour, max: time.Hour}.retry(ctx, func() error { calls++; cancel(); return syscall.ECONNREFUSED }, nil, nil)
	if calls != 1 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("canceled: %d calls, %v; want 1 call and its error", calls, err)
	}
	r := backoff{initial: time.Hour, max: time.Hour, budget: time.Minute}.start()
	if _, ok := r.next(); ok {
		t.Error("a wait past the budget was allowed")
	}
	for fails, base := range map[int]time.Duration{1: 10, 2: 20, 3: 40, 8: 1000} {
		base *= time.Millisecond
		if d := forwardBackoff.delay(fails); d < base*8/10 || d > base*12/10 {
			t.Errorf("forwardBackoff.delay(%d) = %s, want %s ±20%%", fails, d, base)
		}
	}
}

// TestFakeConflictingDialOptionRefused: an option the engine sets itself after the dial
// function's (acks, the consumer's fetch size) is refused when the dial function sets it too,
// with an error naming the setting as MM2 spells it; before, New succeeded and the engine's
// producers wrote with acks=all whatever the dial function said.
func TestFakeConflictingDialOptionRefused(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	f.extra = []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.FetchMaxBytes(1 << 20)}
	_, err := New(context.Background(), f.opts, f.dial, nil)
	if err == nil {
		t.Fatal("New succeeded with acks=1 in the dial function's options; want an error naming tgt.producer.acks")
	}
	for _, want := range []string{"tgt.producer.acks to 1", "src.producer.acks to 1", "src.consumer.fetch.max.bytes to 1048576", "MM2_SOURCE_CONSUMER_FETCH_MAX_BYTES"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "tgt.consumer") {
		t.Errorf("error %q names a consumer setting of the target, which the engine does not set", err)
	}
	// Values the engine keeps are accepted: its own linger, read_committed when asked for.
	f.extra = []kgo.Opt{kgo.ProducerLinger(25 * time.Millisecond), kgo.FetchIsolationLevel(kgo.ReadCommitted())}
	f.opts.ProducerLinger, f.opts.ReadCommitted = 25*time.Millisecond, true
	e, err := New(context.Background(), f.opts, f.dial, nil)
	if err != nil {
		t.Fatalf("New with the engine's own values: %v", err)
	}
	e.Close()
}
