// Package policy implements MirrorMaker 2's replication policies: how a
// replicated topic is named on the target cluster, how the source cluster of a
// remote topic is recovered from its name, and the names of MM2's internal
// topics (heartbeats, checkpoints, offset syncs).
//
// The behaviour follows Apache Kafka's DefaultReplicationPolicy and
// IdentityReplicationPolicy byte for byte, including Java String.split edge
// cases, because topic names are shared with real MM2 deployments.
package policy

import (
	"fmt"
	"strings"
)

// Class names accepted by New, as written in MM2's replication.policy.class.
const (
	DefaultClass  = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
	IdentityClass = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
)

// DefaultSeparator is MM2's default replication.policy.separator.
const DefaultSeparator = "."

// heartbeats is the name of the heartbeats topic for every policy.
const heartbeats = "heartbeats"

// Policy is MM2's ReplicationPolicy. Methods returning (string, bool) return
// ok=false where Java returns null.
type Policy interface {
	// FormatRemoteTopic is the name of topic from cluster sourceAlias on the
	// target cluster.
	FormatRemoteTopic(sourceAlias, topic string) string
	// TopicSource is the alias of the cluster topic was replicated from;
	// ok=false means topic is not a remote topic. The alias may be empty
	// with ok=true (".a" with the default policy).
	TopicSource(topic string) (alias string, ok bool)
	// UpstreamTopic is the name of topic on the cluster it was replicated
	// from; ok=false means topic is not a remote topic.
	UpstreamTopic(topic string) (string, bool)
	// OriginalTopic follows UpstreamTopic until the topic is not remote
	// any more (or the name does not change).
	OriginalTopic(topic string) string
	// HeartbeatsTopic is the name of the heartbeats topic ("heartbeats").
	HeartbeatsTopic() string
	// OffsetSyncsTopic is the name of the offset-syncs topic for alias
	// (the alias of the other cluster of the flow).
	OffsetSyncsTopic(alias string) string
	// CheckpointsTopic is the name of the checkpoints topic for source alias.
	CheckpointsTopic(alias string) string
	// IsHeartbeatsTopic reports whether topic is a heartbeats topic,
	// local or remote (its original name is "heartbeats").
	IsHeartbeatsTopic(topic string) bool
	// IsCheckpointsTopic reports whether topic is a checkpoints topic.
	IsCheckpointsTopic(topic string) bool
	// IsMM2InternalTopic reports whether topic is one of MM2's internal
	// topics: a name starting with "mm2" and ending with "<sep>internal",
	// or a checkpoints topic.
	IsMM2InternalTopic(topic string) bool
	// IsInternalTopic reports whether topic is internal to MM2 or Kafka
	// (IsMM2InternalTopic, or a name starting with "__" or "."); such
	// topics are never replicated. As in MM2 4.1, other names ending with
	// ".internal" or "-internal" (orders.internal) are ordinary topics.
	IsInternalTopic(topic string) bool
}

// New returns the policy named by class (MM2's replication.policy.class).
// It accepts the fully qualified MM2 class names, their simple names and the
// short forms "default" and "identity" (case-insensitive); an empty class is
// the default policy. sourceAlias is only used by the identity policy (MM2's
// source.cluster.alias). An empty separator means DefaultSeparator.
func New(class, separator string, internalSeparator bool, sourceAlias string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(class)) {
	case "", strings.ToLower(DefaultClass), "defaultreplicationpolicy", "default":
		return NewDefault(separator, internalSeparator), nil
	case strings.ToLower(IdentityClass), "identityreplicationpolicy", "identity":
		return NewIdentity(sourceAlias, separator, internalSeparator), nil
	}
	return nil, fmt.Errorf("replication.policy.class %q is not supported: use %s or %s", class, DefaultClass, IdentityClass)
}

// IsIdentity reports whether class (as New accepts it) names the identity policy; ok is
// false for classes New does not accept.
func IsIdentity(class string) (identity, ok bool) {
	switch strings.ToLower(strings.TrimSpace(class)) {
	case "", strings.ToLower(DefaultClass), "defaultreplicationpolicy", "default":
		return false, true
	case strings.ToLower(IdentityClass), "identityreplicationpolicy", "identity":
		return true, true
	}
	return false, false
}

// Default is MM2's DefaultReplicationPolicy: remote topics are named
// "<source alias><separator><topic>".
type Default struct {
	sep         string
	internalSep string
}

// NewDefault returns the default policy. separator is
// replication.policy.separator ("" means DefaultSeparator); internalSeparator
// is replication.policy.internal.topic.separator.enabled (KIP-949): when false,
// internal topic names use "." whatever the separator.
func NewDefault(separator string, internalSeparator bool) *Default {
	if separator == "" {
		separator = DefaultSeparator
	}
	d := &Default{sep: separator, internalSep: "."}
	if internalSeparator {
		d.internalSep = separator
	}
	return d
}

// Separator is the separator used in remote topic names.
func (d *Default) Separator() string { return d.sep }

// FormatRemoteTopic implements Policy.
func (d *Default) FormatRemoteTopic(sourceAlias, topic string) string {
	return sourceAlias + d.sep + topic
}

// TopicSource implements Policy with Java String.split semantics: trailing
// empty pieces are dropped, and fewer than two pieces means "not remote".
func (d *Default) TopicSource(topic string) (string, bool) {
	parts := javaSplit(topic, d.sep)
	if len(parts) < 2 {
		return "", false
	}
	return parts[0], true
}

// UpstreamTopic implements Policy.
func (d *Default) UpstreamTopic(topic string) (string, bool) {
	src, ok := d.TopicSource(topic)
	if !ok {
		return "", false
	}
	return topic[len(src)+len(d.sep):], true
}

// OriginalTopic implements Policy.
func (d *Default) OriginalTopic(topic string) string { return originalTopic(d, topic) }

// HeartbeatsTopic implements Policy.
func (d *Default) HeartbeatsTopic() string { return heartbeats }

// OffsetSyncsTopic implements Policy.
func (d *Default) OffsetSyncsTopic(alias string) string {
	return "mm2-offset-syncs" + d.internalSep + alias + d.internalSuffix()
}

// CheckpointsTopic implements Policy.
func (d *Default) CheckpointsTopic(alias string) string {
	return alias + d.checkpointsSuffix()
}

// IsHeartbeatsTopic implements Policy.
func (d *Default) IsHeartbeatsTopic(topic string) bool {
	return d.OriginalTopic(topic) == heartbeats
}

// IsCheckpointsTopic implements Policy.
func (d *Default) IsCheckpointsTopic(topic string) bool {
	return strings.HasSuffix(topic, d.checkpointsSuffix())
}

// IsMM2InternalTopic implements Policy.
func (d *Default) IsMM2InternalTopic(topic string) bool {
	return strings.HasPrefix(topic, "mm2") && strings.HasSuffix(topic, d.internalSuffix()) || d.IsCheckpointsTopic(topic)
}

// IsInternalTopic implements Policy.
func (d *Default) IsInternalTopic(topic string) bool { return isInternal(d, topic) }

func (d *Default) internalSuffix() string { return d.internalSep + "internal" }
func (d *Default) checkpointsSuffix() string {
	return d.internalSep + "checkpoints" + d.internalSuffix()
}

// Identity is MM2's IdentityReplicationPolicy (KIP-690): topics keep their
// names, except topics whose name ends with "heartbeats", which are named as
// by the default policy. It cannot detect replication cycles.
type Identity struct {
	Default
	sourceAlias string
}

// NewIdentity returns the identity policy. sourceAlias is MM2's
// source.cluster.alias, returned by TopicSource for every non-heartbeats topic;
// empty means not configured (TopicSource then reports ok=false, as Java
// returns null).
func NewIdentity(sourceAlias, separator string, internalSeparator bool) *Identity {
	return &Identity{Default: *NewDefault(separator, internalSeparator), sourceAlias: sourceAlias}
}

func looksLikeHeartbeat(topic string) bool { return strings.HasSuffix(topic, heartbeats) }

// FormatRemoteTopic implements Policy.
func (p *Identity) FormatRemoteTopic(sourceAlias, topic string) string {
	if looksLikeHeartbeat(topic) {
		return p.Default.FormatRemoteTopic(sourceAlias, topic)
	}
	return topic
}

// TopicSource implements Policy.
func (p *Identity) TopicSource(topic string) (string, bool) {
	if looksLikeHeartbeat(topic) {
		return p.Default.TopicSource(topic)
	}
	return p.sourceAlias, p.sourceAlias != ""
}

// UpstreamTopic implements Policy.
func (p *Identity) UpstreamTopic(topic string) (string, bool) {
	if looksLikeHeartbeat(topic) {
		return p.Default.UpstreamTopic(topic)
	}
	return topic, true
}

// OriginalTopic implements Policy.
func (p *Identity) OriginalTopic(topic string) string {
	if looksLikeHeartbeat(topic) {
		// Java calls the overridden upstreamTopic from the inherited
		// originalTopic, so walk with p, not p.Default.
		return originalTopic(p, topic)
	}
	return topic
}

// IsHeartbeatsTopic implements Policy.
func (p *Identity) IsHeartbeatsTopic(topic string) bool {
	return p.OriginalTopic(topic) == heartbeats
}

// IsInternalTopic implements Policy.
func (p *Identity) IsInternalTopic(topic string) bool { return isInternal(p, topic) }

// originalTopic is ReplicationPolicy.originalTopic: follow upstreamTopic
// until it is null or unchanged.
func originalTopic(p Policy, topic string) string {
	for {
		up, ok := p.UpstreamTopic(topic)
		if !ok || up == topic {
			return topic
		}
		topic = up
	}
}

// isInternal is ReplicationPolicy.isInternalTopic of Kafka 4.1: MM2's own
// topics and Kafka's ("__" or "." prefix). Kafka 3.x also treated every name
// ending with ".internal" or "-internal" as internal; 4.x does not.
func isInternal(p Policy, topic string) bool {
	return p.IsMM2InternalTopic(topic) ||
		strings.HasPrefix(topic, "__") || strings.HasPrefix(topic, ".")
}

// IsCycle reports whether replicating topic to the cluster targetAlias would
// close a replication cycle: some hop in topic's name came from targetAlias
// (MirrorSourceConnector.isCycle). The identity policy never detects cycles
// except through heartbeats names.
func IsCycle(p Policy, targetAlias, topic string) bool {
	for {
		src, ok := p.TopicSource(topic)
		if !ok {
			return false
		}
		if src == targetAlias {
			return true
		}
		up, ok := p.UpstreamTopic(topic)
		if !ok || up == topic {
			return false
		}
		topic = up
	}
}

// javaSplit splits s around the non-empty literal sep like Java's
// String.split(Pattern.quote(sep)): a string without sep is one piece, and
// trailing empty pieces are removed (so "a." is ["a"] and ".." is []).
func javaSplit(s, sep string) []string {
	parts := strings.Split(s, sep)
	if len(parts) == 1 {
		return parts // no match: Java returns the input, even when empty
	}
	n := len(parts)
	for n > 0 && parts[n-1] == "" {
		n--
	}
	return parts[:n]
}

// CheckAliases checks a flow's source and target cluster aliases: both set and different.
// what names the options in the error ("checkpoint options").
func CheckAliases(what, source, target string) error {
	if source == "" || target == "" {
		return fmt.Errorf("%s: source and target aliases are required", what)
	}
	if source == target {
		return fmt.Errorf("%s: source and target alias are both %q", what, source)
	}
	return nil
}

// CheckFlow checks a flow's aliases as CheckAliases does and returns p, or MM2's default
// replication policy (DefaultReplicationPolicy, separator ".") when p is nil: the defaults
// every job's options share.
func CheckFlow(what, source, target string, p Policy) (Policy, error) {
	if err := CheckAliases(what, source, target); err != nil {
		return nil, err
	}
	if p == nil {
		p = NewDefault(DefaultSeparator, true)
	}
	return p, nil
}

// Offset-syncs topic locations: the values of MM2's offset-syncs.topic.location.
const (
	SyncsOnSource = "source"
	SyncsOnTarget = "target"
)

// SyncsLocation normalises an offset-syncs.topic.location value: SyncsOnSource (also for
// ""), SyncsOnTarget, or an error naming the setting; what names the options ("engine
// options").
func SyncsLocation(what, v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", SyncsOnSource:
		return SyncsOnSource, nil
	case SyncsOnTarget:
		return SyncsOnTarget, nil
	}
	return "", fmt.Errorf("%s: offset-syncs.topic.location %q: want source or target", what, v)
}
