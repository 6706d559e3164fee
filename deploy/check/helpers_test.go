package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/mm2go/mm2go/shared/config"
)

// repoRoot is the top of the mm2go repository (this package is deploy/check).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	return root
}

// doc is one YAML document of a manifest file.
type doc struct {
	file string // path relative to the repository root
	idx  int    // position in the file
	kind string
	api  string
	name string
	raw  []byte // the document as JSON
}

func (d doc) String() string { return fmt.Sprintf("%s#%d %s/%s", d.file, d.idx, d.kind, d.name) }

// readDocs splits a YAML stream into documents (empty ones skipped).
func readDocs(t testing.TB, name string, data []byte) []doc {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []doc
	for i := 0; ; i++ {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		js, err := yaml.YAMLToJSONStrict(chunk)
		if err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &meta); err != nil {
			t.Fatalf("%s document %d: %v", name, i, err)
		}
		out = append(out, doc{file: name, idx: i, kind: meta.Kind, api: meta.APIVersion, name: meta.Metadata.Name, raw: js})
	}
	return out
}

// manifestDocs reads every *.yaml file of dir (relative to the repository root).
func manifestDocs(t testing.TB, dir string) []doc {
	t.Helper()
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no YAML files in %s", dir)
	}
	var out []doc
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		out = append(out, readDocs(t, rel, data)...)
	}
	return out
}

// strict decodes JSON into v, failing on unknown or duplicate fields.
func strict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// strictField decodes one field of a generic object strictly into v.
func strictField(obj map[string]any, field string, v any) error {
	raw, err := json.Marshal(obj[field])
	if err != nil {
		return err
	}
	return strict(raw, v)
}

// functionSettings are the environment variable names the functions read (config.EnvNames,
// the same list `mirror -h` prints).
func functionSettings(t testing.TB) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, n := range config.EnvNames() {
		set[n] = true
	}
	if len(set) < 10 || !set["MM2_SOURCE_BOOTSTRAP_SERVERS"] {
		t.Fatalf("config.EnvNames lists only %d settings: %v", len(set), keys(set))
	}
	return set
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

// isoSeconds parses the ISO-8601 durations Knative uses (PT0.5S, PT2M, PT1H30M).
func isoSeconds(s string) (float64, error) {
	m := regexp.MustCompile(`^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$`).FindStringSubmatch(s)
	if m == nil || s == "PT" {
		return 0, fmt.Errorf("duration %q: want PT[nH][nM][n.nS]", s)
	}
	var total float64
	for i, mult := range []float64{3600, 60, 1} {
		if m[i+1] == "" {
			continue
		}
		var f float64
		if _, err := fmt.Sscanf(m[i+1], "%g", &f); err != nil {
			return 0, err
		}
		total += f * mult
	}
	return total, nil
}
