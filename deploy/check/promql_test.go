package check

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/mm2go/mm2go/shared/metrics"
)

// grafanaVar is a Grafana variable reference: $name, ${name} or ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)

// labelValues is Grafana's label_values(selector, label) variable query (not PromQL).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// promqlOf turns a dashboard query into PromQL as Grafana sends it: range variables
// ($__rate_interval, $__range, ${run_window}, ...) become a duration, the others a label value.
func promqlOf(q string, rangeVars map[string]bool) string {
	return grafanaVar.ReplaceAllStringFunc(q, func(v string) string {
		name := grafanaVar.FindStringSubmatch(v)[1]
		if strings.HasPrefix(name, "__") || rangeVars[name] {
			return "5m"
		}
		return "x"
	})
}

// parsedQuery is one dashboard query parsed by Prometheus's own parser.
type parsedQuery struct {
	where   string
	expr    string
	metrics []string // metric names of its selectors
}

// parseDashboard parses every panel query and variable query of the dashboard with
// promql/parser and returns them with the metric names they select.
func parseDashboard(t testing.TB) []parsedQuery {
	t.Helper()
	rangeVars := map[string]bool{}
	for _, v := range dashboardVariables(t) {
		if v.Type == "interval" || v.Type == "custom" && strings.HasSuffix(v.Name, "_window") {
			rangeVars[v.Name] = true
		}
	}
	p := parser.NewParser(parser.Options{})
	var out []parsedQuery
	for _, q := range dashboardQueriesWhere(t) {
		pq := parsedQuery{where: q.where, expr: q.expr}
		src := promqlOf(q.expr, rangeVars)
		if m := labelValues.FindStringSubmatch(strings.TrimSpace(src)); m != nil {
			ms, err := p.ParseMetricSelector(m[1])
			if err != nil {
				t.Errorf("%s: label_values selector %q: %v", q.where, m[1], err)
				continue
			}
			for _, lm := range ms {
				if lm.Name == "__name__" {
					pq.metrics = append(pq.metrics, lm.Value)
				}
			}
			out = append(out, pq)
			continue
		}
		expr, err := p.ParseExpr(src)
		if err != nil {
			t.Errorf("%s: PromQL %q: %v", q.where, q.expr, err)
			continue
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				if vs.Name == "" {
					t.Errorf("%s: selector %s without a metric name", q.where, vs)
				}
				pq.metrics = append(pq.metrics, vs.Name)
			}
			return nil
		})
		if len(pq.metrics) == 0 {
			t.Errorf("%s: %q selects no metric", q.where, q.expr)
		}
		out = append(out, pq)
	}
	if len(out) < 10 {
		t.Fatalf("only %d dashboard queries parsed", len(out))
	}
	return out
}

// documentedMetrics returns the metric names docs/metrics.md's table lists.
func documentedMetrics(t testing.TB) map[string]bool {
	t.Helper()
	documented := map[string]bool{}
	for _, line := range strings.Split(string(mustReadTB(t, "docs/metrics.md")), "\n") {
		if strings.HasPrefix(line, "| `mm2go_") {
			documented[metricName.FindString(line)] = true
		}
	}
	if len(documented) < 10 {
		t.Fatalf("docs/metrics.md documents only %d metrics: %v", len(documented), keys(documented))
	}
	return documented
}

// TestDashboardPromQL parses every query with Prometheus's own PromQL parser; each selector
// names a metric docs/metrics.md documents (histogram series by their family) and that a
// recorder of shared/metrics shows on its Prometheus /metrics once each instrument recorded.
func TestDashboardPromQL(t *testing.T) {
	documented := documentedMetrics(t)
	live := recorderSamples(t)
	for _, q := range parseDashboard(t) {
		for _, n := range q.metrics {
			if !documented[histogramFamily(n)] {
				t.Errorf("%s: %s is not in docs/metrics.md", q.where, n)
			}
			if !live[n] {
				t.Errorf("%s: %s is not on a recorder's /metrics (%d sample names there)", q.where, n, len(live))
			}
		}
	}
}

// recorderSamples records one value on every instrument of a shared/metrics Recorder with its
// Prometheus exporter, serves its handler in-process and returns the sample names of GET
// /metrics.
func recorderSamples(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	r, err := metrics.New(ctx, metrics.Options{Function: "mirror", SourceAlias: "src", TargetAlias: "tgt", Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	r.Copied(ctx, "orders", 0, 10, 1000)
	r.RecordAge(ctx, "orders", 0, time.Second)
	r.ReplicationLatency(ctx, "orders", 0, time.Second)
	r.Lag(ctx, "orders", 0, 5)
	r.CheckpointLatency(ctx, "g", "src.orders", 0, time.Second)
	r.HeartbeatLatency(ctx, time.Second)
	r.SourceGap(ctx, "orders", 0, "deleted", 3)
	r.Error(ctx, "timeout")
	r.Burst(ctx, "done", time.Second)
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	return metricSampleNames(t, "the recorder", srv.URL+"/metrics")
}
