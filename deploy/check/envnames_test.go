package check

import (
	"encoding/json"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podInfo is what these checks read of any pod template (CronJob, ScaledJob, Knative Service).
type podInfo struct {
	labels         map[string]string
	serviceAccount string
	containers     []corev1.Container
}

// podsOf lists the pod templates of every workload in dd, by "<Kind> <name>".
func podsOf(dd *decoded) map[string]podInfo {
	out := map[string]podInfo{}
	for name, s := range dd.services {
		ps := s.Spec.Template.Spec.PodSpec
		out["knative Service "+name] = podInfo{s.Spec.Template.Labels, ps.ServiceAccountName, ps.Containers}
	}
	for name, cj := range dd.cronJobs {
		tp := cj.Spec.JobTemplate.Spec.Template
		out["CronJob "+name] = podInfo{tp.Labels, tp.Spec.ServiceAccountName, tp.Spec.Containers}
	}
	for name, obj := range dd.custom["ScaledJob"] {
		var sj scaledJob
		raw, _ := json.Marshal(obj)
		if json.Unmarshal(raw, &sj) != nil {
			continue
		}
		var js struct {
			Template corev1.PodTemplateSpec `json:"template"`
		}
		if json.Unmarshal(sj.Spec.JobTargetRef, &js) != nil {
			continue
		}
		out["ScaledJob "+name] = podInfo{js.Template.Labels, js.Template.Spec.ServiceAccountName, js.Template.Spec.Containers}
	}
	return out
}

// envNamesOf collects every environment variable name the workloads of dd set (env, envFrom
// ConfigMaps and Secrets, every settings ConfigMap key) and every name a KEDA trigger reads
// from the Job's environment (*FromEnv), each with where it is set.
func envNamesOf(dd *decoded, where string, add func(name, where string)) {
	for pw, pod := range podsOf(dd) {
		pw = where + " " + pw
		for _, c := range pod.containers {
			for _, e := range c.Env {
				add(e.Name, pw+" env")
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil {
					if cm := dd.configMaps[ef.ConfigMapRef.Name]; cm != nil {
						for k := range cm.Data {
							add(ef.Prefix+k, "ConfigMap "+cm.Name+" (envFrom in "+pw+")")
						}
					}
				}
				if ef.SecretRef != nil {
					if s := dd.secrets[ef.SecretRef.Name]; s != nil {
						for k := range s.StringData {
							add(ef.Prefix+k, "Secret "+s.Name+" (envFrom in "+pw+")")
						}
					}
				}
			}
		}
	}
	// Every key of the settings ConfigMaps becomes an env var, referenced or not.
	for _, cm := range dd.configMaps {
		for k := range cm.Data {
			add(k, where+" ConfigMap "+cm.Name)
		}
	}
	for name, obj := range dd.custom["ScaledJob"] {
		var sj scaledJob
		raw, _ := json.Marshal(obj)
		if json.Unmarshal(raw, &sj) != nil {
			continue
		}
		for _, tr := range sj.Spec.Triggers {
			for k, v := range tr.Metadata {
				if len(k) > 7 && k[len(k)-7:] == "FromEnv" {
					add(v, where+" ScaledJob "+name+" trigger "+k)
				}
			}
		}
	}
}

// envLike finds env-like names (MM2_*) in the Grafana dashboard's text.
var envLike = regexp.MustCompile(`\bMM2_[A-Z0-9_]+\b`)

// TestEnvNamesAreSettings: every environment variable a manifest, the KEDA overlay, the Helm
// chart (each documented example and every name its values.schema.json accepts as a setting)
// or the dashboard names must be a setting the functions read (shared/config, as printed by
// `mirror -h`), so renaming a setting breaks this test instead of silently dropping the value
// in production.
func TestEnvNamesAreSettings(t *testing.T) {
	known := functionSettings(t)
	used := map[string][]string{} // name -> where
	add := func(name, where string) { used[name] = append(used[name], where) }

	envNamesOf(decodeAll(t, manifestDocs(t, "knative")), "knative/", add)
	envNamesOf(decodeAll(t, manifestDocs(t, "deploy/kubernetes")), "deploy/kubernetes/", add)
	envNamesOf(decodeAll(t, kustomizeBuild(t, "deploy/keda")), "deploy/keda (kustomize build)", add)
	ch := loadChart(t)
	for _, c := range chartCases {
		envNamesOf(decodeAll(t, chartDocs(t, ch, c.values(t))), "helm "+c.name, add)
	}
	// The chart's settings map: every name its schema lets through.
	var schema struct {
		Properties struct {
			Settings struct {
				PropertyNames struct {
					Enum []string `json:"enum"`
				} `json:"propertyNames"`
			} `json:"settings"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(mustRead(t, chartDir+"/values.schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	if len(schema.Properties.Settings.PropertyNames.Enum) < 20 {
		t.Fatalf("values.schema.json settings.propertyNames.enum lists %d names", len(schema.Properties.Settings.PropertyNames.Enum))
	}
	for _, n := range schema.Properties.Settings.PropertyNames.Enum {
		add(n, "values.schema.json settings")
	}
	for _, n := range envLike.FindAllString(string(mustRead(t, dashboardFile)), -1) {
		add(n, dashboardFile)
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
		"MM2_LAG_GROUP", "MM2_BURST_GROUP", "MM2_TARGET_AZURE_AUTH",
	} {
		if !known[name] {
			t.Errorf("setting %s is gone from shared/config", name)
		}
	}
}
