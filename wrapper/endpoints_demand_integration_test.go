package wrapper_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper"
)

// endpointsInformer is a v1 Endpoints informer through the wrapper that the
// test can stop.
func endpointsInformer(t *testing.T, url string) (cache.SharedIndexInformer, context.CancelFunc) {
	t.Helper()
	f := informers.NewSharedInformerFactory(clientFor(t, url, protobuf), 0)
	inf := f.Core().V1().Endpoints().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	stop := func() { cancel(); f.Shutdown() }
	t.Cleanup(stop)
	f.Start(ctx.Done())
	return inf, stop
}

// TestEndpointsFetchedOnlyOnDemand: a wrapper whose clients read only
// EndpointSlices (kube-proxy since v1.22) fetches no v1 Endpoints from
// upstream, so Endpoints changes cost its link nothing; an Endpoints client
// gets the right ones (after 429s while they are fetched); once no client
// has asked for a while the wrapper stops fetching them, and a later client
// is served the current ones again.
func TestEndpointsFetchedOnlyOnDemand(t *testing.T) {
	t.Parallel() // its own control plane
	ns := "ondemand"
	cp, admin := startTestCluster(t, ns)
	ctx := t.Context()
	createService(t, admin, ns, "grid", `["zone1"]`)
	createEndpoints(t, admin, ns, "grid", map[string]string{"10.2.0.1": "node0", "10.2.0.2": "node1"}, nil)
	createSlice(t, admin, ns, "grid", "grid-a", endpoint("10.1.0.1", "node0"), endpoint("10.1.0.2", "node1"))

	counter := &byteCounter{bytes: map[string]int64{}}
	const node = "node0"
	w := startWrapper(t, cp, node, "", wrapper.Options{Upstream: counter.wrap(cp.Config), OnDemandIdleTimeout: time.Second})
	endpointRequests := func() int {
		n := 0
		for _, uri := range counter.requests() {
			if strings.HasPrefix(uri, "/api/v1/endpoints") {
				n++
			}
		}
		return n
	}
	// Slices only, as kube-proxy: no Endpoints upstream.
	sf := informers.NewSharedInformerFactory(clientFor(t, w.URL(), protobuf), 0)
	slicesInf := sf.Discovery().V1().EndpointSlices().Informer()
	sctx, scancel := context.WithCancel(context.Background())
	t.Cleanup(func() { scancel(); sf.Shutdown() })
	sf.Start(sctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), slicesInf.HasSynced) {
		t.Fatal("slices informer did not sync")
	}
	changeEndpoints := func(ip string) {
		t.Helper()
		ep, err := admin.CoreV1().Endpoints(ns).Get(ctx, "grid", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: ip, NodeName: ptr("node2")})
		if _, err := admin.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	noEndpointBytes := func(phase string, first int) {
		t.Helper()
		before := counter.get("endpoints")
		for i := range 20 {
			changeEndpoints(fmt.Sprintf("10.3.%d.%d", first, i))
		}
		// A slice change after them has reached the wrapper's client: the
		// Endpoints changes, had they been watched, would have reached the
		// wrapper before it (one apiserver, one watch cache order).
		createSlice(t, admin, ns, "grid", "grid-"+phase, endpoint("10.1.1.1", "node0"))
		eventually(t, phase+": the marker slice is served", 2*time.Minute, func(context.Context) (bool, error) {
			_, ok, _ := slicesInf.GetStore().GetByKey(ns + "/grid-" + phase)
			return ok, nil
		})
		if got := counter.get("endpoints") - before; got != 0 {
			t.Errorf("%s: %d bytes of Endpoints from upstream for 20 Endpoints changes, want 0", phase, got)
		}
		if w.srv.FetchingEndpoints() {
			t.Errorf("%s: fetching Endpoints from upstream with no Endpoints client", phase)
		}
	}
	if n := endpointRequests(); n != 0 {
		t.Errorf("%d Endpoints requests upstream before any client asked for Endpoints", n)
	}
	noEndpointBytes("before", 0)

	checkEndpoints := func(inf cache.SharedIndexInformer) {
		t.Helper()
		eventually(t, "Endpoints served to an Endpoints client", 2*time.Minute, func(ctx context.Context) (bool, error) {
			if !inf.HasSynced() {
				return false, nil
			}
			cl, err := readCluster(ctx, admin, ns)
			if err != nil {
				return false, err
			}
			if err := diffServed(inf.GetStore(), ns, cl.wantEndpoints(node)); err != nil {
				return false, err
			}
			return true, nil
		})
	}
	epInf, stopEp := endpointsInformer(t, w.URL())
	checkEndpoints(epInf)
	if !w.srv.FetchingEndpoints() || endpointRequests() == 0 {
		t.Fatal("an Endpoints client is served, but Endpoints are not fetched from upstream")
	}
	changeEndpoints("10.4.0.1")
	checkEndpoints(epInf)

	stopEp()
	eventually(t, "Endpoints no longer fetched once their client has gone", 2*time.Minute, func(context.Context) (bool, error) {
		return !w.srv.FetchingEndpoints(), nil
	})
	noEndpointBytes("after", 1)

	// A new client gets the current Endpoints.
	epInf2, _ := endpointsInformer(t, w.URL())
	checkEndpoints(epInf2)
}

func ptr[T any](v T) *T { return &v }
