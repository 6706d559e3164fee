package check

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdDir holds verbatim copies of the upstream CustomResourceDefinitions (see its README).
const crdDir = "testdata/crds"

// crdVersion is one served version of a custom resource, ready to check objects as the API
// server does on create.
type crdVersion struct {
	crd        string // file name, for messages
	namespaced bool
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator // nil without x-kubernetes-validations
}

var (
	crdOnce    sync.Once
	crdSchemas map[string]*crdVersion // "group/version/Kind"
	crdErr     error
)

// loadCRDs reads every CRD in testdata/crds once; the schemas are read-only afterwards.
func loadCRDs(t testing.TB) map[string]*crdVersion {
	t.Helper()
	crdOnce.Do(func() { crdSchemas, crdErr = readCRDs(crdDir) })
	if crdErr != nil {
		t.Fatal(crdErr)
	}
	return crdSchemas
}

func readCRDs(dir string) (map[string]*crdVersion, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s (%v)", dir, err)
	}
	out := map[string]*crdVersion{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: kind %q, want CustomResourceDefinition", f, crd.Kind)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return nil, fmt.Errorf("%s: version %s has no openAPIV3Schema", f, v.Name)
			}
			var internal apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
				return nil, fmt.Errorf("%s %s: converting the schema: %w", f, v.Name, err)
			}
			s, err := structuralschema.NewStructural(&internal)
			if err != nil {
				return nil, fmt.Errorf("%s %s: not a structural schema: %w", f, v.Name, err)
			}
			if errs := structuralschema.ValidateStructural(nil, s); len(errs) > 0 {
				return nil, fmt.Errorf("%s %s: not a structural schema: %v", f, v.Name, errs.ToAggregate())
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
			if err != nil {
				return nil, fmt.Errorf("%s %s: schema validator: %w", f, v.Name, err)
			}
			cv := &crdVersion{crd: filepath.Base(f), namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped, structural: s, validator: validator}
			if hasCELRules(s) {
				cv.cel = cel.NewValidator(s, true, celconfig.PerCallLimit)
			}
			out[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind] = cv
		}
	}
	return out, nil
}

func hasCELRules(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 || hasCELRules(s.Items) || (s.AdditionalProperties != nil && hasCELRules(s.AdditionalProperties.Structural)) {
		return true
	}
	for _, p := range s.Properties {
		if hasCELRules(&p) {
			return true
		}
	}
	return false
}

// crdFor returns the schema of d's apiVersion and kind, or nil if no CRD defines it.
func crdFor(t testing.TB, d doc) *crdVersion {
	return loadCRDs(t)[d.api+"/"+d.kind]
}

// validateCustom checks d against its CRD the way kube-apiserver handles a create with
// `kubectl apply` (field validation Strict, kubectl's default): fields the schema does not
// know are errors (the server's pruning would drop them), then defaulting, then the OpenAPI
// schema (types, enums, patterns, required, bounds), embedded ObjectMeta, list-type
// invariants and x-kubernetes-validations rules. The namespace is filled in like the
// server's request path does.
func validateCustom(cv *crdVersion, d doc) error {
	var obj map[string]any
	if err := json.Unmarshal(d.raw, &obj); err != nil {
		return err
	}
	if cv.namespaced {
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			return fmt.Errorf("%s (%s): metadata missing", d, cv.crd)
		}
		if md["namespace"] == nil {
			md["namespace"] = testNamespace
		}
	}
	var unknown []string
	_, _, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return fmt.Errorf("%s (%s): metadata: %w", d, cv.crd, err)
	}
	unknown = append(unknown, metaUnknown...)
	unknown = append(unknown, structuralpruning.PruneWithOptions(obj, cv.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, cv.structural)
	ferr, metaPaths := schemaobjectmeta.CoerceWithOptions(nil, obj, cv.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		return fmt.Errorf("%s (%s): %v", d, cv.crd, ferr)
	}
	unknown = append(unknown, metaPaths...)
	if len(unknown) > 0 {
		sort.Strings(unknown)
		// The API server's words for fieldValidation=Strict.
		return fmt.Errorf("%s (%s): strict decoding error: unknown field %s", d, cv.crd, quoteAll(unknown))
	}
	structuraldefaulting.Default(obj, cv.structural)

	var errs field.ErrorList
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, cv.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, obj, cv.structural, true)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, cv.structural, obj)...)
	if cv.cel != nil && len(errs) == 0 {
		celErrs, _ := cv.cel.Validate(context.Background(), nil, cv.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s (%s): %v", d, cv.crd, errs.ToAggregate())
	}
	return nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
