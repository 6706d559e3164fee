package engine

import "fmt"

// Gap kinds (Gap.Kind).
const (
	// GapDeleted: the stored position is behind the source partition's log start: retention
	// or DeleteRecords removed records before they were mirrored.
	GapDeleted = "deleted"
	// GapRecreated: the stored position is beyond the source partition's end: the topic was
	// deleted and recreated (or the partition truncated, e.g. by an unclean leader election).
	GapRecreated = "recreated"
)

// Gap is a loss of source data a burst found and copied around: records that will never be
// mirrored. MM2 skips both cases without a word.
type Gap struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Kind is GapDeleted or GapRecreated.
	Kind string `json:"kind"`
	// Position is the stored position (last copied offset).
	Position int64 `json:"position"`
	// From is the first missing offset: position + 1. The missing offsets run from it up to
	// `to` (exclusive), the log start, for a deleted gap; for a recreated one they are in the
	// old partition, whose end is unknown (`to` is -1), and the copy restarts at the new
	// partition's log start.
	//
	// Kind GapDeleted: [From, To) ends at the log start; GapRecreated: To = -1.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Records is the number of missing records, `to` - `from`; -1 when unknown (a recreated
	// gap).
	Records int64 `json:"records"`
}

// String describes the gap in one line.
func (g Gap) String() string {
	if g.Kind == GapRecreated {
		return fmt.Sprintf("%s-%d: stored position %d is beyond the partition's end (topic recreated or truncated): the records after it in the old partition were not mirrored (count unknown)", g.Topic, g.Partition, g.Position)
	}
	return fmt.Sprintf("%s-%d: offsets %d-%d (%d records) were deleted on the source before they were mirrored", g.Topic, g.Partition, g.From, g.To-1, g.Records)
}

// PositionGap is the gap between a stored position and a source partition's log [logStart,
// end), nil when the position is in the log (or there is none: pos < 0).
func PositionGap(tp TP, pos, logStart, end int64) *Gap {
	switch {
	case pos < 0:
		return nil
	case pos+1 > end:
		return &Gap{Topic: tp.Topic, Partition: tp.Partition, Kind: GapRecreated, Position: pos, From: pos + 1, To: -1, Records: -1}
	case pos+1 < logStart:
		return &Gap{Topic: tp.Topic, Partition: tp.Partition, Kind: GapDeleted, Position: pos, From: pos + 1, To: logStart, Records: logStart - pos - 1}
	}
	return nil
}
