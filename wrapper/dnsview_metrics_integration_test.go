package wrapper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/informers"

	"github.com/servicegroup/servicegroup/wrapper"
)

// wrapperGauge is the wrapper's gauge name{resource=resource}, and whether
// it is exported at all.
func wrapperGauge(t *testing.T, name, resource string) (float64, bool) {
	t.Helper()
	families, err := wrapper.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "application_grid_wrapper_"+name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == resource {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestDNSViewMetrics: served_objects and event_log_bytes count the DNS
// view's own stores (its unfiltered EndpointSlices and its Namespaces)
// beside kube-proxy's, so the memory the view costs is seen.
func TestDNSViewMetrics(t *testing.T) {
	t.Parallel() // its own control plane
	ns := "dnsmetrics"
	cp, admin := startTestCluster(t, ns)
	createDNSService(t, admin, ns, "plain", false, `["zone1"]`)
	createSlice(t, admin, ns, "plain", "plain-a", endpoint("10.5.0.1", "node0"), endpoint("10.5.0.2", "node1"))
	w := startWrapper(t, cp, "node0", "", wrapper.Options{BookmarkInterval: 100 * time.Millisecond})

	f := informers.NewSharedInformerFactory(clientFor(t, w.URL()+wrapper.DNSPathPrefix, protobuf), 0)
	slices, nss := f.Discovery().V1().EndpointSlices().Informer(), f.Core().V1().Namespaces().Informer()
	f.Start(t.Context().Done())
	t.Cleanup(f.Shutdown)

	// Other tests' wrappers set the same gauges: wait for this one's figures.
	eventually(t, "served_objects and event_log_bytes of the DNS view's stores", 2*time.Minute, func(context.Context) (bool, error) {
		if !slices.HasSynced() || !nss.HasSynced() {
			return false, nil
		}
		for resource, want := range map[string]int{"dns-endpointslices": len(slices.GetStore().List()), "namespaces": len(nss.GetStore().List())} {
			if want == 0 {
				return false, fmt.Errorf("the DNS view serves no %s", resource)
			}
			if got, ok := wrapperGauge(t, "served_objects", resource); !ok || int(got) != want {
				return false, nil
			}
			if got, ok := wrapperGauge(t, "event_log_bytes", resource); !ok || got <= 0 {
				return false, nil
			}
		}
		return true, nil
	})
}
