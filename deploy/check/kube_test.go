package check

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventingduckv1 "knative.dev/eventing/pkg/apis/duck/v1"
	"knative.dev/eventing/pkg/apis/feature"
	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mm2go/mm2go/deploy/internal/image"
)

const testNamespace = "mm2go"

// decoded holds every object of one manifest directory, decoded strictly into its API type.
type decoded struct {
	services     map[string]*servingv1.Service
	pings        map[string]*sourcesv1.PingSource
	kafkaSources map[string]map[string]any // no Go type available (see decodeDoc)
	kafkaSinks   map[string]map[string]any
	cronJobs     map[string]*batchv1.CronJob
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	accounts     map[string]*corev1.ServiceAccount
	kustomize    *kusttypes.Kustomization
	// custom holds the other kinds that have a CRD in testdata/crds (ScaledJob,
	// TriggerAuthentication, EventPolicy, ...) by kind and name; TestManifestSchemas
	// validates them against their CRDs.
	custom map[string]map[string]map[string]any
}

func newDecoded() *decoded {
	return &decoded{
		services: map[string]*servingv1.Service{}, pings: map[string]*sourcesv1.PingSource{},
		kafkaSources: map[string]map[string]any{}, kafkaSinks: map[string]map[string]any{},
		cronJobs: map[string]*batchv1.CronJob{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, accounts: map[string]*corev1.ServiceAccount{},
		custom: map[string]map[string]map[string]any{},
	}
}

// decodeDoc decodes d strictly by apiVersion and kind. Unknown kinds are errors.
//
// KafkaSource (sources.knative.dev/v1) and KafkaSink (eventing.knative.dev/v1alpha1) are
// defined in knative.dev/eventing-kafka-broker, which the Go module proxy refuses to serve, so
// they are kept generic here: TestManifestSchemas validates them against their CRDs
// (testdata/crds), and their parts that are core Knative types are decoded strictly and
// validated by checkKafkaSource (delivery: eventing duck DeliverySpec; sink: duck Destination).
// Other kinds with a CRD in testdata/crds are kept generic in custom.
func (dd *decoded) decodeDoc(d doc) error {
	dup := func(seen bool) error {
		if seen {
			return fmt.Errorf("%v: duplicate %s %q", d, d.kind, d.name)
		}
		return nil
	}
	switch d.api + "/" + d.kind {
	case "serving.knative.dev/v1/Service":
		var o servingv1.Service
		if err := strict(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.services[d.name]
		dd.services[d.name] = &o
		return dup(seen)
	case "sources.knative.dev/v1/PingSource":
		var o sourcesv1.PingSource
		if err := strict(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.pings[d.name]
		dd.pings[d.name] = &o
		return dup(seen)
	case "sources.knative.dev/v1/KafkaSource":
		var o map[string]any
		if err := json.Unmarshal(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.kafkaSources[d.name]
		dd.kafkaSources[d.name] = o
		return dup(seen)
	case "eventing.knative.dev/v1alpha1/KafkaSink":
		var o map[string]any
		if err := json.Unmarshal(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.kafkaSinks[d.name]
		dd.kafkaSinks[d.name] = o
		return dup(seen)
	case "batch/v1/CronJob":
		var o batchv1.CronJob
		if err := strict(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.cronJobs[d.name]
		dd.cronJobs[d.name] = &o
		return dup(seen)
	case "v1/ConfigMap":
		var o corev1.ConfigMap
		if err := strict(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.configMaps[d.name]
		dd.configMaps[d.name] = &o
		return dup(seen)
	case "v1/Secret":
		var o corev1.Secret
		if err := strict(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.secrets[d.name]
		dd.secrets[d.name] = &o
		return dup(seen)
	case "v1/ServiceAccount":
		var o corev1.ServiceAccount
		if err := strict(d.raw, &o); err != nil {
			return err
		}
		_, seen := dd.accounts[d.name]
		dd.accounts[d.name] = &o
		return dup(seen)
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		var o kusttypes.Kustomization
		if err := strict(d.raw, &o); err != nil {
			return err
		}
		if dd.kustomize != nil {
			return fmt.Errorf("%v: second Kustomization", d)
		}
		dd.kustomize = &o
		return nil
	}
	if cv := crdSchemas[d.api+"/"+d.kind]; cv != nil {
		var o map[string]any
		if err := json.Unmarshal(d.raw, &o); err != nil {
			return err
		}
		if dd.custom[d.kind] == nil {
			dd.custom[d.kind] = map[string]map[string]any{}
		}
		_, seen := dd.custom[d.kind][d.name]
		dd.custom[d.kind][d.name] = o
		return dup(seen)
	}
	return fmt.Errorf("%v: unexpected apiVersion/kind %s/%s", d, d.api, d.kind)
}

func decodeAll(t *testing.T, docs []doc) *decoded {
	t.Helper()
	loadCRDs(t) // decodeDoc looks kinds up in crdSchemas
	dd := newDecoded()
	for _, d := range docs {
		if err := dd.decodeDoc(d); err != nil {
			t.Errorf("%v: %v", d, err)
		}
	}
	return dd
}

// kustomizeBuild renders dir (relative to the repository root) like `kubectl apply -k`.
func kustomizeBuild(t *testing.T, dir string) []doc {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot(t), dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return readDocs(t, dir+" (kustomize build)", out)
}

// secretRefs checks that every ConfigMap/Secret an env list refers to is defined and has the key.
func checkEnvRefs(t *testing.T, where string, c corev1.Container, dd *decoded) {
	t.Helper()
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			if dd.configMaps[ef.ConfigMapRef.Name] == nil {
				t.Errorf("%s: envFrom ConfigMap %q is not defined", where, ef.ConfigMapRef.Name)
			}
		case ef.SecretRef != nil:
			if dd.secrets[ef.SecretRef.Name] == nil {
				t.Errorf("%s: envFrom Secret %q is not defined", where, ef.SecretRef.Name)
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			s := dd.secrets[r.Name]
			if s == nil {
				t.Errorf("%s: env %s: Secret %q is not defined (secret.example.yaml)", where, e.Name, r.Name)
			} else if _, ok := s.StringData[r.Key]; !ok && !strings.Contains(secretComments[r.Name], r.Key) {
				t.Errorf("%s: env %s: Secret %q has no key %q", where, e.Name, r.Name, r.Key)
			}
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			if cm := dd.configMaps[r.Name]; cm == nil || cm.Data[r.Key] == "" {
				t.Errorf("%s: env %s: ConfigMap %q key %q is not defined", where, e.Name, r.Name, r.Key)
			}
		}
	}
}

// secretComments: keys documented (commented out) in the Secret templates as alternatives.
var secretComments = map[string]string{"mm2go-kafka": "target-eventhubs-connection-string source-eventhubs-connection-string"}

// checkFunctionContainer checks what every mm2go container needs.
func checkFunctionContainer(t *testing.T, where string, c corev1.Container, subcommand string) string {
	t.Helper()
	if len(c.Command) != 1 || !strings.HasPrefix(c.Command[0], image.BinDir+"/") {
		t.Errorf("%s: command %q, want one of %s/{%s}", where, c.Command, image.BinDir, strings.Join(image.Functions, ","))
		return ""
	}
	fn := strings.TrimPrefix(c.Command[0], image.BinDir+"/")
	known := false
	for _, f := range image.Functions {
		known = known || f == fn
	}
	if !known {
		t.Errorf("%s: command %q is not one of the functions %v", where, c.Command[0], image.Functions)
	}
	if len(c.Args) != 1 || c.Args[0] != subcommand {
		t.Errorf("%s: args %q, want [%q]", where, c.Args, subcommand)
	}
	if !strings.Contains(c.Image, "mm2go") {
		t.Errorf("%s: image %q is not the mm2go image", where, c.Image)
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("%s: securityContext must forbid privilege escalation, make the root filesystem read-only and drop ALL capabilities", where)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: memory request and limit must be set", where)
	}
	return fn
}

func TestKnativeManifests(t *testing.T) {
	docs := manifestDocs(t, "knative")
	dd := decodeAll(t, docs)
	checkKnative(t, dd, false)
}

func TestKnativeKustomizeBuild(t *testing.T) {
	rendered := kustomizeBuild(t, "knative")
	dd := decodeAll(t, rendered)
	for _, d := range rendered {
		var m struct {
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(d.raw, &m)
		if m.Metadata.Namespace != testNamespace {
			t.Errorf("%v: namespace %q after kustomize, want %q", d, m.Metadata.Namespace, testNamespace)
		}
	}
	// The secrets are not part of the build; take them from the template for the cross checks.
	for _, d := range readDocs(t, "knative/secret.example.yaml", mustRead(t, "knative/secret.example.yaml")) {
		if err := dd.decodeDoc(d); err != nil {
			t.Fatal(err)
		}
	}
	checkKnative(t, dd, true)

	// The replacements copy the bootstrap servers from the ConfigMap (one place to edit).
	cm := dd.configMaps["mm2go-settings"]
	ks := dd.kafkaSources["mm2go-mirror"]
	if got := nested(ks, "spec", "bootstrapServers"); fmt.Sprint(got) != fmt.Sprint([]any{cm.Data["MM2_SOURCE_BOOTSTRAP_SERVERS"]}) {
		t.Errorf("KafkaSource bootstrapServers %v, want [%s] from the ConfigMap", got, cm.Data["MM2_SOURCE_BOOTSTRAP_SERVERS"])
	}
	sink := dd.kafkaSinks["mm2go-dead-letters"]
	if got := nested(sink, "spec", "bootstrapServers"); fmt.Sprint(got) != fmt.Sprint([]any{cm.Data["MM2_TARGET_BOOTSTRAP_SERVERS"]}) {
		t.Errorf("KafkaSink bootstrapServers %v, want [%s] from the ConfigMap", got, cm.Data["MM2_TARGET_BOOTSTRAP_SERVERS"])
	}
	for name, s := range dd.services {
		img := s.Spec.Template.Spec.Containers[0].Image
		if img != "registry.example.com/mm2go:0.1.0" {
			t.Errorf("Service %s: image %q after kustomize, want the kustomization's images entry", name, img)
		}
	}
}

func mustRead(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := readFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nested(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func checkKnative(t *testing.T, dd *decoded, rendered bool) {
	t.Helper()
	// Eventing's feature flags as an unmodified cluster has them (config-features defaults:
	// delivery-timeout enabled); the webhook validates with them in its context.
	flags, err := feature.NewFlagsConfigFromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := feature.ToContext(apis.WithinCreate(context.Background()), flags)
	wantServices := map[string]string{"mm2go-mirror": "mirror", "mm2go-checkpoint": "checkpoint", "mm2go-heartbeat": "heartbeat"}
	for name, fn := range wantServices {
		if dd.services[name] == nil {
			t.Errorf("Knative Service %s (%s) missing", name, fn)
		}
	}
	if !rendered && dd.kustomize == nil {
		t.Error("knative/kustomization.yaml missing")
	}
	if dd.configMaps["mm2go-settings"] == nil {
		t.Fatal("ConfigMap mm2go-settings missing")
	}
	if len(dd.secrets) == 0 {
		t.Fatal("Secret template missing")
	}

	for name, s := range dd.services {
		where := "Service " + name
		s := s.DeepCopy()
		if s.Namespace == "" {
			s.Namespace = testNamespace
		}
		s.SetDefaults(ctx)
		if err := s.Validate(ctx); err != nil {
			t.Errorf("%s: Knative validation: %v", where, err)
		}
		ann := s.Spec.Template.Annotations
		if ann["autoscaling.knative.dev/min-scale"] != "0" {
			t.Errorf("%s: autoscaling.knative.dev/min-scale = %q, want \"0\" (scale to zero)", where, ann["autoscaling.knative.dev/min-scale"])
		}
		if ann["autoscaling.knative.dev/max-scale"] == "" {
			t.Errorf("%s: no max-scale", where)
		}
		ps := s.Spec.Template.Spec
		if ps.TimeoutSeconds == nil || *ps.TimeoutSeconds < 30 || *ps.TimeoutSeconds > 600 {
			t.Errorf("%s: timeoutSeconds %v, want 30..600", where, ps.TimeoutSeconds)
		}
		if ps.ContainerConcurrency == nil || *ps.ContainerConcurrency < 1 {
			t.Errorf("%s: containerConcurrency must be set explicitly (>= 1)", where)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", where, len(ps.Containers))
		}
		c := ps.Containers[0]
		fn := checkFunctionContainer(t, where, c, "serve")
		if want := wantServices[name]; want != "" && fn != want {
			t.Errorf("%s: runs %s, want %s", where, fn, want)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
			t.Errorf("%s: readiness probe must GET a path (TestKnativeBehaviour says which)", where)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: liveness probe must GET /healthz", where)
		}
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 {
			t.Errorf("%s: want exactly one port 8080 (Knative sets PORT)", where)
		}
		if ps.ServiceAccountName == "" || dd.accounts[ps.ServiceAccountName] == nil && !rendered {
			t.Errorf("%s: serviceAccountName %q not defined", where, ps.ServiceAccountName)
		}
		if fn == "mirror" && (*ps.TimeoutSeconds < 280) {
			t.Errorf("%s: timeoutSeconds %d is below the server's request budget (280 s)", where, *ps.TimeoutSeconds)
		}
		checkEnvRefs(t, where, c, dd)
		if len(c.EnvFrom) == 0 {
			t.Errorf("%s: settings must come from the ConfigMap (envFrom)", where)
		}
	}

	for name, p := range dd.pings {
		where := "PingSource " + name
		p := p.DeepCopy()
		if p.Namespace == "" {
			p.Namespace = testNamespace
		}
		p.SetDefaults(ctx)
		if err := p.Validate(ctx); err != nil {
			t.Errorf("%s: Knative validation: %v", where, err)
		}
		if _, err := cron.ParseStandard(p.Spec.Schedule); err != nil {
			t.Errorf("%s: schedule %q: %v", where, p.Spec.Schedule, err)
		}
		checkSinkRef(t, where, p.Spec.Sink, dd)
	}
	for _, want := range []string{"mm2go-mirror-burst", "mm2go-checkpoint", "mm2go-heartbeat"} {
		if dd.pings[want] == nil {
			t.Errorf("PingSource %s missing", want)
		}
	}
	targets := map[string]bool{}
	for _, p := range dd.pings {
		if p.Spec.Sink.Ref != nil {
			targets[p.Spec.Sink.Ref.Name] = true
		}
	}
	for name := range wantServices {
		if !targets[name] {
			t.Errorf("no PingSource wakes Service %s", name)
		}
	}

	if len(dd.kafkaSources) != 1 {
		t.Errorf("%d KafkaSources, want 1", len(dd.kafkaSources))
	}
	for name, ks := range dd.kafkaSources {
		checkKafkaSource(t, ctx, "KafkaSource "+name, ks, dd)
	}
	for name, s := range dd.kafkaSinks {
		checkKafkaSink(t, "KafkaSink "+name, s, dd, rendered)
	}
}

func checkSinkRef(t *testing.T, where string, dest duckv1.Destination, dd *decoded) {
	t.Helper()
	r := dest.Ref
	if r == nil {
		t.Errorf("%s: sink must be a ref", where)
		return
	}
	switch r.APIVersion + "/" + r.Kind {
	case "serving.knative.dev/v1/Service":
		if dd.services[r.Name] == nil {
			t.Errorf("%s: sink Service %q is not defined", where, r.Name)
		}
	case "eventing.knative.dev/v1alpha1/KafkaSink":
		if dd.kafkaSinks[r.Name] == nil {
			t.Errorf("%s: KafkaSink %q is not defined", where, r.Name)
		}
	default:
		t.Errorf("%s: unexpected sink %s/%s", where, r.APIVersion, r.Kind)
	}
}

func checkKafkaSource(t *testing.T, ctx context.Context, where string, ks map[string]any, dd *decoded) {
	t.Helper()
	labels, _ := nested(ks, "metadata", "labels").(map[string]any)
	if labels["kafkasources.sources.knative.dev/key-type"] != "byte-array" {
		t.Errorf("%s: label kafkasources.sources.knative.dev/key-type must be byte-array (a label, not an annotation)", where)
	}
	// Fields, types and required ones: TestManifestSchemas (the KafkaSource CRD).
	spec, _ := ks["spec"].(map[string]any)
	if spec["ordering"] != "ordered" {
		t.Errorf("%s: ordering %v, want ordered", where, spec["ordering"])
	}
	if spec["consumerGroup"] == nil || spec["consumerGroup"] == "" {
		t.Errorf("%s: consumerGroup must be fixed (it cannot change later)", where)
	}
	for _, f := range []string{"bootstrapServers", "topics"} {
		if l, _ := spec[f].([]any); len(l) == 0 {
			t.Errorf("%s: %s required", where, f)
		}
	}
	var delivery eventingduckv1.DeliverySpec
	if err := strictField(spec, "delivery", &delivery); err != nil {
		t.Fatalf("%s: delivery is not an eventing DeliverySpec: %v", where, err)
	}
	if err := delivery.Validate(ctx); err != nil {
		t.Errorf("%s: delivery: %v", where, err)
	}
	if delivery.Retry == nil || *delivery.Retry < 1 {
		t.Errorf("%s: delivery.retry %v, want at least one retry (a pod restart answers 503 once)", where, delivery.Retry)
	}
	if delivery.BackoffPolicy == nil || *delivery.BackoffPolicy != eventingduckv1.BackoffPolicyExponential {
		t.Errorf("%s: backoffPolicy must be exponential", where)
	}
	if delivery.DeadLetterSink == nil {
		t.Errorf("%s: no deadLetterSink: the dispatcher commits given-up records anyway", where)
	} else {
		if err := delivery.DeadLetterSink.Validate(ctx); err != nil {
			t.Errorf("%s: deadLetterSink: %v", where, err)
		}
		checkSinkRef(t, where+" deadLetterSink", *delivery.DeadLetterSink, dd)
	}
	// Waiting of exponential backoff: delay * (2^1 + ... + 2^retry). The genuine dispatcher
	// spends it on a record it cannot send (a header value with a control byte) while holding
	// every later record of the partition (ordered), so it is kept short: in fetch mode an event
	// is only a wake-up and a given-up event loses no record (docs/events.md).
	delay, err := isoSeconds(*delivery.BackoffDelay)
	if err != nil {
		t.Fatalf("%s: backoffDelay: %v", where, err)
	}
	timeout, err := isoSeconds(*delivery.Timeout)
	if err != nil {
		t.Fatalf("%s: timeout: %v", where, err)
	}
	waits := 0.0
	for n := int32(1); n <= *delivery.Retry; n++ {
		waits += delay * float64(int64(1)<<n)
	}
	if waits < 1 || waits > 60 {
		t.Errorf("%s: retries wait %s in all; want between 1 s (ride over a restart) and 60 s (an unsendable record holds its partition that long)", where, time.Duration(waits*float64(time.Second)))
	}
	var sink duckv1.Destination
	if err := strictField(spec, "sink", &sink); err != nil {
		t.Fatalf("%s: sink is not a duck Destination: %v", where, err)
	}
	if err := sink.Validate(ctx); err != nil {
		t.Errorf("%s: sink: %v", where, err)
	}
	checkSinkRef(t, where, sink, dd)
	if sink.Ref != nil {
		if s := dd.services[sink.Ref.Name]; s != nil && s.Spec.Template.Spec.TimeoutSeconds != nil &&
			int64(timeout) < *s.Spec.Template.Spec.TimeoutSeconds {
			t.Errorf("%s: delivery.timeout %v s is shorter than the Service's timeoutSeconds %d", where, timeout, *s.Spec.Template.Spec.TimeoutSeconds)
		}
	}
	// SASL/TLS secrets must exist in the template with the keys used.
	var net struct {
		SASL struct {
			Enable   bool                           `json:"enable"`
			User     struct{ SecretKeyRef *keyRef } `json:"user"`
			Password struct{ SecretKeyRef *keyRef } `json:"password"`
			Type     struct{ SecretKeyRef *keyRef } `json:"type"`
		} `json:"sasl"`
		TLS struct {
			Enable bool `json:"enable"`
		} `json:"tls"`
	}
	if err := strictField(spec, "net", &net); err != nil {
		t.Errorf("%s: net: %v", where, err)
	}
	for _, r := range []*keyRef{net.SASL.User.SecretKeyRef, net.SASL.Password.SecretKeyRef, net.SASL.Type.SecretKeyRef} {
		if net.SASL.Enable && r == nil {
			t.Errorf("%s: SASL enabled without user/password/type secret refs", where)
			continue
		}
		if r != nil && (dd.secrets[r.Name] == nil || dd.secrets[r.Name].StringData[r.Key] == "") {
			t.Errorf("%s: secret %s key %s is not in the Secret template", where, r.Name, r.Key)
		}
	}
}

type keyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

func checkKafkaSink(t *testing.T, where string, s map[string]any, dd *decoded, rendered bool) {
	t.Helper()
	spec, _ := s["spec"].(map[string]any)
	// Fields and types: TestManifestSchemas (the KafkaSink CRD).
	if spec["topic"] == nil {
		t.Errorf("%s: topic required", where)
	}
	if l, _ := spec["bootstrapServers"].([]any); len(l) == 0 {
		t.Errorf("%s: bootstrapServers required", where)
	}
	ref, _ := nested(s, "spec", "auth", "secret", "ref", "name").(string)
	if ref != "" {
		sec := dd.secrets[ref]
		if sec == nil {
			t.Errorf("%s: auth secret %q is not in the Secret template", where, ref)
		} else if sec.StringData["protocol"] == "" {
			t.Errorf("%s: auth secret %q has no protocol key", where, ref)
		}
	}
	_ = rendered
}

func TestKubernetesManifests(t *testing.T) {
	dd := decodeAll(t, manifestDocs(t, "deploy/kubernetes"))
	if dd.kustomize == nil {
		t.Error("deploy/kubernetes/kustomization.yaml missing")
	}
	checkKubernetes(t, dd)
}

func TestKubernetesKustomizeBuild(t *testing.T) {
	rendered := kustomizeBuild(t, "deploy/kubernetes")
	dd := decodeAll(t, rendered)
	for _, d := range readDocs(t, "deploy/kubernetes/secret.example.yaml", mustRead(t, "deploy/kubernetes/secret.example.yaml")) {
		if err := dd.decodeDoc(d); err != nil {
			t.Fatal(err)
		}
	}
	checkKubernetes(t, dd)
	for name, cj := range dd.cronJobs {
		if cj.Namespace != testNamespace {
			t.Errorf("CronJob %s: namespace %q after kustomize", name, cj.Namespace)
		}
		if img := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/mm2go:0.1.0" {
			t.Errorf("CronJob %s: image %q after kustomize", name, img)
		}
	}
}

func checkKubernetes(t *testing.T, dd *decoded) {
	t.Helper()
	want := map[string]string{"mm2go-mirror": "mirror", "mm2go-checkpoint": "checkpoint", "mm2go-heartbeat": "heartbeat"}
	if len(dd.cronJobs) != len(want) {
		t.Errorf("%d CronJobs, want %d", len(dd.cronJobs), len(want))
	}
	for name, cj := range dd.cronJobs {
		where := "CronJob " + name
		s := cj.Spec
		sched, err := cron.ParseStandard(s.Schedule)
		if err != nil {
			t.Errorf("%s: schedule %q: %v", where, s.Schedule, err)
			continue
		}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		interval := sched.Next(sched.Next(t0)).Sub(sched.Next(t0))
		if s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("%s: concurrencyPolicy %q, want Forbid", where, s.ConcurrencyPolicy)
		}
		if s.SuccessfulJobsHistoryLimit == nil || s.FailedJobsHistoryLimit == nil {
			t.Errorf("%s: history limits must be set", where)
		}
		if s.StartingDeadlineSeconds == nil || time.Duration(*s.StartingDeadlineSeconds)*time.Second >= interval {
			t.Errorf("%s: startingDeadlineSeconds must be set and below the interval %v", where, interval)
		}
		if s.TimeZone == nil || *s.TimeZone == "" {
			t.Errorf("%s: timeZone must be explicit", where)
		}
		js := s.JobTemplate.Spec
		if js.ActiveDeadlineSeconds == nil || time.Duration(*js.ActiveDeadlineSeconds)*time.Second >= interval {
			t.Errorf("%s: activeDeadlineSeconds must be set and below the interval %v (runs never overlap)", where, interval)
		}
		if js.BackoffLimit == nil {
			t.Errorf("%s: backoffLimit must be set", where)
		}
		ps := js.Template.Spec
		if ps.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: restartPolicy %q, want Never", where, ps.RestartPolicy)
		}
		if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot ||
			ps.SecurityContext.RunAsUser == nil || *ps.SecurityContext.RunAsUser != image.UID {
			t.Errorf("%s: pod must run as non-root %d", where, image.UID)
		}
		if ps.ServiceAccountName == "" || dd.accounts[ps.ServiceAccountName] == nil {
			t.Errorf("%s: serviceAccountName %q not defined", where, ps.ServiceAccountName)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("%s: %d containers", where, len(ps.Containers))
		}
		fn := checkFunctionContainer(t, where, ps.Containers[0], "run")
		if want[name] != "" && fn != want[name] {
			t.Errorf("%s: runs %s, want %s", where, fn, want[name])
		}
		checkEnvRefs(t, where, ps.Containers[0], dd)
	}
	if dd.configMaps["mm2go-settings"] == nil {
		t.Error("ConfigMap mm2go-settings missing")
	}
}
