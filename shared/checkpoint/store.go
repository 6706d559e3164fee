package checkpoint

import (
	"sort"

	"github.com/mm2go/mm2go/shared/mm2"
)

// partitionKey names a target-side topic partition.
type partitionKey struct {
	topic     string
	partition int32
}

// checkpointStore is MM2's CheckpointStore: the last checkpoint written for
// each (group, target topic, partition).
type checkpointStore struct {
	groups map[string]map[partitionKey]mm2.Checkpoint
	n      int
}

func newCheckpointStore() *checkpointStore {
	return &checkpointStore{groups: map[string]map[partitionKey]mm2.Checkpoint{}}
}

// put records c as the latest checkpoint of its group and partition.
func (s *checkpointStore) put(c mm2.Checkpoint) {
	g := s.groups[c.Group]
	if g == nil {
		g = map[partitionKey]mm2.Checkpoint{}
		s.groups[c.Group] = g
	}
	k := partitionKey{c.Topic, c.Partition}
	if _, ok := g[k]; !ok {
		s.n++
	}
	g[k] = c
}

// get returns the stored checkpoint of group for a target partition.
func (s *checkpointStore) get(group, topic string, partition int32) (mm2.Checkpoint, bool) {
	c, ok := s.groups[group][partitionKey{topic, partition}]
	return c, ok
}

// groupNames returns the groups that have at least one checkpoint, in no particular order.
func (s *checkpointStore) groupNames() []string {
	out := make([]string, 0, len(s.groups))
	for g := range s.groups {
		out = append(out, g)
	}
	return out
}

// len is the number of (group, partition) entries.
func (s *checkpointStore) len() int { return s.n }

// group returns the checkpoints of group sorted by topic and partition.
func (s *checkpointStore) group(group string) []mm2.Checkpoint {
	g := s.groups[group]
	out := make([]mm2.Checkpoint, 0, len(g))
	for _, c := range g {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// moreRecent is MirrorCheckpointTask.checkpointIsMoreRecent: c is worth
// emitting if nothing is stored for its group and partition, if the group
// rewound on the source (upstream went down), or if the downstream offset
// went up. An equal downstream is a duplicate; a lower downstream with a
// non-lower upstream would rewind the target and is dropped.
func moreRecent(last mm2.Checkpoint, stored bool, c mm2.Checkpoint) bool {
	switch {
	case !stored:
		return true
	case c.UpstreamOffset < last.UpstreamOffset:
		return true
	case c.DownstreamOffset > last.DownstreamOffset:
		return true
	}
	return false
}
