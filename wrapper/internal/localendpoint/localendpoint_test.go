package localendpoint

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestLocalEndpoint(t *testing.T) {
	for _, tc := range []struct {
		a     map[string]string
		found bool
		ok    bool
	}{
		{map[string]string{}, false, true},
		{map[string]string{"superedge.io/local-endpoint": "127.0.0.1", "superedge.io/local-port": "51003"}, true, true},
		{map[string]string{"superedge.io/local-endpoint": "::1", "superedge.io/local-port": "443"}, true, true},
		{map[string]string{"superedge.io/local-endpoint": "127.0.0.1"}, true, false},
		{map[string]string{"superedge.io/local-endpoint": "localhost", "superedge.io/local-port": "1"}, true, false},
		{map[string]string{"superedge.io/local-endpoint": "127.0.0.1", "superedge.io/local-port": "70000"}, true, false},
		{map[string]string{"superedge.io/local-endpoint": "127.0.0.1", "superedge.io/local-port": "0"}, true, false},
	} {
		_, found, err := Parse(tc.a)
		if found != tc.found || (err == nil) != tc.ok {
			t.Errorf("%v: found=%v err=%v", tc.a, found, err)
		}
	}
	le, _, _ := Parse(map[string]string{"superedge.io/local-endpoint": "127.0.0.1", "superedge.io/local-port": "51003"})
	name := "https"
	sl := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &name}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"192.168.0.1"}}, {Addresses: []string{"192.168.0.2"}}}}
	got := le.RewriteSlice(sl)
	if len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "127.0.0.1" || *got.Ports[0].Port != 51003 || *got.Ports[0].Name != "https" || len(sl.Endpoints) != 2 {
		t.Fatalf("rewritten slice: %+v", got)
	}
	e := le.RewriteEndpoints(&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.168.0.1"}}, Ports: []corev1.EndpointPort{{Name: "https", Port: 6443}}}}})
	if len(e.Subsets) != 1 || e.Subsets[0].Addresses[0].IP != "127.0.0.1" || e.Subsets[0].Ports[0].Port != 51003 {
		t.Fatalf("rewritten endpoints: %+v", e)
	}
}
