package topology

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SuperEdge's layout: node0 alone in nodeunit1, node1 and node2 in nodeunit2.
var seedNodes = map[string]map[string]string{
	"node0": {"zone1": "nodeunit1", "region": "r1"},
	"node1": {"zone1": "nodeunit2", "region": "r1"},
	"node2": {"zone1": "nodeunit2", "region": "r2"},
}

func topoFor(self string) Nodes {
	return Nodes{Self: seedNodes[self], Labels: func(n string) (map[string]string, bool) {
		l, ok := seedNodes[n]
		return l, ok
	}}
}

func ep(ip, node string, ready *bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready},
		Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z"}}}}
	if node != "" {
		e.NodeName = &node
	}
	return e
}

func slice(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
}

func ips(slices []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Hints != nil {
				out = append(out, "HINT")
			}
			out = append(out, e.Addresses...)
		}
	}
	return out
}

func TestFilterEndpointSlices(t *testing.T) {
	f := false
	in := []*discoveryv1.EndpointSlice{
		slice("a", ep("10.0.0.0", "node0", nil), ep("10.0.0.1", "node1", nil)),
		slice("b", ep("10.0.0.2", "node2", &f), ep("10.0.0.9", "", nil), ep("10.0.0.8", "gone", nil)),
	}
	orig := []*discoveryv1.EndpointSlice{in[0].DeepCopy(), in[1].DeepCopy()}
	for _, tc := range []struct {
		self string
		keys []string
		want []string
	}{
		{"node0", []string{"zone1"}, []string{"10.0.0.0"}},
		// node2 is not ready but node1 qualifies the key: both are served.
		{"node1", []string{"zone1"}, []string{"10.0.0.1", "10.0.0.2"}},
		{"node2", []string{"region"}, nil}, // only node2 in r2, and it is not usable
		{"node2", []string{"region", "*"}, []string{"10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.9", "10.0.0.8"}},
		{"node2", []string{"missing", "zone1"}, []string{"10.0.0.1", "10.0.0.2"}},
		{"unknown", []string{"zone1"}, nil},
	} {
		got := FilterEndpointSlices(tc.keys, topoFor(tc.self), in)
		if len(got) != 2 || !slices.Equal(ips(got), tc.want) {
			t.Errorf("%s %q: got %q, want %q", tc.self, tc.keys, ips(got), tc.want)
		}
		for _, s := range got {
			if s.Endpoints == nil {
				t.Errorf("%s %q: slice %s has nil endpoints, want empty", tc.self, tc.keys, s.Name)
			}
		}
	}
	if !apiequality.Semantic.DeepEqual(in, orig) {
		t.Fatal("filter modified its input")
	}
}

func TestFilterEndpoints(t *testing.T) {
	n0, n1, n2 := "node0", "node1", "node2"
	in := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{
		Addresses:         []corev1.EndpointAddress{{IP: "10.0.0.0", NodeName: &n0}, {IP: "10.0.0.1", NodeName: &n1}},
		NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.2", NodeName: &n2}},
		Ports:             []corev1.EndpointPort{{Port: 80}},
	}}}
	got := FilterEndpoints([]string{"zone1"}, topoFor("node0"), in)
	if len(got.Subsets) != 1 || len(got.Subsets[0].Addresses) != 1 || got.Subsets[0].Addresses[0].IP != "10.0.0.0" || len(got.Subsets[0].NotReadyAddresses) != 0 {
		t.Fatalf("node0: %+v", got.Subsets)
	}
	got = FilterEndpoints([]string{"zone1"}, topoFor("node2"), in)
	if len(got.Subsets) != 1 || len(got.Subsets[0].Addresses) != 1 || len(got.Subsets[0].NotReadyAddresses) != 1 {
		t.Fatalf("node2: %+v", got.Subsets)
	}
	in2 := in.DeepCopy()
	in2.Subsets[0].Addresses = in2.Subsets[0].Addresses[1:] // only node1 usable
	got = FilterEndpoints([]string{"zone1"}, topoFor("node0"), in2)
	if got.Subsets == nil || len(got.Subsets) != 0 {
		t.Fatalf("node0 without local endpoints: %+v", got.Subsets)
	}
}

// FuzzFilterEndpointSlices checks the filter's invariants on arbitrary
// layouts: it never panics, never modifies its input, serves only endpoints
// of the input, keeps one output slice per input, and never serves an
// endpoint on another nodeunit for ["zone1"].
func FuzzFilterEndpointSlices(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, byte(0), `["zone1"]`)
	f.Add([]byte{5, 9, 200, 3, 7}, byte(1), `["zone1","*"]`)
	f.Add([]byte{}, byte(2), `["region","zone1"]`)
	names := []string{"node0", "node1", "node2", "", "gone"}
	f.Fuzz(func(t *testing.T, layout []byte, self byte, annotation string) {
		keys, err := ParseKeys(annotation)
		if err != nil {
			return
		}
		var in []*discoveryv1.EndpointSlice
		cur := slice("s0")
		for i, b := range layout {
			if b&0x80 != 0 {
				in = append(in, cur)
				cur = slice("s" + string(rune('a'+i%26)))
			}
			var ready *bool
			switch b >> 5 & 3 {
			case 1:
				ready = new(bool)
			case 2:
				tr := true
				ready = &tr
			}
			e := ep("10.0.0."+string(rune('0'+i%10)), names[int(b)%len(names)], ready)
			if b&0x10 != 0 {
				tr := true
				e.Conditions.Serving = &tr
			}
			cur.Endpoints = append(cur.Endpoints, e)
		}
		in = append(in, cur)
		orig := make([]*discoveryv1.EndpointSlice, len(in))
		for i := range in {
			orig[i] = in[i].DeepCopy()
		}
		selfName := names[int(self)%3]
		out := FilterEndpointSlices(keys, topoFor(selfName), in)
		if !apiequality.Semantic.DeepEqual(in, orig) {
			t.Fatal("input modified")
		}
		if len(out) != len(in) {
			t.Fatalf("%d slices in, %d out", len(in), len(out))
		}
		for i, s := range out {
			if s.Endpoints == nil || len(s.Endpoints) > len(in[i].Endpoints) {
				t.Fatalf("slice %d: %d endpoints from %d", i, len(s.Endpoints), len(in[i].Endpoints))
			}
			for _, e := range s.Endpoints {
				if e.Hints != nil {
					t.Fatal("hints kept")
				}
				if slices.Equal(keys, []string{"zone1"}) && (e.NodeName == nil || seedNodes[*e.NodeName]["zone1"] != seedNodes[selfName]["zone1"]) {
					t.Fatalf("served endpoint on %v to %s", e.NodeName, selfName)
				}
			}
		}
	})
}
