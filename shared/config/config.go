// Package config loads mm2go's settings: defaults, then an MM2 properties
// file (MM2_CONFIG_FILE, the file users ran connect-mirror-maker.sh with),
// then environment variables, which win.
//
// Every setting has an environment variable named after its MM2 property:
// a flow key <key> is MM2_<KEY> and a cluster key <alias>.<key> is
// MM2_SOURCE_<KEY> / MM2_TARGET_<KEY>, where KEY is the key upper-cased with
// '.' and '-' replaced by '_' (offset-syncs.topic.location is
// MM2_OFFSET_SYNCS_TOPIC_LOCATION). The struct tags below are envconfig tags,
// so envconfig's usage printer lists them (see Usage); Load implements the
// layering itself because envconfig can only read the process environment.
package config

import (
	"time"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/secret"
	"github.com/mm2go/mm2go/shared/serve"
)

// Secret is a value that never prints itself; see package secret.
type Secret = secret.Secret

// Tags used besides envconfig's (envconfig, default, desc, ignored):
//
//	mm2:"key"          the MM2 property (below "<alias>." for cluster fields)
//	scope:"..."        where the file value comes from: "" (flow key:
//	                   <src>-><tgt>.<key>, then <key>), "worker" (<key>, then
//	                   <target>.<key>, like MM2's Connect worker config), "env"
//	                   (environment only), "special" (handled in code)
//	defaultdoc:"..."   default shown by Usage when it is computed, not a tag
//	notrim:"true"      keep surrounding whitespace
//	role:"source"      on a cluster.Settings field: which cluster it is
//	fn:"mirror,..."    the functions that read it (on a struct: its fields); none: every
//	                   function. -h of a function lists only the settings it reads, and
//	                   test/doccheck checks the tags against the code that reads them
//	cmd:"run,serve"    the sub-commands that read it; none: every sub-command. A
//	                   sub-command's -h (mirror serve -h) lists only what it reads

// Config is everything one mm2go function needs for one flow
// <SourceAlias>-><TargetAlias>.
type Config struct {
	// SourceAlias and TargetAlias are the flow's cluster aliases, from the
	// properties file's enabled flow (or MM2_FLOW) unless set.
	SourceAlias string `envconfig:"MM2_SOURCE_ALIAS" mm2:"source.cluster.alias" scope:"special" default:"source" desc:"alias of the source cluster (from the file's enabled flow when one is loaded)"`
	TargetAlias string `envconfig:"MM2_TARGET_ALIAS" mm2:"target.cluster.alias" scope:"special" default:"target" desc:"alias of the target cluster"`

	// Source and Target are the clusters' connection settings; Load sets
	// their Alias and normalizes them (cluster.Settings.Normalize).
	Source cluster.Settings `envconfig:"MM2_SOURCE" role:"source"`
	Target cluster.Settings `envconfig:"MM2_TARGET" role:"target"`

	// Filters (MM2 regex lists; see package filter).
	Topics                  string `envconfig:"MM2_TOPICS" fn:"mirror,checkpoint" mm2:"topics" default:".*" desc:"topics to replicate: comma separated regexes, whole-name match"`
	TopicsExclude           string `envconfig:"MM2_TOPICS_EXCLUDE" fn:"mirror,checkpoint" mm2:"topics.exclude" default:"mm2.*\\.internal, .*\\.replica, __.*" desc:"topics never replicated (wins over topics)"`
	Groups                  string `envconfig:"MM2_GROUPS" fn:"mirror,checkpoint" mm2:"groups" default:".*" desc:"consumer groups to checkpoint: comma separated regexes"`
	GroupsExclude           string `envconfig:"MM2_GROUPS_EXCLUDE" fn:"mirror,checkpoint" mm2:"groups.exclude" default:"console-consumer-.*, connect-.*, __.*" desc:"consumer groups never checkpointed"`
	ConfigPropertiesExclude string `envconfig:"MM2_CONFIG_PROPERTIES_EXCLUDE" fn:"mirror" mm2:"config.properties.exclude" default:"follower\\.replication\\.throttled\\.replicas, leader\\.replication\\.throttled\\.replicas, message\\.timestamp\\.difference\\.max\\.ms, message\\.timestamp\\.type, unclean\\.leader\\.election\\.enable, min\\.insync\\.replicas" desc:"topic configs never copied to the target"`

	// Replication policy.
	ReplicationPolicyClass                         string `envconfig:"MM2_REPLICATION_POLICY_CLASS" mm2:"replication.policy.class" default:"org.apache.kafka.connect.mirror.DefaultReplicationPolicy" desc:"DefaultReplicationPolicy (prefix remote topics with the source alias) or IdentityReplicationPolicy (keep names)"`
	ReplicationPolicySeparator                     string `envconfig:"MM2_REPLICATION_POLICY_SEPARATOR" mm2:"replication.policy.separator" notrim:"true" default:"." desc:"separator between alias and topic in remote topic names"`
	ReplicationPolicyInternalTopicSeparatorEnabled bool   `envconfig:"MM2_REPLICATION_POLICY_INTERNAL_TOPIC_SEPARATOR_ENABLED" mm2:"replication.policy.internal.topic.separator.enabled" default:"true" desc:"use the separator in internal topic names too (false: '.' as before Kafka 3.1)"`

	// Offset syncs and checkpoints.
	OffsetSyncsTopicLocation string `envconfig:"MM2_OFFSET_SYNCS_TOPIC_LOCATION" fn:"mirror,checkpoint" mm2:"offset-syncs.topic.location" default:"source" desc:"cluster holding the offset-syncs topic: source or target"`
	OffsetLagMax             int64  `envconfig:"MM2_OFFSET_LAG_MAX" fn:"mirror" mm2:"offset.lag.max" default:"100" desc:"max records between offset syncs"`
	EmitOffsetSyncsEnabled   bool   `envconfig:"MM2_EMIT_OFFSET_SYNCS_ENABLED" fn:"mirror,checkpoint" mm2:"emit.offset-syncs.enabled" default:"true" desc:"write offset syncs (false: no offset-syncs topic, and checkpoint refuses to run, as in MM2)"`
	EmitCheckpointsEnabled   bool   `envconfig:"MM2_EMIT_CHECKPOINTS_ENABLED" fn:"checkpoint" mm2:"emit.checkpoints.enabled" default:"true" desc:"write consumer group checkpoints"`
	SyncGroupOffsetsEnabled  bool   `envconfig:"MM2_SYNC_GROUP_OFFSETS_ENABLED" fn:"checkpoint" mm2:"sync.group.offsets.enabled" default:"false" desc:"commit translated offsets of inactive groups on the target"`

	// Topic creation.
	ReplicationFactor                 int  `envconfig:"MM2_REPLICATION_FACTOR" fn:"mirror" mm2:"replication.factor" default:"2" desc:"replication factor of remote topics (-1: broker default)"`
	OffsetSyncsTopicReplicationFactor int  `envconfig:"MM2_OFFSET_SYNCS_TOPIC_REPLICATION_FACTOR" fn:"mirror" mm2:"offset-syncs.topic.replication.factor" default:"3" desc:"replication factor of the offset-syncs topic"`
	CheckpointsTopicReplicationFactor int  `envconfig:"MM2_CHECKPOINTS_TOPIC_REPLICATION_FACTOR" fn:"mirror,checkpoint" mm2:"checkpoints.topic.replication.factor" default:"3" desc:"replication factor of the checkpoints topic"`
	HeartbeatsTopicReplicationFactor  int  `envconfig:"MM2_HEARTBEATS_TOPIC_REPLICATION_FACTOR" fn:"heartbeat" mm2:"heartbeats.topic.replication.factor" default:"3" desc:"replication factor of the heartbeats topic"`
	SyncTopicConfigsEnabled           bool `envconfig:"MM2_SYNC_TOPIC_CONFIGS_ENABLED" fn:"mirror" mm2:"sync.topic.configs.enabled" default:"true" desc:"copy topic configs to remote topics"`
	RefreshTopicsEnabled              bool `envconfig:"MM2_REFRESH_TOPICS_ENABLED" fn:"mirror" mm2:"refresh.topics.enabled" default:"true" desc:"accepted for MM2 files: every run looks for new topics and partitions, so false has no effect (WARN)"`
	SyncTopicAclsEnabled              bool `envconfig:"MM2_SYNC_TOPIC_ACLS_ENABLED" fn:"mirror" mm2:"sync.topic.acls.enabled" default:"true" desc:"copy the source's topic ACLs (LITERAL, not ALLOW WRITE; ALLOW ALL becomes READ) to the remote topics, once per run"`

	// Positions (Connect offsets topic, shared with MM2).
	OffsetStorageTopic             string `envconfig:"MM2_OFFSET_STORAGE_TOPIC" mm2:"offset.storage.topic" scope:"worker" defaultdoc:"mm2-offsets.<source alias>.internal" desc:"topic on the target holding replication positions (MM2's Connect offsets topic)"`
	OffsetStoragePartitions        int    `envconfig:"MM2_OFFSET_STORAGE_PARTITIONS" fn:"mirror" mm2:"offset.storage.partitions" scope:"worker" default:"25" desc:"partitions of the offsets topic when created (-1: broker default)"`
	OffsetStorageReplicationFactor int    `envconfig:"MM2_OFFSET_STORAGE_REPLICATION_FACTOR" fn:"mirror" mm2:"offset.storage.replication.factor" scope:"worker" default:"3" desc:"replication factor of the offsets topic when created (-1: broker default)"`

	// Heartbeats.
	EmitHeartbeatsEnabled        bool `envconfig:"MM2_EMIT_HEARTBEATS_ENABLED" fn:"heartbeat" mm2:"emit.heartbeats.enabled" default:"true" desc:"write heartbeats to the target"`
	HeartbeatsReplicationEnabled bool `envconfig:"MM2_HEARTBEATS_REPLICATION_ENABLED" fn:"mirror" mm2:"heartbeats.replication.enabled" default:"true" desc:"replicate heartbeats topics even when topics does not match them"`
	// ReverseHeartbeatsEnabled is MM2's <target>-><source>.emit.heartbeats.enabled:
	// MM2 also emits heartbeats to the source cluster unless disabled.
	ReverseHeartbeatsEnabled bool `envconfig:"MM2_REVERSE_HEARTBEATS_ENABLED" fn:"heartbeat" mm2:"<target>-><source>.emit.heartbeats.enabled" scope:"special" default:"true" desc:"also write heartbeats to the source cluster (MM2's reverse heartbeat flow)"`

	// Client overrides that matter to a replicator (the source's consumer, the target's
	// producer); see ConsumerOverrides and ProducerOverrides.
	SourceConsumer ConsumerOverrides `envconfig:"MM2_SOURCE" role:"source" fn:"mirror"`
	TargetProducer ProducerOverrides `envconfig:"MM2_TARGET" role:"target" fn:"mirror"`

	// mm2go's own settings.
	ExactlyOnce           bool          `envconfig:"MM2_EXACTLY_ONCE" fn:"mirror" mm2:"exactly.once" scope:"special" default:"false" desc:"transactional copy with positions committed atomically (exactly.once.source.support=enabled in an MM2 file turns it on)"`
	BurstMaxDuration      time.Duration `envconfig:"MM2_BURST_MAX_DURATION" cmd:"run,serve" mm2:"burst.max.duration" default:"0" desc:"max time one invocation copies, Go duration (0: until caught up); for checkpoint and heartbeat run, how long a round retries retriable errors (0: 2m)"`
	BurstMaxRecords       int64         `envconfig:"MM2_BURST_MAX_RECORDS" cmd:"run,serve" fn:"mirror" mm2:"burst.max.records" default:"0" desc:"max records one invocation copies (0: no limit)"`
	InflightMaxBytes      int64         `envconfig:"MM2_INFLIGHT_MAX_BYTES" fn:"mirror" mm2:"inflight.max.bytes" default:"0" desc:"max bytes of records read from the source and not yet acknowledged by the target (0: 8 MiB over up to 16 partitions, down to 2 MiB over 64 and more; exactly-once: 8 MiB); more needs more memory: raise GOMEMLIMIT (40 MiB by default) with it"`
	ForwardBatches        bool          `envconfig:"MM2_FORWARD_BATCHES" fn:"mirror" mm2:"forward.batches" default:"true" desc:"plain bursts (not exactly-once, burst groups, read_committed, record budgets, serve or Event Hubs targets) produce the source's record batches as they are where the target producer would write the same records (same codec, no compaction gaps, CreateTime), without decoding them; false: always record by record"`
	EventMode             string        `envconfig:"MM2_EVENT_MODE" cmd:"serve" fn:"mirror" mm2:"event.mode" default:"fetch" desc:"fetch: an event starts a fetch burst; payload: events carry the records"`
	BurstEventTypes       []string      `envconfig:"MM2_BURST_EVENT_TYPES" cmd:"serve" mm2:"burst.event.types" desc:"serve: CloudEvent types that start a burst (mirror) or a round (checkpoint, heartbeat) besides PingSource's dev.knative.sources.ping, comma separated (empty: any type from an authenticated sender, PingSource's only without sender authentication)"`
	BurstGroup            string        `envconfig:"MM2_BURST_GROUP" cmd:"run" fn:"mirror" mm2:"burst.group" desc:"source consumer group that splits partitions between concurrent mirror runs (used for assignment only, never for offsets; empty: this run takes every partition)"`
	LagGroup              string        `envconfig:"MM2_LAG_GROUP" fn:"mirror" mm2:"lag.group" desc:"source consumer group mirror commits its positions to after each copy, for lag-based scaling and monitoring (KEDA kafka scaler); never read back (empty: none)"`
	CheckpointTranslation string        `envconfig:"MM2_CHECKPOINT_TRANSLATION" fn:"checkpoint" mm2:"checkpoint.translation" default:"precise" desc:"precise: the closest offset sync still in the offset-syncs topic, at most offset.lag.max re-reads per partition after a failover on a 1:1 copy, never a skipped record; mm2: MM2's 64-slot translation (checkpoints identical to MM2's)"`
	EventKeyType          string        `envconfig:"MM2_EVENT_KEY_TYPE" cmd:"serve" fn:"mirror" mm2:"event.key.type" default:"string" desc:"payload mode: the KafkaSource's key-type label (string, int, float or byte-array)"`
	LogLevel              string        `envconfig:"MM2_LOG_LEVEL" mm2:"log.level" default:"info" desc:"debug, info, warn or error"`
	LogFormat             string        `envconfig:"MM2_LOG_FORMAT" mm2:"log.format" default:"auto" desc:"auto (json unless stderr is a terminal), json or text"`
	Port                  int           `envconfig:"PORT" cmd:"serve" scope:"env" default:"8080" desc:"HTTP port (set by Knative)"`

	// Sender authentication of the serve sub-commands (shared/serve, docs/events.md).
	ServeOIDCIssuer            string   `envconfig:"MM2_SERVE_OIDC_ISSUER" cmd:"serve" scope:"env" desc:"serve: accept only events carrying an OIDC bearer token (Knative Eventing sender authentication) from this issuer URL, e.g. the cluster's service account issuer https://kubernetes.default.svc.cluster.local; payload mode requires https (empty: no sender authentication)"`
	ServeOIDCAudience          string   `envconfig:"MM2_SERVE_OIDC_AUDIENCE" cmd:"serve" scope:"env" desc:"serve: the audience the tokens must be issued for: the sink audience set on the KafkaSource/PingSource (required with MM2_SERVE_OIDC_ISSUER)"`
	ServeOIDCAllowedSubjects   []string `envconfig:"MM2_SERVE_OIDC_ALLOWED_SUBJECTS" cmd:"serve" scope:"env" desc:"serve: token subjects accepted, comma separated, e.g. system:serviceaccount:<namespace>:<service account>; a trailing * matches a prefix (empty: any subject of the issuer)"`
	ServeOIDCSubjectEventTypes []string `envconfig:"MM2_SERVE_OIDC_SUBJECT_EVENT_TYPES" cmd:"serve" scope:"env" desc:"serve: event types each sender may send, as Knative EventPolicy filters: comma separated <subject>=<type>|<type>..., a trailing * on a subject or type matches a prefix, e.g. system:serviceaccount:mm2go:mm2go-burst-oidc-sources.knative.dev-pingsource=dev.knative.sources.ping; another type from that subject gets 403 (empty, or a subject no entry names: any type)"`
	ServeOIDCCAFile            string   `envconfig:"MM2_SERVE_OIDC_CA_FILE" cmd:"serve" scope:"env" desc:"serve: PEM CA bundle trusted for the issuer's HTTPS endpoints, e.g. /var/run/secrets/kubernetes.io/serviceaccount/ca.crt (empty: system roots)"`
	ServeOIDCIssuerTokenFile   string   `envconfig:"MM2_SERVE_OIDC_ISSUER_TOKEN_FILE" cmd:"serve" scope:"env" desc:"serve: bearer token file sent with the issuer's discovery and JWKS requests (over https, to the issuer's host and the jwks_uri host its discovery names), for a Kubernetes API server issuer that serves them to authenticated callers only: /var/run/secrets/kubernetes.io/serviceaccount/token (empty: none)"`
	ConfigFile                 string   `envconfig:"MM2_CONFIG_FILE" scope:"env" desc:"MM2 properties file (connect-mirror-maker.sh's mm2.properties) read before the environment"`
	AutomaticConfigProviders   string   `envconfig:"MM2_AUTOMATIC_CONFIG_PROVIDERS" scope:"env" defaultdoc:"unset: every provider" desc:"config provider classes the MM2 properties file may use, comma separated, as Kafka's system property org.apache.kafka.automatic.config.providers: e.g. org.apache.kafka.common.config.provider.FileConfigProvider; none (or empty) forbids them all, so ${...} references stay as written; a config.providers.<name>.class not listed is an error"`
	Flow                       string   `envconfig:"MM2_FLOW" scope:"env" desc:"flow to run, e.g. primary->backup, when the file enables several (unset: run runs them all; serve and the other commands need one)"`
}

// SenderAuth is the serve sub-commands' sender authentication settings.
func (c *Config) SenderAuth() serve.SenderAuthConfig {
	return serve.SenderAuthConfig{Issuer: c.ServeOIDCIssuer, Audience: c.ServeOIDCAudience,
		AllowedSubjects: c.ServeOIDCAllowedSubjects, CAFile: c.ServeOIDCCAFile, TokenFile: c.ServeOIDCIssuerTokenFile,
		SubjectEventTypes: c.ServeOIDCSubjectEventTypes}
}

// ConnectError explains a failed connection to the flow's "source" or "target" cluster with
// cluster.ConnectError: the alias and bootstrap address, never a secret.
func (c *Config) ConnectError(role string, err error) error {
	if role == "source" {
		return cluster.ConnectError(c.Source, err)
	}
	return cluster.ConnectError(c.Target, err)
}
