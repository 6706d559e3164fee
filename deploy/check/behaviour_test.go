package check

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Checks of what the platforms do with the manifests, beyond their schemas: each rule is a
// behaviour that a schema-valid manifest can still get wrong.

// TestKEDABehaviour: editing the ScaledJob (a new image, resources) must not stop a running
// burst, and the Key Vault TriggerAuthentication must not name an identity that does not exist.
func TestKEDABehaviour(t *testing.T) {
	dd := decodeAll(t, kustomizeBuild(t, "deploy/keda"))
	if len(dd.custom["ScaledJob"]) == 0 {
		t.Fatal("no ScaledJob in deploy/keda")
	}
	for name, sj := range dd.custom["ScaledJob"] {
		// KEDA's default rollout (immediate) deletes the Jobs of a ScaledJob when it changes;
		// gradual leaves them to finish and applies the change to the next Jobs.
		if got := nested(sj, "spec", "rollout", "strategy"); got != "gradual" {
			t.Errorf("ScaledJob %s: rollout.strategy %v, want gradual (an edit would kill a running burst)", name, got)
		}
		if nested(sj, "spec", "rolloutStrategy") != nil {
			t.Errorf("ScaledJob %s: rolloutStrategy is deprecated; use rollout.strategy", name)
		}
	}
	for name, ta := range dd.custom["TriggerAuthentication"] {
		for _, path := range [][]string{{"spec", "podIdentity"}, {"spec", "azureKeyVault", "podIdentity"}} {
			id, ok := nested(ta, append(path, "identityId")...).(string)
			if !ok {
				continue
			}
			// The nil GUID names no identity: KEDA then asks Entra ID for a client that does not
			// exist instead of using its own identity, which is what leaving the field out does.
			if strings.Trim(id, "0-") == "" {
				t.Errorf("TriggerAuthentication %s: %s.identityId %q is a placeholder; leave it out for KEDA's own identity", name, strings.Join(path, "."), id)
			}
		}
	}
}

// Knative Serving's autoscaler defaults (config-autoscaler): a revision with no request for
// the stable window is wanted at zero, and its last pod goes after the grace period.
const (
	knativeStableWindow     = 60 * time.Second
	knativeScaleToZeroGrace = 30 * time.Second
)

// TestKnativeBehaviour: what Knative does with knative/ beyond its schema.
func TestKnativeBehaviour(t *testing.T) {
	dd := decodeAll(t, kustomizeBuild(t, "knative"))
	checkKnativeServing(t, "knative/", dd)

	// A new KafkaSource starts at the end of its topics: what is there already is copied by the
	// bursts, many records a request, not by one request (answered "already copied") per record.
	for name, ks := range dd.kafkaSources {
		if got := nested(ks, "spec", "initialOffset"); got != "latest" {
			t.Errorf("KafkaSource %s: initialOffset %v, want latest (the bursts copy the backlog)", name, got)
		}
	}
	checkKafkaSourceHeartbeats(t, "knative/", dd)

	// No comment may call a setting the functions read "not read yet".
	stale := regexp.MustCompile(`(?i)not read (by the functions )?yet|once mm2go's .*settings exist|are being added`)
	for _, dir := range []string{"knative", "deploy/kubernetes", "deploy/keda"} {
		for _, d := range []string{dir + "/README.md"} {
			checkNoStale(t, d, stale)
		}
		files, _ := filepath.Glob(filepath.Join(repoRoot(t), dir, "*.yaml"))
		for _, f := range files {
			rel, _ := filepath.Rel(repoRoot(t), f)
			checkNoStale(t, rel, stale)
		}
	}
}

// checkKafkaSourceHeartbeats: the mirror copies the source's heartbeats topic (MM2's
// heartbeats.replication.enabled, on unless a settings ConfigMap turns it off), and the
// heartbeat function's replication_latency_ms is the age of the newest heartbeat copied. A
// KafkaSource that does not subscribe to it leaves the heartbeats to the scheduled bursts, so
// the figure measures the PingSource's interval, not the event path that copies the records.
func checkKafkaSourceHeartbeats(t *testing.T, from string, dd *decoded) {
	t.Helper()
	for _, cm := range dd.configMaps {
		if strings.EqualFold(strings.TrimSpace(cm.Data["MM2_HEARTBEATS_REPLICATION_ENABLED"]), "false") {
			return
		}
	}
	for name, ks := range dd.kafkaSources {
		topics, _ := nested(ks, "spec", "topics").([]any)
		if !slices.Contains(topics, any("heartbeats")) {
			t.Errorf("%s KafkaSource %s: topics %v lack heartbeats: the heartbeats the mirror copies wait for the next scheduled burst, and replication_latency_ms measures that schedule, not the event path", from, name, topics)
		}
	}
}

// checkKnativeServing: how Knative Serving treats the Services and the PingSources that wake
// them (knative/ and the chart's knative shape alike). from names the origin in errors.
func checkKnativeServing(t *testing.T, from string, dd *decoded) {
	t.Helper()
	if len(dd.services) == 0 || len(dd.pings) == 0 {
		t.Errorf("%s: no Knative Services or PingSources", from)
	}
	for name, s := range dd.services {
		where := from + " Service " + name
		c := s.Spec.Template.Spec.Containers[0]
		rp := c.ReadinessProbe
		if rp == nil || rp.HTTPGet == nil {
			t.Errorf("%s: no HTTP readiness probe", where)
			continue
		}
		// periodSeconds unset (0) is what turns on the queue-proxy's start-up probing every
		// 25 ms; any other value makes a cold start wait for the kubelet's next probe.
		if rp.PeriodSeconds != 0 {
			t.Errorf("%s: readinessProbe.periodSeconds %d: Knative then probes at that period and a cold start waits up to %d s more; leave it out", where, rp.PeriodSeconds, rp.PeriodSeconds)
		}
		// Readiness is the process serving, not the clusters answering: an unready pod makes the
		// activator hold each event for up to timeoutSeconds, while a ready one answers 503 at
		// once, which the sources retry or give up on in seconds (README.md "Readiness").
		if rp.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: readiness probe GETs %s, want /healthz (/readyz turns unready during a cluster outage)", where, rp.HTTPGet.Path)
		}
	}

	// Scale to zero between ticks: a tick keeps its pod for the stable window, the grace period
	// and the Service's retention period after it; a schedule no longer than that never lets the
	// Service reach zero.
	for name, p := range dd.pings {
		if p.Spec.Sink.Ref == nil {
			continue
		}
		s := dd.services[p.Spec.Sink.Ref.Name]
		if s == nil || s.Spec.Template.Annotations["autoscaling.knative.dev/min-scale"] != "0" {
			continue
		}
		iv := cronInterval(t, "PingSource "+name, p.Spec.Schedule)
		kept := knativeStableWindow + knativeScaleToZeroGrace
		if r := s.Spec.Template.Annotations["autoscaling.knative.dev/scale-to-zero-pod-retention-period"]; r != "" {
			d, err := time.ParseDuration(r)
			if err != nil {
				t.Fatalf("Service %s: scale-to-zero-pod-retention-period %q: %v", s.Name, r, err)
			}
			kept += d
		}
		if iv <= kept {
			t.Errorf("%s PingSource %s: every %v wakes Service %s, which stays up %v after a request: it never scales to zero (its README says it does)", from, name, iv, s.Name, kept)
		}
	}
}

func checkNoStale(t *testing.T, rel string, stale *regexp.Regexp) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if stale.MatchString(line) {
			t.Errorf("%s:%d: stale: %q (the Azure AD settings are read: MM2_<CLUSTER>_AZURE_*)", rel, i+1, strings.TrimSpace(line))
		}
	}
}

func cronInterval(t *testing.T, where, schedule string) time.Duration {
	t.Helper()
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		t.Fatalf("%s: schedule %q: %v", where, schedule, err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return s.Next(s.Next(t0)).Sub(s.Next(t0))
}

// TestKnativeOIDCComponents renders knative/ with the sender-authentication components as the
// README adds them and checks that every file the settings name is mounted where they say, that
// the issuer is one setting (not the API server's in-cluster name), and that Knative accepts the
// Services with the mount.
func TestKnativeOIDCComponents(t *testing.T) {
	root := repoRoot(t)
	render := func(components ...string) *decoded {
		dir := t.TempDir()
		// kustomize takes other kustomization roots by relative path only.
		rel, err := filepath.Rel(dir, filepath.Join(root, "knative"))
		if err != nil {
			t.Fatal(err)
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "\ncomponents:\n"
		for _, c := range components {
			k += "  - " + filepath.Join(rel, "components", c) + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		kz := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		rm, err := kz.Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatalf("kustomize build with %v: %v", components, err)
		}
		out, err := rm.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		dd := decodeAll(t, readDocs(t, "knative + "+strings.Join(components, ", "), out))
		for _, d := range readDocs(t, "knative/secret.example.yaml", mustRead(t, "knative/secret.example.yaml")) {
			if err := dd.decodeDoc(d); err != nil {
				t.Fatal(err)
			}
		}
		checkKnative(t, dd, true)
		return dd
	}
	for _, comps := range [][]string{{"oidc-issuer"}, {"oidc-issuer", "oidc-api-server-issuer"}} {
		dd := render(comps...)
		apiServer := len(comps) == 2
		for name, s := range dd.services {
			where := fmt.Sprintf("Service %s with %v", name, comps)
			c := s.Spec.Template.Spec.Containers[0]
			env := podEnv(t, where, c, dd)
			if aud := env["MM2_SERVE_OIDC_AUDIENCE"]; aud != name || env["MM2_SERVE_OIDC_ALLOWED_SUBJECTS"] == "" {
				t.Errorf("%s: MM2_SERVE_OIDC_AUDIENCE %q and subjects %q; want its own name and its sources", where, aud, env["MM2_SERVE_OIDC_ALLOWED_SUBJECTS"])
			}
			iss := env["MM2_SERVE_OIDC_ISSUER"]
			if iss == "" || strings.HasPrefix(iss, "https://kubernetes.default.svc") {
				t.Errorf("%s: MM2_SERVE_OIDC_ISSUER %q; want the component's issuer setting", where, iss)
			}
			files := map[string]string{"MM2_SERVE_OIDC_CA_FILE": env["MM2_SERVE_OIDC_CA_FILE"], "MM2_SERVE_OIDC_ISSUER_TOKEN_FILE": env["MM2_SERVE_OIDC_ISSUER_TOKEN_FILE"]}
			for setting, path := range files {
				if !apiServer {
					if path != "" {
						t.Errorf("%s: %s %q with a public issuer (the cluster CA would replace the system roots)", where, setting, path)
					}
					continue
				}
				if path == "" {
					t.Errorf("%s: %s not set", where, setting)
					continue
				}
				if !mountedFile(s.Spec.Template.Spec.Volumes, c.VolumeMounts, path, setting) {
					t.Errorf("%s: %s names %s, which no volume of the pod provides", where, setting, path)
				}
			}
		}
	}
}

// mountedFile reports whether path is a file that one of the mounts provides: a projected
// service account token (for the token setting) or the CA key of the kube-root-ca.crt ConfigMap.
func mountedFile(vols []corev1.Volume, mounts []corev1.VolumeMount, path, setting string) bool {
	for _, m := range mounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for _, v := range vols {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				switch {
				case src.ServiceAccountToken != nil && src.ServiceAccountToken.Path == rel:
					return setting == "MM2_SERVE_OIDC_ISSUER_TOKEN_FILE"
				case src.ConfigMap != nil && src.ConfigMap.Name == "kube-root-ca.crt":
					for _, it := range src.ConfigMap.Items {
						if it.Path == rel && it.Key == "ca.crt" {
							return setting == "MM2_SERVE_OIDC_CA_FILE"
						}
					}
				}
			}
		}
	}
	return false
}
