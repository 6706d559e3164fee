package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mm2go/mm2go/shared/app"
	"github.com/mm2go/mm2go/shared/config"
	"github.com/mm2go/mm2go/shared/engine"
	"github.com/mm2go/mm2go/shared/metrics"
	"github.com/mm2go/mm2go/shared/serve"
	"github.com/mm2go/mm2go/test/testkit"
)

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestOpsMetricsAfterBurst copies a known set of records with a Prometheus recorder and reads
// /metrics through serve's handler: copied records and bytes equal the burst's, every
// partition's lag is 0, and the age and latency histograms hold samples of the right size.
func TestOpsMetricsAfterBurst(t *testing.T) {
	c := testkit.Require(t)
	ctx := testkit.Context(t, 2*time.Minute)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "metrics"), 3, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+topic)
	recs := testkit.SampleRecords(topic, 3, 90)
	testkit.Produce(t, c.Source.Bootstrap, recs...)
	var wantBytes int64
	for _, r := range recs {
		wantBytes += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			wantBytes += int64(len(h.Key) + len(h.Value))
		}
	}

	rec, err := metrics.New(ctx, metrics.Options{Function: "mirror", SourceAlias: "source", TargetAlias: "target", Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(envMap(MirrorEnv(c, topic)), nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	o, err := app.EngineOptions(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Metrics = rec
	e, err := engine.New(ctx, o, app.Dialer(cfg, log), log)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.Burst(ctx, engine.BurstOptions{})
	if err != nil || s.Records != 90 || s.Bytes != wantBytes {
		t.Fatalf("burst: %v, %d records %d bytes; want 90 records %d bytes", err, s.Records, s.Bytes, wantBytes)
	}

	h := serve.NewHTTPHandler(serve.Config{Metrics: rec.Handler()}, log,
		serve.HandlerFunc(func(context.Context, event.Event) protocol.Result { return nil }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}

	sum := func(name string) (total float64, perPartition map[string]float64) {
		perPartition = map[string]float64{}
		for _, m := range mf[name].GetMetric() {
			l := labelMap(m)
			if l["topic"] != topic {
				continue
			}
			if l["source"] != "source" || l["target"] != "target" {
				t.Errorf("%s labels %v", name, l)
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			perPartition[l["partition"]] += v
			total += v
		}
		return total, perPartition
	}
	if got, per := sum("mm2go_records_copied_total"); got != 90 || len(per) != 3 || per["0"] != 30 {
		t.Errorf("mm2go_records_copied_total = %v %v, want 90 (30 per partition)", got, per)
	}
	if got, _ := sum("mm2go_bytes_copied_total"); int64(got) != wantBytes {
		t.Errorf("mm2go_bytes_copied_total = %v, want %d", got, wantBytes)
	}
	lags := 0
	for _, m := range mf["mm2go_lag_records"].GetMetric() {
		if labelMap(m)["topic"] == topic {
			lags++
			if v := m.GetGauge().GetValue(); v != 0 {
				t.Errorf("lag of %v = %v, want 0", labelMap(m), v)
			}
		}
	}
	if lags != 3 {
		t.Errorf("lag gauges for %d partitions, want 3", lags)
	}
	// SampleRecords are stamped in January 2020: every age and latency sample is older.
	minAge := time.Since(time.Date(2020, 1, 2, 3, 5, 0, 0, time.UTC)).Seconds()
	for _, name := range []string{"mm2go_record_age_seconds", "mm2go_replication_latency_seconds"} {
		var n uint64
		for _, m := range mf[name].GetMetric() {
			if labelMap(m)["topic"] != topic {
				continue
			}
			hg := m.GetHistogram()
			n += hg.GetSampleCount()
			if hg.GetSampleCount() > 0 && hg.GetSampleSum() < float64(hg.GetSampleCount())*minAge {
				t.Errorf("%s %v: sum %v over %d samples, want each >= %v s", name, labelMap(m), hg.GetSampleSum(), hg.GetSampleCount(), minAge)
			}
		}
		if n == 0 || n > 90 {
			t.Errorf("%s: %d samples, want between 1 and 90 (sampled per batch)", name, n)
		}
	}
}

// otlpSink is an OTLP/HTTP metrics receiver decoding ExportMetricsServiceRequest protobufs.
type otlpSink struct {
	mu   sync.Mutex
	reqs []*colmetrics.ExportMetricsServiceRequest
}

func (o *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := &colmetrics.ExportMetricsServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(body, req)
	}
	if err != nil || r.URL.Path != "/v1/metrics" {
		http.Error(w, fmt.Sprintf("%s: %v", r.URL.Path, err), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.reqs = append(o.reqs, req)
	o.mu.Unlock()
	out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out[kv.GetKey()] = v.GetStringValue()
		default:
			out[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		}
	}
	return out
}

// sums returns, per metric name, the newest cumulative value of every sum data point whose
// attributes match keep, added up.
func (o *otlpSink) sums(keep func(map[string]string) bool) (map[string]int64, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	newest := map[string]int64{} // name + attributes -> value
	names := map[string]string{}
	for _, req := range o.reqs {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					for _, dp := range m.GetSum().GetDataPoints() {
						a := attrs(dp.GetAttributes())
						if !keep(a) {
							continue
						}
						k := m.GetName() + fmt.Sprint(a)
						newest[k] = dp.GetAsInt()
						names[k] = m.GetName()
					}
				}
			}
		}
	}
	out := map[string]int64{}
	for k, v := range newest {
		out[names[k]] += v
	}
	return out, len(o.reqs)
}

// TestOpsMetricsOTLPFromMirrorRun runs the built `mirror run` with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at a test receiver and an export interval of an hour: the burst's metrics arrive
// anyway, because the process flushes before it exits, and equal the burst's summary.
func TestOpsMetricsOTLPFromMirrorRun(t *testing.T) {
	c := testkit.Require(t)
	topic := testkit.CreateTopic(t, c.Source.Bootstrap, testkit.Name(t, "otlp"), 2, nil)
	testkit.DeleteTopicsAtEnd(t, c.Target.Bootstrap, "source."+topic)
	testkit.Produce(t, c.Source.Bootstrap, testkit.SampleRecords(topic, 2, 60)...)

	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	r := RunMirror(t, MirrorEnv(c, topic,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_METRIC_EXPORT_INTERVAL=3600000"))
	if r.Code != 0 || r.Records() != 60 {
		t.Fatalf("mirror run: exit %d, %d records\n%s", r.Code, r.Records(), r.Stderr)
	}
	wantBytes, _ := r.Summary["bytes"].(float64)

	got, n := sink.sums(func(a map[string]string) bool { return a["topic"] == topic })
	if n == 0 {
		t.Fatal("the OTLP receiver got no request before the process exited")
	}
	if got[metrics.NameRecordsCopied] != 60 || got[metrics.NameBytesCopied] != int64(wantBytes) {
		t.Errorf("OTLP: records %d bytes %d, want 60 and %d (%d requests)", got[metrics.NameRecordsCopied], got[metrics.NameBytesCopied], int64(wantBytes), n)
	}
	bursts, _ := sink.sums(func(a map[string]string) bool { return a["function"] == "mirror" && a["reason"] == "done" })
	if bursts[metrics.NameBursts] != 1 {
		t.Errorf("OTLP: %d bursts with reason done, want 1", bursts[metrics.NameBursts])
	}
}
