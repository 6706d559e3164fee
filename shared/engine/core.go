package engine

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// core is what every part of a copy shares with the engine: the flow's options, its dial
// function and logger, the engine's metadata and admin clients, the background Close waits
// for, and the parts below the copy: the topic planner, the position store and serve's
// long-lived producers and checks (reuse). The copier, its committer and sinks, the burst
// runner and the offset-syncs setup hold it instead of the Engine, which embeds it and adds
// the parts on top (the serve coordinator and the burst runner).
//
// Ownership: New sets the options and clients, wire the parts; all are read-only afterwards
// (each part owns its state and lock).
type core struct {
	opts Options
	dial DialFunc
	log  *slog.Logger

	src, tgt       *kgo.Client // metadata/admin clients
	srcAdm, tgtAdm *kadm.Client

	planner   *topicPlanner  // topics: selection, plan, creation, configs, ACLs, gaps
	positions *positionStore // the offsets topic and what this process made durable
	reuse     reused         // serve's long-lived producers, recent checks and warm-up

	bg *background // the goroutines the engine starts beyond a call; Close waits for them
}

// producerOpts returns opts plus the ProducerLinger override, if any.
func (e *core) producerOpts(opts ...kgo.Opt) []kgo.Opt {
	if e.opts.ProducerLinger > 0 {
		opts = append(opts, kgo.ProducerLinger(e.opts.ProducerLinger))
	}
	return opts
}

// isolation is the source isolation level of a copy: read_committed under exactly-once or
// Options.ReadCommitted.
func (e *core) isolation() kgo.Opt {
	if e.opts.ReadCommitted || e.opts.ExactlyOnce {
		return kgo.FetchIsolationLevel(kgo.ReadCommitted())
	}
	return kgo.FetchIsolationLevel(kgo.ReadUncommitted())
}

// dataProducerOpts are the options of the at-least-once producer of copied records. None of
// them is one a user's setting names, so the dial function's options are never overridden.
// There is no delivery timeout: franz-go counts it from the record's timestamp, which a copy
// keeps from its source record (producer.delivery.timeout.ms is therefore not applied: its
// verdict in shared/config).
func (e *core) dataProducerOpts() []kgo.Opt {
	return e.producerOpts(
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedBytes(e.opts.producerBufferedBytes()),
		kgo.MaxBufferedRecords(maxBufferedRecords),
	)
}
