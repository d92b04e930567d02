package wrapper_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
)

// stormAuditPolicy records, at Metadata level, the lists and watches of
// what kube-proxy reads (and the wrapper for it): the audit log is the
// apiserver's own count of relists and failed calls, beside the clients'.
const stormAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "watch"]
  resources:
  - group: ""
    resources: ["services", "nodes"]
  - group: "discovery.k8s.io"
    resources: ["endpointslices"]
  - group: "networking.k8s.io"
    resources: ["servicecidrs"]
- level: None
`

// stormAuditArgs writes the policy and returns the apiserver's audit flags
// and the log's path.
func stormAuditArgs(b *testing.B) (args []string, logPath string) {
	dir := b.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(stormAuditPolicy), 0o600); err != nil {
		b.Fatal(err)
	}
	logPath = filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + logPath, "--audit-log-maxsize=0"}, logPath
}

// auditCount is what the audit log holds per user agent prefix and
// resource: full lists (LIST, or a watch-list) and failed calls.
type auditCount struct{ lists, failed map[string]int }

// readAudit counts the audit log's requests of user agents starting with
// one of prefixes, from byte offset on; it returns the counts by
// "prefix resource" and the offset reached. Each request is counted once
// (a watch has a ResponseStarted and a ResponseComplete event).
func readAudit(b *testing.B, path string, offset int64, prefixes ...string) (auditCount, int64) {
	c := auditCount{lists: map[string]int{}, failed: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		offset += int64(len(sc.Bytes())) + 1
		var ev struct {
			AuditID        string                    `json:"auditID"`
			Verb           string                    `json:"verb"`
			RequestURI     string                    `json:"requestURI"`
			UserAgent      string                    `json:"userAgent"`
			ObjectRef      struct{ Resource string } `json:"objectRef"`
			ResponseStatus struct{ Code int }        `json:"responseStatus"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || seen[ev.AuditID] {
			continue
		}
		i := slices.IndexFunc(prefixes, func(p string) bool { return strings.HasPrefix(ev.UserAgent, p) })
		if i < 0 {
			continue
		}
		seen[ev.AuditID] = true
		key := prefixes[i] + " " + ev.ObjectRef.Resource
		u, _ := url.Parse(ev.RequestURI)
		switch {
		case ev.ResponseStatus.Code >= 400:
			c.failed[key]++
		case ev.Verb == "list" || (u != nil && u.Query().Get("sendInitialEvents") == "true"):
			c.lists[key]++
		}
	}
	return c, offset
}

// stormResources are what a kube-proxy-shaped consumer watches.
var stormResources = []string{"services", "endpointslices", "nodes", "servicecidrs"}

// kubeProxyConsumer is client-go informers as kube-proxy runs them:
// Services and EndpointSlices by its label selector, its own Node, and
// ServiceCIDRs; counted by its tap.
type kubeProxyConsumer struct {
	tap      *resourceTap
	services cache.SharedIndexInformer
}

func startKubeProxyConsumer(b *testing.B, cfg *rest.Config, node string) *kubeProxyConsumer {
	b.Helper()
	k := &kubeProxyConsumer{tap: newResourceTap()}
	c := kubernetes.NewForConfigOrDie(k.tap.wrap(cfg))
	sel := "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	nf := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + node
	}))
	cf := informers.NewSharedInformerFactory(c, 0)
	k.services = f.Core().V1().Services().Informer()
	synced := []cache.InformerSynced{k.services.HasSynced, f.Discovery().V1().EndpointSlices().Informer().HasSynced,
		nf.Core().V1().Nodes().Informer().HasSynced, cf.Networking().V1().ServiceCIDRs().Informer().HasSynced}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() { cancel(); f.Shutdown(); nf.Shutdown(); cf.Shutdown() })
	f.Start(ctx.Done())
	nf.Start(ctx.Done())
	cf.Start(ctx.Done())
	sctx, scancel := context.WithTimeout(ctx, 5*time.Minute)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		b.Fatalf("kube-proxy-shaped informers of %s at %s did not sync", node, cfg.Host)
	}
	return k
}

// stormSide sums a group of consumers' counts by resource.
type stormSide struct {
	lists, failed map[string]int
	bytes         int64
}

func sumConsumers(cs []*kubeProxyConsumer) stormSide {
	s := stormSide{lists: map[string]int{}, failed: map[string]int{}}
	for _, c := range cs {
		x := c.tap.counts()
		for r, n := range x.lists {
			s.lists[r] += n
		}
		for r, n := range x.failed {
			s.failed[r] += n
		}
		s.bytes += x.bytes
	}
	return s
}

func (s stormSide) since(before stormSide) stormSide {
	d := stormSide{lists: map[string]int{}, failed: map[string]int{}, bytes: s.bytes - before.bytes}
	for r, n := range s.lists {
		d.lists[r] = n - before.lists[r]
	}
	for r, n := range s.failed {
		d.failed[r] = n - before.failed[r]
	}
	return d
}

func total(m map[string]int) (t int) {
	for _, n := range m {
		t += n
	}
	return t
}

// perResource formats m's counts of stormResources divided by n.
func perResource(m map[string]int, n int) string {
	var parts []string
	for _, r := range stormResources {
		parts = append(parts, fmt.Sprintf("%s %.2f", r, float64(m[r])/float64(n)))
	}
	for _, r := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(stormResources, r) && m[r] != 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", r, float64(m[r])/float64(n)))
		}
	}
	return strings.Join(parts, ", ")
}

// allWatching reports whether every consumer has a watch open of each
// resource it watches.
func allWatching(cs []*kubeProxyConsumer) bool {
	for _, c := range cs {
		open := c.tap.counts().open
		for _, r := range stormResources {
			if open[r] < 1 {
				return false
			}
		}
	}
	return true
}

// stormWrapper is one wrapper of the restart scenarios with its upstream
// taps: by wrapper (lists, bytes, open watches) and by resource.
type stormWrapper struct {
	node  int
	w     *runningWrapper
	up    *upstreamRequests
	kinds *resourceTap
}

// User agents that tell the audit log's requests apart.
const (
	stormWrapperAgent = "storm-wrapper"
	stormDirectAgent  = "storm-direct"
	stormBehindAgent  = "storm-behind"
)

// runRestartScenarios: one kube-proxy-shaped consumer behind each wrapper
// of ws and as many straight to the apiserver, each for the same node;
// then the apiserver is stopped (SIGTERM), its port left closed for down,
// and started again, once as it is ("restart") and once with etcd
// compacted while it is away ("compaction"). Each is counted from the
// SIGTERM until every watch is open again and nothing was listed or
// failed for 10 s, by the clients' taps and by the apiserver's audit log.
func runRestartScenarios(b *testing.B, rec *benchrecord.Record, f *fleet, ws []stormWrapper, auditLog string, down time.Duration) {
	ctx := b.Context()
	proto := func(cfg *rest.Config, agent string) *rest.Config {
		cfg = rest.CopyConfig(cfg)
		cfg.UserAgent = agent
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = cfg.ContentType + ",application/json"
		return cfg
	}
	var behind, direct []*kubeProxyConsumer
	for _, w := range ws {
		behind = append(behind, startKubeProxyConsumer(b, proto(&rest.Config{Host: w.w.URL(), QPS: -1}, stormBehindAgent), fleetNodeName(w.node)))
		direct = append(direct, startKubeProxyConsumer(b, proto(f.cp.Config, stormDirectAgent), fleetNodeName(w.node)))
	}
	n := len(ws)
	activity := func() (a int) {
		for _, s := range []stormSide{sumConsumers(behind), sumConsumers(direct)} {
			a += total(s.lists) + total(s.failed)
		}
		for _, w := range ws {
			t := w.up.tally()
			a += t.lists + t.failed
		}
		return a
	}
	watchesPer := make([]int, n)
	settle := func(what string) {
		eventually(b, what, 10*time.Minute, func(context.Context) (bool, error) {
			if !allWatching(behind) || !allWatching(direct) {
				return false, fmt.Errorf("consumers not watching every resource: behind the wrappers %v, direct %v", !allWatching(behind), !allWatching(direct))
			}
			short := 0
			for x, w := range ws {
				if w.up.tally().open < watchesPer[x] {
					short++
				}
			}
			if short > 0 {
				return false, fmt.Errorf("%d wrappers with fewer upstream watches open than before", short)
			}
			before := activity()
			time.Sleep(10 * time.Second)
			after := activity()
			return after == before, fmt.Errorf("%d lists or failed calls in 10 s", after-before)
		})
	}
	settle("every consumer watching")
	for x, w := range ws {
		watchesPer[x] = w.up.tally().open
	}
	wrapperKinds := func() stormSide {
		var ks []*kubeProxyConsumer
		for _, w := range ws {
			ks = append(ks, &kubeProxyConsumer{tap: w.kinds})
		}
		return sumConsumers(ks)
	}
	wrapperBytes := func() (t int64) {
		for _, w := range ws {
			x := w.up.tally()
			t += x.fullListBytes + x.otherBytes
		}
		return t
	}
	_, auditAt := readAudit(b, auditLog, 0)
	var behindRelists, behindFailed int
	for _, sc := range []struct {
		name    string
		compact bool
	}{{"restart", false}, {"compaction", true}} {
		settle("quiet before the " + sc.name)
		bh0, d0, k0, wb0 := sumConsumers(behind), sumConsumers(direct), wrapperKinds(), wrapperBytes()
		_, auditAt = readAudit(b, auditLog, auditAt)
		stopAt := time.Now()
		f.cp.StopAPIServer()
		stopped := time.Since(stopAt)
		if sc.compact {
			rev, err := f.cp.CompactEtcd(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: etcd compacted at revision %d with the apiserver stopped", sc.name, rev)
		}
		time.Sleep(time.Until(stopAt.Add(stopped + down)))
		if err := f.cp.StartAPIServer(ctx); err != nil {
			b.Fatal(err)
		}
		back := time.Now()
		settle("every watch open again after the " + sc.name)
		settled := time.Since(back)
		// A Service created after: every consumer sees it.
		name := "storm-after-" + sc.name
		createService(b, f.admin, fleetNS, name, `["zone1"]`)
		eventually(b, name+" seen by every consumer", 5*time.Minute, func(context.Context) (bool, error) {
			for _, c := range slices.Concat(behind, direct) {
				if _, ok, _ := c.services.GetStore().GetByKey(fleetNS + "/" + name); !ok {
					return false, nil
				}
			}
			return true, nil
		})
		cpu := readAPIServerLoad(b, f.cp, f.admin).cpuSeconds
		bh, d, k := sumConsumers(behind).since(bh0), sumConsumers(direct).since(d0), wrapperKinds().since(k0)
		wb := wrapperBytes() - wb0
		var audit auditCount
		audit, auditAt = readAudit(b, auditLog, auditAt, stormWrapperAgent, stormDirectAgent, stormBehindAgent)
		ofAgent := func(m map[string]int, agent string) map[string]int {
			out := map[string]int{}
			for key, v := range m {
				if r, ok := strings.CutPrefix(key, agent+" "); ok {
					out[r] += v
				}
			}
			return out
		}
		b.Logf("%s: apiserver stopped in %v, port closed %v, every watch open again and 10 s quiet %v after the start",
			sc.name, stopped.Round(100*time.Millisecond), down, settled.Round(100*time.Millisecond))
		b.Logf("%s, per consumer (%d each side), relists by resource: behind the wrappers %s (failed calls %d); straight to the apiserver %s (failed calls %s)",
			sc.name, n, perResource(bh.lists, n), total(bh.failed), perResource(d.lists, n), perResource(d.failed, n))
		b.Logf("%s, per wrapper, its own relists by resource: %s; failed calls %s",
			sc.name, perResource(k.lists, n), perResource(k.failed, n))
		b.Logf("%s, audit log per client: wrapper lists %s, failed %s; direct lists %s, failed %s; behind the wrappers (forwarded) lists %d, failed %d",
			sc.name, perResource(ofAgent(audit.lists, stormWrapperAgent), n), perResource(ofAgent(audit.failed, stormWrapperAgent), n),
			perResource(ofAgent(audit.lists, stormDirectAgent), n), perResource(ofAgent(audit.failed, stormDirectAgent), n),
			total(ofAgent(audit.lists, stormBehindAgent)), total(ofAgent(audit.failed, stormBehindAgent)))
		b.Logf("%s: bytes from the apiserver per wrapper %.0f, per direct client %.0f (%.2fx); kube-apiserver CPU from the SIGTERM to the end %.1f s (the new process's, both sides together; the old one's shutdown not counted)",
			sc.name, float64(wb)/float64(n), float64(d.bytes)/float64(n), float64(wb)/float64(max(d.bytes, 1)), cpu)
		behindRelists += total(bh.lists)
		behindFailed += total(bh.failed)
		for _, r := range slices.Sorted(maps.Keys(k.lists)) {
			if k.lists[r] != 0 || slices.Contains(stormResources, r) {
				rec.Report(float64(k.lists[r])/float64(n), r+"-relists/wrapper-"+sc.name)
			}
		}
		rec.Report(float64(total(d.lists))/float64(n), "relists/direct-"+sc.name)
		rec.Report(float64(total(d.failed))/float64(n), "failed/direct-"+sc.name)
		rec.Report(float64(total(ofAgent(audit.lists, stormWrapperAgent))+total(ofAgent(audit.lists, stormBehindAgent))), "audit-relists-wrappers-"+sc.name)
		rec.Report(float64(total(ofAgent(audit.lists, stormDirectAgent))), "audit-relists-direct-"+sc.name)
		rec.Report(float64(wb)/float64(max(d.bytes, 1)), "bytes-wrapper/direct-"+sc.name)
		rec.Report(cpu, "apiserver-cpu-s-"+sc.name)
	}
	rec.Report(float64(behindRelists), "relists-behind-wrapper")
	rec.Report(float64(behindFailed), "failed-behind-wrapper")
}
