package wrapper_test

import (
	"context"
	"fmt"
	"os"
	"slices"
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
)

// BenchmarkSiteStream: bytes over the cloud link of one site of N nodes
// (SG_SITE_SIZES, default 1,5,20,50) whose wrappers share one stream,
// against N kube-proxies reading the apiserver directly, side by side, in
// BenchmarkFleet's world (SG_FLEET_NODES, 300 nodes in 6 nodeunits, 100
// topology Services whose EndpointSlices kube-controller-manager makes from
// pods, every node's kubelet writing its Lease and status at kubelet's
// cadence). The site is the first N nodes of nodeunit 0. Every iteration
// makes SG_SITE_CHANGES_PER_SERVICE (2) pod changes to each of
// SG_SITE_SERVICES (40) Services (a new ready pod on a node of nodeunit 0,
// the Service's previous such pod deleted) and waits until every kube-proxy
// view (behind each wrapper, or direct) lists the last pod and not the one
// before. Reported per iteration: unit-bytes (Services and EndpointSlices
// lists and watches, decoded bodies) and all-bytes (every response body,
// Leases and each node's own reads included) over the site's cloud links,
// for the site and for the direct kube-proxies, wire-bytes (what crosses
// the links below TLS, both directions: records, HTTP/2 frames, headers,
// requests), and each over what ONE direct kube-proxy pulled; and the bytes
// per second over the links during 10 s with no change.
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
	const servicesN = 100
	services, changes := min(envInt("SG_SITE_SERVICES", 40), servicesN), envInt("SG_SITE_CHANGES_PER_SERVICE", 2)
	f := startFleet(b, envInt("SG_FLEET_NODES", 300), servicesN)
	startKubelets(b, f)
	cp, admin := f.cp, f.admin
	if _, err := admin.CoreV1().ServiceAccounts(peerNS).Create(b.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: peerAccount}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var unit0 []string
	for i := range f.nodesN {
		if fleetUnitOf(i) == 0 {
			unit0 = append(unit0, fleetNodeName(i))
		}
	}
	// sitePods[s] is Service s's pod of the last change, "" before any.
	sitePods, made := make([]string, services), 0
	for _, size := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			if size > len(unit0) {
				b.Fatalf("a site of %d nodes in a nodeunit of %d: more nodes (SG_FLEET_NODES)", size, len(unit0))
			}
			nodes := unit0[:size]
			labelSite := func(value string) {
				patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, siteLabel, value)
				for _, n := range nodes {
					if _, err := admin.CoreV1().Nodes().Patch(context.Background(), n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			labelSite(fmt.Sprintf("%q", fmt.Sprintf("site-%d", size)))
			b.Cleanup(func() { labelSite("null") }) // after the wrappers stop: cleanups run last first
			var directLinks, siteLinks []*cloudLink
			var views []cache.SharedIndexInformer // slices, as each kube-proxy sees them
			for _, node := range nodes {
				link := newCloudLink()
				link.wire = newWireCounter()
				cfg := link.wire.wrap(b, cp.Config)
				cfg.Wrap(link.wrap)
				directLinks = append(directLinks, link)
				views = append(views, directKubeProxy(b, cfg, node))
			}
			ws := make([]*siteWrapper, size)
			for i, node := range nodes {
				ws[i] = startSiteWrapper(b, cp, node, 30+i, siteOptions{countWire: true})
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
			// Each site wrapper reads the Node of every member of its site
			// it learns of (from its leader, every 10 s) once: measured
			// after those reads, as the site's Nodes' first lists were
			// before (sitestream's informer synced before the election).
			nodeReads := func() (n, bytes int64) {
				const byName = "GET /api/v1/nodes/{name} metadata"
				return sentTotals(siteLinks)[byName], readTotals(siteLinks)[byName]
			}
			start, last, lastN := time.Now(), time.Now(), int64(-1)
			for time.Since(last) < 12*time.Second && time.Since(start) < 90*time.Second {
				if n, _ := nodeReads(); n != lastN {
					last, lastN = time.Now(), n
				}
				time.Sleep(100 * time.Millisecond)
			}
			reads, readBytes := nodeReads()
			b.Logf("site of %d: its wrappers read %d Nodes (%d B of bodies) while starting, settled after %s", size, reads, readBytes, time.Since(start).Round(time.Second))
			// Whether the site's one unit stream is compressed as a direct
			// kube-proxy's first watch is (a watch-list) or not.
			for i, w := range ws {
				if n := w.cloud.openUnitStreams(); n > 0 {
					b.Logf("site of %d: wrapper %d streams from the cloud: %d unit streams open, %d gzipped", size, i, n, w.cloud.openUnitStreamsGzipped())
				}
			}
			const (
				unitBodies = iota
				allBodies
				wire
			)
			sum := func(links []*cloudLink, what int) int64 {
				var n int64
				for _, l := range links {
					switch what {
					case unitBodies:
						n += l.unitBytes.Load()
					case allBodies:
						n += l.bytes.Load()
					case wire:
						n += l.wire.total()
					}
				}
				return n
			}
			var d0, s0 [3]int64
			for what := range 3 {
				d0[what], s0[what] = sum(directLinks, what), sum(siteLinks, what)
			}
			dr0, sr0, ss0 := readTotals(directLinks), readTotals(siteLinks), sentTotals(siteLinks)
			b.ResetTimer()
			for b.Loop() {
				before := slices.Clone(sitePods)
				for range changes {
					for s := range services {
						made++
						name := fmt.Sprintf("%s-site%d", fleetService(s), made)
						readyPod(b, admin, fleetNS, fleetService(s), name, unit0[made%len(unit0)], podIP(name), f.next())
						if sitePods[s] != "" {
							if err := admin.CoreV1().Pods(fleetNS).Delete(b.Context(), sitePods[s], metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
								b.Fatal(err)
							}
						}
						sitePods[s] = name
					}
				}
				last := make([]string, services)
				for s := range services {
					last[s] = podIP(sitePods[s])
				}
				waitFor(b, "every kube-proxy view has the last change", func(context.Context) error {
					for i, v := range views {
						addrs := viewAddresses(v)
						for s := range services {
							if !addrs[fleetService(s)][last[s]] {
								return fmt.Errorf("view %d lacks %s of %s", i, last[s], fleetService(s))
							}
							if before[s] != "" && addrs[fleetService(s)][podIP(before[s])] {
								return fmt.Errorf("view %d still has %s's pod %s", i, fleetService(s), before[s])
							}
						}
					}
					return nil
				})
			}
			b.StopTimer()
			iters := float64(b.N)
			logReads(b, fmt.Sprintf("site of %d", size), readTotals(siteLinks), sr0, iters, 1)
			logReads(b, fmt.Sprintf("site of %d: requests", size), sentTotals(siteLinks), ss0, iters, 1)
			logReads(b, fmt.Sprintf("site of %d: ONE direct kube-proxy", size), readTotals(directLinks), dr0, iters, float64(size))
			var d, st [3]float64
			for what := range 3 {
				d[what] = float64(sum(directLinks, what)-d0[what]) / iters
				st[what] = float64(sum(siteLinks, what)-s0[what]) / iters
			}
			// A quiet spell: what the site pays with nothing changing (the
			// Lease: the leader renews it, every follower reads it, each
			// every RetryPeriod).
			qd, qs, qdw, qsw := sum(directLinks, allBodies), sum(siteLinks, allBodies), sum(directLinks, wire), sum(siteLinks, wire)
			const quiet = 10 * time.Second
			time.Sleep(quiet)
			benchRec.ReportOn(b, float64(sum(directLinks, allBodies)-qd)/quiet.Seconds(), "direct-quiet-B/s")
			benchRec.ReportOn(b, float64(sum(siteLinks, allBodies)-qs)/quiet.Seconds(), "site-quiet-B/s")
			benchRec.ReportOn(b, float64(sum(directLinks, wire)-qdw)/quiet.Seconds(), "direct-quiet-wire-B/s")
			benchRec.ReportOn(b, float64(sum(siteLinks, wire)-qsw)/quiet.Seconds(), "site-quiet-wire-B/s")
			benchRec.ReportOn(b, d[unitBodies], "direct-unit-B/op")
			benchRec.ReportOn(b, d[allBodies], "direct-all-B/op")
			benchRec.ReportOn(b, d[wire], "direct-wire-B/op")
			benchRec.ReportOn(b, st[unitBodies], "site-unit-B/op")
			benchRec.ReportOn(b, st[allBodies], "site-all-B/op")
			benchRec.ReportOn(b, st[wire], "site-wire-B/op")
			one := float64(size)
			benchRec.ReportOn(b, st[unitBodies]/(d[unitBodies]/one), "site/one-direct")
			benchRec.ReportOn(b, st[allBodies]/(d[allBodies]/one), "site-all/one-direct-all")
			benchRec.ReportOn(b, st[wire]/(d[wire]/one), "site-wire/one-direct-wire")
		})
	}
}

// logReads logs the response bytes per iteration by what was read
// (readKind), largest first: what a site pays for above one kube-proxy.
func logReads(b *testing.B, who string, now, before map[string]int64, iters, per float64) {
	type read struct {
		kind string
		n    float64
	}
	var reads []read
	for k, n := range now {
		if d := float64(n-before[k]) / iters / per; d > 0 {
			reads = append(reads, read{k, d})
		}
	}
	slices.SortFunc(reads, func(a, b read) int { return int(b.n - a.n) })
	var lines []string
	for _, r := range reads {
		lines = append(lines, fmt.Sprintf("%10.1f  %s", r.n, r.kind))
	}
	b.Logf("%s: per iteration by read (response bytes, or requests):\n%s", who, strings.Join(lines, "\n"))
}

// podIP is the address BenchmarkSiteStream gave its pod name: the number
// after "-site".
func podIP(name string) string {
	n, _ := strconv.Atoi(name[strings.LastIndex(name, "-site")+len("-site"):])
	return fmt.Sprintf("10.32.%d.%d", n/250, n%250+1)
}

// viewAddresses is every address a view's EndpointSlices list, by Service.
func viewAddresses(v cache.SharedIndexInformer) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, o := range v.GetStore().List() {
		sl := o.(*discoveryv1.EndpointSlice)
		svc := sl.Labels[discoveryv1.LabelServiceName]
		if out[svc] == nil {
			out[svc] = map[string]bool{}
		}
		for _, ep := range sl.Endpoints {
			for _, a := range ep.Addresses {
				out[svc][a] = true
			}
		}
	}
	return out
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
