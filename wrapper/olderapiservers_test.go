package wrapper_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// TestListWatchOnEachAPIServer runs the wrapper against each supported
// kube-apiserver release (the cached one and hack/apiserver-versions.txt)
// and kube-proxy's informers through it: they sync with node0's nodeunit's
// endpoints only, and a relabel upstream reaches them through the watch.
func TestListWatchOnEachAPIServer(t *testing.T) {
	// Parallel: it runs after the package's sequential tests, which gives
	// the older releases' build (in the background on a fresh machine,
	// hack/older-release-bins.sh) that much longer before it is waited for.
	t.Parallel()
	for _, r := range controlplane.APIServerReleasesForTest(t) {
		t.Run(r.Version, func(t *testing.T) {
			t.Parallel() // each its own control plane
			cp := controlplane.StartForTest(t, controlplane.Options{APIServerBinary: r.Binary})
			admin := adminClient(cp)
			if v, err := admin.Discovery().ServerVersion(); err != nil || v.GitVersion != r.Version {
				t.Fatalf("apiserver version %v (%v), want %s", v, err, r.Version)
			}
			createNodes(t, admin)
			createNamespace(t, admin, "smoke")
			createService(t, admin, "smoke", "svc", `["zone1"]`)
			createSlice(t, admin, "smoke", "svc", "svc-a", endpoint("10.9.0.1", "node0"), endpoint("10.9.0.2", "node1"))

			w := startWrapper(t, cp, "node0", "", wrapper.Options{})
			pi := startInformers(t, w.URL(), protobuf, "node0")
			ips := func() []string {
				var out []string
				for _, o := range pi.slices.GetStore().List() {
					for _, ep := range o.(*discoveryv1.EndpointSlice).Endpoints {
						out = append(out, ep.Addresses...)
					}
				}
				slices.Sort(out)
				return out
			}
			want := func(what string, ips0 ...string) {
				t.Helper()
				eventually(t, what, 2*time.Minute, func(context.Context) (bool, error) {
					if got := ips(); !slices.Equal(got, ips0) {
						return false, fmt.Errorf("endpoints through the wrapper %v, want %v", got, ips0)
					}
					return true, nil
				})
			}
			want("node0's nodeunit only", "10.9.0.1")
			if n := len(pi.services.GetStore().List()); n < 2 {
				t.Fatalf("%d Services through the wrapper, want svc and kubernetes", n)
			}
			setNodeUnit(t, admin, "node1", nodeUnits["node0"])
			want("node1 joined node0's nodeunit, seen through the watch", "10.9.0.1", "10.9.0.2")
		})
	}
}
