package check

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
)

const chartDir = "deploy/helm/mm2go"

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(filepath.Join(repoRoot(t), chartDir))
	if err != nil {
		t.Fatalf("loading %s: %v", chartDir, err)
	}
	return ch
}

// installDryRun is `helm install NAME chart -n mm2go --dry-run=client [-f values]` through
// Helm v4's own install action: values coalesced with the chart's defaults and checked
// against values.schema.json, templates rendered in strict mode, hooks and NOTES.txt split
// out, and the manifest parsed as Kubernetes objects, with no cluster.
func installDryRun(t testing.TB, ch *chart.Chart, name string, vals map[string]any) (*release.Release, error) {
	t.Helper()
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = name
	inst.Namespace = testNamespace
	kv, err := common.ParseKubeVersion("v1.33.0")
	if err != nil {
		t.Fatal(err)
	}
	inst.KubeVersion = kv
	r, err := inst.RunWithContext(t.Context(), ch, vals)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*release.Release)
	if !ok {
		t.Fatalf("install returned a %T", r)
	}
	return rel, nil
}

// renderChart renders the chart as release mm2go; the error is the install's.
func renderChart(t testing.TB, ch *chart.Chart, vals map[string]any) (*release.Release, error) {
	t.Helper()
	return installDryRun(t, ch, "mm2go", vals)
}

// chartDocs renders the chart as release mm2go and splits its manifest (hooks apart) into
// documents.
func chartDocs(t testing.TB, ch *chart.Chart, vals map[string]any) []doc {
	t.Helper()
	return releaseDocs(t, ch, "mm2go", vals)
}

func releaseDocs(t testing.TB, ch *chart.Chart, name string, vals map[string]any) []doc {
	t.Helper()
	rel, err := installDryRun(t, ch, name, vals)
	if err != nil {
		t.Fatalf("helm install --dry-run %s: %v", name, err)
	}
	return readDocs(t, "helm release "+name, []byte(rel.Manifest))
}

// chartCase is one documented way to install the chart.
type chartCase struct {
	name  string
	file  string // file below the chart directory ("" = the defaults)
	shape string
	auth  string // TriggerAuthentication the ScaledJob uses (shape keda)
}

var chartCases = []chartCase{
	{"defaults", "", "cronjobs", ""},
	{"keda", "examples/keda.yaml", "keda", "mm2go-source-kafka"},
	{"knative", "examples/knative.yaml", "knative", ""},
	{"azure-workload-identity", "examples/azure-workload-identity.yaml", "keda", "mm2go-source-azure"},
}

func (c chartCase) values(t testing.TB) map[string]any {
	t.Helper()
	if c.file == "" {
		return map[string]any{}
	}
	v, err := common.ReadValuesFile(filepath.Join(repoRoot(t), chartDir, c.file))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any(v)
}

// renderCase renders one case and decodes it with the Secret templates of its shape.
func renderCase(t *testing.T, ch *chart.Chart, c chartCase) ([]doc, *decoded) {
	t.Helper()
	docs := chartDocs(t, ch, c.values(t))
	dd := decodeAll(t, docs)
	secrets := "deploy/kubernetes/secret.example.yaml"
	if c.shape == "knative" {
		secrets = "knative/secret.example.yaml"
	}
	for _, d := range readDocs(t, secrets, mustRead(t, secrets)) {
		if err := dd.decodeDoc(d); err != nil {
			t.Fatal(err)
		}
	}
	return docs, dd
}

// TestHelmChart renders the chart for its defaults and each documented example: every object
// passes its real schema (CRD or k8s.io/api, as in TestManifestSchemas) and the same checks as
// the plain manifests of that shape, and every function's settings load.
func TestHelmChart(t *testing.T) {
	ch := loadChart(t)
	if ch.Schema == nil {
		t.Fatal("the chart has no values.schema.json")
	}
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			docs, dd := renderCase(t, ch, c)
			for _, d := range docs {
				if err := checkSchema(t, d); err != nil {
					t.Error(err)
				}
			}
			switch c.shape {
			case "cronjobs":
				checkKubernetes(t, dd)
			case "keda":
				checkKubernetes(t, dd)
				checkScaledJobs(t, dd, c.auth)
			case "knative":
				checkKnative(t, dd, true)
				if len(dd.cronJobs) != 0 || len(dd.custom["ScaledJob"]) != 0 {
					t.Errorf("knative shape renders CronJobs or ScaledJobs too")
				}
			}
			for where, pod := range podsOf(dd) {
				for _, c := range pod.containers {
					loadSettings(t, where, podEnv(t, where, c, dd))
				}
			}
			if c.name == "azure-workload-identity" {
				checkWorkloadIdentity(t, dd)
			}
		})
	}
}

// checkWorkloadIdentity: every pod is labelled for the AKS webhook, its ServiceAccount names the
// identity, and the target signs in with workload identity rather than a secret.
func checkWorkloadIdentity(t *testing.T, dd *decoded) {
	t.Helper()
	for where, pod := range podsOf(dd) {
		if pod.labels["azure.workload.identity/use"] != "true" {
			t.Errorf("%s: pod without label azure.workload.identity/use=true", where)
		}
		env := podEnv(t, where, pod.containers[0], dd)
		if env["MM2_TARGET_AZURE_AUTH"] != "workload-identity" || env["MM2_TARGET_EVENTHUBS_CONNECTION_STRING"] != "" {
			t.Errorf("%s: target must sign in with workload identity only (env %v)", where, env)
		}
		if sa := dd.accounts[pod.serviceAccount]; sa == nil || sa.Annotations["azure.workload.identity/client-id"] == "" {
			t.Errorf("%s: ServiceAccount %q without azure.workload.identity/client-id", where, pod.serviceAccount)
		}
	}
}

// TestHelmChartRefusesBadValues: values.schema.json and the templates turn mistakes into
// errors naming the value, before anything reaches a cluster.
func TestHelmChartRefusesBadValues(t *testing.T) {
	ch := loadChart(t)
	cases := []struct {
		name string
		vals map[string]any
		want string
	}{
		{"unknown shape", map[string]any{"shape": "lambda"}, "shape"},
		{"misspelt setting", map[string]any{"settings": map[string]any{"MM2_TOPIC": "orders"}}, "MM2_TOPIC"},
		{"setting the chart owns", map[string]any{"settings": map[string]any{"MM2_LAG_GROUP": "x"}}, "MM2_LAG_GROUP"},
		{"unknown key", map[string]any{"keda": map[string]any{"lagGrop": "x"}}, "lagGrop"},
		{"bad cron", map[string]any{"schedules": map[string]any{"mirror": "every 5 minutes"}}, "/schedules/mirror"},
		{"bad protocol", map[string]any{"source": map[string]any{"securityProtocol": "TLS"}}, "securityProtocol"},
		{"knative with Azure AD source", map[string]any{"shape": "knative", "source": map[string]any{"auth": "azureWorkloadIdentity"}}, "source.auth=azureWorkloadIdentity with shape=knative"},
		{"KEDA scaler on an Azure AD source with secrets", map[string]any{"shape": "keda", "source": map[string]any{"auth": "azureWorkloadIdentity"}}, "set keda.auth=azureKeyVault"},
		{"Key Vault without URI", map[string]any{"shape": "keda", "keda": map[string]any{"auth": "azureKeyVault"}}, "keda.keyVault.uri"},
	}
	for _, c := range cases {
		_, err := renderChart(t, ch, c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
