package check

import (
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestHelmPodMonitor: with podMonitor.enabled the knative shape renders one PodMonitor,
// decoded strictly into the Prometheus Operator's own Go types (monitoring.coreos.com/v1),
// whose selector picks exactly the pods of the three Services and whose endpoint is the port
// `serve` answers /metrics on. The other shapes refuse it: their run Jobs have no port.
func TestHelmPodMonitor(t *testing.T) {
	ch := loadChart(t)
	vals := chartCases[2].values(t) // knative
	if vals["shape"] != "knative" {
		t.Fatalf("chartCases[2] is %v, want the knative example", vals["shape"])
	}
	vals["podMonitor"] = map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}
	var rest []doc
	var pms []*monitoringv1.PodMonitor
	for _, d := range chartDocs(t, ch, vals) {
		if d.kind != "PodMonitor" {
			rest = append(rest, d)
			continue
		}
		if err := checkSchema(t, d); err != nil {
			t.Fatal(err)
		}
		var pm monitoringv1.PodMonitor
		if err := strict(d.raw, &pm); err != nil {
			t.Fatalf("%v: not a monitoring.coreos.com/v1 PodMonitor: %v", d, err)
		}
		pms = append(pms, &pm)
	}
	if len(pms) != 1 {
		t.Fatalf("%d PodMonitors, want 1", len(pms))
	}
	pm := pms[0]
	if pm.APIVersion != monitoringv1.SchemeGroupVersion.String() || pm.Kind != monitoringv1.PodMonitorsKind {
		t.Errorf("PodMonitor %s/%s", pm.APIVersion, pm.Kind)
	}
	if pm.Labels["release"] != "prometheus" {
		t.Errorf("PodMonitor labels %v lack podMonitor.labels", pm.Labels)
	}
	if ns := pm.Spec.NamespaceSelector.MatchNames; len(ns) != 1 || ns[0] != testNamespace {
		t.Errorf("namespaceSelector %v, want the release namespace", ns)
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatalf("PodMonitor selector: %v", err)
	}
	dd := decodeAll(t, rest)
	if len(dd.services) != 3 {
		t.Fatalf("%d Knative Services", len(dd.services))
	}
	for name, s := range dd.services {
		// Knative adds its own labels to the pods; the template's are what the chart controls.
		if !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
			t.Errorf("Service %s: pod labels %v not selected by %v", name, s.Spec.Template.Labels, sel)
		}
	}
	for name, cm := range dd.configMaps {
		if sel.Matches(labels.Set(cm.Labels)) && !strings.HasSuffix(name, "-settings") {
			t.Errorf("selector matches ConfigMap %s", name)
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("%d endpoints", len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Path != "/metrics" || ep.PortNumber == nil || ep.Port != nil {
		t.Errorf("endpoint path %q port %v portNumber %v, want /metrics on the container port number", ep.Path, ep.Port, ep.PortNumber)
	}
	for name, s := range dd.services {
		ports := s.Spec.Template.Spec.Containers[0].Ports
		if len(ports) != 1 || ep.PortNumber == nil || ports[0].ContainerPort != *ep.PortNumber {
			t.Errorf("Service %s: container ports %v, PodMonitor scrapes %v", name, ports, ep.PortNumber)
		}
	}
	if ep.Interval == "" {
		t.Error("no scrape interval")
	}

	for _, c := range chartCases {
		if c.shape == "knative" {
			continue
		}
		v := c.values(t)
		v["podMonitor"] = map[string]any{"enabled": true}
		if _, err := renderChart(t, ch, v); err == nil || !strings.Contains(err.Error(), "podMonitor.enabled needs shape=knative") {
			t.Errorf("%s: podMonitor.enabled gave %v, want a refusal naming the shape", c.name, err)
		}
	}
}
