// Package heartbeat runs one round of MirrorMaker 2's heartbeat job
// (MirrorHeartbeatConnector/MirrorHeartbeatTask) for one flow source->target:
//
//   - write Heartbeat{source, target, now} to "heartbeats" on the target;
//   - write the reverse heartbeat Heartbeat{target, source, now} to
//     "heartbeats" on the source, as MM2's reverse herder target->source does
//     by default, so that replicating the source's "heartbeats" topic yields
//     <source>.heartbeats on the target (what MM2's MirrorClient and
//     RemoteClusterUtils use to discover upstream clusters);
//   - report the end-to-end replication latency: now minus the timestamp of
//     the newest heartbeat found in <source>.heartbeats on the target. The
//     flow's own reverse heartbeats ({target, source}, written by this job or
//     by MM2's reverse herder) are preferred, so that one clock stamps and
//     measures; any other heartbeat replicated from the source is used when
//     there is none.
//
// Records use MM2's byte format (package mm2), partition 0, record timestamp
// equal to the heartbeat's, no headers.
package heartbeat

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/mm2"
	"github.com/mm2go/mm2go/shared/round"
)

// UnavailableError reports that a cluster of the flow could not be reached:
// the round did nothing and should be retried later (serve answers 503).
type UnavailableError = round.UnavailableError

// Summary reports one round, for logs and the JSON answer of serve.
type Summary struct {
	Source     string    `json:"source"`
	Target     string    `json:"target"`
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	// Written lists the heartbeats written this round.
	Written []Written `json:"written"`
	// ReverseError says why the reverse heartbeat (to the source) could not
	// be written; the round goes on without it.
	ReverseError string `json:"reverse_error,omitempty"`
	// LatencyTopic is the remote heartbeats topic read on the target.
	LatencyTopic string `json:"latency_topic"`
	// Newest is the newest heartbeat found in latency_topic, preferring
	// the flow's own reverse heartbeats; null when none.
	Newest *Heartbeat `json:"newest_replicated_heartbeat"`
	// ReplicationLatencyMS is the round's time minus the timestamp of the
	// newest replicated heartbeat; null when none was found.
	ReplicationLatencyMS *int64 `json:"replication_latency_ms"`
}

// Written is one heartbeat written by a round.
type Written struct {
	Cluster string `json:"cluster"` // "target" or "source"
	Topic   string `json:"topic"`
	Offset  int64  `json:"offset"`
	Heartbeat
}

// Heartbeat is an MM2 heartbeat in JSON form.
type Heartbeat struct {
	SourceAlias string `json:"source_cluster_alias"`
	TargetAlias string `json:"target_cluster_alias"`
	Timestamp   int64  `json:"timestamp"` // epoch milliseconds
}

// Job runs heartbeat rounds for one flow; its clients are kept between
// rounds. A Job runs one round at a time.
type Job struct {
	opts          Options
	log           *slog.Logger
	target        ClientFunc
	round.Clients             // kept between rounds; Close releases them
	gate          *round.Gate // one round at a time (Handle)
}

// New returns a Job for the flow described by opts. Nothing is sent before
// the first round.
func New(ctx context.Context, opts Options, source, target ClientFunc, logger *slog.Logger) (*Job, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// A short metadata cache: kadm answers from it, and a topic created a
	// moment ago (by this job, the mirror function or MM2) must be seen.
	prod := []kgo.Opt{kgo.MetadataMinAge(100 * time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}
	clients, err := round.Dial(ctx, "heartbeat", source, target, opts.SourceAlias, opts.TargetAlias, prod, prod)
	if err != nil {
		return nil, err
	}
	j := &Job{
		opts: opts, log: logger, target: target, Clients: clients,
		gate: round.NewGate("heartbeat", opts.Metrics),
	}
	j.gate.Logger = logger
	return j, nil
}

// Round writes this round's heartbeats and measures the replication latency.
func (j *Job) Round(ctx context.Context) (*Summary, error) {
	start := j.opts.Now()
	sum := &Summary{
		Source: j.opts.SourceAlias, Target: j.opts.TargetAlias,
		Started: start.UTC(), Written: []Written{}, LatencyTopic: j.LatencyTopic(),
	}
	defer func() { sum.DurationMS = j.opts.Now().Sub(start).Milliseconds() }()

	type side struct {
		name, alias string
		cl          *kgo.Client
		adm         *kadm.Client
		hb          mm2.Heartbeat
		write       bool
		configs     map[string]*string
	}
	sides := []side{
		{"target", j.opts.TargetAlias, j.Tgt, j.TgtAdm, mm2.Heartbeat{SourceAlias: j.opts.SourceAlias, TargetAlias: j.opts.TargetAlias}, !j.opts.DisableHeartbeats, j.opts.TargetTopicConfigs},
		{"source", j.opts.SourceAlias, j.Src, j.SrcAdm, mm2.Heartbeat{SourceAlias: j.opts.TargetAlias, TargetAlias: j.opts.SourceAlias}, !j.opts.DisableReverse, j.opts.SourceTopicConfigs},
	}
	if err := j.ping(ctx); err != nil {
		return sum, err
	}

	for _, s := range sides {
		if !s.write {
			continue
		}
		ectx, cancel := ctx, context.CancelFunc(func() {})
		if s.name == "source" {
			ectx, cancel = context.WithTimeout(ctx, reverseTimeout)
		}
		w, err := j.emit(ectx, s.name, s.alias, s.cl, s.adm, s.hb, s.configs)
		cancel()
		if err != nil {
			if s.name == "source" {
				// The reverse heartbeat only feeds topology discovery and the
				// latency figure; a source the job may not write to (e.g. a
				// read-only source with offset syncs on the target) must not
				// fail the round.
				sum.ReverseError = err.Error()
				j.log.Warn("reverse heartbeat not written", "cluster", s.alias, "err", err)
				continue
			}
			return sum, err
		}
		sum.Written = append(sum.Written, w)
	}

	newest, err := j.newestReplicated(ctx)
	if err != nil {
		return sum, err
	}
	if newest != nil {
		sum.Newest = newest
		lat := j.opts.Now().UnixMilli() - newest.Timestamp
		sum.ReplicationLatencyMS = &lat
		j.opts.Metrics.HeartbeatLatency(ctx, time.Duration(lat)*time.Millisecond)
		j.log.Info("heartbeat round done", "written", len(sum.Written), "replication_latency_ms", lat,
			"latency_topic", sum.LatencyTopic, "newest_from", newest.SourceAlias, "newest_to", newest.TargetAlias)
	} else {
		j.log.Info("heartbeat round done; no replicated heartbeat yet", "written", len(sum.Written),
			"latency_topic", sum.LatencyTopic)
	}
	return sum, nil
}

// reverseTimeout bounds writing the reverse heartbeat, so that an
// unreachable source does not hold the round.
const reverseTimeout = 30 * time.Second

// ping checks that the target answers a metadata request. A round needs
// only the target: the source may be down (a failover) and the round still
// writes the forward heartbeat and measures.
func (j *Job) ping(ctx context.Context) error { return j.Clients.Ping(ctx, &j.opts.Flow, false) }

func (j *Job) emit(ctx context.Context, name, alias string, cl *kgo.Client, adm *kadm.Client, hb mm2.Heartbeat, configs map[string]*string) (Written, error) {
	topic := j.opts.Policy.HeartbeatsTopic()
	if _, _, err := cluster.EnsureTopic(ctx, cl, topic, 1, j.opts.HeartbeatsTopicReplicationFactor, configs); err != nil {
		return Written{}, fmt.Errorf("heartbeats topic on %s %q: %w", name, alias, err)
	}
	hb.Timestamp = j.opts.Now().UnixMilli()
	key, value, err := hb.Encode()
	if err != nil {
		return Written{}, fmt.Errorf("encoding %v: %w", hb, err)
	}
	rec := &kgo.Record{Topic: topic, Partition: 0, Key: key, Value: value, Timestamp: time.UnixMilli(hb.Timestamp)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return Written{}, fmt.Errorf("writing heartbeat to %s on %s %q: %w", topic, name, alias, err)
	}
	if j.opts.WriteConnectOffsets {
		j.writeConnectOffset(ctx, cl, adm, hb)
	}
	return Written{Cluster: name, Topic: topic, Offset: rec.Offset, Heartbeat: fromMM2(hb)}, nil
}

func fromMM2(h mm2.Heartbeat) Heartbeat {
	return Heartbeat{SourceAlias: h.SourceAlias, TargetAlias: h.TargetAlias, Timestamp: h.Timestamp}
}

// tailRecords is how many records from the end of each partition of the
// remote heartbeats topic are examined.
const tailRecords = 256

// writeConnectOffset writes the heartbeat connector's Connect source offset
// to the Connect offsets topic of herder hb.SourceAlias->hb.TargetAlias on the
// cluster written to, if that topic exists. MM2 never reads it back; failures are only logged.
func (j *Job) writeConnectOffset(ctx context.Context, cl *kgo.Client, adm *kadm.Client, hb mm2.Heartbeat) {
	topic := "mm2-offsets." + hb.SourceAlias + ".internal"
	if hb.SourceAlias == j.opts.SourceAlias {
		topic = j.opts.OffsetStorageTopic
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		j.log.Warn("Connect offset not written", "topic", topic, "err", err)
		return
	}
	d, ok := md.Topics[topic]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		j.log.Debug("Connect offsets topic absent; heartbeat source offset not written", "topic", topic, "found", ok, "err", d.Err)
		return
	}
	p := mm2.HeartbeatPosition(hb.SourceAlias, hb.TargetAlias, int32(len(d.Partitions)))
	rec := &kgo.Record{Topic: topic, Partition: p.Partition, Key: p.Key, Value: p.Value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		j.log.Warn("Connect offset not written", "topic", topic, "err", err)
	}
}

// Ready reports whether the target cluster answers a metadata request (a round needs only
// the target).
func (j *Job) Ready(ctx context.Context) error { return j.ping(ctx) }

// Gate is the job's round gate: one round at a time.
func (j *Job) Gate() *round.Gate { return j.gate }
