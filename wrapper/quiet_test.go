package wrapper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/servicegroup/servicegroup/wrapper"
)

// TestQuietForForeignChanges: endpoints added in another nodeunit leave
// node0's served form unchanged and send node0's kube-proxy no event, while
// the apiserver sends one per change. A last change in node0's own nodeunit
// is the sentinel that every earlier change has been processed.
func TestQuietForForeignChanges(t *testing.T) {
	t.Parallel() // its own control plane
	const foreignChanges = 10
	ns := "quiet"
	cp, admin := startTestCluster(t, ns)
	createService(t, admin, ns, "svc", `["zone1"]`)
	createSlice(t, admin, ns, "svc", "svc-a", endpoint("10.4.0.1", "node0"), endpoint("10.4.0.2", "node1"))
	w := startWrapper(t, cp, "node0", "", wrapper.Options{})
	through := clientFor(t, w.URL(), protobuf)

	upstream := watchSlicesFrom(t, admin.DiscoveryV1().EndpointSlices(ns))
	served := watchSlicesFrom(t, through.DiscoveryV1().EndpointSlices(ns))

	update := func(eps ...discoveryv1.Endpoint) {
		sl, err := admin.DiscoveryV1().EndpointSlices(ns).Get(t.Context(), "svc-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sl.Endpoints = append(sl.Endpoints, eps...)
		if _, err := admin.DiscoveryV1().EndpointSlices(ns).Update(t.Context(), sl, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range foreignChanges {
		update(endpoint(fmt.Sprintf("10.4.1.%d", i), "node1"))
	}
	update(endpoint("10.4.2.1", "node0")) // the sentinel

	up, down := eventsUntil(t, upstream, "10.4.2.1"), eventsUntil(t, served, "10.4.2.1")
	t.Logf("events for %d foreign-nodeunit changes and 1 local one: apiserver %d, wrapper for node0 %d", foreignChanges, up, down)
	if up != foreignChanges+1 || down != 1 {
		t.Fatalf("apiserver sent %d events, the wrapper %d; want %d and 1", up, down, foreignChanges+1)
	}
}

// eventsUntil counts the events wi delivers up to and including the first
// EndpointSlice holding the sentinel address.
func eventsUntil(tb testing.TB, wi watch.Interface, sentinel string) int {
	tb.Helper()
	n := 0
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev := <-wi.ResultChan():
			n++
			if sl, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
				for _, e := range sl.Endpoints {
					if e.Addresses[0] == sentinel {
						return n
					}
				}
			}
		case <-timeout:
			tb.Fatalf("no event with %s after %d events", sentinel, n)
		}
	}
}

// sliceLister is the EndpointSlice client both the apiserver and the wrapper
// answer.
type sliceLister interface {
	List(context.Context, metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// watchSlicesFrom lists through c and watches from the list's version.
func watchSlicesFrom(tb testing.TB, c sliceLister) watch.Interface {
	tb.Helper()
	l, err := c.List(tb.Context(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	wi, err := c.Watch(tb.Context(), metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(wi.Stop)
	return wi
}
