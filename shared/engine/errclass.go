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
	}
	return "fatal"
}

// classify sorts err into its errClass. Kafka errors follow the protocol's own flag (kerr's
// Retriable), except that a broker's REQUEST_TIMED_OUT and NETWORK_EXCEPTION and franz-go's
// record timeout leave the outcome unknown, and a fenced producer is errFenced: PRODUCER_FENCED,
// INVALID_PRODUCER_EPOCH, and INVALID_TXN_STATE, which a coordinator with transactions V2
// (KIP-890) answers to the EndTxn(commit) of a producer whose transaction a newer producer's
// InitProducerId aborted (fencing bumped the epoch by one, so the old epoch's EndTxn looks
// like a retry of that abort; the state CompleteAbort or PrepareAbort refuses a commit), and
// which means on a commit that the transaction did not commit. Network errors
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
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.InvalidTxnState):
		return errFenced
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
