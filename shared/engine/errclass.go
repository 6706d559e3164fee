package engine

import (
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
)

// errClass is what the engine does after an error of a write to the target or of an admin
// request: every sink, every retry loop and the exactly-once settling ask classify, so that
// one error means the same thing on every path.
type errClass int

const (
	// errNone: no error.
	errNone errClass = iota
	// errFatal: trying again cannot help (a setting, an authorization, a canceled context, a
	// record the target refuses).
	errFatal
	// errRetriable: the request did not take effect (a leader moving, a broker restarting, a
	// new partition not yet served); sending it again is safe.
	errRetriable
	// errOutcomeUnknown: the request may have taken effect and its answer was lost (a request
	// that timed out, a connection closed while the answer was awaited, a commit whose outcome
	// franz-go could not learn). Sending it again is safe only where the target deduplicates
	// (an idempotent batch sent with its own sequence) or after the outcome is settled (an
	// exactly-once commit: fence, then read the stored position back).
	errOutcomeUnknown
	// errFenced: a newer producer with this producer's transactional id exists (another
	// instance took the partition over), and this producer's open transaction was aborted, not
	// committed. Trying again would fence the other instance in turn; the exactly-once copy
	// gives the partition up instead (its records are left as lag, the position stays at what
	// the target committed).
	errFenced
	// errEpoch: the producer's epoch or transaction state was refused (INVALID_PRODUCER_EPOCH,
	// INVALID_TXN_STATE). A newer producer of the transactional id may have fenced this one
	// (a coordinator with transactions V2 answers INVALID_TXN_STATE to a fenced producer's
	// commit), or not: a stale epoch of this producer's own (transactions V2 bump it at every
	// commit), or a bug of ours. The exactly-once copy asks the coordinator who holds the id
	// (eosCommitter.takenOver) and gives the partition up only to another producer; otherwise
	// the transaction is settled and written again.
	errEpoch
)

func (c errClass) String() string {
	switch c {
	case errNone:
		return "none"
	case errRetriable:
		return "retriable"
	case errOutcomeUnknown:
		return "outcome unknown"
	case errFenced:
		return "fenced"
	case errEpoch:
		return "epoch refused"
	}
	return "fatal"
}

// classify sorts err into its errClass. Kafka errors follow the protocol's own flag (kerr's
// Retriable), except that a broker's REQUEST_TIMED_OUT and NETWORK_EXCEPTION and franz-go's
// record timeout leave the outcome unknown, PRODUCER_FENCED is errFenced (a newer producer
// initialized), and INVALID_PRODUCER_EPOCH and INVALID_TXN_STATE are errEpoch: a coordinator
// with transactions V2 (KIP-890) answers INVALID_TXN_STATE to the EndTxn(commit) of a producer
// whose transaction a newer producer's InitProducerId aborted (fencing bumped the epoch by
// one, so the old epoch's EndTxn looks like a retry of that abort), but the same errors also
// come from a producer's own stale epoch or a bug, where nobody took anything over. Network errors
// follow cluster.Retriable, settings mistakes (TLS, a SASL mismatch) being fatal; a refused
// connection never reached the broker (retriable), a connection lost mid-request may have
// (outcome unknown). Other client-side errors (a broker not yet in the metadata) are
// retriable, a canceled context fatal.
func classify(err error) errClass {
	var (
		u  *unsettledCommit
		ke *kerr.Error
	)
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, context.Canceled), cluster.SettingsMistake(err):
		return errFatal
	case errors.As(err, &u):
		return errOutcomeUnknown
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return errFatal
	case errors.Is(err, kerr.ProducerFenced):
		return errFenced
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.InvalidTxnState):
		return errEpoch
	case errors.Is(err, kerr.RequestTimedOut), errors.Is(err, kerr.NetworkException),
		errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, context.DeadlineExceeded):
		return errOutcomeUnknown
	case errors.As(err, &ke):
		if cluster.Retriable(err) {
			return errRetriable
		}
		return errFatal
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRetriable
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return errOutcomeUnknown
	}
	return errRetriable
}

// unsettledCommit is the error of a copy stopped while a transaction of it was unsettled:
// whether it committed was unknown (a new producer with the same transactional id would have
// fenced it, completing or aborting it, and the stored position told; eosCommitter.settle).
// The next run reads the stored position after fencing, so it starts from what did commit.
type unsettledCommit struct{ err error }

func (u *unsettledCommit) Error() string { return u.err.Error() }

func (u *unsettledCommit) Unwrap() error { return u.err }
