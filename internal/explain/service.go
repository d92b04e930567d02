package explain

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/topology"
)

// TopologyKeysAnnotation is the Service annotation the wrapper filters by.
const TopologyKeysAnnotation = superedgev1.AnnotationTopologyKeys

// ServiceReport is one node's view of one Service through the wrapper.
type ServiceReport struct {
	Service string `json:"service"` // namespace/name
	Node    string `json:"node"`
	// NodeKnown is false when the node does not exist: no key can qualify.
	NodeKnown bool `json:"nodeKnown"`
	// Annotation is the raw topologyKeys annotation ("" when absent).
	Annotation string `json:"annotation,omitempty"`
	// Mode is "unfiltered" (no annotation), "invalid" (served unfiltered,
	// see Error), "topology" (the wrapper's mode) or "native"
	// (trafficDistribution PreferSameZone, no annotation: the data plane's).
	Mode string `json:"mode"`
	// Zone is the node's topology.kubernetes.io/zone (native mode).
	Zone string `json:"zone,omitempty"`
	// Fallback says why the data plane uses every endpoint (native mode),
	// "" when it keeps to the node's zone.
	Fallback string      `json:"fallback,omitempty"`
	Error    string      `json:"error,omitempty"`
	Keys     []KeyReport `json:"keys,omitempty"`
	// Winner is the first qualifying key; empty when none qualified (then
	// no endpoint is served) or the Service is not filtered.
	Winner string `json:"winner,omitempty"`
	// Served are the endpoints kube-proxy on Node receives.
	Served []EndpointReport `json:"served"`
	// Total counts the endpoints of the Service before filtering.
	Total int `json:"total"`
}

// KeyReport is one topology key as seen from the node.
type KeyReport struct {
	Key string `json:"key"`
	// Value is the node's value of Key ("*" for the wildcard); HasValue is
	// false when the node lacks the label, so the key cannot qualify.
	Value    string `json:"value,omitempty"`
	HasValue bool   `json:"hasValue"`
	// Usable counts usable (ready or serving) endpoints matching Key.
	Usable    int  `json:"usable"`
	Qualified bool `json:"qualified"`
	Won       bool `json:"won"`
}

// EndpointReport is one served endpoint.
type EndpointReport struct {
	Slice     string   `json:"slice"`
	Addresses []string `json:"addresses"`
	Node      string   `json:"node,omitempty"`
	Ready     bool     `json:"ready"`
	Serving   bool     `json:"serving"`
	Terminate bool     `json:"terminating,omitempty"`
}

// Service explains what node self receives for svc, given the Service's
// EndpointSlices and every node. The decision is topology.FilterEndpointSlices:
// a key qualifies exactly when filtering by that key alone serves an
// endpoint, and the served endpoints are the filter's output for all keys.
func Service(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, self string, nodes []corev1.Node) ServiceReport {
	view := NodeView(self, nodes)
	r := ServiceReport{
		Service: svc.Namespace + "/" + svc.Name, Node: self, NodeKnown: view.Self != nil,
		Total: countEndpoints(slices),
	}
	raw, annotated := svc.Annotations[TopologyKeysAnnotation]
	r.Annotation = raw
	if !annotated && nativeDistribution(svc) {
		explainNative(&r, view.Self, slices)
		return r
	}
	if !annotated {
		r.Mode = "unfiltered"
		r.Served = endpointsOf(slices)
		return r
	}
	keys, err := topology.ParseKeys(raw)
	if err != nil {
		r.Mode, r.Error = "invalid", err.Error()
		r.Served = endpointsOf(slices)
		return r
	}
	r.Mode = "topology"
	for _, key := range keys {
		k := KeyReport{Key: key}
		switch v, ok := view.Self[key]; {
		case key == topology.AnyKey:
			k.Value, k.HasValue = topology.AnyKey, true
		case ok:
			k.Value, k.HasValue = v, true
		}
		k.Usable = countUsableMatching(view, key, slices)
		k.Qualified = len(endpointsOf(topology.FilterEndpointSlices([]string{key}, view, slices))) > 0
		if k.Qualified && r.Winner == "" {
			k.Won, r.Winner = true, key
		}
		r.Keys = append(r.Keys, k)
	}
	r.Served = endpointsOf(topology.FilterEndpointSlices(keys, view, slices))
	return r
}

func countUsableMatching(view topology.Nodes, key string, ss []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range ss {
		for _, ep := range s.Endpoints {
			if topology.ProxyUsable(ep.Conditions) && view.Matches(key, deref(ep.NodeName)) {
				n++
			}
		}
	}
	return n
}

func countEndpoints(ss []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range ss {
		n += len(s.Endpoints)
	}
	return n
}

func endpointsOf(ss []*discoveryv1.EndpointSlice) []EndpointReport {
	out := []EndpointReport{}
	for _, s := range ss {
		for _, ep := range s.Endpoints {
			ready := boolOr(ep.Conditions.Ready, true)
			out = append(out, EndpointReport{
				Slice: s.Name, Addresses: slices.Clone(ep.Addresses), Node: deref(ep.NodeName),
				Ready: ready, Serving: boolOr(ep.Conditions.Serving, ready),
				Terminate: boolOr(ep.Conditions.Terminating, false),
			})
		}
	}
	sortEndpoints(out)
	return out
}

func sortEndpoints(out []EndpointReport) {
	slices.SortFunc(out, func(a, b EndpointReport) int {
		return strings.Compare(fmt.Sprint(a.Addresses), fmt.Sprint(b.Addresses))
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}
