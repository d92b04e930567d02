package gridhosts

import (
	"slices"
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
)

func strp(s string) *string { return &s }

// TestServiceKeys: a headless grid Service follows its topologyKeys
// annotation when valid, else its grid key.
func TestServiceKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		anns    map[string]string
		want    []string
		wantErr bool
	}{
		{"grid key only", map[string]string{superedgev1.LabelGridUniqKey: "zone1"}, nil, []string{"zone1"}, false},
		{"topologyKeys wins", map[string]string{superedgev1.LabelGridUniqKey: "zone1"},
			map[string]string{superedgev1.AnnotationTopologyKeys: `["zone2","*"]`}, []string{"zone2", "*"}, false},
		{"invalid topologyKeys falls back", map[string]string{superedgev1.LabelGridUniqKey: "zone1"},
			map[string]string{superedgev1.AnnotationTopologyKeys: `["*","zone2"]`}, []string{"zone1"}, true},
		{"annotation key verbatim", map[string]string{superedgev1.LabelGridUniqKey: "a.io_zone"},
			map[string]string{superedgev1.AnnotationGridUniqKey: "a.io/zone"}, []string{"a.io/zone"}, false},
		{"not a grid service", nil, nil, nil, false},
	} {
		got, err := serviceKeys(gridname.GridKeyRefOf(tc.labels, tc.anns), tc.anns)
		if !slices.Equal(got, tc.want) || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %q, %v; want %q, err=%v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestPrefixedGridKey serves a grid keyed on a prefixed node label, with
// children labelled and annotated as servicegroup's controller writes them.
func TestPrefixedGridKey(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	grid := newGrid("default", "web", zone, "web-uid")
	set := newSet(grid, "east", "websvc", "web-set", 1)
	set.Labels[superedgev1.LabelGridUniqKey] = superedgev1.GridUniqKeyLabelValue(zone)
	set.Annotations = map[string]string{superedgev1.AnnotationGridUniqKey: zone}
	svc := newService("default", "websvc", superedgev1.GridUniqKeyLabelValue(zone), false)
	svc.Annotations = map[string]string{superedgev1.AnnotationGridUniqKey: zone}
	g := demoHandler([]any{grid, set, svc, newNode("n1", map[string]string{zone: "east"}, ""), newPod(set, 0, "n1", "10.3.0.1")})
	g.Node = "n1"
	name := "web-0.websvc.default.svc.cluster.local."
	run(t, g, "", []test.Case{{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{test.A(name + "	5	IN	A	10.3.0.1")}}})

	// The same Service without the annotation, as SuperEdge would label it
	// if it accepted prefixed keys: still ours, through the label value.
	delete(svc.Annotations, superedgev1.AnnotationGridUniqKey)
	g.index.Upsert(svc)
	run(t, g, "", []test.Case{{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{test.A(name + "	5	IN	A	10.3.0.1")}}})
}
