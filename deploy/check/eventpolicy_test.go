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

// senderAudience is the OIDC audience every mm2go source requests (sink.audience) and the
// functions expect (MM2_SERVE_OIDC_AUDIENCE).
const senderAudience = "mm2go"

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
		if p.Spec.Sink.Audience == nil || *p.Spec.Sink.Audience != senderAudience {
			t.Errorf("PingSource %s: sink.audience %v, want %q", name, p.Spec.Sink.Audience, senderAudience)
		}
		senders["PingSource/"+name] = subject("PingSource", name)
	}
	for name, ks := range dd.kafkaSources {
		if got := nested(ks, "spec", "sink", "audience"); got != senderAudience {
			t.Errorf("KafkaSource %s: sink.audience %v, want %q", name, got, senderAudience)
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

	// The commented settings block of configmap.yaml: known names, the same audience, the
	// subjects Eventing will create.
	text := string(mustRead(t, "knative/configmap.yaml"))
	known := functionSettings(t)
	settings := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*#\s*(MM2_SERVE_OIDC_[A-Z_]+|MM2_PAYLOAD_[A-Z_]+):\s*(.*)$`).FindAllStringSubmatch(text, -1) {
		settings[m[1]] = strings.Trim(strings.TrimSpace(m[2]), `"`)
	}
	for name := range settings {
		if !known[name] {
			t.Errorf("configmap.yaml comments setting %s, which the functions do not read", name)
		}
	}
	// The issuer and its files come from the components (TestKnativeOIDCComponents).
	if settings["MM2_SERVE_OIDC_AUDIENCE"] != senderAudience {
		t.Errorf("configmap.yaml sender auth block: audience %q, want %q", settings["MM2_SERVE_OIDC_AUDIENCE"], senderAudience)
	}
	listed := map[string]bool{}
	for _, s := range strings.Split(settings["MM2_SERVE_OIDC_ALLOWED_SUBJECTS"], ",") {
		listed[strings.TrimSpace(s)] = true
	}
	for key, sub := range senders {
		if !listed[sub] {
			t.Errorf("MM2_SERVE_OIDC_ALLOWED_SUBJECTS in configmap.yaml lacks %s, the OIDC identity of %s", sub, key)
		}
		delete(listed, sub)
	}
	for sub := range listed {
		t.Errorf("MM2_SERVE_OIDC_ALLOWED_SUBJECTS in configmap.yaml lists %s, which is no source of knative/", sub)
	}
}
