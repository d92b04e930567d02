package wrapper_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper"
)

const kubeProxySelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"

// TestUnproxiedFetchedOnlyOnDemand: upstream, the wrapper lists and watches
// Services and EndpointSlices with kube-proxy's selector; headless ones and
// those of another proxy are fetched only while a client asks for objects
// outside that selection, and such a client gets them all.
func TestUnproxiedFetchedOnlyOnDemand(t *testing.T) {
	t.Parallel() // its own control plane
	ns := "unproxied"
	cp, admin := startTestCluster(t, ns)
	ctx := t.Context()
	createService(t, admin, ns, "plain", `["zone1"]`)
	createSlice(t, admin, ns, "plain", "plain-a", endpoint("10.1.0.1", "node0"))
	createService(t, admin, ns, "headless", "")
	createSlice(t, admin, ns, "headless", "headless-a", endpoint("10.1.1.1", "node1"))
	createService(t, admin, ns, "other", "")
	createSlice(t, admin, ns, "other", "other-a", endpoint("10.1.2.1", "node0"))
	label := func(kind, name, key, value string) {
		t.Helper()
		v := "null"
		if value != "" {
			v = `"` + value + `"`
		}
		patch := []byte(`{"metadata":{"labels":{"` + key + `":` + v + `}}}`)
		var err error
		if kind == "service" {
			_, err = admin.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		} else {
			_, err = admin.DiscoveryV1().EndpointSlices(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	label("slice", "headless-a", corev1.IsHeadlessService, "x")
	label("service", "other", "service.kubernetes.io/service-proxy-name", "other-proxy")
	label("slice", "other-a", "service.kubernetes.io/service-proxy-name", "other-proxy")

	counter := &byteCounter{bytes: map[string]int64{}}
	w := startWrapper(t, cp, "node0", "", wrapper.Options{Upstream: counter.wrap(cp.Config), OnDemandIdleTimeout: time.Second})
	unselected := func(since int) []string {
		var out []string
		for _, uri := range counter.requests()[since:] {
			u, err := url.Parse(uri)
			if err != nil {
				t.Fatal(err)
			}
			if (strings.HasSuffix(u.Path, "/services") || strings.HasSuffix(u.Path, "/endpointslices")) &&
				u.Query().Get("labelSelector") != kubeProxySelector {
				out = append(out, uri)
			}
		}
		return out
	}
	proxy := startInformers(t, w.URL(), protobuf, "node0")
	names := func(inf cache.SharedIndexInformer) []string {
		var out []string
		for _, k := range inf.GetStore().ListKeys() {
			if strings.HasPrefix(k, ns+"/") {
				out = append(out, strings.TrimPrefix(k, ns+"/"))
			}
		}
		slices.Sort(out)
		return out
	}
	if got := names(proxy.slices); !slices.Equal(got, []string{"plain-a"}) {
		t.Errorf("kube-proxy's informer holds slices %v, want [plain-a]", got)
	}
	if u := unselected(0); len(u) != 0 || w.srv.FetchingUnproxied() {
		t.Errorf("with only kube-proxy's selection asked for, upstream requests outside it: %v (fetching: %v)", u, w.srv.FetchingUnproxied())
	}

	// A client without a selector gets everything, as from the apiserver.
	all := clientFor(t, w.URL(), protobuf)
	list, err := all.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list.Items {
		got = append(got, s.Name)
	}
	slices.Sort(got)
	if want := []string{"headless-a", "other-a", "plain-a"}; !slices.Equal(got, want) {
		t.Errorf("a list without a selector served %v, want %v", got, want)
	}
	if _, err := all.CoreV1().Services(ns).Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Errorf("get of a Service of another proxy: %v", err)
	}
	// Its watch follows changes outside kube-proxy's selection.
	f := informers.NewSharedInformerFactoryWithOptions(all, 0, informers.WithNamespace(ns))
	everything := f.Discovery().V1().EndpointSlices().Informer()
	fctx, stopAll := context.WithCancel(context.Background())
	t.Cleanup(func() { stopAll(); f.Shutdown() })
	f.Start(fctx.Done())
	sl, err := admin.DiscoveryV1().EndpointSlices(ns).Get(ctx, "headless-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints = append(sl.Endpoints, endpoint("10.1.1.2", "node2"))
	if _, err := admin.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a watch without a selector sees a headless slice change", 2*time.Minute, func(context.Context) (bool, error) {
		o, ok, _ := everything.GetStore().GetByKey(ns + "/headless-a")
		return ok && len(o.(*discoveryv1.EndpointSlice).Endpoints) == 2, nil
	})

	// Once it has gone, nothing outside kube-proxy's selection is fetched.
	stopAll()
	f.Shutdown()
	eventually(t, "no longer fetching outside kube-proxy's selection", 2*time.Minute, func(context.Context) (bool, error) {
		return !w.srv.FetchingUnproxied(), nil
	})
	since := len(counter.requests())
	// An object leaving and entering kube-proxy's selection still reaches it.
	label("slice", "headless-a", corev1.IsHeadlessService, "")
	eventually(t, "a slice that lost its headless label reaches kube-proxy's informer", 2*time.Minute, func(context.Context) (bool, error) {
		return slices.Equal(names(proxy.slices), []string{"headless-a", "plain-a"}), nil
	})
	label("slice", "plain-a", corev1.IsHeadlessService, "x")
	eventually(t, "a slice that became headless leaves kube-proxy's informer", 2*time.Minute, func(context.Context) (bool, error) {
		return slices.Equal(names(proxy.slices), []string{"headless-a"}), nil
	})
	if u := unselected(since); len(u) != 0 {
		t.Errorf("after the last client outside kube-proxy's selection left, upstream requests outside it: %v", u)
	}
}
