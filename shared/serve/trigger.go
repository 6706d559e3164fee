package serve

import (
	"context"
	"slices"
)

// TypePing is PingSource's event type: it starts a run (a mirror burst, a checkpoint or
// heartbeat round) from any sender.
const TypePing = "dev.knative.sources.ping"

// TriggerAllowed reports whether an event of type typ, from the sender of ctx, may start a run:
// PingSource's type and the listed types (MM2_BURST_EVENT_TYPES) from anyone; any other type
// only when the list is empty and the sender's token was verified (Authenticated), since
// without sender authentication anyone who can reach the service could start runs.
func TriggerAllowed(ctx context.Context, typ string, listed []string) bool {
	return typ == TypePing || slices.Contains(listed, typ) || len(listed) == 0 && Authenticated(ctx)
}
