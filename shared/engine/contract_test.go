package engine

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Regression tests of the engine's contracts with its callers and users, on kfake: each one
// failed on the engine before the fix named in its comment.

// TestFakeUserDeliveryTimeoutHonoured: a user's producer.delivery.timeout.ms
// (MM2_TARGET_PRODUCER_DELIVERY_TIMEOUT_MS, applied by the dial function before the engine's
// own options, as shared/app's Dialer does) is the delivery timeout of every records producer
// the engine dials: a burst's, the warmed one and serve's long-lived one. Before the fix the
// engine appended RecordDeliveryTimeout(0) and so overrode it in silence (got 0s).
func TestFakeUserDeliveryTimeoutHonoured(t *testing.T) {
	f := newFakeFlow(t, map[string]int32{"orders": 1})
	const want = 7 * time.Second
	f.extra = []kgo.Opt{kgo.RecordDeliveryTimeout(want)}
	e := f.engine()
	ctx := context.Background()
	prod, _, err := e.reusedProducers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	warmed := e.warmProducer(ctx)
	if warmed == nil {
		t.Fatal("no warmed producer")
	}
	defer warmed.Close()
	for name, cl := range map[string]*kgo.Client{"serve's records producer": prod, "a burst's records producer": warmed} {
		if got, _ := cl.OptValue(kgo.RecordDeliveryTimeout).(time.Duration); got != want {
			t.Errorf("%s: delivery timeout %v, want the user's %v", name, got, want)
		}
	}
}
