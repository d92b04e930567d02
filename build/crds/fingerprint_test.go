package crds

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The apiserver's copy of a CRD (tested against a real one in
// internal/gridcli's TestDoctor) differs from the manifest in what it
// defaults and how it spells empty values; a changed schema must not.
func TestFingerprint(t *testing.T) {
	ms, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	fps, err := Fingerprints()
	if err != nil {
		t.Fatal(err)
	}
	if len(fps) != len(ms) {
		t.Fatalf("%d fingerprints for %d CRDs", len(fps), len(ms))
	}
	for _, m := range ms {
		spec := m.CRD.Spec.DeepCopy()
		spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		spec.Versions[0].AdditionalPrinterColumns = append([]apiextensionsv1.CustomResourceColumnDefinition{}, spec.Versions[0].AdditionalPrinterColumns...)
		if len(spec.Versions[0].AdditionalPrinterColumns) == 0 {
			spec.Versions[0].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{}
		}
		same, err := Fingerprint(spec)
		if err != nil {
			t.Fatal(err)
		}
		if same != fps[m.Name] || len(same) != 32 {
			t.Errorf("%s: fingerprint %q with the apiserver's defaults, want %q", m.Name, same, fps[m.Name])
		}
		spec.Names.Categories = append(spec.Names.Categories, "edited")
		other, err := Fingerprint(spec)
		if err != nil {
			t.Fatal(err)
		}
		if other == same {
			t.Errorf("%s: an added category leaves the fingerprint %q", m.Name, other)
		}
	}
}
