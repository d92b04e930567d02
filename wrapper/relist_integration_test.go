package wrapper_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper"
)

// TestWrapperRelistsOncePerKind: a wrapper serving kube-proxy and, through
// the DNS view, the node's CoreDNS (so it also fetches the headless
// Services and other proxies' ones, with watches of their own) sees the
// apiserver restarted with etcd compacted meanwhile: every watch it had
// ends in 410. It lists Services and EndpointSlices at most once each, not
// once per watch, and both clients through it neither relist nor miss what
// changes after.
func TestWrapperRelistsOncePerKind(t *testing.T) {
	t.Parallel() // its own control plane
	ns := "relist"
	cp, admin := startTestCluster(t, ns)
	createDNSService(t, admin, ns, "plain", false, "")
	createDNSSlice(t, admin, dnsSlice(ns, "plain", "plain-a", false, endpoint("10.5.0.1", "node0")))
	createDNSService(t, admin, ns, "headless", true, "")
	createDNSSlice(t, admin, dnsSlice(ns, "headless", "headless-a", true, endpoint("10.5.1.1", "node1")))
	createOtherProxyService(t, admin, ns, "other")
	other := dnsSlice(ns, "other", "other-a", false, endpoint("10.5.2.1", "node1"))
	other.Labels["service.kubernetes.io/service-proxy-name"] = "other-proxy"
	createDNSSlice(t, admin, other)

	tap := newResourceTap()
	w := startWrapper(t, cp, "node0", "", wrapper.Options{Upstream: tap.wrap(cp.Config)})
	proxy := startInformers(t, w.URL(), protobuf, "node0")
	dnsF := informers.NewSharedInformerFactory(clientFor(t, w.URL()+wrapper.DNSPathPrefix, protobuf), 0)
	dnsServices, dnsSlices := dnsF.Core().V1().Services().Informer(), dnsF.Discovery().V1().EndpointSlices().Informer()
	dctx, dcancel := context.WithCancel(context.Background())
	t.Cleanup(func() { dcancel(); dnsF.Shutdown() })
	dnsF.Start(dctx.Done())
	if !cache.WaitForCacheSync(t.Context().Done(), dnsServices.HasSynced, dnsSlices.HasSynced) {
		t.Fatal("DNS view informers did not sync")
	}
	namesIn := func(inf cache.SharedIndexInformer) []string {
		var out []string
		for _, k := range inf.GetStore().ListKeys() {
			if n, ok := strings.CutPrefix(k, ns+"/"); ok {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	expect := func(what string, inf cache.SharedIndexInformer, want ...string) {
		t.Helper()
		eventually(t, what, 30*time.Second, func(context.Context) (bool, error) {
			got := namesIn(inf)
			return slices.Equal(got, want), fmt.Errorf("%q, want %q", got, want)
		})
	}
	// A headless Service carries no label; only its slices do.
	expect("kube-proxy's Services", proxy.services, "headless", "plain")
	expect("the DNS view's Services", dnsServices, "headless", "other", "plain")
	expect("the DNS view's EndpointSlices", dnsSlices, "headless-a", "other-a", "plain-a")

	// Every watch open, for more than a second (client-go relists after a
	// "very short watch").
	var watching map[string]int
	eventually(t, "the wrapper's watches open", 60*time.Second, func(context.Context) (bool, error) {
		watching = tap.counts().open
		return watching["services"] >= 1 && watching["endpointslices"] >= 1, fmt.Errorf("open watches %v", watching)
	})
	time.Sleep(1500 * time.Millisecond)
	watching = tap.counts().open
	before := tap.counts()
	listsBefore, bytesBefore := before.lists, before.listBytes
	clientMark := w.started.Load()
	t.Logf("the wrapper's open watches upstream: %v", watching)

	cp.StopAPIServer()
	rev, err := cp.CompactEtcd(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd compacted at revision %d with the apiserver stopped", rev)
	if err := cp.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Back once every watch is open again and no list came for 5 s.
	var lists map[string]int
	eventually(t, "the wrapper watching again", 3*time.Minute, func(context.Context) (bool, error) {
		c0 := tap.counts()
		l0, open := c0.lists, c0.open
		for r, n := range watching {
			if open[r] < n {
				return false, fmt.Errorf("open watches %v, before %v", open, watching)
			}
		}
		time.Sleep(5 * time.Second)
		lists = tap.counts().lists
		return maps.Equal(l0, lists), fmt.Errorf("lists went on: %v -> %v", l0, lists)
	})
	bytesAfter := tap.counts().listBytes
	relisted := map[string]int{}
	for r, n := range lists {
		if d := n - listsBefore[r]; d > 0 {
			relisted[r] = d
			t.Logf("the wrapper listed %s %d times (%d bytes)", r, d, bytesAfter[r]-bytesBefore[r])
		}
	}
	for _, r := range []string{"services", "endpointslices"} {
		if relisted[r] > 1 {
			t.Errorf("the wrapper listed %s %d times after the restart, want at most once", r, relisted[r])
		}
	}
	if l := relists(w.requestsSince(clientMark)); len(l) != 0 {
		t.Errorf("clients through the wrapper relisted: %q", l)
	}

	// Each view still holds its own selection and follows changes.
	createDNSService(t, admin, ns, "later-headless", true, "")
	createDNSService(t, admin, ns, "later", false, "")
	createDNSSlice(t, admin, dnsSlice(ns, "later-headless", "later-headless-a", true, endpoint("10.5.3.1", "node0")))
	expect("kube-proxy's Services after", proxy.services, "headless", "later", "later-headless", "plain")
	expect("the DNS view's Services after", dnsServices, "headless", "later", "later-headless", "other", "plain")
	expect("the DNS view's EndpointSlices after", dnsSlices, "headless-a", "later-headless-a", "other-a", "plain-a")
	expect("kube-proxy's EndpointSlices after", proxy.slices, "plain-a")
}

// createOtherProxyService creates a Service another proxy implements
// (kube-proxy's selector leaves it out).
func createOtherProxyService(t testing.TB, c kubernetes.Interface, ns, name string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"service.kubernetes.io/service-proxy-name": "other-proxy"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := c.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
