package gridname

import (
	"testing"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// TestGridKeyPrecedence: the annotation, when set, decides alone; without
// it the label must be the label value of the grid's key.
func TestGridKeyPrecedence(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	for _, tc := range []struct {
		name        string
		label, ann  *string
		key         string
		wantBelongs bool
	}{
		{"SuperEdge label", strp("zone1"), nil, "zone1", true},
		{"SuperEdge label, other key", strp("zone1"), nil, "zone2", false},
		{"prefixed key, label only", strp("topology.kubernetes.io_zone"), nil, zone, true},
		{"prefixed key, label and annotation", strp("topology.kubernetes.io_zone"), strp(zone), zone, true},
		{"annotation wins over label", strp("zone1"), strp("zone2"), "zone1", false},
		{"annotation decides with a stale label", strp("stale"), strp("zone1"), "zone1", true},
		{"empty annotation ignored", strp("zone1"), strp(""), "zone1", true},
		{"neither", nil, nil, "zone1", false},
		{"empty grid key", strp(""), nil, "", false},
	} {
		labels, anns := map[string]string{}, map[string]string{}
		if tc.label != nil {
			labels[superedgev1.LabelGridUniqKey] = *tc.label
		}
		if tc.ann != nil {
			anns[superedgev1.AnnotationGridUniqKey] = *tc.ann
		}
		if got := GridKeyRefOf(labels, anns).Is(tc.key); got != tc.wantBelongs {
			t.Errorf("%s: is(%q) = %v, want %v", tc.name, tc.key, got, tc.wantBelongs)
		}
	}
}

func strp(s string) *string { return &s }
