package wrapper_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper"
)

// cidrInformer is kube-proxy's ServiceCIDR informer (an unmodified
// client-go one) through the wrapper, with the list and watch errors its
// reflector reports.
type cidrInformer struct {
	inf  cache.SharedIndexInformer
	mu   sync.Mutex
	errs []string
}

func startCIDRInformer(t *testing.T, url string) *cidrInformer {
	t.Helper()
	f := informers.NewSharedInformerFactory(clientFor(t, url, protobuf), 0)
	ci := &cidrInformer{inf: f.Networking().V1().ServiceCIDRs().Informer()}
	if err := ci.inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		ci.mu.Lock()
		ci.errs = append(ci.errs, err.Error())
		ci.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.Start(ctx.Done())
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), ci.inf.HasSynced) {
		t.Fatal("ServiceCIDR informer through the wrapper did not sync")
	}
	return ci
}

func (ci *cidrInformer) errors() []string {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	return slices.Clone(ci.errs)
}

func (ci *cidrInformer) names() []string {
	var out []string
	for _, o := range ci.inf.GetStore().List() {
		out = append(out, o.(*networkingv1.ServiceCIDR).Name+"="+strings.Join(o.(*networkingv1.ServiceCIDR).Spec.CIDRs, ","))
	}
	slices.Sort(out)
	return out
}

// cidrRelists are the ServiceCIDR lists and watch-lists among uris.
func cidrRelists(uris []string) []string {
	var out []string
	for _, u := range relists(uris) {
		if strings.Contains(u, "/servicecidrs") {
			out = append(out, u)
		}
	}
	return out
}

// TestServiceCIDRsThroughOutage: kube-proxy's ServiceCIDR informer through
// the wrapper makes no relist and sees no error while the apiserver is
// stopped; a wrapper restarted with the apiserver still away serves them
// from its snapshot (the informer resumes its watch, a fresh one lists
// them); and once the apiserver is back, still no relist.
func TestServiceCIDRsThroughOutage(t *testing.T) {
	t.Parallel() // its own control plane
	cp, admin := startTestCluster(t, "")
	var want []string
	eventually(t, "the apiserver's default ServiceCIDR", 30*time.Second, func(ctx context.Context) (bool, error) {
		l, err := admin.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 {
			return false, fmt.Errorf("%v ServiceCIDRs: %v", l, err)
		}
		want = nil
		for _, c := range l.Items {
			want = append(want, c.Name+"="+strings.Join(c.Spec.CIDRs, ","))
		}
		slices.Sort(want)
		return true, nil
	})
	stateDir := filepath.Join(t.TempDir(), "state")
	opts := wrapper.Options{StateDir: stateDir, SnapshotInterval: 100 * time.Millisecond}
	w := startWrapper(t, cp, "node0", "", opts)
	ci := startCIDRInformer(t, w.URL())
	if got := ci.names(); !slices.Equal(got, want) {
		t.Fatalf("ServiceCIDRs through the wrapper %q, want %q", got, want)
	}
	// Selectors and get as the apiserver answers them.
	c := clientFor(t, w.URL(), protobuf)
	for _, sel := range []string{"metadata.name=kubernetes", "metadata.name!=kubernetes", "spec.cidrs=10.0.0.0/16"} {
		got, err := c.NetworkingV1().ServiceCIDRs().List(t.Context(), metav1.ListOptions{FieldSelector: sel})
		up, upErr := admin.NetworkingV1().ServiceCIDRs().List(t.Context(), metav1.ListOptions{FieldSelector: sel})
		if (err == nil) != (upErr == nil) || apierrors.ReasonForError(err) != apierrors.ReasonForError(upErr) {
			t.Fatalf("fieldSelector %s: through the wrapper %v, from the apiserver %v", sel, err, upErr)
		}
		if err == nil && len(got.Items) != len(up.Items) {
			t.Fatalf("fieldSelector %s: %d through the wrapper, %d from the apiserver", sel, len(got.Items), len(up.Items))
		}
	}
	if _, err := c.NetworkingV1().ServiceCIDRs().Get(t.Context(), "kubernetes", metav1.GetOptions{}); err != nil {
		t.Fatalf("get through the wrapper: %v", err)
	}
	// Watches more than a second old (client-go relists after a "very
	// short watch").
	eventually(t, "the informer watches", 30*time.Second, func(context.Context) (bool, error) {
		return w.openWatches("servicecidrs") == 1, nil
	})
	time.Sleep(1500 * time.Millisecond)

	mark := w.started.Load()
	cp.StopAPIServer()
	// Long enough for a forwarded watch to end and the informer to retry
	// (it would within a second) several times.
	time.Sleep(5 * time.Second)
	if l := cidrRelists(w.requestsSince(mark)); len(l) != 0 {
		t.Errorf("the informer relisted ServiceCIDRs while the apiserver was stopped: %q", l)
	}
	if e := ci.errors(); len(e) != 0 {
		t.Errorf("the informer saw errors while the apiserver was stopped: %q", e)
	}
	if n := w.openWatches("servicecidrs"); n != 1 {
		t.Errorf("%d open ServiceCIDR watches while the apiserver was stopped, want 1", n)
	}
	if t.Failed() {
		t.FailNow()
	}

	// A restart with the apiserver still away: served from the snapshot.
	addr := w.addr
	w.Stop()
	w = startWrapper(t, cp, "node0", addr, opts)
	eventually(t, "the informer watches the restarted wrapper", 60*time.Second, func(context.Context) (bool, error) {
		return w.openWatches("servicecidrs") == 1, nil
	})
	if l := cidrRelists(w.requestsSince(0)); len(l) != 0 {
		t.Fatalf("the informer relisted ServiceCIDRs from the snapshot: %q", l)
	}
	fresh := startCIDRInformer(t, w.URL())
	if got := fresh.names(); !slices.Equal(got, want) {
		t.Fatalf("a fresh informer from the snapshot: %q, want %q", got, want)
	}
	if got := ci.names(); !slices.Equal(got, want) {
		t.Fatalf("the resumed informer: %q, want %q", got, want)
	}
	errsBefore := len(ci.errors())

	mark = w.started.Load()
	if err := cp.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the wrapper confirms its snapshot", 60*time.Second, func(context.Context) (bool, error) {
		code, body := readyz(t, w)
		return code == 200 && body == "ok", fmt.Errorf("/readyz %d %q", code, body)
	})
	if l := cidrRelists(w.requestsSince(mark)); len(l) != 0 {
		t.Fatalf("relists after the apiserver returned: %q", l)
	}
	if e := ci.errors(); len(e) != errsBefore {
		t.Fatalf("the informer saw errors after the apiserver returned: %q", e[errsBefore:])
	}
	if got := ci.names(); !slices.Equal(got, want) {
		t.Fatalf("after the apiserver returned: %q, want %q", got, want)
	}
}

// TestServiceCIDRsUpstreamWithout: against an apiserver that serves no
// networking.k8s.io/v1 ServiceCIDRs (a release before the API went GA;
// 1.35-1.37 cannot turn it off: the apiserver does not become ready with
// --runtime-config=networking.k8s.io/v1/servicecidrs=false) the wrapper
// passes requests for them on and returns the apiserver's own answer. The
// real apiserver stands in for one: its requests for ServiceCIDRs are sent
// to a resource of the same group it does not have. kube-proxy's other
// informers are unaffected.
func TestServiceCIDRsUpstreamWithout(t *testing.T) {
	t.Parallel() // its own control plane
	cp, admin := startTestCluster(t, "")
	const cidrs, unknown = "/apis/networking.k8s.io/v1/servicecidrs", "/apis/networking.k8s.io/v1/nosuchresources"
	up := rest.CopyConfig(cp.Config)
	var asked atomic.Int32
	up.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasPrefix(r.URL.Path, cidrs) {
				asked.Add(1)
				r = r.Clone(r.Context())
				r.URL.Path = unknown + strings.TrimPrefix(r.URL.Path, cidrs)
				r.URL.RawPath = ""
			}
			return rt.RoundTrip(r)
		})
	})
	direct := admin.NetworkingV1().RESTClient().Get().AbsPath(unknown).Do(t.Context()).Error()
	if !apierrors.IsNotFound(direct) {
		t.Fatalf("the apiserver answered a list of an unknown resource with %v, want 404", direct)
	}
	w := startWrapper(t, cp, "node0", "", wrapper.Options{Upstream: up})
	startInformers(t, w.URL(), protobuf, "node0")
	c := clientFor(t, w.URL(), protobuf)
	for range 2 { // the first starts the fetch and waits for its answer, the second knows it
		before := asked.Load()
		err := c.NetworkingV1().RESTClient().Get().AbsPath(cidrs).Do(t.Context()).Error()
		if !apierrors.IsNotFound(err) || err.Error() != direct.Error() {
			t.Fatalf("a ServiceCIDR list through the wrapper: %v, want the apiserver's %v", err, direct)
		}
		if asked.Load() == before {
			t.Fatal("the ServiceCIDR list was not passed upstream")
		}
	}
	if code, body := readyz(t, w); code != http.StatusOK {
		t.Fatalf("/readyz: %d %q", code, body)
	}
}
