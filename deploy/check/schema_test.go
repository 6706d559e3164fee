package check

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	kusttypes "sigs.k8s.io/kustomize/api/types"
)

// strictCodecs decode every built-in Kubernetes kind (k8s.io/api) as the API server's strict
// field validation does: unknown and duplicate fields are errors.
var strictCodecs = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)

// goTyped are the kinds without a CRD in testdata/crds and outside k8s.io/api that the
// manifests use on purpose, each decoded strictly into its own project's Go type.
var goTyped = map[string]func([]byte) error{
	// Knative Serving's CRD only carries x-kubernetes-preserve-unknown-fields; its webhook
	// validates against these Go types (TestKnativeManifests also runs their Validate).
	"serving.knative.dev/v1/Service": func(raw []byte) error { return strict(raw, &servingv1.Service{}) },
	// The Prometheus Operator's types (its CRD is generated from them).
	"monitoring.coreos.com/v1/PodMonitor":     func(raw []byte) error { return strict(raw, &monitoringv1.PodMonitor{}) },
	"monitoring.coreos.com/v1/PrometheusRule": func(raw []byte) error { return strict(raw, &monitoringv1.PrometheusRule{}) },
	// Read by kustomize, never sent to a cluster.
	"kustomize.config.k8s.io/v1beta1/Kustomization": func(raw []byte) error { return strict(raw, &kusttypes.Kustomization{}) },
	"kustomize.config.k8s.io/v1alpha1/Component":    func(raw []byte) error { return strict(raw, &kusttypes.Kustomization{}) },
}

// checkSchema checks one object against its real schema: its CRD's (as the API server
// validates a custom resource), else k8s.io/api's types (strict), else one of goTyped. A kind
// with none of these is an error: a new manifest kind needs its CRD in testdata/crds.
func checkSchema(t testing.TB, d doc) error {
	if d.api == "" || d.kind == "" {
		return fmt.Errorf("%v: apiVersion and kind are required", d)
	}
	if cv := crdFor(t, d); cv != nil {
		return validateCustom(cv, d)
	}
	if dec, ok := goTyped[d.api+"/"+d.kind]; ok {
		if err := dec(d.raw); err != nil {
			return fmt.Errorf("%v: %w", d, err)
		}
		return nil
	}
	gvk := fmt.Sprintf("%s/%s", d.api, d.kind)
	obj, got, err := strictCodecs.UniversalDeserializer().Decode(d.raw, nil, nil)
	if err != nil {
		if strings.Contains(err.Error(), "no kind") {
			return fmt.Errorf("%v: no schema for %s: add its CRD to deploy/check/%s (or a Go type to goTyped)", d, gvk, crdDir)
		}
		return fmt.Errorf("%v: %w", d, err)
	}
	if got.GroupVersion().String() != d.api || got.Kind != d.kind || obj == nil {
		return fmt.Errorf("%v: decoded as %v", d, got)
	}
	return nil
}

// manifestTree reads every YAML document below the given directories (relative to the
// repository root), except chart templates (Go templates, checked after rendering) and
// test data.
func manifestTree(t testing.TB, dirs ...string) []doc {
	t.Helper()
	root := repoRoot(t)
	var out []doc
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if e.IsDir() {
				switch {
				case e.Name() == "testdata", filepath.Base(filepath.Dir(p)) == "helm", rel == "deploy/helm",
					rel == "deploy/prometheus": // Prometheus rules files, not manifests: TestAlertRules
					return filepath.SkipDir
				}
				return nil
			}
			if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, readDocs(t, rel, data)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestManifestSchemas: every YAML document in knative/ and deploy/, each as written and
// each kustomization rendered, passes its real schema (checkSchema). A manifest the cluster
// would refuse fails here.
func TestManifestSchemas(t *testing.T) {
	docs := manifestTree(t, "knative", "deploy")
	if len(docs) < 15 {
		t.Fatalf("found only %d manifest documents", len(docs))
	}
	kinds := map[string]int{}
	for _, d := range docs {
		kinds[d.kind]++
		if err := checkSchema(t, d); err != nil {
			t.Error(err)
		}
	}
	for _, k := range []string{"KafkaSource", "KafkaSink", "PingSource", "ScaledJob", "TriggerAuthentication", "CronJob"} {
		if kinds[k] == 0 {
			t.Errorf("no %s checked (kinds seen: %v)", k, kinds)
		}
	}
	for _, dir := range kustomizations(t) {
		for _, d := range kustomizeBuild(t, dir) {
			if err := checkSchema(t, d); err != nil {
				t.Error(err)
			}
		}
	}
}

// kustomizations are the directories below knative/ and deploy/ with a kustomization.yaml.
func kustomizations(t testing.TB) []string {
	t.Helper()
	var dirs []string
	for _, d := range manifestTree(t, "knative", "deploy") {
		if d.kind == "Kustomization" {
			dirs = append(dirs, filepath.Dir(d.file))
		}
	}
	if len(dirs) < 2 {
		t.Fatalf("kustomizations: %v", dirs)
	}
	return dirs
}

// mutate returns a copy of d changed by f (on its generic form).
func mutate(t *testing.T, d doc, f func(obj map[string]any)) doc {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(d.raw, &obj); err != nil {
		t.Fatal(err)
	}
	f(obj)
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	d.raw = raw
	return d
}

// TestSchemaRefusesBadKafkaSource: the checks catch what the API server would refuse in
// knative/kafkasource.yaml: a misspelt field, a wrong type, a missing required field; and a
// value outside a KafkaSink enum, a wrong type in a KEDA ScaledJob, a misspelt field of a
// built-in kind and a kind without a schema.
func TestSchemaRefusesBadKafkaSource(t *testing.T) {
	var ks doc
	for _, d := range readDocs(t, "knative/kafkasource.yaml", mustRead(t, "knative/kafkasource.yaml")) {
		if d.kind == "KafkaSource" {
			ks = d
		}
	}
	if ks.raw == nil {
		t.Fatal("no KafkaSource in knative/kafkasource.yaml")
	}
	if err := checkSchema(t, ks); err != nil {
		t.Fatalf("the KafkaSource as written: %v", err)
	}
	cases := []struct {
		name string
		f    func(spec map[string]any)
		want string
	}{
		{"misspelt field", func(s map[string]any) { s["consumerGrop"] = s["consumerGroup"]; delete(s, "consumerGroup") }, `unknown field "spec.consumerGrop"`},
		{"misspelt nested field", func(s map[string]any) { s["delivery"].(map[string]any)["retries"] = 3 }, `unknown field "spec.delivery.retries"`},
		{"wrong type", func(s map[string]any) { s["consumers"] = "one" }, `spec.consumers: Invalid value: "string": spec.consumers in body must be of type integer`},
		{"required field missing", func(s map[string]any) { delete(s, "topics") }, `spec.topics: Required value`},
	}
	for _, c := range cases {
		bad := mutate(t, ks, func(obj map[string]any) { c.f(obj["spec"].(map[string]any)) })
		err := checkSchema(t, bad)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}

	// A wrong type in a KEDA ScaledJob, a misspelt field of a built-in kind, an unknown kind.
	sj := doc{file: "inline", kind: "ScaledJob", api: "keda.sh/v1alpha1", name: "x", raw: []byte(`{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledJob","metadata":{"name":"x"},
		"spec":{"jobTargetRef":{"template":{"spec":{"containers":[{"name":"a","image":"b"}]}}},"triggers":[{"type":"kafka","metadata":{}}],"pollingInterval":"30s"}}`)}
	if err := checkSchema(t, sj); err == nil || !strings.Contains(err.Error(), `spec.pollingInterval in body must be of type integer`) {
		t.Errorf("ScaledJob with pollingInterval \"30s\": %v", err)
	}
	for _, d := range readDocs(t, "knative/kafkasink.yaml", mustRead(t, "knative/kafkasink.yaml")) {
		if d.kind != "KafkaSink" {
			continue
		}
		bad := mutate(t, d, func(obj map[string]any) { obj["spec"].(map[string]any)["contentMode"] = "text" })
		if err := checkSchema(t, bad); err == nil || !strings.Contains(err.Error(), `spec.contentMode: Unsupported value: "text"`) {
			t.Errorf("KafkaSink with contentMode text: %v", err)
		}
	}
	cj := doc{file: "inline", kind: "ConfigMap", api: "v1", name: "x", raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"date":{"a":"b"}}`)}
	if err := checkSchema(t, cj); err == nil || !strings.Contains(err.Error(), `unknown field "date"`) {
		t.Errorf("ConfigMap with data misspelt: %v", err)
	}
	unk := doc{file: "inline", kind: "Gadget", api: "example.com/v1", name: "x", raw: []byte(`{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"x"}}`)}
	if err := checkSchema(t, unk); err == nil || !strings.Contains(err.Error(), "no schema for example.com/v1/Gadget") {
		t.Errorf("unknown kind: %v", err)
	}
}
