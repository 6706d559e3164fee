package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Event Hubs profile modes, the values of MM2_<CLUSTER>_EVENTHUBS_PROFILE.
const (
	// ProfileAuto (the default) turns the profile on for Event Hubs hosts
	// (*.servicebus.*, any Azure cloud) and Event Hubs connection strings.
	ProfileAuto = "auto"
	// ProfileOn forces the profile on (e.g. a private endpoint's own name).
	ProfileOn = "on"
	// ProfileOff forces it off.
	ProfileOff = "off"
)

// Event Hubs tiers, the values of MM2_<CLUSTER>_EVENTHUBS_TIER. They set the
// default topic and partition budgets and whether compaction and gzip exist.
const (
	TierStandard  = "standard"
	TierPremium   = "premium"
	TierDedicated = "dedicated"
)

// Event Hubs request limits.
const (
	// EventHubsMaxRequestBytes is the size above which Event Hubs closes the
	// connection instead of answering a request (Microsoft: max.request.size
	// must stay below it).
	EventHubsMaxRequestBytes = 1_046_528
	// EventHubsProduceBytes is the produce request (and batch) cap the
	// profile sets, Microsoft's recommended max.request.size.
	EventHubsProduceBytes = 1_000_000
	// EventHubsIdleCut is how long Azure's load balancer keeps an idle TCP
	// connection before dropping it.
	EventHubsIdleCut = 240 * time.Second
)

type tierLimits struct {
	topics, partitions int
	compaction, gzip   bool
	// grow: event hubs can gain partitions (not on Standard).
	grow bool
}

// tiers holds per-namespace defaults (Microsoft's quotas page, 2026): Premium
// and Dedicated scale with processing/capacity units, so their topic budget
// is for one unit; set EVENTHUBS_MAX_TOPICS for more. Compaction on Standard
// is documented inconsistently (older pages say Premium/Dedicated only), so
// the Standard default is no compaction.
var tiers = map[string]tierLimits{
	TierStandard:  {topics: 10, partitions: 32, compaction: false, gzip: false, grow: false},
	TierPremium:   {topics: 100, partitions: 100, compaction: true, gzip: true, grow: true},
	TierDedicated: {topics: 1000, partitions: 1024, compaction: true, gzip: true, grow: true},
}

// ProfileConfig is one cluster's Event Hubs profile settings
// (MM2_<CLUSTER>_EVENTHUBS_*). Zero values mean the defaults.
type ProfileConfig struct {
	// Mode is auto (default), on or off.
	Mode string `envconfig:"PROFILE" mm2:"profile" defaultdoc:"auto" desc:"Event Hubs profile: auto (on for *.servicebus.* hosts and connection strings), on or off"`
	// Tier is standard (default), premium or dedicated.
	Tier string `envconfig:"TIER" mm2:"tier" defaultdoc:"standard" desc:"Event Hubs tier for the profile's limits: standard, premium or dedicated"`
	// MaxTopics overrides the tier's event hubs per namespace; 0: the tier's.
	MaxTopics int `envconfig:"MAX_TOPICS" mm2:"max.topics" defaultdoc:"0" desc:"event hubs (topics) the namespace allows (0: the tier's: 10, 100 per PU, 1000)"`
	// MaxPartitions overrides the tier's partitions per event hub; 0: the tier's.
	MaxPartitions int `envconfig:"MAX_PARTITIONS" mm2:"max.partitions" defaultdoc:"0" desc:"partitions per event hub (0: the tier's: 32, 100, 1024)"`
	// Compaction says whether internal topics are created compacted:
	// "true", "false", or empty for the tier's default.
	Compaction string `envconfig:"COMPACTION" mm2:"compaction" defaultdoc:"false on standard, true on premium/dedicated" desc:"create internal topics compacted: true or false"`
}

func (pc *ProfileConfig) normalize(bad func(key, format string, args ...any)) {
	pc.Mode = strings.ToLower(strings.TrimSpace(pc.Mode))
	switch pc.Mode {
	case "", ProfileAuto, ProfileOn, ProfileOff:
	default:
		bad("eventhubs.profile", "unknown value %q (want auto, on or off)", pc.Mode)
	}
	pc.Tier = strings.ToLower(strings.TrimSpace(pc.Tier))
	if _, ok := tiers[pc.Tier]; !ok && pc.Tier != "" {
		bad("eventhubs.tier", "unknown value %q (want standard, premium or dedicated)", pc.Tier)
	}
	if pc.MaxTopics < 0 {
		bad("eventhubs.max.topics", "must not be negative")
	}
	if pc.MaxPartitions < 0 {
		bad("eventhubs.max.partitions", "must not be negative")
	}
	pc.Compaction = strings.ToLower(strings.TrimSpace(pc.Compaction))
	if pc.Compaction != "" {
		if _, err := strconv.ParseBool(pc.Compaction); err != nil {
			bad("eventhubs.compaction", "%q is not true or false", pc.Compaction)
		}
	}
}

// IsEventHubsHost reports whether host (with or without port) is an Event
// Hubs namespace host of any Azure cloud: <ns>.servicebus.windows.net,
// .servicebus.chinacloudapi.cn, .servicebus.usgovcloudapi.net, ...
func IsEventHubsHost(host string) bool {
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	return strings.Contains(strings.ToLower(host), ".servicebus.")
}

// Profile is what a cluster allows, for the engine and the client options.
// The zero Profile is a plain Kafka cluster: everything allowed, no limits.
type Profile struct {
	// Cluster is the alias, for messages.
	Cluster string
	// EventHubs is true when the Event Hubs profile is on.
	EventHubs bool
	// Reason says why the profile is on ("host ns.servicebus.windows.net",
	// "eventhubs.profile=on", "Event Hubs connection string").
	Reason string
	// Tier is the Event Hubs tier the limits come from.
	Tier string
	// SyncConfigs is false when topic configs must not be read from or
	// altered on this cluster (Event Hubs lacks AlterConfigs and supports
	// DescribeConfigs only partly): create topics without copied configs and
	// skip topic config sync.
	SyncConfigs bool
	// SyncACLs is false when ACL APIs are missing (Event Hubs authorizes with
	// SAS policies or Azure RBAC).
	SyncACLs bool
	// CompactInternalTopics says whether internal topics (positions,
	// offset syncs, checkpoints, heartbeats) are created compacted.
	CompactInternalTopics bool
	// MaxPartitionsPerTopic and MaxTopics are the namespace's budgets; 0
	// means unlimited.
	MaxPartitionsPerTopic int32
	MaxTopics             int
	// FixedPartitions is true where an existing topic cannot gain partitions (Event Hubs
	// Standard: the partition count is fixed when the event hub is created).
	FixedPartitions bool
	// GroupsDeadMeansIdle is true where consumer groups without members are
	// reported Dead rather than Empty (Event Hubs): treat Dead as idle.
	GroupsDeadMeansIdle bool

	envPrefix string // MM2_TARGET_, for messages
}

// NewProfile works out the profile of the cluster alias from its profile
// settings, its bootstrap servers, whether it uses an Event Hubs connection
// string, and its producer compression type (none, gzip, snappy, lz4, zstd).
// It fails when the profile is on and the compression cannot work there.
func NewProfile(alias string, pc ProfileConfig, bootstrap []string, connectionString bool, compression string) (Profile, error) {
	return newProfile("", alias, pc, bootstrap, connectionString, compression)
}

func newProfile(role, alias string, pc ProfileConfig, bootstrap []string, connectionString bool, compression string) (Profile, error) {
	env, _ := prefixes(role, alias)
	var errs []string
	pc.normalize(func(key, format string, args ...any) {
		errs = append(errs, settingName(env, alias, key)+": "+fmt.Sprintf(format, args...))
	})
	if len(errs) > 0 {
		return Profile{}, fmt.Errorf("cluster %q: %s", alias, strings.Join(errs, "; "))
	}
	p := Profile{Cluster: alias, SyncConfigs: true, SyncACLs: true, CompactInternalTopics: true, envPrefix: env}
	if pc.Tier == "" {
		pc.Tier = TierStandard
	}
	switch pc.Mode {
	case ProfileOn:
		p.EventHubs, p.Reason = true, "eventhubs.profile=on"
	case ProfileAuto, "":
		if connectionString {
			p.EventHubs, p.Reason = true, "Event Hubs connection string"
		}
		for _, b := range bootstrap {
			if IsEventHubsHost(b) {
				p.EventHubs, p.Reason = true, "host "+b
				break
			}
		}
	}
	if !p.EventHubs {
		return p, nil
	}
	lim := tiers[pc.Tier]
	p.Tier = pc.Tier
	p.SyncConfigs, p.SyncACLs, p.GroupsDeadMeansIdle = false, false, true
	p.CompactInternalTopics = lim.compaction
	if pc.Compaction != "" {
		p.CompactInternalTopics, _ = strconv.ParseBool(pc.Compaction)
	}
	p.MaxTopics, p.MaxPartitionsPerTopic = lim.topics, int32(lim.partitions)
	p.FixedPartitions = !lim.grow
	if pc.MaxTopics > 0 {
		p.MaxTopics = pc.MaxTopics
	}
	if pc.MaxPartitions > 0 {
		p.MaxPartitionsPerTopic = int32(pc.MaxPartitions)
	}
	switch c := strings.ToLower(strings.TrimSpace(compression)); c {
	case "", "none":
	case "gzip":
		if !lim.gzip {
			return Profile{}, fmt.Errorf("cluster %q: %s: Event Hubs %s accepts only uncompressed batches (gzip needs Premium or Dedicated: set %sEVENTHUBS_TIER)",
				alias, settingName(env, alias, "producer.compression.type"), pc.Tier, env)
		}
	default:
		return Profile{}, fmt.Errorf("cluster %q: %s: Event Hubs refuses %s batches (UNSUPPORTED_FOR_MESSAGE_FORMAT): use none (or gzip on Premium/Dedicated)",
			alias, settingName(env, alias, "producer.compression.type"), c)
	}
	return p, nil
}

func settingName(env, alias, key string) string {
	e := env + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(key))
	if alias == "" {
		return e
	}
	return fmt.Sprintf("%s (%s.%s)", e, alias, key)
}

// ClientOpts are the franz-go options the profile needs, to apply after the
// cluster's own: requests under Event Hubs' 1,046,528-byte cap, idle
// connections and metadata refreshed well inside Azure's 240 s idle cut,
// Microsoft's timeouts. Compression is left to the producer setting, which
// NewProfile has checked. Nil for a plain Kafka cluster.
func (p Profile) ClientOpts() []kgo.Opt {
	if !p.EventHubs {
		return nil
	}
	return []kgo.Opt{
		kgo.BrokerMaxWriteBytes(EventHubsProduceBytes),
		kgo.ProducerBatchMaxBytes(EventHubsProduceBytes),
		// franz-go reaps idle connections within twice this.
		kgo.ConnIdleTimeout(60 * time.Second),
		kgo.MetadataMaxAge(180 * time.Second),
		// Event Hubs uses a 20 s internal minimum and throttles by delaying
		// answers; Microsoft recommends request.timeout.ms=60000.
		kgo.ProduceRequestTimeout(30 * time.Second),
		kgo.RequestTimeoutOverhead(30 * time.Second),
		kgo.SessionTimeout(30 * time.Second),
		kgo.MaxVersions(eventHubsVersions()),
	}
}

// eventHubsVersions are the request versions used with Event Hubs: the client's own, except
// that requests whose later versions name topics by ID only stay below those versions. Event
// Hubs has no topic IDs (it answers Metadata up to v9) but advertises later OffsetCommit
// versions (franz-go#1312): franz-go's group commits pin v9 themselves, but an admin commit
// (kadm's CommitOffsets: the checkpoint job's group sync, mirror cutover) sent v10 with a zero
// topic ID and had every partition refused with UNKNOWN_TOPIC_ID.
func eventHubsVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	v.SetMaxKeyVersion(int16(kmsg.Produce), 12)
	return v
}

// InternalTopicConfigs returns the configs for creating an internal topic
// (positions, offset syncs, checkpoints, heartbeats): compacted where the
// cluster compacts, else none (the namespace's retention applies, so such a
// topic keeps only recent records: readers must look backwards from the end).
func (p Profile) InternalTopicConfigs() map[string]*string {
	if !p.CompactInternalTopics {
		return map[string]*string{}
	}
	compact := "compact"
	return map[string]*string{"cleanup.policy": &compact}
}

// Notice is the one line to log when the profile is on, saying what it
// changes; empty when it is off.
func (p Profile) Notice() string {
	if !p.EventHubs {
		return ""
	}
	compaction := "compacted"
	if !p.CompactInternalTopics {
		compaction = "not compacted (no compaction on this tier; set " + p.envPrefix + "EVENTHUBS_COMPACTION=true if the namespace has it)"
	}
	return fmt.Sprintf("cluster %q is Azure Event Hubs (%s, tier %s): topic configs and ACLs are not synced (Event Hubs has no AlterConfigs or ACL APIs), "+
		"internal topics are %s, produce requests are capped at %d bytes, at most %d topics and %d partitions per topic",
		p.Cluster, p.Reason, p.Tier, compaction, EventHubsProduceBytes, p.MaxTopics, p.MaxPartitionsPerTopic)
}

// BudgetError is a run that would exceed an Event Hubs namespace's budgets.
type BudgetError struct {
	Cluster   string
	Tier      string
	MaxTopics int
	// Existing is how many topics the namespace has; New are the topics the
	// run would create (sorted); Over is by how many topics it would exceed.
	Existing int
	New      []string
	Over     int
	// TooWide lists topics needing more partitions than an event hub can
	// have, with their partition counts.
	TooWide       map[string]int32
	MaxPartitions int32
	// Fixed lists existing topics with fewer partitions than their source where the tier
	// cannot add partitions: name -> [partitions now, partitions needed].
	Fixed     map[string][2]int32
	envPrefix string
}

func (e *BudgetError) Error() string {
	var parts []string
	if e.Over > 0 {
		parts = append(parts, fmt.Sprintf("the namespace allows %d event hubs (topics) and has %d; creating %d more (%s) would be %d over: "+
			"replicate fewer topics, use another namespace, or raise %sEVENTHUBS_MAX_TOPICS if the namespace allows more",
			e.MaxTopics, e.Existing, len(e.New), strings.Join(e.New, ", "), e.Over, e.envPrefix))
	}
	if len(e.TooWide) > 0 {
		var w []string
		for _, n := range slices.Sorted(maps.Keys(e.TooWide)) {
			w = append(w, fmt.Sprintf("%s needs %d (%d over)", n, e.TooWide[n], e.TooWide[n]-e.MaxPartitions))
		}
		parts = append(parts, fmt.Sprintf("an event hub has at most %d partitions: %s; raise %sEVENTHUBS_MAX_PARTITIONS if the tier allows more",
			e.MaxPartitions, strings.Join(w, ", "), e.envPrefix))
	}
	if len(e.Fixed) > 0 {
		var w []string
		for _, n := range slices.Sorted(maps.Keys(e.Fixed)) {
			w = append(w, fmt.Sprintf("%s has %d and its source %d", n, e.Fixed[n][0], e.Fixed[n][1]))
		}
		parts = append(parts, fmt.Sprintf("an event hub of the %s tier cannot gain partitions (%s), so the new source partitions cannot be copied: "+
			"move the namespace to Premium or Dedicated and set %sEVENTHUBS_TIER, or replicate into new event hubs created with enough partitions "+
			"(another MM2_REPLICATION_POLICY_SEPARATOR or source alias gives new names) and move consumers to them",
			e.Tier, strings.Join(w, "; "), e.envPrefix))
	}
	return fmt.Sprintf("cluster %q (Event Hubs, tier %s): nothing created: %s", e.Cluster, e.Tier, strings.Join(parts, "; "))
}

// CheckBudget fails, before anything is created, when creating the topics in
// want (name -> partitions; topics that already exist are not counted again)
// would exceed the namespace's topic budget or an event hub's partition cap.
// Existing topics listed with more partitions than they have count as growth
// and are checked against the partition cap too, and refused where the tier
// cannot add partitions (FixedPartitions). It does nothing for a plain
// Kafka cluster.
func (p Profile) CheckBudget(ctx context.Context, adm *kadm.Client, want map[string]int32) error {
	if !p.EventHubs || len(want) == 0 {
		return nil
	}
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("cluster %q: listing topics to check the Event Hubs budget: %w", p.Cluster, err)
	}
	existing := 0
	for _, d := range td {
		if d.Err == nil && !d.IsInternal {
			existing++
		}
	}
	e := &BudgetError{Cluster: p.Cluster, Tier: p.Tier, MaxTopics: p.MaxTopics, Existing: existing,
		TooWide: map[string]int32{}, MaxPartitions: p.MaxPartitionsPerTopic, Fixed: map[string][2]int32{}, envPrefix: p.envPrefix}
	for name, n := range want {
		d, ok := td[name]
		exists := ok && d.Err == nil
		if !exists {
			e.New = append(e.New, name)
		}
		if p.MaxPartitionsPerTopic > 0 && n > p.MaxPartitionsPerTopic && (!exists || int32(len(d.Partitions)) < n) {
			e.TooWide[name] = n
		} else if have := int32(len(d.Partitions)); p.FixedPartitions && exists && have < n {
			e.Fixed[name] = [2]int32{have, n}
		}
	}
	sort.Strings(e.New)
	if p.MaxTopics > 0 && existing+len(e.New) > p.MaxTopics {
		e.Over = existing + len(e.New) - p.MaxTopics
	}
	if e.Over > 0 || len(e.TooWide) > 0 || len(e.Fixed) > 0 {
		return e
	}
	return nil
}

// SettingsProfile returns the profile of the cluster that s describes.
func SettingsProfile(s Settings) (Profile, error) {
	bootstrap, err := Bootstrap(s)
	if err != nil {
		return Profile{}, err
	}
	return newProfile(s.Role, s.Alias, s.EventHubs, bootstrap, s.EventHubsConnectionString.IsSet(), s.ProducerCompressionType)
}
