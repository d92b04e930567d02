package controllerlease

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelsRoundTrip(t *testing.T) {
	for _, version := range []string{"v0.1.0", "dev", "v1.2.3+build.7", "-" + strings.Repeat("x", 80), "+++"} {
		labels := Labels(version, map[string]string{"servicegrids.superedge.io": "0123456789abcdef0123456789abcdef"})
		for k, v := range labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("version %q: label key %q: %v", version, k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("version %q: label %s=%q: %v", version, k, v, errs)
			}
		}
		p, ok := Read(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Labels: labels}})
		if !ok || p.Version == "" || p.CRDs["servicegrids.superedge.io"] != "0123456789abcdef0123456789abcdef" || len(p.CRDs) != 1 {
			t.Errorf("version %q: read back %+v, %v", version, p, ok)
		}
	}
	if _, ok := Read(&coordinationv1.Lease{}); ok {
		t.Error("a Lease without labels publishes something")
	}
}
