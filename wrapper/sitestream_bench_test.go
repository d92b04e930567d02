package wrapper_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

const benchGen = "example.com/gen"

// BenchmarkSiteStream: bytes over the cloud link of one site of N nodes
// (SG_SITE_SIZES, default 1,5,20,50) whose wrappers share one stream,
// against N kube-proxies reading the apiserver directly, side by side
// against one real kube-apiserver. SG_SITE_SERVICES (40) Services with an
// EndpointSlice of 8 endpoints each; every iteration changes each slice
// SG_SITE_CHANGES_PER_SERVICE (2) times and waits until every kube-proxy
// view (behind each wrapper, or direct) holds the last change. Reported per
// iteration: unit-bytes (Services and EndpointSlices lists and watches) and
// all-bytes (every response, Leases and each node's own reads included) over
// the site's cloud links, for the site and for the direct kube-proxies, and
// site/one-direct, the site's unit bytes over what ONE direct kube-proxy
// pulled; and the bytes per second over the links during 10 s with no change.
func BenchmarkSiteStream(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/sitestream-bytes.md")
	sizes := []int{1, 5, 20, 50}
	if v := os.Getenv("SG_SITE_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				sizes = append(sizes, n)
			}
		}
	}
	services, changes := envInt("SG_SITE_SERVICES", 40), envInt("SG_SITE_CHANGES_PER_SERVICE", 2)
	cp := controlplane.StartForTest(b, controlplane.Options{})
	admin := adminClient(cp)
	if _, err := admin.CoreV1().ServiceAccounts(peerNS).Create(b.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: peerAccount}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	const ns = "bench"
	createNamespace(b, admin, ns)
	for s := range services {
		name := fmt.Sprintf("svc-%02d", s)
		createService(b, admin, ns, name, `["zone1"]`)
		var eps []discoveryv1.Endpoint
		for e := range 8 {
			eps = append(eps, endpoint(fmt.Sprintf("10.%d.%d.1", s, e), "bench-0-0"))
		}
		createSlice(b, admin, ns, name, name, eps...)
	}
	gen := 0
	for _, size := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			nodes := make([]string, size)
			for i := range nodes {
				nodes[i] = fmt.Sprintf("bench-%d-%d", size, i)
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[i], Labels: map[string]string{gridKey: "unit", siteLabel: fmt.Sprintf("site-%d", size)}}}
				if _, err := admin.CoreV1().Nodes().Create(b.Context(), n, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			var directLinks, siteLinks []*cloudLink
			var views []cache.SharedIndexInformer // slices, as each kube-proxy sees them
			for _, node := range nodes {
				link := newCloudLink()
				cfg := rest.CopyConfig(cp.Config)
				cfg.Wrap(link.wrap)
				directLinks = append(directLinks, link)
				views = append(views, directKubeProxy(b, cfg, node))
			}
			ws := make([]*siteWrapper, size)
			for i, node := range nodes {
				ws[i] = startSiteWrapper(b, cp, node, 30+i, siteOptions{})
				ws[i].proxy = watchAsKubeProxy(b, ws[i].runningWrapper, node, nil)
				siteLinks = append(siteLinks, ws[i].cloud)
				views = append(views, ws[i].proxy.slices)
			}
			// One wrapper alone streams from the cloud before measuring.
			waitFor(b, "one cloud stream for the site", func(context.Context) error {
				streaming := 0
				for _, w := range ws {
					if w.cloud.openUnitStreams() > 0 {
						streaming++
					}
				}
				if streaming != 1 {
					return fmt.Errorf("%d wrappers stream from the cloud", streaming)
				}
				return nil
			})
			sum := func(links []*cloudLink, unit bool) int64 {
				var n int64
				for _, l := range links {
					if unit {
						n += l.unitBytes.Load()
					} else {
						n += l.bytes.Load()
					}
				}
				return n
			}
			du, da, su, sa := sum(directLinks, true), sum(directLinks, false), sum(siteLinks, true), sum(siteLinks, false)
			b.ResetTimer()
			for b.Loop() {
				for range changes {
					gen++
					for s := range services {
						patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}},"endpoints":[{"addresses":["10.%d.%d.9"],"nodeName":"bench-0-0"}]}`, benchGen, gen, s, gen%250)
						if _, err := admin.DiscoveryV1().EndpointSlices(ns).Patch(b.Context(), fmt.Sprintf("svc-%02d", s), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
							b.Fatal(err)
						}
					}
				}
				want := strconv.Itoa(gen)
				waitFor(b, "every kube-proxy view has the last change", func(context.Context) error {
					for i, v := range views {
						for s := range services {
							o, ok, _ := v.GetStore().GetByKey(fmt.Sprintf("%s/svc-%02d", ns, s))
							if !ok || o.(*discoveryv1.EndpointSlice).Annotations[benchGen] != want {
								return fmt.Errorf("view %d lags on svc-%02d", i, s)
							}
						}
					}
					return nil
				})
			}
			b.StopTimer()
			iters := float64(b.N)
			du, da = sum(directLinks, true)-du, sum(directLinks, false)-da
			su, sa = sum(siteLinks, true)-su, sum(siteLinks, false)-sa
			// A quiet spell: what the site pays with nothing changing (the
			// Lease: the leader renews it, every follower reads it, each
			// every RetryPeriod).
			qd, qs := sum(directLinks, false), sum(siteLinks, false)
			const quiet = 10 * time.Second
			time.Sleep(quiet)
			benchRec.ReportOn(b, float64(sum(directLinks, false)-qd)/quiet.Seconds(), "direct-quiet-B/s")
			benchRec.ReportOn(b, float64(sum(siteLinks, false)-qs)/quiet.Seconds(), "site-quiet-B/s")
			benchRec.ReportOn(b, float64(du)/iters, "direct-unit-B/op")
			benchRec.ReportOn(b, float64(da)/iters, "direct-all-B/op")
			benchRec.ReportOn(b, float64(su)/iters, "site-unit-B/op")
			benchRec.ReportOn(b, float64(sa)/iters, "site-all-B/op")
			benchRec.ReportOn(b, float64(su)/(float64(du)/float64(size)), "site/one-direct")
			benchRec.ReportOn(b, float64(sa)/(float64(da)/float64(size)), "site-all/one-direct-all")
		})
	}
}

// directKubeProxy runs kube-proxy-shaped informers (protobuf, its selector,
// its own Node) against cfg and returns the slices informer once synced.
func directKubeProxy(tb testing.TB, cfg *rest.Config, node string) cache.SharedIndexInformer {
	tb.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType, cfg.AcceptContentTypes, cfg.QPS = protobuf, protobuf+",application/json", -1
	c := kubernetes.NewForConfigOrDie(cfg)
	sel := "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	nf := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + node }))
	slices, svcs, self := f.Discovery().V1().EndpointSlices().Informer(), f.Core().V1().Services().Informer(), nf.Core().V1().Nodes().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() { cancel(); f.Shutdown(); nf.Shutdown() })
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	if !cache.WaitForCacheSync(tb.Context().Done(), slices.HasSynced, svcs.HasSynced, self.HasSynced) {
		tb.Fatal("direct kube-proxy informers did not sync")
	}
	return slices
}

// waitFor polls cond until it holds (2 minutes at most).
func waitFor(tb testing.TB, what string, cond func(context.Context) error) {
	tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(tb.Context()); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("%s: %v", what, err)
}
