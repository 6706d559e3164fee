package replay

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rickb777/date/period"
	eventingduckv1 "knative.dev/eventing/pkg/apis/duck/v1"
	duckv1 "knative.dev/pkg/apis/duck/v1"
)

// KafkaSource is a KafkaSource of a rendered kustomization or chart, reduced to what Knative's
// control plane puts in the dispatcher's contract and does before the dispatcher consumes.
type KafkaSource struct {
	Name          string
	Bootstrap     []string
	Topics        []string
	ConsumerGroup string
	// InitialOffset is earliest or latest (KafkaSource's default). With latest the control
	// plane commits the end offsets of every partition the group has no offset for before the
	// source turns ready.
	InitialOffset string
	// Ordered is ordering: ordered (the default), one request in flight per partition.
	Ordered bool
	// KeyType is the contract's key type (label kafkasources.sources.knative.dev/key-type).
	KeyType   string
	Consumers int32
	// Delivery: retries, exponential (else linear) backoff from BackoffDelay, each request's
	// timeout, and the dead-letter sink's name (empty: none).
	Retry        int
	Exponential  bool
	BackoffDelay time.Duration
	Timeout      time.Duration
	DeadLetter   string
	// Sink is the Service the events go to, Audience the OIDC audience of the tokens sent to it.
	Sink, Audience string
}

// keyTypes maps the key-type label to the contract's key type (eventing-kafka-broker's
// control plane: string, int, float, byte-array).
var keyTypes = map[string]string{"": "String", "string": "String", "int": "Integer", "float": "Double", "byte-array": "ByteArray"}

// isoDuration reads an ISO 8601 duration as Knative's delivery validation does.
func isoDuration(s *string, def time.Duration) (time.Duration, error) {
	if s == nil {
		return def, nil
	}
	p, err := period.Parse(*s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", *s, err)
	}
	d, _ := p.Duration()
	return d, nil
}

// KafkaSources derives the KafkaSources of a rendered kustomization or chart.
func KafkaSources(objs []map[string]any) ([]KafkaSource, error) {
	var out []KafkaSource
	for _, o := range objs {
		if o["kind"] != "KafkaSource" {
			continue
		}
		var ks struct {
			Metadata struct {
				Name   string
				Labels map[string]string
			}
			Spec struct {
				BootstrapServers []string `json:"bootstrapServers"`
				Topics           []string `json:"topics"`
				ConsumerGroup    string   `json:"consumerGroup"`
				InitialOffset    string   `json:"initialOffset"`
				Ordering         string   `json:"ordering"`
				Consumers        *int32   `json:"consumers"`
				Delivery         *eventingduckv1.DeliverySpec
				Sink             duckv1.Destination `json:"sink"`
			}
		}
		if err := decode(o, &ks); err != nil {
			return nil, err
		}
		name, sp := ks.Metadata.Name, ks.Spec
		s := KafkaSource{Name: name, Bootstrap: sp.BootstrapServers, Topics: sp.Topics, ConsumerGroup: sp.ConsumerGroup,
			InitialOffset: orDefault(sp.InitialOffset, "latest"), Consumers: 1, Retry: 10, Exponential: true,
			BackoffDelay: 300 * time.Millisecond, Timeout: 600 * time.Second}
		switch sp.Ordering {
		case "", "ordered":
			s.Ordered = true
		case "unordered":
		default:
			return nil, fmt.Errorf("KafkaSource %s: ordering %q", name, sp.Ordering)
		}
		kt, ok := keyTypes[ks.Metadata.Labels["kafkasources.sources.knative.dev/key-type"]]
		if !ok {
			return nil, fmt.Errorf("KafkaSource %s: key-type label %q", name, ks.Metadata.Labels["kafkasources.sources.knative.dev/key-type"])
		}
		s.KeyType = kt
		if sp.Consumers != nil {
			s.Consumers = *sp.Consumers
		}
		if d := sp.Delivery; d != nil {
			if d.Retry != nil {
				s.Retry = int(*d.Retry)
			}
			if d.BackoffPolicy != nil {
				s.Exponential = *d.BackoffPolicy != eventingduckv1.BackoffPolicyLinear
			}
			var err error
			if s.BackoffDelay, err = isoDuration(d.BackoffDelay, s.BackoffDelay); err != nil {
				return nil, fmt.Errorf("KafkaSource %s: backoffDelay: %w", name, err)
			}
			if s.Timeout, err = isoDuration(d.Timeout, s.Timeout); err != nil {
				return nil, fmt.Errorf("KafkaSource %s: timeout: %w", name, err)
			}
			if d.DeadLetterSink != nil && d.DeadLetterSink.Ref != nil {
				s.DeadLetter = d.DeadLetterSink.Ref.Name
			}
		}
		if sp.Sink.Ref == nil || sp.Sink.Ref.Kind != "Service" {
			return nil, fmt.Errorf("KafkaSource %s: sink is not a Service reference", name)
		}
		s.Sink = sp.Sink.Ref.Name
		if sp.Sink.Audience != nil {
			s.Audience = *sp.Sink.Audience
		}
		if len(s.Topics) == 0 || s.ConsumerGroup == "" {
			return nil, fmt.Errorf("KafkaSource %s: topics %v, consumerGroup %q", name, s.Topics, s.ConsumerGroup)
		}
		for _, t := range s.Topics {
			if strings.ContainsAny(t, "*^$[") {
				return nil, fmt.Errorf("KafkaSource %s: topic %q is a pattern, the dispatcher takes literal names", name, t)
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
