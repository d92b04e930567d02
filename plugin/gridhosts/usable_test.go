package gridhosts

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/topology"
	"github.com/servicegroup/servicegroup/wrapper"
)

// TestDrainingNodeunit: nodeunit1's only endpoint is draining (serving,
// terminating, not ready). The two usable rules of package topology decide
// differently here, each for its reader: the wrapper keeps nodeunit1's key
// and hands kube-proxy the draining endpoint (kube-proxy uses serving
// terminating endpoints when none is ready), while gridhosts names only
// ready endpoints and so answers with the next key, "*".
func TestDrainingNodeunit(t *testing.T) {
	node1 := newNode("node-1", map[string]string{"zone1": "nodeunit1"}, "10.0.0.1")
	node2 := newNode("node-2", map[string]string{"zone1": "nodeunit2"}, "10.0.0.2")
	svc := newService("default", "hl", "zone1", true)
	svc.Annotations = map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1","*"]`}
	slice := newSlice("default", "hl-1", "hl", 8080,
		testEndpoint{IP: "10.5.1.1", Node: "node-1"},
		testEndpoint{IP: "10.5.2.1", Node: "node-2", Ready: true},
	)
	tr := true
	slice.Endpoints[0].Conditions.Serving, slice.Endpoints[0].Conditions.Terminating = &tr, &tr

	g := demoHandler([]any{node1, node2, svc, slice})
	g.Node = "node-1"
	const name = "hl.default.svc.cluster.local."
	run(t, g, "", []test.Case{{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{test.A(name + "	5	IN	A	10.5.2.1")}}})

	keys, err := topology.ParseKeys(svc.Annotations[superedgev1.AnnotationTopologyKeys])
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]string{"node-1": node1.Labels, "node-2": node2.Labels}
	view := topology.Nodes{Self: node1.Labels, Labels: func(n string) (map[string]string, bool) { l, ok := labels[n]; return l, ok }}
	var served []string
	for _, s := range wrapper.FilterEndpointSlices(keys, view, []*discoveryv1.EndpointSlice{slice}) {
		for _, ep := range s.Endpoints {
			served = append(served, ep.Addresses...)
		}
	}
	if len(served) != 1 || served[0] != "10.5.1.1" {
		t.Errorf("the wrapper serves kube-proxy on node-1 %v, want the draining 10.5.1.1 alone", served)
	}
}
