package replay

import (
	"testing"
)

// TestReplayHelm: each shape of deploy/helm/mm2go, rendered as `helm install` renders it with
// the chart's default values, replayed as its plain manifests are: the CronJobs and the KEDA
// ScaledJob through the scenario, the Knative Services through their PingSources and the
// KafkaSource through the genuine dispatcher.
func TestReplayHelm(t *testing.T) {
	t.Parallel()
	for _, shape := range HelmShapes {
		objs, err := HelmTemplate(t.Context(), RepoFile("deploy", "helm", "mm2go"), map[string]any{"shape": shape})
		if err != nil {
			t.Fatal(err)
		}
		switch shape {
		case "knative":
			secrets := RepoFile("knative", "secret.example.yaml")
			t.Run("knative/pingsources", func(t *testing.T) { t.Parallel(); knativeReplay(t, objs, secrets) })
			t.Run("knative/kafkasource", func(t *testing.T) { t.Parallel(); kafkaSourceReplay(t, "helm knative", objs, secrets) })
		default:
			ws, err := KubernetesWorkloads("helm "+shape, objs, RepoFile("deploy", "kubernetes", "secret.example.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			t.Run(shape, func(t *testing.T) { t.Parallel(); scenario(t, "helm "+shape, ws) })
		}
	}
}
