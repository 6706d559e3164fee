package check

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestEnvNamesAreSettings: every environment variable a manifest sets must be a setting the
// functions read (shared/config, as printed by `mirror -h`), so renaming a setting breaks this
// test instead of silently dropping the value in production.
func TestEnvNamesAreSettings(t *testing.T) {
	known := functionSettings(t)
	used := map[string][]string{} // name -> where
	add := func(name, where string) { used[name] = append(used[name], where) }

	fromPods := func(dd *decoded, where string, cs []corev1.Container) {
		for _, c := range cs {
			for _, e := range c.Env {
				add(e.Name, where+" env")
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil {
					if cm := dd.configMaps[ef.ConfigMapRef.Name]; cm != nil {
						for k := range cm.Data {
							add(ef.Prefix+k, "ConfigMap "+cm.Name+" (envFrom in "+where+")")
						}
					}
				}
				if ef.SecretRef != nil {
					if s := dd.secrets[ef.SecretRef.Name]; s != nil {
						for k := range s.StringData {
							add(ef.Prefix+k, "Secret "+s.Name+" (envFrom in "+where+")")
						}
					}
				}
			}
		}
	}
	kn := decodeAll(t, manifestDocs(t, "knative"))
	for name, s := range kn.services {
		fromPods(kn, "knative Service "+name, s.Spec.Template.Spec.Containers)
	}
	k8s := decodeAll(t, manifestDocs(t, "deploy/kubernetes"))
	for name, cj := range k8s.cronJobs {
		fromPods(k8s, "CronJob "+name, cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
	}
	// Every key of the settings ConfigMaps becomes an env var, referenced or not.
	for _, dd := range []*decoded{kn, k8s} {
		for _, cm := range dd.configMaps {
			for k := range cm.Data {
				add(k, "ConfigMap "+cm.Name)
			}
		}
	}
	_, jobs := evalTemplate(t, map[string]any{"deployEventJob": true})
	for _, j := range jobs {
		for _, c := range j.job.Properties.Template.Containers {
			for _, e := range c.Env {
				add(*e.Name, "Azure job "+j.name)
			}
		}
	}

	if len(used) < 10 {
		t.Fatalf("found only %d env names in the manifests; the collection is broken", len(used))
	}
	for _, name := range keys(used) {
		if !known[name] {
			t.Errorf("%s (set in %v) is not a setting of the functions (see `mirror -h`)", name, used[name])
		}
	}
	// The settings the brief names must stay available under these names.
	for _, name := range []string{
		"MM2_SOURCE_BOOTSTRAP_SERVERS", "MM2_TARGET_BOOTSTRAP_SERVERS", "MM2_SOURCE_ALIAS", "MM2_TARGET_ALIAS",
		"MM2_SOURCE_SECURITY_PROTOCOL", "MM2_SOURCE_SASL_MECHANISM", "MM2_SOURCE_SASL_USERNAME", "MM2_SOURCE_SASL_PASSWORD",
		"MM2_TARGET_EVENTHUBS_CONNECTION_STRING", "MM2_TOPICS", "MM2_BURST_MAX_DURATION", "MM2_EVENT_MODE", "PORT",
	} {
		if !known[name] {
			t.Errorf("setting %s is gone from shared/config", name)
		}
	}
}
