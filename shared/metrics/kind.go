package metrics

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error kinds returned by ErrorKind besides Kafka error codes.
const (
	KindTimeout  = "timeout"
	KindCanceled = "canceled"
	KindNetwork  = "network"
	KindOther    = "other"
)

// ErrorKind classifies err for the kind attribute of mm2go_errors_total: a Kafka error code in
// lower case with dashes ("not-leader-for-partition", "topic-authorization-failed"), or
// timeout, canceled, network, other. The set of values is small and fixed, so it is safe as a
// metric attribute.
func ErrorKind(err error) string {
	var ke *kerr.Error
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ke):
		return strings.ToLower(strings.ReplaceAll(ke.Message, "_", "-"))
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.As(err, &ne):
		if ne.Timeout() {
			return KindTimeout
		}
		return KindNetwork
	default:
		return KindOther
	}
}
