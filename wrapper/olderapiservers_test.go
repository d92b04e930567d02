package wrapper_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// TestListWatchOnEachAPIServer runs the wrapper against each supported
// kube-apiserver release (the cached one and hack/apiserver-versions.txt),
// and against the cached one with watch-list turned off, and kube-proxy's
// informers through it: they sync with node0's nodeunit's endpoints only,
// and a relabel upstream reaches them through the watch. The wrapper's
// first sync of Services and EndpointSlices is a watch-list where the
// apiserver serves one, gzipped from v1.37 (as kube-proxy's), and a LIST
// where it does not.
func TestListWatchOnEachAPIServer(t *testing.T) {
	// Parallel: it runs after the package's sequential tests, which gives
	// the older releases' build (in the background on a fresh machine,
	// hack/older-release-bins.sh) that much longer before it is waited for.
	t.Parallel()
	type apiserver struct {
		name, version, binary string
		args                  []string
	}
	var cases []apiserver
	for _, r := range controlplane.APIServerReleasesForTest(t) {
		cases = append(cases, apiserver{name: r.Version, version: r.Version, binary: r.Binary})
		if r.Version == controlplane.KubernetesVersion {
			cases = append(cases, apiserver{name: r.Version + "-no-watch-list", version: r.Version, binary: r.Binary,
				args: []string{"--feature-gates=WatchList=false"}})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each its own control plane
			cp := controlplane.StartForTest(t, controlplane.Options{APIServerBinary: c.binary, APIServerArgs: c.args})
			admin := adminClient(cp)
			if v, err := admin.Discovery().ServerVersion(); err != nil || v.GitVersion != c.version {
				t.Fatalf("apiserver version %v (%v), want %s", v, err, c.version)
			}
			createNodes(t, admin)
			createNamespace(t, admin, "smoke")
			createService(t, admin, "smoke", "svc", `["zone1"]`)
			createSlice(t, admin, "smoke", "svc", "svc-a", endpoint("10.9.0.1", "node0"), endpoint("10.9.0.2", "node1"))

			tap := newResourceTap()
			w := startWrapper(t, cp, "node0", "", wrapper.Options{Upstream: tap.wrap(cp.Config)})
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
			got := tap.counts()
			for _, r := range []string{"services", "endpointslices"} {
				lists, watchLists, gzipped := got.lists[r], got.watchLists[r], got.gzipped[r]
				t.Logf("the wrapper's full lists of %s: %d, %d of them watch-lists, %d gzipped", r, lists, watchLists, gzipped)
				switch {
				case c.args != nil: // watch-list off: the reflector falls back to LIST
					if watchLists != 0 || lists == 0 {
						t.Errorf("%s: %d watch-lists answered and %d lists, want LISTs only", r, watchLists, lists)
					}
				case lists == 0 || watchLists != lists:
					t.Errorf("%s: %d full lists, %d of them watch-lists; want watch-lists only", r, lists, watchLists)
				case version.MustParseGeneric(c.version).AtLeast(version.MajorMinor(1, 37)) && gzipped != lists:
					t.Errorf("%s: %d of %d watch-lists gzipped, want every one (WatchListCompression)", r, gzipped, lists)
				}
			}
			if n := len(pi.services.GetStore().List()); n < 2 {
				t.Fatalf("%d Services through the wrapper, want svc and kubernetes", n)
			}
			setNodeUnit(t, admin, "node1", nodeUnits["node0"])
			want("node1 joined node0's nodeunit, seen through the watch", "10.9.0.1", "10.9.0.2")
		})
	}
}
