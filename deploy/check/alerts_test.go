package check

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

const (
	// alertsFile is the plain Prometheus rules file of the recommended alerts.
	alertsFile = "deploy/prometheus/mm2go-alerts.yaml"
	// chartAlertsFile is its copy inside the chart, which templates/prometheusrule.yaml reads.
	chartAlertsFile = chartDir + "/files/mm2go-alerts.yaml"
)

// parseRules parses a rules file as Prometheus loads rule_files: rulefmt with unknown fields
// refused, every expression through the PromQL parser, every annotation and label template
// parsed.
func parseRules(t testing.TB, where string, content []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%s: %v", where, err)
	}
	if groups == nil || len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// TestAlertRules: deploy/prometheus/mm2go-alerts.yaml passes Prometheus's own rule parser
// (rulefmt: fields, durations, templates; PromQL), each alert has a severity, a summary and a
// description, and every metric it selects is one docs/metrics.md documents and a
// shared/metrics recorder exports. The chart's copy is the same file.
func TestAlertRules(t *testing.T) {
	content := mustReadTB(t, alertsFile)
	groups := parseRules(t, alertsFile, content)
	documented := documentedMetrics(t)
	live := recorderSamples(t)
	p := parser.NewParser(parser.Options{})
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			where := alertsFile + ": " + r.Alert
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			selected := 0
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				selected++
				if !documented[histogramFamily(vs.Name)] {
					t.Errorf("%s: %s is not in docs/metrics.md", where, vs.Name)
				}
				if !live[vs.Name] {
					t.Errorf("%s: %s is not on a recorder's /metrics", where, vs.Name)
				}
				return nil
			})
			if selected == 0 {
				t.Errorf("%s: %q selects no metric", where, r.Expr)
			}
		}
	}
	if alerts < 5 {
		t.Errorf("%s: %d alerts, want the 5 recommended ones", alertsFile, alerts)
	}
	if chart := mustReadTB(t, chartAlertsFile); !bytes.Equal(chart, content) {
		t.Errorf("%s differs from %s: cp %s %s", chartAlertsFile, alertsFile, alertsFile, chartAlertsFile)
	}
}

// TestHelmPrometheusRule: with prometheusRule.enabled every shape renders one PrometheusRule,
// decoded strictly into the Prometheus Operator's Go type, carrying prometheusRule.labels and
// exactly the rules of deploy/prometheus/mm2go-alerts.yaml (parsed by rulefmt both ways);
// without it, none.
func TestHelmPrometheusRule(t *testing.T) {
	ch := loadChart(t)
	want := parseRules(t, alertsFile, mustReadTB(t, alertsFile))
	for _, c := range chartCases {
		vals := c.values(t)
		if n := countKind(chartDocs(t, ch, vals), "PrometheusRule"); n != 0 {
			t.Errorf("%s: %d PrometheusRules without prometheusRule.enabled", c.name, n)
		}
		vals["prometheusRule"] = map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}
		var rules []*monitoringv1.PrometheusRule
		for _, d := range chartDocs(t, ch, vals) {
			if d.kind != "PrometheusRule" {
				continue
			}
			if err := checkSchema(t, d); err != nil {
				t.Fatal(err)
			}
			var pr monitoringv1.PrometheusRule
			if err := strict(d.raw, &pr); err != nil {
				t.Fatalf("%s: %v: not a monitoring.coreos.com/v1 PrometheusRule: %v", c.name, d, err)
			}
			rules = append(rules, &pr)
		}
		if len(rules) != 1 {
			t.Fatalf("%s: %d PrometheusRules, want 1", c.name, len(rules))
		}
		pr := rules[0]
		if pr.Labels["release"] != "prometheus" {
			t.Errorf("%s: PrometheusRule labels %v lack prometheusRule.labels", c.name, pr.Labels)
		}
		spec, err := yaml.Marshal(pr.Spec)
		if err != nil {
			t.Fatal(err)
		}
		got := parseRules(t, c.name+": the PrometheusRule's spec", spec)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the PrometheusRule's groups are not those of %s:\n%s", c.name, alertsFile, spec)
		}
	}
}

func countKind(docs []doc, kind string) int {
	n := 0
	for _, d := range docs {
		if strings.EqualFold(d.kind, kind) {
			n++
		}
	}
	return n
}
