// Package metrics records mm2go's operational metrics with OpenTelemetry and exposes them two
// ways: a Prometheus text handler (for the /metrics endpoint of serve) and OTLP push (HTTP or
// gRPC) when the standard OTEL_EXPORTER_OTLP_* variables ask for it.
//
// A Recorder is created in main and passed down; there is no global meter provider. A nil
// *Recorder is valid and records nothing, so packages can take an optional *Recorder without
// checks; Nop returns a non-nil one for tests that want to exercise the calls.
//
// The metrics and their MirrorMaker 2 equivalents are listed in docs/metrics.md. Callers
// aggregate on the hot path: counts are passed as deltas per fetch batch or per position flush,
// and the age/latency histograms are sampled once per fetched batch and partition, not per record.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Metric names as exported to Prometheus (OTLP carries the same names without the _total
// suffix of counters). See docs/metrics.md.
const (
	NameRecordsCopied      = "mm2go_records_copied"
	NameBytesCopied        = "mm2go_bytes_copied"
	NameRecordAge          = "mm2go_record_age_seconds"
	NameReplicationLatency = "mm2go_replication_latency_seconds"
	NameLag                = "mm2go_lag_records"
	NameCheckpointLatency  = "mm2go_checkpoint_latency_seconds"
	NameCheckpoints        = "mm2go_checkpoints_written"
	NameHeartbeatLatency   = "mm2go_heartbeat_latency_seconds"
	NameErrors             = "mm2go_errors"
	NameBursts             = "mm2go_bursts"
	NameBurstDuration      = "mm2go_burst_duration_seconds"
	NameSourceGaps         = "mm2go_source_gaps"
	NameSourceGapRecords   = "mm2go_source_gap_records"
)

// latencyBuckets are histogram bounds in seconds, from milliseconds to a week: record ages of a
// backlog copied after a long pause are legitimately days.
var latencyBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400, 604800}

// Options configure a Recorder. Zero values mean the default named in each field's comment.
type Options struct {
	// Function is "mirror", "checkpoint" or "heartbeat": the function attribute of burst
	// metrics and part of service.name ("mm2go-<function>"). Empty means "mm2go".
	Function string
	// SourceAlias and TargetAlias become the source and target attributes of every metric
	// (MM2's KIP-911 source tag).
	SourceAlias, TargetAlias string
	// Prometheus, when true, makes Handler serve the metrics in Prometheus text format.
	Prometheus bool
	// LookupEnv decides whether OTLP export is on: it is when OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set (non-empty). The protocol comes from
	// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" or
	// "http/protobuf" (the default). The exporter then reads the other standard variables
	// (headers, certificates, timeout, OTEL_METRIC_EXPORT_INTERVAL) itself, as the
	// OpenTelemetry SDK documents. Nil means no OTLP export.
	LookupEnv func(string) (string, bool)
	// Logger reports export problems; nil discards them.
	Logger *slog.Logger
}

// Recorder records mm2go's metrics. Its methods are safe for concurrent use; all of them do
// nothing on a nil *Recorder.
type Recorder struct {
	provider metric.MeterProvider
	sdk      *sdkmetric.MeterProvider // nil for Nop
	registry *prometheus.Registry     // nil unless Options.Prometheus
	otlp     string                   // "", "http/protobuf" or "grpc"
	log      *slog.Logger
	function string
	flow     []attribute.KeyValue

	recordsCopied, bytesCopied, errs, bursts, checkpoints metric.Int64Counter
	gaps, gapRecords                                      metric.Int64Counter
	recordAge, replLatency, cpLatency, burstDuration      metric.Float64Histogram
	lag                                                   metric.Int64Gauge
	hbLatency                                             metric.Float64Gauge

	mu    sync.RWMutex
	attrs map[tpKey]metric.MeasurementOption // per topic-partition attribute sets
}

type tpKey struct {
	topic     string
	partition int32
}

// New returns a Recorder for one flow. It fails only if an exporter cannot be built from its
// settings (e.g. an unknown OTLP protocol); it never connects anywhere itself.
func New(ctx context.Context, o Options) (*Recorder, error) {
	if o.Function == "" {
		o.Function = "mm2go"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	service := "mm2go"
	if o.Function != "mm2go" {
		service += "-" + o.Function
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		res = resource.NewSchemaless(attribute.String("service.name", service))
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	r := &Recorder{log: log, function: o.Function, attrs: map[tpKey]metric.MeasurementOption{}}
	if o.Prometheus {
		r.registry = prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(r.registry), otelprom.WithoutScopeInfo())
		if err != nil {
			return nil, fmt.Errorf("creating Prometheus exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(exp))
	}
	if o.LookupEnv != nil {
		exp, proto, err := otlpExporter(ctx, o.LookupEnv)
		if err != nil {
			return nil, err
		}
		if exp != nil {
			r.otlp = proto
			opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		}
	}
	r.sdk = sdkmetric.NewMeterProvider(opts...)
	r.provider = r.sdk
	r.flow = []attribute.KeyValue{attribute.String("source", o.SourceAlias), attribute.String("target", o.TargetAlias)}
	if err := r.instruments(); err != nil {
		return nil, err
	}
	return r, nil
}

// Nop returns a Recorder that accepts every call and records nothing.
func Nop() *Recorder {
	r := &Recorder{provider: noop.NewMeterProvider(), log: slog.New(slog.DiscardHandler), attrs: map[tpKey]metric.MeasurementOption{}}
	if err := r.instruments(); err != nil {
		panic(err) // the no-op provider never fails
	}
	return r
}

// otlpExporter builds the OTLP exporter the environment asks for, or nil when no endpoint is set.
func otlpExporter(ctx context.Context, lookupEnv func(string) (string, bool)) (sdkmetric.Exporter, string, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	if get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return nil, "", nil
	}
	proto := get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
	if proto == "" {
		proto = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("creating OTLP/HTTP metric exporter: %w", err)
		}
		return exp, "http/protobuf", nil
	case "grpc":
		exp, err := otlpmetricgrpc.New(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("creating OTLP/gRPC metric exporter: %w", err)
		}
		return exp, "grpc", nil
	default:
		return nil, "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf (http/json is not supported)", proto)
	}
}

func (r *Recorder) instruments() error {
	m := r.provider.Meter("github.com/mm2go/mm2go/shared/metrics")
	var errs []error
	c := func(name, unit, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	h := func(name, desc string) metric.Float64Histogram {
		i, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(latencyBuckets...))
		errs = append(errs, err)
		return i
	}
	r.recordsCopied = c(NameRecordsCopied, "{record}", "Records copied to the target and acknowledged (MM2 record-count).")
	r.bytesCopied = c(NameBytesCopied, "By", "Key, value and header bytes of the records copied and acknowledged (MM2 byte-count counts values only).")
	r.errs = c(NameErrors, "{error}", "Errors by kind.")
	r.bursts = c(NameBursts, "{burst}", "Bursts (invocations) by function and exit reason.")
	r.checkpoints = c(NameCheckpoints, "{checkpoint}", "Checkpoints written to the checkpoints topic.")
	r.gaps = c(NameSourceGaps, "{gap}", "Source data losses a burst found and copied around, by kind: deleted (stored position behind the log start) or recreated (stored position beyond the end).")
	r.gapRecords = c(NameSourceGapRecords, "{record}", "Source records deleted before they were mirrored (gaps of kind deleted).")
	r.recordAge = h(NameRecordAge, "Age of fetched source records: fetch time minus record timestamp, one sample per fetched batch and partition (MM2 record-age-ms).")
	r.replLatency = h(NameReplicationLatency, "Target acknowledgement time minus source record timestamp, one sample per fetched batch and partition (MM2 replication-latency-ms).")
	r.cpLatency = h(NameCheckpointLatency, "Time from reading a group's committed offsets to the checkpoint's acknowledgement (MM2 checkpoint-latency-ms).")
	r.burstDuration = h(NameBurstDuration, "Duration of a burst (one invocation of a function).")
	var err error
	r.lag, err = m.Int64Gauge(NameLag, metric.WithUnit("{record}"), metric.WithDescription("Records left to copy per source partition: end offset seen at the burst's start minus the next offset to copy."))
	errs = append(errs, err)
	r.hbLatency, err = m.Float64Gauge(NameHeartbeatLatency, metric.WithUnit("s"), metric.WithDescription("Heartbeat round time minus the timestamp of the newest replicated heartbeat (<source>.heartbeats on the target)."))
	errs = append(errs, err)
	return errors.Join(errs...)
}

// tp returns the attribute option for a source topic-partition, cached.
func (r *Recorder) tp(topic string, partition int32) metric.MeasurementOption {
	k := tpKey{topic, partition}
	r.mu.RLock()
	o, ok := r.attrs[k]
	r.mu.RUnlock()
	if ok {
		return o
	}
	kv := append(append([]attribute.KeyValue(nil), r.flow...), attribute.String("topic", topic), attribute.Int("partition", int(partition)))
	o = metric.WithAttributeSet(attribute.NewSet(kv...))
	r.mu.Lock()
	r.attrs[k] = o
	r.mu.Unlock()
	return o
}

func (r *Recorder) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), r.flow...), kv...)...))
}

// Copied adds records and bytes acknowledged by the target for a source partition (deltas).
func (r *Recorder) Copied(ctx context.Context, topic string, partition int32, records, bytes int64) {
	if r == nil || (records == 0 && bytes == 0) {
		return
	}
	o := r.tp(topic, partition)
	r.recordsCopied.Add(ctx, records, o)
	r.bytesCopied.Add(ctx, bytes, o)
}

// RecordAge records the age of a fetched source record (fetch time minus its timestamp).
// Negative ages (clock skew, timestamps in the future) are recorded as 0.
func (r *Recorder) RecordAge(ctx context.Context, topic string, partition int32, age time.Duration) {
	if r == nil {
		return
	}
	r.recordAge.Record(ctx, max(age, 0).Seconds(), r.tp(topic, partition))
}

// ReplicationLatency records the target acknowledgement time minus the record's timestamp.
func (r *Recorder) ReplicationLatency(ctx context.Context, topic string, partition int32, d time.Duration) {
	if r == nil {
		return
	}
	r.replLatency.Record(ctx, max(d, 0).Seconds(), r.tp(topic, partition))
}

// Lag sets the records left to copy for a source partition.
func (r *Recorder) Lag(ctx context.Context, topic string, partition int32, lag int64) {
	if r == nil {
		return
	}
	r.lag.Record(ctx, max(lag, 0), r.tp(topic, partition))
}

// CheckpointLatency records one written checkpoint of group for the target topic-partition and
// its latency (MM2: acknowledgement time minus the time the round read the group's offsets).
func (r *Recorder) CheckpointLatency(ctx context.Context, group, topic string, partition int32, d time.Duration) {
	if r == nil {
		return
	}
	o := r.with(attribute.String("group", group), attribute.String("topic", topic), attribute.Int("partition", int(partition)))
	r.checkpoints.Add(ctx, 1, o)
	r.cpLatency.Record(ctx, max(d, 0).Seconds(), o)
}

// HeartbeatLatency sets the end-to-end replication latency measured by a heartbeat round.
func (r *Recorder) HeartbeatLatency(ctx context.Context, d time.Duration) {
	if r == nil {
		return
	}
	r.hbLatency.Record(ctx, max(d, 0).Seconds(), r.with())
}

// SourceGap counts one loss of source data found on a partition: kind "deleted" with the
// number of records deleted before they were mirrored, or "recreated" (records < 0: unknown).
func (r *Recorder) SourceGap(ctx context.Context, topic string, partition int32, kind string, records int64) {
	if r == nil {
		return
	}
	o := r.with(attribute.String("topic", topic), attribute.Int("partition", int(partition)), attribute.String("kind", kind))
	r.gaps.Add(ctx, 1, o)
	if records > 0 {
		r.gapRecords.Add(ctx, records, r.tp(topic, partition))
	}
}

// Error counts one error of the given kind (see ErrorKind for a classification).
func (r *Recorder) Error(ctx context.Context, kind string) {
	if r == nil {
		return
	}
	r.errs.Add(ctx, 1, r.with(attribute.String("kind", kind), attribute.String("function", r.function)))
}

// Burst records the end of one burst (invocation): its duration and exit reason ("done",
// "max-records", "max-duration", "stopped", "failed", ...).
func (r *Recorder) Burst(ctx context.Context, reason string, d time.Duration) {
	if r == nil {
		return
	}
	o := r.with(attribute.String("function", r.function), attribute.String("reason", reason))
	r.bursts.Add(ctx, 1, o)
	r.burstDuration.Record(ctx, max(d, 0).Seconds(), o)
}

// Handler serves the metrics in Prometheus text format. Without Options.Prometheus (or on a
// nil Recorder) it answers 404.
func (r *Recorder) Handler() http.Handler {
	if r == nil || r.registry == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{})
}

// OTLP returns the OTLP protocol in use ("http/protobuf" or "grpc"), "" when OTLP is off.
func (r *Recorder) OTLP() string {
	if r == nil {
		return ""
	}
	return r.otlp
}

// Flush pushes the metrics recorded so far to the OTLP endpoint, if any. Short jobs call
// Shutdown instead, which also flushes.
func (r *Recorder) Flush(ctx context.Context) error {
	if r == nil || r.sdk == nil {
		return nil
	}
	if err := r.sdk.ForceFlush(ctx); err != nil {
		return fmt.Errorf("flushing metrics: %w", err)
	}
	return nil
}

// Shutdown flushes the metrics (ForceFlush) and stops the exporters. Call it once before the
// process exits so that a short job's metrics reach the OTLP endpoint.
func (r *Recorder) Shutdown(ctx context.Context) error {
	if r == nil || r.sdk == nil {
		return nil
	}
	err := r.sdk.ForceFlush(ctx)
	if serr := r.sdk.Shutdown(ctx); serr != nil && !errors.Is(serr, sdkmetric.ErrReaderShutdown) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("flushing metrics: %w", err)
	}
	return nil
}
