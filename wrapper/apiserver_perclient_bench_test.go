package wrapper_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/wrapper"
	"github.com/servicegroup/servicegroup/wrapper/sitestream"
)

// apiserverMetrics sums the kube-apiserver's /metrics samples of name by
// the value of label (one entry per value; "" when the sample lacks it),
// keeping the samples keep accepts (nil: all).
func apiserverMetrics(tb testing.TB, admin kubernetes.Interface, name, label string, keep func(labels string) bool) map[string]float64 {
	tb.Helper()
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		n, labels, _ := strings.Cut(line[:sp], "{")
		if n != name || (keep != nil && !keep(labels)) {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		out[labelValue(labels, label)] += v
	}
	return out
}

// labelValue is label's value in a sample's labels (`a="x",b="y"}`).
func labelValue(labels, label string) string {
	for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
		if v, ok := strings.CutPrefix(kv, label+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func isWatch(labels string) bool { return strings.Contains(labels, `verb="WATCH"`) }

// perClientDelta is (b - a) / n per key of either, zeros left out.
func perClientDelta(a, b map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k := range maps.Keys(b) {
		if d := (b[k] - a[k]) / float64(n); d != 0 {
			out[k] = d
		}
	}
	for k := range maps.Keys(a) {
		if _, ok := b[k]; !ok && a[k] != 0 {
			out[k] = -a[k] / float64(n)
		}
	}
	return out
}

func formatPer(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// startParallel is how many wrappers (plain) or sites start at once in
// BenchmarkAPIServerPerClient: one after the other, 1,000 site wrappers
// would take 6-12 minutes, each waiting to be ready.
const startParallel = 20

// startInParallel runs start(0..n-1), limit at a time, each with a
// testing.TB whose Fatal ends only its own goroutine (the failure is
// recorded); it fails the benchmark once all have ended if any failed.
func startInParallel(b *testing.B, n, limit int, start func(tb testing.TB, i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			start(goroutineTB{b}, i)
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// liveLogf logs to the benchmark's log and to stderr at once: a
// benchmark's log appears only when it ends, and a run stopped early (1,000
// site wrappers hold ~11 GB) keeps what it measured.
func liveLogf(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
}

// goroutineTB is a testing.TB for a goroutine the benchmark started:
// FailNow may only end the benchmark's own goroutine, so Fatal records
// the failure and ends the calling goroutine alone.
type goroutineTB struct{ testing.TB }

func (g goroutineTB) FailNow() { g.TB.Fail(); runtime.Goexit() }

func (g goroutineTB) Fatal(args ...any) { g.TB.Helper(); g.TB.Error(args...); runtime.Goexit() }

func (g goroutineTB) Fatalf(format string, args ...any) {
	g.TB.Helper()
	g.TB.Errorf(format, args...)
	runtime.Goexit()
}

// BenchmarkAPIServerPerClient: what one edge node costs the kube-apiserver
// (issue 46, item 3), side by side in one run on BenchmarkFleet's world
// (100 topology Services with EndpointSlices made by
// kube-controller-manager, the application-grid-controller's summaries),
// three groups of SG_PERCLIENT_N (200) clients added one group after the
// other, each client on its own node and its own TCP connection:
//
//   - wrapper: a wrapper as shipped without a site stream;
//   - site: a wrapper in a site of SG_PERCLIENT_SITE (10) nodes sharing one
//     stream (sitestream's default timings: 15 s lease, 2 s retry);
//   - kube-proxy: kube-proxy-shaped informers straight to the apiserver
//     (Services and EndpointSlices by its selector, its Node; protobuf).
//
// Per group: the apiserver's watches (apiserver_longrunning_requests WATCH,
// by resource; v1.37 exports no apiserver_registered_watchers), its Go heap
// in use after a forced collection (median of 3) right before and right
// after the group starts (no change in between but the group's own: the
// watch caches' history of earlier change cycles is in both; with
// SG_PERCLIENT_PROFILES=dir the heap profiles are kept there for `go tool
// pprof -diff_base`), its RSS, and its CPU over SG_PERCLIENT_CPU_RUNS (3)
// change cycles of 20 s (every node reports its status, 20 Services change,
// 20 endpoints go unready and ready again). The site wrappers' Pods and
// peer tokens (a DaemonSet's Pod in a cluster) are made before anything is
// measured. SG_PERCLIENT_GROUPS (wrapper,site,kube-proxy) picks the groups
// and the order they start in.
//
// SG_PERCLIENT_RENEW_RULES picks when a site leader serves (issue 46): now
// (the default), before (Options.ServeOnlyRightAfterRenewal: only within
// 5 s of its last Lease write answered), or both: the even sites the rule
// now, the odd ones the rule before, side by side under the same load.
// With both, the site group is not measured per client: once every site
// streams, SG_PERCLIENT_CPU_RUNS (at least 1) change cycles run and each
// rule's leader pauses, followers' give-ups, lists and watches of Services
// and EndpointSlices sent to the apiserver, and Lease write times over
// them are reported; with groups started after the site group, once more
// at the end, from the same start (SG_PERCLIENT_GROUPS=site,kube-proxy:
// 1,000 kube-proxy sets starting at once load the apiserver while the
// leaders renew).
func BenchmarkAPIServerPerClient(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/fleet-scale.md")
	n, siteSize := envInt("SG_PERCLIENT_N", 200), envInt("SG_PERCLIENT_SITE", 10)
	cpuRuns := 3
	if v := os.Getenv("SG_PERCLIENT_CPU_RUNS"); v != "" {
		var err error
		if cpuRuns, err = strconv.Atoi(v); err != nil || cpuRuns < 0 {
			b.Fatalf("SG_PERCLIENT_CPU_RUNS=%q: want 0 or more", v)
		}
	}
	if n%siteSize != 0 {
		b.Fatalf("SG_PERCLIENT_N=%d is not a multiple of the site size %d", n, siteSize)
	}
	profDir := os.Getenv("SG_PERCLIENT_PROFILES")
	renewRules := os.Getenv("SG_PERCLIENT_RENEW_RULES")
	switch renewRules {
	case "", "now", "before":
	case "both":
		if (n/siteSize)%2 != 0 {
			b.Fatalf("SG_PERCLIENT_RENEW_RULES=both: %d sites, want an even number", n/siteSize)
		}
	default:
		b.Fatalf("SG_PERCLIENT_RENEW_RULES=%q: want now, before or both", renewRules)
	}
	// The groups, in the order they start.
	order := []string{"wrapper", "site", "kube-proxy"}
	if v := os.Getenv("SG_PERCLIENT_GROUPS"); v != "" {
		order = strings.Split(v, ",")
		for i, g := range order {
			if g != "wrapper" && g != "site" && g != "kube-proxy" {
				b.Fatalf("SG_PERCLIENT_GROUPS: unknown group %q (wrapper, site, kube-proxy)", g)
			}
			if slices.Contains(order[:i], g) {
				b.Fatalf("SG_PERCLIENT_GROUPS: group %q named twice", g)
			}
		}
	}
	groups := map[string]bool{}
	for _, g := range order {
		groups[g] = true
	}
	const servicesN, churn = 100, 20
	// Nodes [0,n) carry the wrappers and the kube-proxy sets (one each, as
	// the two would be on one node); [n,2n) the site wrappers.
	f := startFleet(b, 2*n, servicesN)
	ctx := b.Context()
	if _, err := f.admin.CoreV1().ServiceAccounts(peerNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: peerAccount}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	sites := n
	if !groups["site"] {
		sites = 0
	}
	fleetParallel(sites, func(j int) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"site-%d"}}}`, siteLabel, j/siteSize)
		if _, err := f.admin.CoreV1().Nodes().Patch(ctx, fleetNodeName(n+j), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Error(err)
		}
	})

	load := func() apiserverLoad { return readAPIServerLoad(b, f.cp, f.admin) }
	watches := func() map[string]float64 {
		return apiserverMetrics(b, f.admin, "apiserver_longrunning_requests", "resource", isWatch)
	}
	total := func(m map[string]float64) float64 {
		var t float64
		for _, v := range m {
			t += v
		}
		return t
	}
	heap := func(phase string) float64 {
		var h []float64
		for range 3 {
			prof, err := f.admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if profDir != "" {
				if err := os.WriteFile(filepath.Join(profDir, phase+".pb.gz"), prof, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			h = append(h, load().heapBytes)
		}
		slices.Sort(h)
		return h[1]
	}
	// settle: the number of open watches has not moved for 10 s.
	settle := func(what string) {
		last, still := -1.0, 0
		eventually(b, what+": watches steady for 10 s", 10*time.Minute, func(context.Context) (bool, error) {
			time.Sleep(2 * time.Second)
			cur := total(watches())
			if cur == last {
				still++
			} else {
				still = 0
			}
			last = cur
			return still >= 5, nil
		})
	}
	type phase struct {
		name                  string
		watches               map[string]float64
		heapBefore, heap, rss float64
		cpu                   []float64
		tookS, syncCPU        float64
	}
	measure := func(name string, heapBefore float64, took time.Duration, syncCPU float64) phase {
		settle(name)
		p := phase{name: name, watches: watches(), heapBefore: heapBefore, heap: heap(name), tookS: took.Seconds(), syncCPU: syncCPU}
		p.rss = load().rssBytes
		p.cpu = f.cycleCPU(b, cpuRuns, churn)
		liveLogf(b, "phase %s: started in %.1f s, apiserver CPU %.2f s; %.0f watches (%s); heap %.1f MiB (%.1f before the group started), RSS %.0f MiB; cycle CPU %v; process RSS %.0f MiB; load %s",
			name, p.tookS, p.syncCPU, total(p.watches), formatPer(p.watches), p.heap/(1<<20), p.heapBefore/(1<<20), p.rss/(1<<20), p.cpu, selfRSSMiB(), loadAverage())
		return p
	}
	tokens := make([]func() (string, error), n)
	fleetParallel(sites, func(j int) {
		tok, err := f.cp.PodToken(ctx, peerNS, peerAccount, fleetNodeName(n+j), sitestream.PeerAudience)
		if err != nil {
			b.Error(err)
		}
		tokens[j] = func() (string, error) { return tok, nil }
	})
	if b.Failed() {
		b.FailNow()
	}
	settle("none")
	phases := []phase{measure("none", heap("none"), 0, 0)}

	// add names a group's start; the groups then start in their order,
	// each with the heap right before and the time and the apiserver's
	// CPU it took.
	starts := map[string]func(){}
	add := func(name string, start func()) { starts[name] = start }
	// With SG_PERCLIENT_RENEW_RULES=both, the rules' report from the site
	// group's streaming on (set once it streams).
	var renewReport func(what string)
	taps := map[string][]*resourceTap{}
	add("wrapper", func() {
		for range n {
			taps["wrapper"] = append(taps["wrapper"], newResourceTap())
		}
		startInParallel(b, n, startParallel, func(tb testing.TB, i int) {
			startWrapper(tb, f.cp, fleetNodeName(i), "", wrapper.Options{Upstream: taps["wrapper"][i].wrap(newWireCounter().wrap(tb, f.cp.Config))})
		})
	})
	add("site", func() {
		// Sites start side by side, a site's wrappers one after the
		// other (its first is the likely leader, the others find it).
		ws := make([]*siteWrapper, n)
		startInParallel(b, n/siteSize, startParallel, func(tb testing.TB, s int) {
			old := renewRules == "before" || (renewRules == "both" && s%2 == 1)
			for j := s * siteSize; j < (s+1)*siteSize; j++ {
				ws[j] = startSiteWrapper(tb, f.cp, fleetNodeName(n+j), 30+j%200, siteOptions{countWire: true, defaultTimings: true, token: tokens[j], oldRenewRule: old})
			}
		})
		eventually(b, "one cloud stream in every site", 10*time.Minute, func(context.Context) (bool, error) {
			for s := 0; s < n; s += siteSize {
				streaming := 0
				for _, w := range ws[s : s+siteSize] {
					if w.cloud.openUnitStreams() > 0 {
						streaming++
					}
				}
				if streaming != 1 {
					return false, fmt.Errorf("site %d: %d wrappers stream from the cloud", s/siteSize, streaming)
				}
			}
			return true, nil
		})
		if renewRules == "both" {
			renewReport = compareRenewRules(b, f, ws, siteSize, max(cpuRuns, 1), churn)
		}
	})
	add("kube-proxy", func() {
		var synced []func() bool
		for i := range n {
			tap := newResourceTap()
			taps["kube-proxy"] = append(taps["kube-proxy"], tap)
			s, _ := kubeProxyInformers(b, tap.wrap(newWireCounter().wrap(b, f.cp.Config)), fleetNodeName(i))
			synced = append(synced, s)
		}
		eventually(b, "kube-proxy-shaped informers synced", 10*time.Minute, func(context.Context) (bool, error) {
			for _, s := range synced {
				if !s() {
					return false, nil
				}
			}
			return true, nil
		})
	})
	var later []string // the groups started after the site group
	for _, name := range order {
		if renewReport != nil {
			later = append(later, name)
		}
		h0 := heap(name + "-before")
		at, l0 := time.Now(), load()
		starts[name]()
		took := time.Since(at)
		if name == "site" && renewRules == "both" {
			liveLogf(b, "site group not measured per client (SG_PERCLIENT_RENEW_RULES=both)")
			continue
		}
		phases = append(phases, measure(name, h0, took, load().cpuSeconds-l0.cpuSeconds))
	}
	if len(later) > 0 {
		renewReport("from its cycles through the start, settling and change cycles of " + strings.Join(later, ", "))
	}
	for group, ts := range taps {
		open := map[string]float64{}
		for _, t := range ts {
			c := t.counts()
			for r, k := range c.open {
				open[r] += float64(k) / float64(len(ts))
			}
		}
		b.Logf("%s: open watches per client, as its tap counts them: %s", group, formatPer(open))
	}

	b.Logf("%d clients a group, sites of %d, %d nodes, %d Services; load average %s", n, siteSize, f.nodesN, servicesN, loadAverage())
	mid := func(r []float64) float64 {
		if len(r) == 0 {
			return 0
		}
		return r[len(r)/2]
	}
	for i := 1; i < len(phases); i++ {
		p, q := phases[i-1], phases[i]
		w := perClientDelta(p.watches, q.watches, n)
		heapKiB := (q.heap - q.heapBefore) / float64(n) / 1024
		liveLogf(b, "per %s client: watches %.2f (%s); heap %.1f KiB; start %.1f s, apiserver CPU at start %.1f ms; change cycle CPU %.2f ms (median of %d; runs before %v, after %v)",
			q.name, total(w), formatPer(w), heapKiB, q.tookS, q.syncCPU/float64(n)*1000,
			(mid(q.cpu)-mid(p.cpu))/float64(n)*1000, cpuRuns, p.cpu, q.cpu)
		benchRec.Report(total(w), q.name+"-watches/client")
		benchRec.Report(heapKiB, q.name+"-heap-KiB/client")
		benchRec.Report(q.syncCPU/float64(n)*1000, q.name+"-start-CPU-ms/client")
		if cpuRuns > 0 {
			benchRec.Report((mid(q.cpu)-mid(p.cpu))/float64(n)*1000, q.name+"-cycle-CPU-ms/client")
		}
	}
	last := phases[len(phases)-1]
	benchRec.Report(last.heap/(1<<20), "apiserver-heap-MiB-all")
	benchRec.Report(last.rss/(1<<20), "apiserver-RSS-MiB-all")
}

// compareRenewRules runs cycles change cycles over sites whose even ones
// serve by the rule now and odd ones by the rule before, and reports for
// each rule its leaders' pauses, its followers' give-ups of their leader,
// the lists and watches of Services and EndpointSlices its wrappers sent
// the apiserver, and its Lease writes' times, over the cycles. The func
// it returns reports the same from the same start to the moment it is
// called (for the groups started after the site group: their start is the
// heaviest load on the apiserver the run makes).
func compareRenewRules(b *testing.B, f *fleet, ws []*siteWrapper, siteSize, cycles, churn int) func(what string) {
	type counts struct{ pauses, giveUps, unit, leaseN, leaseTotal, leaseMax int64 }
	var longest [2]int64 // the longest Lease write since the start, per rule
	read := func() (c [2]counts) {
		for j, w := range ws {
			r := &c[(j/siteSize)%2]
			r.pauses += w.srv.SiteStreamPauses()
			r.giveUps += w.srv.SiteStreamLeaderGiveUps()
			r.unit += w.cloud.unitRequests.Load()
			r.leaseN += w.cloud.leaseN.Load()
			r.leaseTotal += w.cloud.leaseTotal.Load()
			r.leaseMax = max(r.leaseMax, w.cloud.leaseMax.Swap(0))
		}
		return c
	}
	before, at := read(), time.Now()
	report := func(what string) {
		after := read()
		for r, name := range []string{"now", "before"} {
			longest[r] = max(longest[r], after[r].leaseMax)
			d := counts{pauses: after[r].pauses - before[r].pauses, giveUps: after[r].giveUps - before[r].giveUps, unit: after[r].unit - before[r].unit,
				leaseN: after[r].leaseN - before[r].leaseN, leaseTotal: after[r].leaseTotal - before[r].leaseTotal, leaseMax: longest[r]}
			mean := 0.0
			if d.leaseN > 0 {
				mean = time.Duration(d.leaseTotal / d.leaseN).Seconds()
			}
			liveLogf(b, "rule %s, %d sites, %s, %s: %d leader pauses, %d give-ups of a leader by followers, %d lists and watches of Services and EndpointSlices sent to the apiserver; %d Lease writes, mean %.2f s, longest %.2f s",
				name, len(ws)/siteSize/2, what, time.Since(at).Round(time.Second), d.pauses, d.giveUps, d.unit, d.leaseN, mean, time.Duration(d.leaseMax).Seconds())
			b.ReportMetric(float64(d.pauses), "renew-"+name+"-pauses")
			b.ReportMetric(float64(d.giveUps), "renew-"+name+"-giveups")
			b.ReportMetric(float64(d.unit), "renew-"+name+"-unit-requests")
		}
	}
	liveLogf(b, "renew rules side by side: %d change cycles over %d sites (even: the rule now, odd: the rule before), load %s", cycles, len(ws)/siteSize, loadAverage())
	cpu := f.cycleCPU(b, cycles, churn)
	report(fmt.Sprintf("over %d change cycles", cycles))
	liveLogf(b, "renew rules side by side: apiserver CPU per cycle %v s; load %s", cpu, loadAverage())
	return report
}
