package v1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestGridUniqKeyLabelValue(t *testing.T) {
	long := strings.Repeat("a", 60) + ".example.com/zone"
	for _, tc := range []struct{ key, want string }{
		{"zone1", "zone1"},                                             // SuperEdge's keys: byte for byte
		{"superedge_zone", "superedge_zone"},                           // "_" in an unprefixed key is kept
		{"topology.kubernetes.io/zone", "topology.kubernetes.io_zone"}, // the label real clusters carry
		{"kubernetes.io/hostname", "kubernetes.io_hostname"},
		{long, ""},
	} {
		got := GridUniqKeyLabelValue(tc.key)
		if tc.key == long {
			// The hash suffix is checked for shape; its digits are the key's SHA-256.
			if !strings.HasPrefix(got, strings.Repeat("a", 54)+"-") || len(got) != 63 {
				t.Errorf("GridUniqKeyLabelValue(long) = %q, want 54 a's, '-', 8 hex digits", got)
			}
		} else if got != tc.want {
			t.Errorf("GridUniqKeyLabelValue(%q) = %q, want %q", tc.key, got, tc.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("GridUniqKeyLabelValue(%q) = %q is not a label value: %v", tc.key, got, errs)
		}
	}
	if a, b := GridUniqKeyLabelValue(long), GridUniqKeyLabelValue(long+"x"); a == b {
		t.Errorf("two long keys share the label value %q", a)
	}
}

func FuzzGridUniqKeyLabelValue(f *testing.F) {
	for _, k := range []string{"zone1", "topology.kubernetes.io/zone", strings.Repeat("b", 63) + "/" + strings.Repeat("c", 63)} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if len(validation.IsQualifiedName(key)) > 0 {
			return // only label keys are grid keys
		}
		v := GridUniqKeyLabelValue(key)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("GridUniqKeyLabelValue(%q) = %q: %v", key, v, errs)
		}
		if !strings.Contains(key, "/") && len(key) <= validation.LabelValueMaxLength && v != key {
			t.Fatalf("unprefixed key %q changed to %q", key, v)
		}
		if GridUniqKeyLabelValue(key) != v {
			t.Fatalf("not deterministic for %q", key)
		}
	})
}
