package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/mm2go/mm2go/shared/cluster"
	"github.com/mm2go/mm2go/shared/filter"
	"github.com/mm2go/mm2go/shared/policy"
)

// env returns a lookup function over m.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// userFiles copies the user's mm2-config.properties and access.properties
// into a temp dir, pointing /properties/ at it, and returns the config path.
func userFiles(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	access, err := os.ReadFile("testdata/access.properties")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("testdata/mm2-config.properties")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "access.properties"), string(access))
	path := filepath.Join(dir, "mm2-config.properties")
	writeFile(t, path, strings.ReplaceAll(string(cfg), "/properties/", dir+"/"))
	return path, dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// file writes content (with $DIR replaced by a temp dir) and returns its path.
func file(t *testing.T, content string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "mm2.properties")
	writeFile(t, path, strings.ReplaceAll(content, "$DIR", dir))
	return path, dir
}

func mustLoad(t *testing.T, m map[string]string) *Config {
	t.Helper()
	c, err := Load(env(m), nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestUserFileUnchanged(t *testing.T) {
	path, _ := userFiles(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), logger)
	if err != nil {
		t.Fatal(err)
	}
	if c.SourceAlias != "source" || c.TargetAlias != "target" || c.Source.Alias != "source" || c.Target.Alias != "target" {
		t.Errorf("aliases = %q/%q", c.SourceAlias, c.TargetAlias)
	}
	if !slices.Equal(c.Source.BootstrapServers, []string{"src-kafka-1:9092", "src-kafka-2:9092"}) ||
		!slices.Equal(c.Target.BootstrapServers, []string{"tgt-kafka-1:9092"}) {
		t.Errorf("bootstrap = %v / %v", c.Source.BootstrapServers, c.Target.BootstrapServers)
	}
	if c.Topics != "topic1,topic2" {
		t.Errorf("topics = %q", c.Topics)
	}
	f, err := c.TopicFilter()
	if err != nil {
		t.Fatal(err)
	}
	if !f.Accept("topic1") || !f.Accept("topic2") || f.Accept("topic3") {
		t.Errorf("topic filter wrong")
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if got := p.FormatRemoteTopic(c.SourceAlias, "topic1"); got != "source.topic1" {
		t.Errorf("remote topic = %q", got)
	}
	if c.OffsetStorageTopic != "mm2-offsets.source.internal" || c.Source.SecurityProtocol != "PLAINTEXT" {
		t.Errorf("derived: %q %q", c.OffsetStorageTopic, c.Source.SecurityProtocol)
	}
	if strings.Contains(logs.String(), "does not use") {
		t.Errorf("the user's file has no unused keys, log: %s", logs.String())
	}
}

func TestDefaults(t *testing.T) {
	c := mustLoad(t, map[string]string{"MM2_SOURCE_BOOTSTRAP_SERVERS": "a:1", "MM2_TARGET_BOOTSTRAP_SERVERS": "b:2"})
	want := Config{
		SourceAlias: "source", TargetAlias: "target",
		Topics: ".*", TopicsExclude: filter.DefaultTopicsExclude, Groups: ".*", GroupsExclude: filter.DefaultGroupsExclude,
		ConfigPropertiesExclude:                        `follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, unclean\.leader\.election\.enable, min\.insync\.replicas`,
		ReplicationPolicyClass:                         policy.DefaultClass,
		ReplicationPolicySeparator:                     ".",
		ReplicationPolicyInternalTopicSeparatorEnabled: true,
		OffsetSyncsTopicLocation:                       "source", OffsetLagMax: 100, EmitOffsetSyncsEnabled: true,
		EmitCheckpointsEnabled: true, SyncGroupOffsetsEnabled: false,
		ReplicationFactor: 2, OffsetSyncsTopicReplicationFactor: 3, CheckpointsTopicReplicationFactor: 3, HeartbeatsTopicReplicationFactor: 3,
		SyncTopicConfigsEnabled: true, RefreshTopicsEnabled: true, SyncTopicAclsEnabled: true,
		OffsetStorageTopic: "mm2-offsets.source.internal", OffsetStoragePartitions: 25, OffsetStorageReplicationFactor: 3,
		EmitHeartbeatsEnabled: true, HeartbeatsReplicationEnabled: true, ReverseHeartbeatsEnabled: true,
		ExactlyOnce: false, BurstMaxDuration: 0, BurstMaxRecords: 0, ForwardBatches: true, EventMode: "fetch", EventKeyType: "string", CheckpointTranslation: "precise",
		LogLevel: "info", LogFormat: "auto", Port: 8080,
	}
	clusterDefaults := cluster.Settings{
		SecurityProtocol: "PLAINTEXT", SSLEndpointIdentificationAlgorithm: "https",
		ConsumerAutoOffsetReset: "earliest", ConsumerIsolationLevel: "read_uncommitted", ProducerCompressionType: "none", ProducerCompressionGzipLevel: -1, ProducerCompressionLz4Level: 9, ProducerCompressionZstdLevel: 3, ProducerLingerMS: 5,
	}
	want.Source, want.Target = clusterDefaults, clusterDefaults
	want.Source.Alias, want.Source.Role, want.Source.BootstrapServers = "source", "source", []string{"a:1"}
	want.Target.Alias, want.Target.Role, want.Target.BootstrapServers = "target", "target", []string{"b:2"}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", *c, want)
	}
}

func TestEnvOverridesFile(t *testing.T) {
	path, _ := userFiles(t)
	c := mustLoad(t, map[string]string{
		"MM2_CONFIG_FILE":              path,
		"MM2_SOURCE_BOOTSTRAP_SERVERS": "override:9092",
		"MM2_TOPICS":                   "orders.*",
		"MM2_TARGET_ALIAS":             "dr",
		"MM2_OFFSET_LAG_MAX":           "7",
		"MM2_SOURCE_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "",
		"MM2_BURST_MAX_DURATION":                           "90s",
		"MM2_BURST_EVENT_TYPES":                            "a, b",
	})
	if !slices.Equal(c.Source.BootstrapServers, []string{"override:9092"}) || c.Topics != "orders.*" || c.TargetAlias != "dr" || c.Target.Alias != "dr" || c.OffsetLagMax != 7 {
		t.Errorf("env did not win: %v %q %q %d", c.Source.BootstrapServers, c.Topics, c.TargetAlias, c.OffsetLagMax)
	}
	if c.Source.SSLEndpointIdentificationAlgorithm != "" || c.Target.SSLEndpointIdentificationAlgorithm != "https" {
		t.Errorf("set-but-empty must disable: %q", c.Source.SSLEndpointIdentificationAlgorithm)
	}
	if c.BurstMaxDuration != 90*time.Second || !slices.Equal(c.BurstEventTypes, []string{"a", "b"}) {
		t.Errorf("burst = %v %q", c.BurstMaxDuration, c.BurstEventTypes)
	}
	// The file's target cluster keys still apply under the new alias.
	if !slices.Equal(c.Target.BootstrapServers, []string{"tgt-kafka-1:9092"}) {
		t.Errorf("target bootstrap = %v", c.Target.BootstrapServers)
	}
}

func TestFileMapping(t *testing.T) {
	for _, test := range []struct {
		name  string
		file  string
		env   map[string]string
		check func(t *testing.T, c *Config)
	}{
		{"aliases from flow and top-level security copied", `
clusters = primary, backup, dr
primary->backup.enabled = true
backup->primary.enabled = false
bootstrap.servers = shared:9092
security.protocol = SASL_SSL
sasl.mechanism = SCRAM-SHA-512
sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="alice" password="alice-secret";
backup.bootstrap.servers = backup:9093
backup.security.protocol = SSL
backup.ssl.truststore.location = /ca.pem
primary.consumer.auto.offset.reset = latest
backup.producer.compression.type = zstd
backup.producer.compression.zstd.level = 1
backup.producer.linger.ms = 20
primary.client.id = me
topics = a.*
primary->backup.topics = b.*
groups.blacklist = legacy.*
replication.policy.separator = _
offset.storage.topic = my-offsets
`, nil, func(t *testing.T, c *Config) {
			if c.SourceAlias != "primary" || c.TargetAlias != "backup" {
				t.Errorf("aliases %q %q", c.SourceAlias, c.TargetAlias)
			}
			if c.Source.BootstrapServers[0] != "shared:9092" || c.Target.BootstrapServers[0] != "backup:9093" {
				t.Errorf("bootstrap %v %v", c.Source.BootstrapServers, c.Target.BootstrapServers)
			}
			u, p, err := c.Source.SASLCredentials()
			if c.Source.SecurityProtocol != "SASL_SSL" || c.Source.SASLMechanism != "SCRAM-SHA-512" || u != "alice" || p.Reveal() != "alice-secret" || err != nil {
				t.Errorf("source sasl %q %q %q %v", c.Source.SecurityProtocol, c.Source.SASLMechanism, u, err)
			}
			// Target overrides security.protocol but inherits sasl.*:
			// harmless with SSL (Kafka ignores SASL settings then).
			if c.Target.SecurityProtocol != "SSL" || c.Target.SSLTruststoreLocation != "/ca.pem" {
				t.Errorf("target tls %q %q", c.Target.SecurityProtocol, c.Target.SSLTruststoreLocation)
			}
			if c.Source.ConsumerAutoOffsetReset != "latest" || c.Target.ConsumerAutoOffsetReset != "earliest" ||
				c.Target.ProducerCompressionType != "zstd" || c.Target.ProducerCompressionZstdLevel != 1 || c.Source.ProducerCompressionZstdLevel != 3 ||
				c.Target.ProducerLingerMS != 20 || c.Source.ClientID != "me" {
				t.Errorf("client keys %+v / %+v", c.Source, c.Target)
			}
			if c.Topics != "b.*" || c.GroupsExclude != "legacy.*" || c.ReplicationPolicySeparator != "_" || c.OffsetStorageTopic != "my-offsets" {
				t.Errorf("flow keys %q %q %q %q", c.Topics, c.GroupsExclude, c.ReplicationPolicySeparator, c.OffsetStorageTopic)
			}
		}},
		{"MM2_FLOW picks among several", `
clusters=a,b
a->b.enabled=true
b->a.enabled=true
a.bootstrap.servers=a:1
b.bootstrap.servers=b:1
a->b.emit.heartbeats.enabled=false
`, map[string]string{"MM2_FLOW": "b->a"}, func(t *testing.T, c *Config) {
			if c.SourceAlias != "b" || c.TargetAlias != "a" || c.Source.BootstrapServers[0] != "b:1" {
				t.Errorf("flow b->a: %q->%q %v", c.SourceAlias, c.TargetAlias, c.Source.BootstrapServers)
			}
			if !c.EmitHeartbeatsEnabled || c.ReverseHeartbeatsEnabled {
				t.Errorf("heartbeats: emit %v reverse %v", c.EmitHeartbeatsEnabled, c.ReverseHeartbeatsEnabled)
			}
		}},
		{"global heartbeats and exactly once", `
clusters=a,b
a->b.enabled=true
a.bootstrap.servers=a:1
b.bootstrap.servers=b:1
emit.heartbeats.enabled=false
exactly.once.source.support=enabled
b.offset.storage.topic=from-target
topics.blacklist=x.*
a->b.topics.exclude=y.*
`, nil, func(t *testing.T, c *Config) {
			if c.EmitHeartbeatsEnabled || c.ReverseHeartbeatsEnabled || !c.ExactlyOnce || c.OffsetStorageTopic != "from-target" || c.TopicsExclude != "y.*" {
				t.Errorf("%v %v %v %q %q", c.EmitHeartbeatsEnabled, c.ReverseHeartbeatsEnabled, c.ExactlyOnce, c.OffsetStorageTopic, c.TopicsExclude)
			}
		}},
		{"declared providers: env and dir", `
config.providers=env,dir
config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
clusters=s,t
s->t.enabled=true
s.bootstrap.servers=${env:SRC}
t.bootstrap.servers=tgt:1
t.security.protocol=SASL_SSL
t.sasl.mechanism=PLAIN
t.sasl.username=${dir:$DIR:user}
t.sasl.password=${dir:$DIR:pass}
`, map[string]string{"SRC": "from-env:9092"}, func(t *testing.T, c *Config) {
			if c.Source.BootstrapServers[0] != "from-env:9092" || c.Target.SASLUsername != "bob" || c.Target.SASLPassword.Reveal() != "bob-pw\n" {
				t.Errorf("providers: %v %q", c.Source.BootstrapServers, c.Target.SASLUsername)
			}
		}},
		{"top-level sasl only for the SASL cluster", `
clusters=onprem,cloud
onprem->cloud.enabled=true
onprem.bootstrap.servers=onprem:9092
cloud.bootstrap.servers=cloud:9093
cloud.security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
`, nil, func(t *testing.T, c *Config) {
			if c.Source.SecurityProtocol != "PLAINTEXT" || c.Source.SASLJAASConfig.IsSet() || c.Source.SASLMechanism != "" {
				t.Errorf("source kept SASL settings: %q %q", c.Source.SecurityProtocol, c.Source.SASLMechanism)
			}
			if u, p, err := c.Target.SASLCredentials(); u != "u" || p.Reveal() != "p" || err != nil {
				t.Errorf("target credentials %q %v", u, err)
			}
		}},
		{"continuation and escapes in file", `
clusters=s,t
s->t.enabled=true
s.bootstrap.servers=a:1,\
                    b:2
t.bootstrap.servers=c\:3
s->t.topics=x\,y
`, nil, func(t *testing.T, c *Config) {
			if !slices.Equal(c.Source.BootstrapServers, []string{"a:1", "b:2"}) || c.Target.BootstrapServers[0] != "c:3" || c.Topics != "x,y" {
				t.Errorf("%v %v %q", c.Source.BootstrapServers, c.Target.BootstrapServers, c.Topics)
			}
		}},
	} {
		t.Run(test.name, func(t *testing.T) {
			path, dir := file(t, test.file)
			writeFile(t, filepath.Join(dir, "user"), "bob")
			writeFile(t, filepath.Join(dir, "pass"), "bob-pw\n")
			m := map[string]string{"MM2_CONFIG_FILE": path}
			for k, v := range test.env {
				m[k] = v
			}
			test.check(t, mustLoad(t, m))
		})
	}
}

func TestUnusedKeysLogged(t *testing.T) {
	path, _ := file(t, "clusters=a,b,c\na->b.enabled=true\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\ntasks.max=4\nb.consumer.max.poll.records=10\n"+
		"c.bootstrap.servers=c:1\nb->c.transforms=x\ntopic.filter.class=org.apache.kafka.connect.mirror.DefaultTopicFilter\nb.producer.acks=1\nno.such.key=1\n")
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), logger); err != nil {
		t.Fatal(err)
	}
	// One WARN line per ignored key of this flow; other clusters' and flows' keys are theirs;
	// a refused key at MM2's default loads.
	for _, key := range []string{"tasks.max", "b.consumer.max.poll.records", "topic.filter.class", "b.producer.acks", "no.such.key"} {
		if n := strings.Count(logs.String(), `"level":"WARN","msg":"MM2 property ignored","key":"`+key+`"`); n != 1 {
			t.Errorf("%s: %d WARN lines, want 1:\n%s", key, n, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "MM2 property ignored"); n != 5 {
		t.Errorf("%d ignored-key lines, want 5:\n%s", n, logs.String())
	}
}

func TestRefusedKeys(t *testing.T) {
	for _, test := range []struct{ line, want string }{
		{"transforms=drop", "transforms: single message transforms"},
		{"a->b.transforms=drop", "a->b.transforms: single message transforms"},
		{"topic.filter.class=com.example.MyFilter", "topic.filter.class: a custom topic filter"},
		{"a->b.group.filter.class=com.example.G", "a->b.group.filter.class: a custom group filter"},
		{"config.property.filter.class=com.example.C", "config.property.filter.class: a custom config property filter"},
		{"value.converter=org.apache.kafka.connect.json.JsonConverter", "value.converter: a converter other than ByteArrayConverter"},
		{"b.producer.interceptor.classes=com.example.I", "b.producer.interceptor.classes: client interceptors"},
		{"a->b.producer.override.partitioner.class=com.example.P", "partitioner.class: a partitioner"},
		{"use.defaults.from=source", "use.defaults.from: use.defaults.from=source"},
		{"forwarding.admin.class=com.example.F", "forwarding.admin.class"},
	} {
		path, _ := file(t, "clusters=a,b\na->b.enabled=true\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\n"+test.line+"\n")
		_, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), nil)
		var re *RefusedKeyError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), test.want) {
			t.Errorf("%s: err = %v, want a RefusedKeyError with %q", test.line, err, test.want)
		}
	}
	// MM2's defaults, in full or simple class names, load.
	for _, line := range []string{"topic.filter.class=DefaultTopicFilter", "value.converter=org.apache.kafka.connect.converters.ByteArrayConverter", "transforms=", "use.defaults.from=target"} {
		path, _ := file(t, "clusters=a,b\na->b.enabled=true\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\n"+line+"\n")
		if _, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), nil); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, test := range []struct {
		name string
		file string // MM2 file content, optional
		env  map[string]string
		want []string // each must appear in the error
	}{
		{"required bootstraps", "", map[string]string{}, []string{
			"MM2_SOURCE_BOOTSTRAP_SERVERS (source.bootstrap.servers): required",
			"MM2_TARGET_BOOTSTRAP_SERVERS (target.bootstrap.servers): required",
			"invalid configuration (2 problems)",
		}},
		{"names use the aliases", "", map[string]string{"MM2_FLOW": "primary->backup", "MM2_TARGET_BOOTSTRAP_SERVERS": "b:1"}, []string{
			"MM2_SOURCE_BOOTSTRAP_SERVERS (primary.bootstrap.servers): required",
		}},
		{"bad numbers and enums", "", map[string]string{
			"MM2_SOURCE_BOOTSTRAP_SERVERS": "a:1", "MM2_TARGET_BOOTSTRAP_SERVERS": "b:1",
			"MM2_OFFSET_LAG_MAX": "lots", "MM2_REPLICATION_FACTOR": "0", "PORT": "http",
			"MM2_OFFSET_SYNCS_TOPIC_LOCATION": "middle", "MM2_EMIT_CHECKPOINTS_ENABLED": "maybe",
			"MM2_BURST_MAX_DURATION": "10", "MM2_EVENT_MODE": "push", "MM2_LOG_FORMAT": "xml",
			"MM2_REPLICATION_POLICY_CLASS": "com.example.Custom", "MM2_TOPICS_EXCLUDE": "(?!keep).*",
			"MM2_TARGET_PRODUCER_LINGER_MS": "1.5", "MM2_SOURCE_SECURITY_PROTOCOL": "TLS",
		}, []string{
			`MM2_OFFSET_LAG_MAX (offset.lag.max): "lots" is not an integer`,
			"MM2_REPLICATION_FACTOR (replication.factor): 0 is invalid",
			`PORT: "http" is not an integer`,
			`MM2_OFFSET_SYNCS_TOPIC_LOCATION (offset-syncs.topic.location): unknown value "middle" (want source, target)`,
			`MM2_EMIT_CHECKPOINTS_ENABLED (emit.checkpoints.enabled): "maybe" is not true or false`,
			`MM2_BURST_MAX_DURATION (burst.max.duration): "10" is not a duration`,
			`MM2_EVENT_MODE (event.mode): unknown value "push"`,
			`MM2_LOG_FORMAT (log.format): unknown value "xml"`,
			`MM2_REPLICATION_POLICY_CLASS (replication.policy.class): unknown class "com.example.Custom"`,
			`MM2_TOPICS_EXCLUDE (topics.exclude): pattern "(?!keep).*": lookahead`,
			`MM2_TARGET_PRODUCER_LINGER_MS (target.producer.linger.ms): "1.5" is not an integer`,
			`MM2_SOURCE_SECURITY_PROTOCOL (source.security.protocol): unknown value "TLS"`,
			"invalid configuration (12 problems)",
		}},
		{"eventhubs and sasl", "", map[string]string{
			"MM2_SOURCE_BOOTSTRAP_SERVERS":           "a:1",
			"MM2_TARGET_EVENTHUBS_CONNECTION_STRING": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=fake-key-do-not-log",
			"MM2_TARGET_SASL_JAAS_CONFIG":            `x.PlainLoginModule required username="u" password="jaas-pw-do-not-log";`,
		}, []string{"MM2_TARGET_EVENTHUBS_CONNECTION_STRING (target.eventhubs.connection.string): set either"}},
		{"env credentials without protocol", "", map[string]string{
			"MM2_SOURCE_BOOTSTRAP_SERVERS": "a:1", "MM2_TARGET_BOOTSTRAP_SERVERS": "b:1",
			"MM2_TARGET_SASL_USERNAME": "u", "MM2_TARGET_SASL_PASSWORD": "jaas-pw-do-not-log",
		}, []string{"MM2_TARGET_SECURITY_PROTOCOL (target.security.protocol): SASL credentials are set"}},
		{"same aliases", "", map[string]string{"MM2_SOURCE_BOOTSTRAP_SERVERS": "a:1", "MM2_TARGET_BOOTSTRAP_SERVERS": "b:1", "MM2_TARGET_ALIAS": "source"}, []string{
			"MM2_TARGET_ALIAS (target.cluster.alias): must differ",
		}},
		{"lag group is the burst group", "", map[string]string{"MM2_SOURCE_BOOTSTRAP_SERVERS": "a:1", "MM2_TARGET_BOOTSTRAP_SERVERS": "b:1",
			"MM2_BURST_GROUP": "mirrors", "MM2_LAG_GROUP": " mirrors"}, []string{
			`MM2_LAG_GROUP (lag.group): must differ from MM2_BURST_GROUP "mirrors"`,
		}},
		{"missing provider declaration", `
config.providers=env
config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
clusters=source,target
source->target.enabled=true
source.bootstrap.servers=${file:/nowhere:SRC}
target.bootstrap.servers=${env:NOPE}
target.security.protocol=SASL_SSL
target.sasl.mechanism=PLAIN
target.sasl.username=u
target.sasl.password=${vault:secret/x:pw}
`, map[string]string{}, []string{
			`MM2_SOURCE_BOOTSTRAP_SERVERS (source.bootstrap.servers): "${file:/nowhere:SRC}" contains an unresolved config provider reference`,
			`MM2_TARGET_BOOTSTRAP_SERVERS (target.bootstrap.servers): "${env:NOPE}" contains an unresolved`,
			"MM2_TARGET_SASL_PASSWORD (target.sasl.password): contains an unresolved config provider reference (value not shown)",
		}},
	} {
		t.Run(test.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range test.env {
				m[k] = v
			}
			if test.file != "" {
				m["MM2_CONFIG_FILE"], _ = file(t, test.file)
			}
			_, err := Load(env(m), nil)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want *ValidationError", err)
			}
			msg := err.Error()
			for _, want := range test.want {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q:\n%s", want, msg)
				}
			}
			for _, leak := range []string{"fake-key-do-not-log", "jaas-pw-do-not-log"} {
				if strings.Contains(msg, leak) {
					t.Errorf("secret leaked:\n%s", msg)
				}
			}
			var se *cluster.SettingError
			if !errors.As(err, &se) {
				t.Errorf("errors.As(*cluster.SettingError) failed")
			}
		})
	}
}

func TestFileAndFlowErrors(t *testing.T) {
	for _, test := range []struct {
		name, file, flow, want string
	}{
		{"no flow", "clusters=a,b\n", "", "enables no flow"},
		{"several flows", "clusters=a,b\na->b.enabled=true\nb->a.enabled=TRUE\n", "", "enables several flows (a->b, b->a): choose one with MM2_FLOW (run runs them all)"},
		{"flow not in clusters", "clusters=a,b\na->b.enabled=true\n", "a->c", "clusters=a,b"},
		{"bad flow", "clusters=a,b\n", "a-b", `MM2_FLOW "a-b"`},
		{"unreadable provider file", "clusters=a,b\na->b.enabled=true\na.bootstrap.servers=${file:/does/not/exist:K}\n", "", "reading properties from /does/not/exist"},
	} {
		t.Run(test.name, func(t *testing.T) {
			path, _ := file(t, test.file)
			_, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path, "MM2_FLOW": test.flow}), nil)
			if err == nil || !strings.Contains(err.Error(), test.want) {
				t.Errorf("err = %v, want %q", err, test.want)
			}
		})
	}
	if _, err := Load(env(map[string]string{"MM2_CONFIG_FILE": "/does/not/exist.properties"}), nil); err == nil || !strings.Contains(err.Error(), "/does/not/exist.properties") {
		t.Errorf("missing file: %v", err)
	}
}

func TestSecretsNeverShown(t *testing.T) {
	const pw, conn, key = "pw-do-not-log", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=eh-do-not-log", "key-do-not-log"
	m := map[string]string{
		"MM2_SOURCE_BOOTSTRAP_SERVERS": "a:1", "MM2_SOURCE_SECURITY_PROTOCOL": "SASL_SSL", "MM2_SOURCE_SASL_MECHANISM": "PLAIN",
		"MM2_SOURCE_SASL_JAAS_CONFIG":            `x.PlainLoginModule required username="u" password="` + pw + `";`,
		"MM2_TARGET_EVENTHUBS_CONNECTION_STRING": conn,
		"MM2_TARGET_SSL_KEYSTORE_KEY":            key, "MM2_TARGET_SSL_KEYSTORE_CERTIFICATE_CHAIN": "chain",
		"MM2_TARGET_SSL_KEY_PASSWORD": pw,
	}
	c := mustLoad(t, m)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", c)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", c)
	j, _ := json.Marshal(c)
	out := buf.String() + string(j) + fmt.Sprintf("%v %+v %#v", c, c, *c)
	for _, s := range []string{pw, "eh-do-not-log", key} {
		if strings.Contains(out, s) {
			t.Errorf("secret %q in output:\n%s", s, out)
		}
	}
	if !strings.Contains(buf.String(), `"SASLJAASConfig":"[redacted]"`) {
		t.Errorf("json log lacks redacted field: %s", buf.String())
	}
	// And in an error: the same secrets plus a bad setting.
	m["MM2_TARGET_SASL_PASSWORD"] = pw
	_, err := Load(env(m), nil)
	if err == nil || strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "eh-do-not-log") {
		t.Errorf("err = %v", err)
	}
}

// TestNamingRule checks every env name against the binding rule and that
// Load's names are exactly envconfig's.
func TestNamingRule(t *testing.T) {
	rule := strings.NewReplacer(".", "_", "-", "_")
	var c Config
	ours := map[string]bool{}
	for _, s := range settingsOf(&c) {
		ours[s.env] = true
		var want string
		switch {
		case s.scope == "env" || s.scope == "special":
			continue
		case s.scope == "cluster":
			want = "MM2_" + strings.ToUpper(s.role) + "_" + strings.ToUpper(rule.Replace(s.prop))
		default:
			want = "MM2_" + strings.ToUpper(rule.Replace(s.prop))
		}
		if s.env != want {
			t.Errorf("%s: want %s by the naming rule (property %s)", s.env, want, s.prop)
		}
	}
	for _, special := range []string{"MM2_SOURCE_ALIAS", "MM2_TARGET_ALIAS", "PORT", "MM2_CONFIG_FILE", "MM2_FLOW", "MM2_EXACTLY_ONCE", "MM2_REVERSE_HEARTBEATS_ENABLED"} {
		if !ours[special] {
			t.Errorf("missing %s", special)
		}
	}
	var keys bytes.Buffer
	tmpl := template.Must(template.New("").Parse("{{range .}}{{.Key}}\n{{end}}"))
	if err := envconfig.Usaget("", &Config{}, &keys, tmpl); err != nil {
		t.Fatal(err)
	}
	theirs := strings.Fields(keys.String())
	if len(theirs) != len(ours) {
		t.Errorf("envconfig has %d keys, Load %d", len(theirs), len(ours))
	}
	for _, k := range theirs {
		if !ours[k] {
			t.Errorf("envconfig key %s unknown to Load", k)
		}
	}
}

func TestUsage(t *testing.T) {
	var buf bytes.Buffer
	if err := Usage(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, s := range settingsOf(&Config{}) {
		if !strings.Contains(out, "\n"+s.env+" ") && !strings.Contains(out, "\n"+s.env+"\n") {
			t.Errorf("usage lacks %s", s.env)
		}
		if s.hasDef && s.def != "" && !strings.Contains(out, "default: "+s.def) {
			t.Errorf("usage lacks default %q of %s", s.def, s.env)
		}
	}
	for _, want := range []string{
		"MM2_SOURCE_BOOTSTRAP_SERVERS  (<source>.bootstrap.servers)",
		"MM2_OFFSET_SYNCS_TOPIC_LOCATION  (offset-syncs.topic.location)",
		"default: mm2-offsets.<source alias>.internal",
		`default: mm2.*\.internal, .*\.replica, __.*`,
		"PORT\n",
		"default: 8080",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

func TestMissingProviderKeyLeftUnchanged(t *testing.T) {
	path, dir := userFiles(t)
	writeFile(t, filepath.Join(dir, "access.properties"), "SRC_BROKERS=s:1\n")
	_, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), nil)
	want := fmt.Sprintf(`MM2_TARGET_BOOTSTRAP_SERVERS (target.bootstrap.servers): "${file:%s/access.properties:TGT_BROKERS}" contains an unresolved config provider reference`, dir)
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "MM2_SOURCE_BOOTSTRAP_SERVERS") {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestEnvNamesMatchUsage(t *testing.T) {
	var b strings.Builder
	if err := Usage(&b); err != nil {
		t.Fatal(err)
	}
	names := EnvNames()
	if len(names) < 40 {
		t.Fatalf("EnvNames lists %d settings, want every setting", len(names))
	}
	for _, n := range append(names, "MM2_EVENT_KEY_TYPE", "MM2_SOURCE_BOOTSTRAP_SERVERS") {
		if !strings.Contains(b.String(), n) {
			t.Errorf("%s is in EnvNames but not in Usage", n)
		}
	}
	if !slices.Contains(names, "MM2_EVENT_KEY_TYPE") {
		t.Error("EnvNames lacks MM2_EVENT_KEY_TYPE")
	}
}
