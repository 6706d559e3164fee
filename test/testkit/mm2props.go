package testkit

import (
	"fmt"
	"strings"
)

// MM2Properties returns a dedicated-mode MirrorMaker 2 configuration that replicates the given
// topics (a regex list) from cluster "source" at sourceBootstrap to cluster "target", tuned for
// single-broker test clusters: replication factors of 1, short refresh intervals (MM2's default
// is 10 minutes) and a 1 s offset flush (a worker setting: MM2 reads it only under the target
// cluster's prefix).
func MM2Properties(sourceBootstrap, targetBootstrap string, topics ...string) string {
	return fmt.Sprintf(`clusters = source, target
source.bootstrap.servers = %s
target.bootstrap.servers = %s
source->target.enabled = true
source->target.topics = %s
target->source.emit.heartbeats.enabled = false
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset.storage.replication.factor = 1
config.storage.replication.factor = 1
status.storage.replication.factor = 1
refresh.topics.interval.seconds = 2
refresh.groups.interval.seconds = 2
emit.checkpoints.interval.seconds = 2
emit.heartbeats.interval.seconds = 1
target.offset.flush.interval.ms = 1000
sync.topic.acls.enabled = false
`, sourceBootstrap, targetBootstrap, strings.Join(topics, ","))
}
