package check

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mm2go/mm2go/shared/config"
)

// podEnv is the environment a container gets: its ConfigMaps (envFrom) and its env entries,
// secret references filled from the Secret templates.
func podEnv(t *testing.T, where string, c corev1.Container, dd *decoded) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			if cm := dd.configMaps[ef.ConfigMapRef.Name]; cm != nil {
				for k, v := range cm.Data {
					env[ef.Prefix+k] = v
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			if s := dd.secrets[r.Name]; s != nil {
				if v, ok := s.StringData[r.Key]; ok {
					env[e.Name] = v
				} else if r.Optional == nil || !*r.Optional {
					t.Errorf("%s: %s: required secret key %s/%s missing from the template", where, e.Name, r.Name, r.Key)
				}
			}
		}
	}
	return env
}

// loadSettings runs the functions' own settings loader on env: values that parse, enums that
// exist, combinations it accepts.
func loadSettings(t *testing.T, where string, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Errorf("%s: the functions reject these settings: %v", where, err)
		return nil
	}
	return cfg
}

// TestManifestSettingsLoad: the settings each manifest gives a function are accepted by
// shared/config (the same code the functions run at start), not only named right.
func TestManifestSettingsLoad(t *testing.T) {
	kn := decodeAll(t, manifestDocs(t, "knative"))
	for name, s := range kn.services {
		where := "knative Service " + name
		cfg := loadSettings(t, where, podEnv(t, where, s.Spec.Template.Spec.Containers[0], kn))
		if cfg == nil {
			continue
		}
		// Every topic that wakes the mirror must be one the flow replicates (MM2_TOPICS, or a
		// heartbeats topic under heartbeats.replication.enabled, as the engine decides);
		// otherwise each of its records is answered 400 and goes straight to the dead-letter sink.
		f, err := cfg.TopicFilter()
		if err != nil {
			t.Fatalf("%s: topic filter: %v", where, err)
		}
		pol, err := cfg.Policy()
		if err != nil {
			t.Fatalf("%s: replication policy: %v", where, err)
		}
		for ksName, ks := range kn.kafkaSources {
			if nested(ks, "spec", "sink", "ref", "name") != name {
				continue
			}
			topics, _ := nested(ks, "spec", "topics").([]any)
			for _, tp := range topics {
				if ok, why := f.Explain(fmt.Sprint(tp)); !ok && !(cfg.HeartbeatsReplicationEnabled && pol.IsHeartbeatsTopic(fmt.Sprint(tp))) {
					t.Errorf("KafkaSource %s topic %v is not replicated by MM2_TOPICS/MM2_TOPICS_EXCLUDE (%s)", ksName, tp, why)
				}
			}
		}
	}
	k8s := decodeAll(t, manifestDocs(t, "deploy/kubernetes"))
	for name, cj := range k8s.cronJobs {
		where := "CronJob " + name
		loadSettings(t, where, podEnv(t, where, cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0], k8s))
	}

	// Azure: the evaluated env, Key Vault secrets replaced by plausible values.
	_, jobs := evalTemplate(t, map[string]any{"deployEventJob": true})
	for _, j := range jobs {
		where := "Azure job " + j.name
		env := armEnv(t, j)
		cfg := loadSettings(t, where, env)
		if cfg != nil && len(cfg.Target.BootstrapServers) == 0 {
			t.Errorf("%s: no target bootstrap servers derived from the Event Hubs connection string", where)
		}
	}
}
