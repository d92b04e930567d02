package explain

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestNativeService: kube-proxy's zone-hint rule, stated by hand per case:
// only the node's zone's endpoints while every ready endpoint is hinted and
// one ready endpoint is hinted for that zone; every endpoint otherwise. A
// topologyKeys annotation keeps the wrapper's mode.
func TestNativeService(t *testing.T) {
	ep := func(ip, zone string, ready bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
		if zone != "" {
			e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
		}
		return e
	}
	nodes := []corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "a1", Labels: map[string]string{"topology.kubernetes.io/zone": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: map[string]string{"topology.kubernetes.io/zone": "c"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "none"}},
	}
	for _, tc := range []struct {
		name, node, distribution, annotation string
		endpoints                            []discoveryv1.Endpoint
		mode, served, fallback               string
	}{
		{"keeps to the zone", "a1", "PreferSameZone", "", []discoveryv1.Endpoint{ep("1", "a", true), ep("2", "b", true), ep("3", "a", false)}, ModeNative, "1,3", ""},
		{"older name", "a1", "PreferClose", "", []discoveryv1.Endpoint{ep("1", "a", true), ep("2", "b", true)}, ModeNative, "1", ""},
		{"only a not-ready one in the zone", "a1", "PreferSameZone", "", []discoveryv1.Endpoint{ep("2", "b", true), ep("3", "a", false)}, ModeNative, "2,3", `no ready endpoint in zone "a"`},
		{"no endpoint in the zone", "c1", "PreferSameZone", "", []discoveryv1.Endpoint{ep("1", "a", true), ep("2", "b", true)}, ModeNative, "1,2", `no ready endpoint in zone "c"`},
		{"a ready endpoint without hint", "a1", "PreferSameZone", "", []discoveryv1.Endpoint{ep("1", "a", true), ep("2", "", true)}, ModeNative, "1,2", "has no zone hint"},
		{"an unhinted one not ready", "a1", "PreferSameZone", "", []discoveryv1.Endpoint{ep("1", "a", true), ep("2", "", false)}, ModeNative, "1", ""},
		{"node without zone", "none", "PreferSameZone", "", []discoveryv1.Endpoint{ep("1", "a", true)}, ModeNative, "1", "no topology.kubernetes.io/zone"},
		{"wrapper mode wins", "a1", "PreferSameZone", `["zone1"]`, []discoveryv1.Endpoint{ep("1", "a", true)}, "topology", "", ""},
		{"PreferSameNode is not native", "a1", "PreferSameNode", "", []discoveryv1.Endpoint{ep("1", "b", true)}, "unfiltered", "1", ""},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{TrafficDistribution: ptr.To(tc.distribution)}}
		if tc.annotation != "" {
			svc.Annotations = map[string]string{TopologyKeysAnnotation: tc.annotation}
		}
		r := Service(svc, []*discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Name: "s-1"}, Endpoints: tc.endpoints}}, tc.node, nodes)
		var served []string
		for _, e := range r.Served {
			served = append(served, e.Addresses...)
		}
		if r.Mode != tc.mode || strings.Join(served, ",") != tc.served || !strings.Contains(r.Fallback, tc.fallback) || (tc.fallback == "") != (r.Fallback == "") {
			t.Errorf("%s: mode %s served %v fallback %q; want %s %s %q", tc.name, r.Mode, served, r.Fallback, tc.mode, tc.served, tc.fallback)
		}
	}
}
