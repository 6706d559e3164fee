package config

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumerOverrides are the source consumer's Kafka client settings that mean something for a
// replicator, read like MM2 reads them: <source>.consumer.<key>, then the flow's
// <source>-><target>.consumer.<key>. Zero means the engine's own choice.
type ConsumerOverrides struct {
	FetchMaxBytes    int `envconfig:"CONSUMER_FETCH_MAX_BYTES" mm2:"consumer.fetch.max.bytes" default:"0" desc:"max bytes of one fetch response from the source (0: mm2go's 512 KiB, 4 KiB per partition consumed up to 4 MiB, sized to compression)"`
	RequestTimeoutMS int `envconfig:"CONSUMER_REQUEST_TIMEOUT_MS" mm2:"consumer.request.timeout.ms" default:"0" desc:"how long the source's clients wait for a response (0: franz-go's default)"`
	SessionTimeoutMS int `envconfig:"CONSUMER_SESSION_TIMEOUT_MS" mm2:"consumer.session.timeout.ms" default:"0" desc:"session timeout of MM2_BURST_GROUP members (0: franz-go's 45 s)"`
}

// ProducerOverrides are the target producer's Kafka client settings that mean something for a
// replicator: <target>.producer.<key> (MM2's worker producer), then the flow's
// <source>-><target>.producer.override.<key> (a Connect per-connector override). Zero means
// franz-go's default.
type ProducerOverrides struct {
	MaxRequestSize   int `envconfig:"PRODUCER_MAX_REQUEST_SIZE" mm2:"producer.max.request.size" default:"0" desc:"largest record batch written to the target, bytes (records above it fail; 0: Kafka's 1048576)"`
	RequestTimeoutMS int `envconfig:"PRODUCER_REQUEST_TIMEOUT_MS" mm2:"producer.request.timeout.ms" default:"0" desc:"how long the target's clients wait for a response (0: franz-go's default)"`
}

// ClientOpts returns the franz-go options of the client overrides of the flow's source
// ("source": consumer.*) or target ("target": producer.*) cluster, to be applied before the
// engine's own options.
func (c *Config) ClientOpts(role string) []kgo.Opt {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	var opts []kgo.Opt
	if role == "source" {
		o := c.SourceConsumer
		if o.RequestTimeoutMS > 0 {
			opts = append(opts, kgo.RequestTimeoutOverhead(ms(o.RequestTimeoutMS)))
		}
		if o.SessionTimeoutMS > 0 {
			opts = append(opts, kgo.SessionTimeout(ms(o.SessionTimeoutMS)))
		}
		return opts
	}
	o := c.TargetProducer
	if o.MaxRequestSize > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(o.MaxRequestSize)))
	}
	if o.RequestTimeoutMS > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(ms(o.RequestTimeoutMS)))
	}
	return opts
}

// validateClients checks the client overrides.
func (c *Config) validateClients(bad func(env, prop, format string, args ...any)) {
	for _, f := range []struct {
		env, prop string
		v         int
	}{
		{"MM2_SOURCE_CONSUMER_FETCH_MAX_BYTES", c.SourceAlias + ".consumer.fetch.max.bytes", c.SourceConsumer.FetchMaxBytes},
		{"MM2_SOURCE_CONSUMER_REQUEST_TIMEOUT_MS", c.SourceAlias + ".consumer.request.timeout.ms", c.SourceConsumer.RequestTimeoutMS},
		{"MM2_SOURCE_CONSUMER_SESSION_TIMEOUT_MS", c.SourceAlias + ".consumer.session.timeout.ms", c.SourceConsumer.SessionTimeoutMS},
		{"MM2_TARGET_PRODUCER_MAX_REQUEST_SIZE", c.TargetAlias + ".producer.max.request.size", c.TargetProducer.MaxRequestSize},
		{"MM2_TARGET_PRODUCER_REQUEST_TIMEOUT_MS", c.TargetAlias + ".producer.request.timeout.ms", c.TargetProducer.RequestTimeoutMS},
	} {
		if f.v < 0 {
			bad(f.env, f.prop, "must not be negative")
		}
	}
	if v := c.TargetProducer.MaxRequestSize; v > 0 && v < 1024 {
		bad("MM2_TARGET_PRODUCER_MAX_REQUEST_SIZE", c.TargetAlias+".producer.max.request.size", "%d is too small (want at least 1024 bytes)", v)
	}
}
