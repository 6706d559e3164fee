package check

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	eventingv1alpha1 "knative.dev/eventing/pkg/apis/eventing/v1alpha1"
	"knative.dev/eventing/pkg/apis/feature"
	"knative.dev/pkg/apis"
	"knative.dev/pkg/kmeta"
)

// sinkName is the name of the Service a source calls (sink.ref.name): each function's audience is its own
// name, which the sources that call it request (sink.audience) and it expects
// (MM2_SERVE_OIDC_AUDIENCE, set by components/oidc-issuer).
func sinkName(v any) string { s, _ := v.(string); return s }

// TestKnativeSenderAuth checks the opt-in sender authentication of knative/: the EventPolicy is
// valid for Eventing's webhook with authentication-oidc on, names every source that calls the
// functions, each of those sinks requests the audience the functions expect, and the subjects
// listed in configmap.yaml are the OIDC service accounts Eventing creates for those sources.
func TestKnativeSenderAuth(t *testing.T) {
	dd := decodeAll(t, manifestDocs(t, "knative"))
	raw := dd.custom["EventPolicy"]["mm2go-senders"] // schema-checked by TestManifestSchemas
	if raw == nil {
		t.Fatal("EventPolicy mm2go-senders missing (knative/eventpolicy.yaml)")
	}
	var ep eventingv1alpha1.EventPolicy
	if b, err := json.Marshal(raw); err != nil {
		t.Fatal(err)
	} else if err := strict(b, &ep); err != nil {
		t.Fatalf("EventPolicy mm2go-senders: %v", err)
	}
	flags, err := feature.NewFlagsConfigFromMap(map[string]string{feature.OIDCAuthentication: "enabled"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := feature.ToContext(apis.WithinCreate(context.Background()), flags)
	ep.SetDefaults(ctx)
	if ferr := ep.Validate(ctx); ferr != nil {
		t.Errorf("EventPolicy mm2go-senders: %v", ferr)
	}

	// Every source: its sink audience, and its Knative OIDC identity.
	senders := map[string]string{} // kind/name -> subject
	// Eventing's name of a source's OIDC service account (knative.dev/eventing pkg/auth
	// GetOIDCServiceAccountNameForResource, v0.50.0; that package is not imported here because
	// it pulls cert-manager and more into this module).
	subject := func(kind, name string) string {
		sa := strings.ToLower(kmeta.ChildName(name, "-oidc-sources.knative.dev-"+kind))
		return "system:serviceaccount:" + testNamespace + ":" + sa
	}
	for name, p := range dd.pings {
		if p.Spec.Sink.Ref == nil || p.Spec.Sink.Audience == nil || *p.Spec.Sink.Audience != p.Spec.Sink.Ref.Name {
			t.Errorf("PingSource %s: sink.audience %v, want the name of the Service it calls", name, p.Spec.Sink.Audience)
		}
		senders["PingSource/"+name] = subject("PingSource", name)
	}
	for name, ks := range dd.kafkaSources {
		if got, want := nested(ks, "spec", "sink", "audience"), sinkName(nested(ks, "spec", "sink", "ref", "name")); got != want || want == "" {
			t.Errorf("KafkaSource %s: sink.audience %v, want %q, the Service it calls", name, got, want)
		}
		senders["KafkaSource/"+name] = subject("KafkaSource", name)
	}
	named := map[string]bool{}
	for i, f := range ep.Spec.From {
		if f.Ref == nil {
			continue
		}
		key := f.Ref.Kind + "/" + f.Ref.Name
		if _, ok := senders[key]; !ok {
			t.Errorf("EventPolicy from[%d]: %s is not a source of knative/", i, key)
		}
		named[key] = true
	}
	for key := range senders {
		if !named[key] {
			t.Errorf("EventPolicy mm2go-senders does not list the source %s", key)
		}
	}

	// Each function's audience and allowed subjects (components/oidc-issuer): its own name, and
	// exactly the identities of the sources that call it.
	callers := map[string]map[string]bool{} // Service -> subjects
	add := func(svc, sub string) {
		if callers[svc] == nil {
			callers[svc] = map[string]bool{}
		}
		callers[svc][sub] = true
	}
	for name, p := range dd.pings {
		if p.Spec.Sink.Ref != nil {
			add(p.Spec.Sink.Ref.Name, subject("PingSource", name))
		}
	}
	for name, ks := range dd.kafkaSources {
		add(sinkName(nested(ks, "spec", "sink", "ref", "name")), subject("KafkaSource", name))
	}
	text := string(mustRead(t, "knative/components/oidc-issuer/kustomization.yaml"))
	re := regexp.MustCompile(`(?s)name: (mm2go-[a-z]+)\}\n    patch: .*?MM2_SERVE_OIDC_AUDIENCE, value: ([^}]+)\}.*?MM2_SERVE_OIDC_ALLOWED_SUBJECTS, value: "([^"]*)"`)
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		svc, aud, subs := m[1], strings.TrimSpace(m[2]), m[3]
		seen[svc] = true
		if aud != svc {
			t.Errorf("components/oidc-issuer: %s expects audience %q, want its own name", svc, aud)
		}
		listed := map[string]bool{}
		for _, sub := range strings.Split(subs, ",") {
			listed[strings.TrimSpace(sub)] = true
		}
		for sub := range callers[svc] {
			if !listed[sub] {
				t.Errorf("components/oidc-issuer: %s does not allow %s, a source that calls it", svc, sub)
			}
		}
		for sub := range listed {
			if !callers[svc][sub] {
				t.Errorf("components/oidc-issuer: %s allows %s, which is no source calling it", svc, sub)
			}
		}
	}
	for svc := range callers {
		if !seen[svc] {
			t.Errorf("components/oidc-issuer sets no audience and subjects for %s", svc)
		}
	}
}
