package realnode

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// TestNextBuildField: the next build's CRD differs from the shipped one by
// the new field only, in both copies, and its fingerprint changes (so the
// controller and doctor see another schema).
func TestNextBuildField(t *testing.T) {
	repo, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := []string{"build/crds/superedge.io_deploymentgrids.yaml", "build/chart/crds/superedge.io_deploymentgrids.yaml"}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := addNextBuildField(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		shipped, next := readCRD(t, filepath.Join(repo, f)), readCRD(t, filepath.Join(dir, f))
		before, err := crds.Fingerprint(&shipped.Spec)
		if err != nil {
			t.Fatal(err)
		}
		after, err := crds.Fingerprint(&next.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if before == after {
			t.Errorf("%s: fingerprint unchanged (%s)", f, before)
		}
		for i := range next.Spec.Versions {
			spec := next.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
			field, ok := spec.Properties[apiChangeField]
			if !ok || field.Type != "string" || field.Default == nil || string(field.Default.Raw) != `"`+apiChangeDefault+`"` {
				t.Errorf("%s %s: spec.%s is %+v", f, next.Spec.Versions[i].Name, apiChangeField, field)
			}
			delete(spec.Properties, apiChangeField)
			next.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
		if !reflect.DeepEqual(shipped.Spec, next.Spec) || shipped.Name != next.Name || !reflect.DeepEqual(shipped.Annotations, next.Annotations) {
			t.Errorf("%s: differs by more than spec.%s", f, apiChangeField)
		}
	}
}

func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}
