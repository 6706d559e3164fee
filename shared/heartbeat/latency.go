package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/mm2"
)

// LatencyTopic is the remote heartbeats topic whose newest record gives the
// replication latency: <source>.heartbeats with the default policy.
func (j *Job) LatencyTopic() string {
	return j.opts.Policy.FormatRemoteTopic(j.opts.SourceAlias, j.opts.Policy.HeartbeatsTopic())
}

// newestReplicated returns the newest decodable heartbeat among the last
// records of the remote heartbeats topic on the target, nil if none. A
// heartbeat keyed {target, source} (this flow's reverse heartbeat) wins over
// any other.
func (j *Job) newestReplicated(ctx context.Context) (*Heartbeat, error) {
	topic := j.LatencyTopic()
	// A fresh client: the job's own may have cached that the topic did not
	// exist a moment ago.
	cl, err := j.target(ctx, kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, ends, err := cluster.ListOffsets(ctx, adm, false, topic)
	if cluster.TopicMissing(err) {
		j.log.Debug("no remote heartbeats topic on the target", "topic", topic)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", j.opts.TargetAlias, err)
	}
	from := map[int32]kgo.Offset{}
	want := map[int32]int64{} // partition -> end offset still to reach
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		if o.Offset <= s.Offset {
			return
		}
		at := max(s.Offset, o.Offset-tailRecords)
		from[o.Partition] = kgo.NewOffset().At(at)
		want[o.Partition] = o.Offset
	})
	j.log.Debug("reading the newest replicated heartbeats", "topic", topic, "ends", want)
	if len(from) == 0 {
		return nil, nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})
	var newest, newestOwn *Heartbeat
	for len(want) > 0 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s on target %q: %w", topic, j.opts.TargetAlias, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("reading %s on target %q: %w", topic, j.opts.TargetAlias, ferr)
		}
		if fs.NumRecords() == 0 {
			break // the last offsets are gone; use what was read
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset >= end-1 {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			h, err := mm2.DecodeHeartbeat(r.Key, r.Value)
			if err != nil {
				return
			}
			hb := fromMM2(h)
			if newest == nil || h.Timestamp > newest.Timestamp {
				newest = &hb
			}
			own := h.SourceAlias == j.opts.TargetAlias && h.TargetAlias == j.opts.SourceAlias
			if own && (newestOwn == nil || h.Timestamp > newestOwn.Timestamp) {
				newestOwn = &hb
			}
		})
	}
	if newestOwn != nil {
		return newestOwn, nil
	}
	return newest, nil
}
