package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/mm2go/mm2go/shared/mm2"
)

// PositionsLostError stops a run that would start partitions over although they were copied
// before: they have no stored position, their remote partitions already hold records, and the
// offsets-topic partitions that would hold their positions have lost records (their log start
// is past 0: retention removed them, as on an Event Hubs tier without compaction after a flow
// stood still longer than the retention). With auto.offset.reset=earliest (MM2's default) the
// run would copy every source record again into the remote topics.
type PositionsLostError struct {
	OffsetsTopic string
	// Partitions are the source partitions concerned, sorted; Remote holds the end offset of
	// each one's remote partition.
	Partitions []TP
	Remote     map[TP]int64
}

func (e *PositionsLostError) Error() string {
	rows := make([]string, 0, len(e.Partitions))
	for _, tp := range e.Partitions {
		rows = append(rows, fmt.Sprintf("%s (remote holds offsets up to %d)", tp, e.Remote[tp]))
	}
	return fmt.Sprintf("the stored positions of %s are gone from %s (its earliest records were removed by retention) although their remote partitions hold records: "+
		"starting them over would copy every source record again. Choose: "+
		"MM2_SOURCE_CONSUMER_AUTO_OFFSET_RESET=latest (consumer.auto.offset.reset) to go on from the source's end, skipping what was written since the lost positions; "+
		"or empty (recreate) the remote topics to copy the source into them once more; "+
		"and to keep positions from now on, run the mirror more often than the offsets topic's retention, or make that topic compacted (MM2_TARGET_EVENTHUBS_COMPACTION=true on a tier with compaction)",
		strings.Join(rows, ", "), e.OffsetsTopic)
}

// checkLost returns a PositionsLostError for the partitions of tps that have no position in
// positions although they were copied before (see PositionsLostError), nil when there are none.
// With auto.offset.reset=latest nothing is copied again, so nothing is checked. A partition whose
// offsets-topic partition still starts at 0 never had a position: it is copied from its start as
// auto.offset.reset says (a first run, or a remote topic that other writers filled).
func (pn *topicPlanner) checkLost(ctx context.Context, tps []TP, remote map[string]string, positions map[TP]int64, offsetsParts int32) error {
	if pn.opts.AutoOffsetResetLatest || offsetsParts <= 0 {
		return nil
	}
	var missing []TP
	for _, tp := range tps {
		if _, ok := positions[tp]; !ok {
			missing = append(missing, tp)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	topic := pn.opts.OffsetStorageTopic
	starts, err := pn.tgtAdm.ListStartOffsets(ctx, topic)
	if err != nil {
		pn.log.Warn("start offsets of the offsets topic not read; positions lost to retention are not looked for", "topic", topic, "err", err)
		return nil
	}
	var suspects []TP
	names := map[string]bool{}
	for _, tp := range missing {
		p := mm2.KeyPartition(mm2.SourceOffsetKey(pn.opts.SourceAlias, tp.Topic, tp.Partition), offsetsParts)
		if s, ok := starts.Lookup(topic, p); ok && s.Err == nil && s.Offset > 0 && remote[tp.Topic] != "" {
			suspects = append(suspects, tp)
			names[remote[tp.Topic]] = true
		}
	}
	if len(suspects) == 0 {
		return nil
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	ends, err := pn.tgtAdm.ListEndOffsets(ctx, list...)
	if err != nil {
		pn.log.Warn("end offsets of remote topics not read; positions lost to retention are not looked for", "err", err)
		return nil
	}
	lost := &PositionsLostError{OffsetsTopic: topic, Remote: map[TP]int64{}}
	for _, tp := range suspects {
		if o, ok := ends.Lookup(remote[tp.Topic], tp.Partition); ok && o.Err == nil && o.Offset > 0 {
			lost.Partitions = append(lost.Partitions, tp)
			lost.Remote[tp] = o.Offset
		}
	}
	if len(lost.Partitions) == 0 {
		return nil
	}
	sort.Slice(lost.Partitions, func(i, j int) bool {
		a, b := lost.Partitions[i], lost.Partitions[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	return lost
}
