package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLoadFlows(t *testing.T) {
	base := "clusters=a,b\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\na->b.enabled=true\nb->a.enabled=true\n" +
		"a->b.topics=orders\nb->a.topics=payments\na.consumer.fetch.max.bytes=1048576\ntasks.max=3\n"
	path, _ := file(t, base)
	var logs bytes.Buffer
	cfgs, err := LoadFlows(env(map[string]string{"MM2_CONFIG_FILE": path}), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 2 {
		t.Fatalf("%d flows, want 2", len(cfgs))
	}
	ab, ba := cfgs[0], cfgs[1]
	if ab.SourceAlias != "a" || ab.TargetAlias != "b" || ab.Topics != "orders" || ab.SourceConsumer.FetchMaxBytes != 1048576 {
		t.Errorf("a->b: %s->%s topics=%q fetch.max.bytes=%d", ab.SourceAlias, ab.TargetAlias, ab.Topics, ab.SourceConsumer.FetchMaxBytes)
	}
	if ba.SourceAlias != "b" || ba.TargetAlias != "a" || ba.Topics != "payments" || ba.SourceConsumer.FetchMaxBytes != 0 {
		t.Errorf("b->a: %s->%s topics=%q fetch.max.bytes=%d", ba.SourceAlias, ba.TargetAlias, ba.Topics, ba.SourceConsumer.FetchMaxBytes)
	}
	// a.consumer.fetch.max.bytes is read by a->b only, so it is not ignored; tasks.max is,
	// and is named once for both flows.
	if n := strings.Count(logs.String(), "MM2 property ignored"); n != 1 || !strings.Contains(logs.String(), `"key":"tasks.max"`) {
		t.Errorf("want one WARN for tasks.max:\n%s", logs.String())
	}

	// Load (serve, status) still wants one flow.
	if _, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), nil); err == nil || !strings.Contains(err.Error(), "choose one with MM2_FLOW") {
		t.Errorf("Load: %v", err)
	}
	// MM2_FLOW picks one.
	cfgs, err = LoadFlows(env(map[string]string{"MM2_CONFIG_FILE": path, "MM2_FLOW": "b->a"}), nil)
	if err != nil || len(cfgs) != 1 || cfgs[0].SourceAlias != "b" {
		t.Errorf("MM2_FLOW=b->a: %v, %d flows", err, len(cfgs))
	}
}

func TestLoadFlowsIdentityCycle(t *testing.T) {
	path, _ := file(t, "clusters=a,b,c\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\nc.bootstrap.servers=c:1\n"+
		"replication.policy.class=org.apache.kafka.connect.mirror.IdentityReplicationPolicy\na->b.enabled=true\nb->c.enabled=true\nc->a.enabled=true\n")
	_, err := LoadFlows(env(map[string]string{"MM2_CONFIG_FILE": path}), nil)
	if err == nil || !strings.Contains(err.Error(), "cannot detect replication cycles") || !strings.Contains(err.Error(), "a->b->c->a") {
		t.Errorf("identity cycle: %v", err)
	}
	// Without the cycle, or with the default policy, the flows load.
	path, _ = file(t, "clusters=a,b,c\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\nc.bootstrap.servers=c:1\n"+
		"replication.policy.class=IdentityReplicationPolicy\na->b.enabled=true\nb->c.enabled=true\n")
	if cfgs, err := LoadFlows(env(map[string]string{"MM2_CONFIG_FILE": path}), nil); err != nil || len(cfgs) != 2 {
		t.Errorf("acyclic identity flows: %v", err)
	}
}

func TestConnectorStyle(t *testing.T) {
	// As Strimzi's KafkaMirrorMaker2 or MSK Connect write a MirrorSourceConnector's config.
	path, _ := file(t, `name=mirror-source
connector.class=org.apache.kafka.connect.mirror.MirrorSourceConnector
tasks.max=4
source.cluster.alias=primary
target.cluster.alias=backup
source.cluster.bootstrap.servers=p:9092
target.cluster.bootstrap.servers=b:9092
source.cluster.security.protocol=SASL_SSL
source.cluster.sasl.mechanism=SCRAM-SHA-512
source.cluster.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";
source.consumer.isolation.level=read_committed
producer.override.max.request.size=4194304
producer.override.compression.type=zstd
topics=orders.*
replication.factor=3
key.converter=org.apache.kafka.connect.converters.ByteArrayConverter
value.converter=org.apache.kafka.connect.converters.ByteArrayConverter
`)
	var logs bytes.Buffer
	c, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if c.SourceAlias != "primary" || c.TargetAlias != "backup" || c.Source.BootstrapServers[0] != "p:9092" || c.Target.BootstrapServers[0] != "b:9092" ||
		c.Source.SASLMechanism != "SCRAM-SHA-512" || !c.Source.SASLJAASConfig.IsSet() || c.Source.ConsumerIsolationLevel != "read_committed" ||
		c.TargetProducer.MaxRequestSize != 4194304 || c.Target.ProducerCompressionType != "zstd" || c.Topics != "orders.*" || c.ReplicationFactor != 3 {
		t.Errorf("loaded %+v", c)
	}
	for _, k := range []string{"name", "connector.class", "tasks.max", "key.converter", "value.converter"} {
		if !strings.Contains(logs.String(), `"key":"`+k+`"`) {
			t.Errorf("no WARN for %s:\n%s", k, logs.String())
		}
	}

	for _, tc := range []struct{ file, want string }{
		{"source.cluster.bootstrap.servers=p:1\ntarget.cluster.bootstrap.servers=b:1\n", "without source.cluster.alias: set source.cluster.alias=<alias>"},
		{"source.cluster.alias=a\nsource.cluster.bootstrap.servers=p:1\n", "needs source.cluster.bootstrap.servers and target.cluster.bootstrap.servers"},
		{"connector.class=io.confluent.connect.replicator.ReplicatorSourceConnector\nsource.cluster.alias=a\n", "is not a MirrorMaker 2 connector"},
		{`{"name":"m","config":{"connector.class":"org.apache.kafka.connect.mirror.MirrorSourceConnector"}}`, "JSON Connect connector config: write its \"config\" entries as a properties file"},
		{"source.cluster.alias=a\nsource.cluster.bootstrap.servers=p:1\ntarget.cluster.bootstrap.servers=b:1\ntransforms=x\n", "transforms: single message transforms"},
	} {
		path, _ := file(t, tc.file)
		if _, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.file, err, tc.want)
		}
	}
}

func TestProducerOverrides(t *testing.T) {
	path, _ := file(t, "clusters=a,b\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\na->b.enabled=true\n"+
		"b.producer.max.request.size=2097152\nb.producer.linger.ms=50\na->b.producer.override.linger.ms=7\na->b.producer.override.delivery.timeout.ms=120000\n"+
		"a.consumer.request.timeout.ms=40000\na->b.consumer.session.timeout.ms=30000\nb.producer.batch.size=65536\n")
	var logs bytes.Buffer
	c, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// producer.override.* (Connect's per-connector override) beats the worker's <target>.producer.*.
	if c.TargetProducer.MaxRequestSize != 2097152 || c.Target.ProducerLingerMS != 7 ||
		c.SourceConsumer.RequestTimeoutMS != 40000 || c.SourceConsumer.SessionTimeoutMS != 30000 {
		t.Errorf("producer %+v linger %d consumer %+v", c.TargetProducer, c.Target.ProducerLingerMS, c.SourceConsumer)
	}
	if len(c.ClientOpts("target")) != 1 || len(c.ClientOpts("source")) != 2 {
		t.Errorf("client options: target %d, source %d", len(c.ClientOpts("target")), len(c.ClientOpts("source")))
	}
	// The shadowed b.producer.linger.ms, the unused batch.size and the delivery timeout (which
	// franz-go would count from a copied record's source timestamp: e2e TestProductionMM2File
	// failed every record of its flow at once when it was applied) are named.
	if n := strings.Count(logs.String(), "MM2 property ignored"); n != 3 || !strings.Contains(logs.String(), `"key":"b.producer.batch.size"`) ||
		!strings.Contains(logs.String(), `"key":"a->b.producer.override.delivery.timeout.ms","verdict":"not needed","why":"franz-go counts a record's delivery time from the record's timestamp`) ||
		!strings.Contains(logs.String(), `"key":"b.producer.linger.ms","verdict":"not needed","why":"another key sets this client setting`) {
		t.Errorf("want WARN lines for b.producer.linger.ms, b.producer.batch.size and the delivery timeout:\n%s", logs.String())
	}
	// Bad values name the setting.
	path, _ = file(t, "clusters=a,b\na.bootstrap.servers=a:1\nb.bootstrap.servers=b:1\na->b.enabled=true\nb.producer.max.request.size=-5\n")
	if _, err := Load(env(map[string]string{"MM2_CONFIG_FILE": path}), nil); err == nil || !strings.Contains(err.Error(), "b.producer.max.request.size") {
		t.Errorf("negative max.request.size: %v", err)
	}
}
