package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// engineOwned is a client option the engine sets itself on the clients it dials, after the
// dial function's own (its value decides how records are copied or bounded). A dial function
// that sets it too would be overridden in silence; checkDialOpts refuses that instead.
type engineOwned struct {
	// key is the Kafka client property, as MM2 reads it after the cluster's alias
	// (<alias>.producer.acks).
	key string
	// opt is the kgo option function, for OptValue.
	opt any
	// consumer: the option is the source consumer's (checked on the source client only).
	consumer bool
	// accept reports whether a value other than franz-go's default is one the engine can keep;
	// nil: none is.
	accept func(v any, o Options) bool
	// why says what the engine does with the option instead, for the error.
	why string
}

// engineOwnedOpts are the options checkDialOpts checks. The partitioner (the engine always
// writes to the source record's partition) cannot be compared and is refused by shared/config
// (partitioner.class). MaxBufferedRecords is left out: the offset-syncs producer keeps the
// dial function's value and sizes its permits from it; the records producer's own bound
// (maxBufferedRecords) applies on top.
var engineOwnedOpts = []engineOwned{
	{key: "producer.acks", opt: kgo.RequiredAcks, accept: func(v any, _ Options) bool { return v == kgo.AllISRAcks() },
		why: "mm2go always writes with acks=all, so a copied record is never lost to a leader change"},
	{key: "producer.buffer.memory", opt: kgo.MaxBufferedBytes,
		why: "the engine bounds the bytes in flight itself: set inflight.max.bytes (MM2_INFLIGHT_MAX_BYTES) instead"},
	{key: "producer.transactional.id", opt: kgo.TransactionalID,
		why: "exactly-once gives each partition its own transactional id (TransactionalID)"},
	{key: "producer.linger.ms", opt: kgo.ProducerLinger,
		accept: func(v any, o Options) bool { return o.ProducerLinger <= 0 || v == o.ProducerLinger },
		why:    "Options.ProducerLinger sets the copy producer's linger"},
	{key: "consumer.isolation.level", opt: kgo.FetchIsolationLevel, consumer: true,
		accept: func(v any, o Options) bool {
			return o.ReadCommitted == (v == int8(1)) || (o.ExactlyOnce && v == int8(1))
		},
		why: "the isolation level follows consumer.isolation.level (Options.ReadCommitted) and exactly-once"},
	{key: "consumer.fetch.max.bytes", opt: kgo.FetchMaxBytes, consumer: true,
		why: "the engine sizes its fetches itself: set consumer.fetch.max.bytes (MM2_SOURCE_CONSUMER_FETCH_MAX_BYTES, Options.FetchMaxBytes) instead"},
	{key: "consumer.max.partition.fetch.bytes", opt: kgo.FetchMaxPartitionBytes, consumer: true,
		why: "the engine sizes partition fetches from fetch.max.bytes and the batches' compression"},
}

// checkDialOpts checks the clients the dial function built without the engine's options
// (src, tgt) against the options the engine sets after the dial function's: a value that is
// neither franz-go's default nor one the engine keeps is refused, with an error naming the
// setting as MM2 spells it, instead of being overridden in silence.
func checkDialOpts(src, tgt *kgo.Client, o Options) error {
	def, err := kgo.NewClient() // franz-go's defaults; never connects
	if err != nil {
		return fmt.Errorf("engine: reading franz-go's client defaults: %w", err)
	}
	defer def.Close()
	var errs []error
	for _, side := range []struct {
		cl    *kgo.Client
		alias string
		name  string
		src   bool
	}{{src, o.SourceAlias, "source", true}, {tgt, o.TargetAlias, "target", false}} {
		if side.cl == nil {
			continue
		}
		for _, eo := range engineOwnedOpts {
			if eo.consumer && !side.src {
				continue
			}
			v := side.cl.OptValue(eo.opt)
			if reflect.DeepEqual(v, def.OptValue(eo.opt)) || (eo.accept != nil && eo.accept(v, o)) {
				continue
			}
			errs = append(errs, fmt.Errorf("engine: the %s cluster's client sets %s.%s to %s, which the engine would override: %s; remove the setting",
				side.name, side.alias, eo.key, showOpt(v), eo.why))
		}
	}
	return errors.Join(errs...)
}

// showOpt renders an option's value for an error.
func showOpt(v any) string {
	switch v := v.(type) {
	case kgo.Acks:
		switch v {
		case kgo.LeaderAck():
			return "1"
		case kgo.NoAck():
			return "0"
		}
		return "all"
	case time.Duration:
		return fmt.Sprint(v.Milliseconds())
	case int8:
		if v == 1 {
			return "read_committed"
		}
		return "read_uncommitted"
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprint(v)
}

// withClientDefaults returns dial with two options before the caller's. Metadata is refreshed
// at most 50 ms apart instead of franz-go's 5 s: the admin clients must see topics created a
// moment ago, and a KRaft broker names a new partition's leader a moment before it serves it,
// so the first batch to a new remote topic can meet NOT_LEADER_FOR_PARTITION and must not wait
// 5 s for the next refresh. Retries back off like Java clients (retry.backoff.ms=100 doubling
// to retry.backoff.max.ms=1000, ±20% jitter) instead of franz-go's 250 ms doubling to 5 s: a
// burst waiting 4 s to retry a partition that became ready meanwhile only loses time.
func withClientDefaults(dial DialFunc) DialFunc {
	return func(ctx context.Context, side Side, extra ...kgo.Opt) (*kgo.Client, error) {
		return dial(ctx, side, append([]kgo.Opt{
			kgo.MetadataMinAge(50 * time.Millisecond),
			kgo.RetryBackoffFn(clientBackoff.delay),
		}, extra...)...)
	}
}
