package replay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// HelmShapes are the chart's shapes (values.yaml shape), each replayed with the chart's default
// values otherwise.
var HelmShapes = []string{"cronjobs", "keda", "knative"}

// HelmTemplate renders the chart in chartDir as `helm install mm2go CHART -n mm2go
// --dry-run=client` with vals (Helm v4's install action: values checked against the schema,
// templates rendered strictly, no cluster) and returns its objects (hooks apart) as generic maps.
func HelmTemplate(ctx context.Context, chartDir string, vals map[string]any) ([]map[string]any, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName, inst.Namespace = "mm2go", "mm2go"
	if inst.KubeVersion, err = common.ParseKubeVersion("v1.33.0"); err != nil {
		return nil, err
	}
	r, err := inst.RunWithContext(ctx, ch, vals)
	if err != nil {
		return nil, fmt.Errorf("helm install --dry-run %s with %v: %w", chartDir, vals, err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm install --dry-run %s: a %T, not a release", chartDir, r)
	}
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader([]byte(rel.Manifest))))
	var out []map[string]any
	for {
		chunk, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("helm manifest of %s: %w", chartDir, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(chunk, &m); err != nil {
			return nil, fmt.Errorf("helm manifest of %s: %w", chartDir, err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}
