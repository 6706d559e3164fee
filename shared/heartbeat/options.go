package heartbeat

import (
	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/round"
)

// ClientFunc builds a franz-go client for one cluster with extra options
// (cluster.Dialer makes one from a cluster's settings).
type ClientFunc = cluster.ClientFunc

// Options configure a Job. Zero values mean the default named in each field's comment.
type Options struct {
	// Flow names the flow and its topics; its WriteConnectOffsets writes MM2's
	// MirrorHeartbeatConnector source offset
	// (["MirrorHeartbeatConnector",{"sourceClusterAlias":s,"targetClusterAlias":t}] =
	// {"offset":0}) next to each heartbeat, into the Connect offsets topic of the herder
	// s->t on the cluster written to: the flow's OffsetStorageTopic on the target,
	// mm2-offsets.<TargetAlias>.internal on the source for the reverse heartbeat.
	round.Flow
	// HeartbeatsTopicReplicationFactor for created heartbeats topics; 0 or -1
	// means the broker's default.
	HeartbeatsTopicReplicationFactor int16
	// TargetTopicConfigs and SourceTopicConfigs are the configs of a created
	// heartbeats topic on each cluster. Nil means cleanup.policy=compact, as
	// MM2 creates it; an Event Hubs namespace without compaction gets an
	// empty map (cluster.Profile).
	TargetTopicConfigs, SourceTopicConfigs map[string]*string
	// DisableHeartbeats is emit.heartbeats.enabled=false: no heartbeat to the
	// target.
	DisableHeartbeats bool
	// DisableReverse turns off the reverse heartbeat to the source (MM2:
	// target->source.emit.heartbeats.enabled=false).
	DisableReverse bool
}

// Validate checks the options as New does, without building anything.
func (o Options) Validate() error { return o.withDefaults() }

func (o *Options) withDefaults() error {
	if err := o.Flow.Defaults("heartbeat options"); err != nil {
		return err
	}
	compact := "compact"
	if o.TargetTopicConfigs == nil {
		o.TargetTopicConfigs = map[string]*string{"cleanup.policy": &compact}
	}
	if o.SourceTopicConfigs == nil {
		o.SourceTopicConfigs = map[string]*string{"cleanup.policy": &compact}
	}
	if o.HeartbeatsTopicReplicationFactor == 0 {
		o.HeartbeatsTopicReplicationFactor = -1
	}
	return nil
}
