package explain

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestUsableCountAgreesWithWrapper: the counts shown come from this
// package's usable rule, the qualified flag from the wrapper's filter; for
// every combination of endpoint conditions they must agree, or the report
// would contradict itself after a change on either side.
func TestUsableCountAgreesWithWrapper(t *testing.T) {
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone1": "a"}}}}
	states := []*bool{nil, ptr.To(true), ptr.To(false)}
	for _, ready := range states {
		for _, serving := range states {
			for _, terminating := range states {
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns",
					Annotations: map[string]string{TopologyKeysAnnotation: `["zone1"]`}}}
				slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s-1"}, Endpoints: []discoveryv1.Endpoint{{
					Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("n1"),
					Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating},
				}}}
				r := Service(svc, []*discoveryv1.EndpointSlice{slice}, "n1", nodes)
				k := r.Keys[0]
				if k.Qualified != (k.Usable > 0) || (r.Winner == "zone1") != k.Qualified || (len(r.Served) == 1) != k.Qualified {
					t.Errorf("ready=%v serving=%v terminating=%v: %+v, winner %q, served %d",
						str(ready), str(serving), str(terminating), k, r.Winner, len(r.Served))
				}
			}
		}
	}
}

func str(b *bool) string {
	if b == nil {
		return "unset"
	}
	if *b {
		return "true"
	}
	return "false"
}
