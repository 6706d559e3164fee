package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kerr"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Scrape fetches h's Prometheus text and parses it with the Prometheus text parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, rec.Body)
	}
	return mf
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestPrometheusOutput(t *testing.T) {
	ctx := context.Background()
	r, err := New(ctx, Options{Function: "mirror", SourceAlias: "a", TargetAlias: "b", Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(ctx)
	r.Copied(ctx, "orders", 0, 10, 1000)
	r.Copied(ctx, "orders", 0, 5, 500)
	r.Copied(ctx, "orders", 1, 1, 7)
	r.RecordAge(ctx, "orders", 0, 2*time.Second)
	r.ReplicationLatency(ctx, "orders", 0, 30*time.Millisecond)
	r.Lag(ctx, "orders", 0, 42)
	r.Lag(ctx, "orders", 0, 0)
	r.CheckpointLatency(ctx, "g1", "a.orders", 0, time.Millisecond)
	r.HeartbeatLatency(ctx, 3*time.Second)
	r.Error(ctx, ErrorKind(kerr.NotLeaderForPartition))
	r.Burst(ctx, "done", time.Second)

	mf := scrape(t, r.Handler())
	want := map[string]dto.MetricType{
		"mm2go_records_copied_total":        dto.MetricType_COUNTER,
		"mm2go_bytes_copied_total":          dto.MetricType_COUNTER,
		"mm2go_record_age_seconds":          dto.MetricType_HISTOGRAM,
		"mm2go_replication_latency_seconds": dto.MetricType_HISTOGRAM,
		"mm2go_lag_records":                 dto.MetricType_GAUGE,
		"mm2go_checkpoint_latency_seconds":  dto.MetricType_HISTOGRAM,
		"mm2go_checkpoints_written_total":   dto.MetricType_COUNTER,
		"mm2go_heartbeat_latency_seconds":   dto.MetricType_GAUGE,
		"mm2go_errors_total":                dto.MetricType_COUNTER,
		"mm2go_bursts_total":                dto.MetricType_COUNTER,
		"mm2go_burst_duration_seconds":      dto.MetricType_HISTOGRAM,
	}
	for name, typ := range want {
		f, ok := mf[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
		}
	}
	for _, m := range mf["mm2go_records_copied_total"].GetMetric() {
		l := labelsOf(m)
		if l["source"] != "a" || l["target"] != "b" || l["topic"] != "orders" {
			t.Errorf("labels %v", l)
		}
		got := m.GetCounter().GetValue()
		if w := map[string]float64{"0": 15, "1": 1}[l["partition"]]; got != w {
			t.Errorf("records partition %s = %v, want %v", l["partition"], got, w)
		}
	}
	for _, m := range mf["mm2go_bytes_copied_total"].GetMetric() {
		l := labelsOf(m)
		if w := map[string]float64{"0": 1500, "1": 7}[l["partition"]]; m.GetCounter().GetValue() != w {
			t.Errorf("bytes partition %s = %v, want %v", l["partition"], m.GetCounter().GetValue(), w)
		}
	}
	if g := mf["mm2go_lag_records"].GetMetric()[0].GetGauge().GetValue(); g != 0 {
		t.Errorf("lag = %v, want 0 (last value)", g)
	}
	e := mf["mm2go_errors_total"].GetMetric()[0]
	if labelsOf(e)["kind"] != "not-leader-for-partition" {
		t.Errorf("error kind %v", labelsOf(e))
	}
	b := mf["mm2go_bursts_total"].GetMetric()[0]
	if l := labelsOf(b); l["reason"] != "done" || l["function"] != "mirror" {
		t.Errorf("burst labels %v", l)
	}
}

func TestNilAndNop(t *testing.T) {
	ctx := context.Background()
	for _, r := range []*Recorder{nil, Nop()} {
		r.Copied(ctx, "t", 0, 1, 1)
		r.RecordAge(ctx, "t", 0, time.Second)
		r.ReplicationLatency(ctx, "t", 0, time.Second)
		r.Lag(ctx, "t", 0, 1)
		r.CheckpointLatency(ctx, "g", "t", 0, time.Second)
		r.HeartbeatLatency(ctx, time.Second)
		r.Error(ctx, "x")
		r.Burst(ctx, "done", time.Second)
		if err := r.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("handler without Prometheus: %d", rec.Code)
		}
	}
}

// otlpReceiver is an OTLP/HTTP metrics endpoint that decodes every request.
type otlpReceiver struct {
	mu   sync.Mutex
	reqs []*colmetrics.ExportMetricsServiceRequest
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := &colmetrics.ExportMetricsServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(body, req)
	}
	if err != nil || r.URL.Path != "/v1/metrics" {
		http.Error(w, fmt.Sprintf("path %s: %v", r.URL.Path, err), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.reqs = append(o.reqs, req)
	o.mu.Unlock()
	out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// sums returns the newest value of every int sum data point by metric name and partition.
func (o *otlpReceiver) sums() map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int64{}
	for _, req := range o.reqs {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					for _, dp := range m.GetSum().GetDataPoints() {
						out[m.GetName()] = dp.GetAsInt() // one data point per metric in these tests
					}
				}
			}
		}
	}
	return out
}

func TestOTLPHTTPShutdownFlushes(t *testing.T) {
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
	// The exporter reads the endpoint from the process environment, as the SDK documents.
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	r, err := New(ctx, Options{Function: "mirror", SourceAlias: "a", TargetAlias: "b", LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if r.OTLP() != "http/protobuf" {
		t.Fatalf("OTLP() = %q", r.OTLP())
	}
	r.Copied(ctx, "orders", 0, 12, 345)
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := recv.sums()
	if got[NameRecordsCopied] != 12 || got[NameBytesCopied] != 345 {
		t.Fatalf("OTLP receiver got %v, want records 12 bytes 345", got)
	}
}

func TestOTLPOffWithoutEndpoint(t *testing.T) {
	r, err := New(context.Background(), Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if r.OTLP() != "" {
		t.Fatalf("OTLP on without endpoint: %q", r.OTLP())
	}
	_, err = New(context.Background(), Options{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}[k], true
	}})
	if err == nil || !strings.Contains(err.Error(), "carrier-pigeon") {
		t.Fatalf("unknown protocol: %v", err)
	}
}

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("x: %w", kerr.TopicAuthorizationFailed), "topic-authorization-failed"},
		{context.DeadlineExceeded, KindTimeout},
		{fmt.Errorf("y: %w", context.Canceled), KindCanceled},
		{errors.New("boom"), KindOther},
	} {
		if got := ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
