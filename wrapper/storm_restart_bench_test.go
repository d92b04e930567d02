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

	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/wrapper"
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
    resources: ["services", "nodes", "namespaces"]
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
type auditCount struct {
	lists, failed map[string]int
	// byAgent: each list's "verb requestURI code" by full user agent and
	// resource, to find a client that listed twice.
	byAgent map[string][]string
}

// readAudit counts the audit log's requests of user agents starting with
// one of prefixes, from byte offset on; it returns the counts by
// "prefix resource" and the offset reached. Each request is counted once
// (a watch has a ResponseStarted and a ResponseComplete event).
func readAudit(b *testing.B, path string, offset int64, prefixes ...string) (auditCount, int64) {
	c := auditCount{lists: map[string]int{}, failed: map[string]int{}, byAgent: map[string][]string{}}
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
			k := ev.UserAgent + " " + ev.ObjectRef.Resource
			c.byAgent[k] = append(c.byAgent[k], fmt.Sprintf("%s %s %d", ev.Verb, ev.RequestURI, ev.ResponseStatus.Code))
		}
	}
	return c, offset
}

// stormResources are what a kube-proxy-shaped consumer watches.
var stormResources = []string{"services", "endpointslices", "nodes", "servicecidrs"}

// stormSide sums a group of consumers' counts by resource.
type stormSide struct {
	lists, failed      map[string]int
	listBytes, bytesBy map[string]int64
	bytes              int64
}

func sumConsumers(cs []*stormConsumer) stormSide {
	s := stormSide{lists: map[string]int{}, failed: map[string]int{}, listBytes: map[string]int64{}, bytesBy: map[string]int64{}}
	for _, c := range cs {
		x := c.tap.counts()
		for r, n := range x.listBytes {
			s.listBytes[r] += n
		}
		for r, n := range x.bytesBy {
			s.bytesBy[r] += n
		}
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
	d := stormSide{lists: map[string]int{}, failed: map[string]int{}, listBytes: map[string]int64{}, bytesBy: map[string]int64{}, bytes: s.bytes - before.bytes}
	for r, n := range s.listBytes {
		d.listBytes[r] = n - before.listBytes[r]
	}
	for r, n := range s.bytesBy {
		d.bytesBy[r] = n - before.bytesBy[r]
	}
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
func perResource[V int | int64](m map[string]V, n int) string {
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

// allWatching reports whether every consumer has each of its watches open.
func allWatching(cs []*stormConsumer) bool {
	for _, c := range cs {
		if !c.watching() {
			return false
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
	// summariesInFull: built to list the NodeLabelSummaries in full at
	// every relist, as before their metadata was asked first.
	summariesInFull bool
}

// User agents that tell the audit log's requests apart.
const (
	stormWrapperAgent = "storm-wrapper"
	stormDirectAgent  = "storm-direct"
	stormBehindAgent  = "storm-behind"
)

// stormScenario is one way the apiserver goes away: stopped (SIGTERM), its
// port closed for down, etcd compacted meanwhile or not, started again.
type stormScenario struct {
	name    string
	down    time.Duration
	compact bool
}

// stormNode is one node of the restart scenarios: its wrapper with a
// kube-proxy-shaped consumer behind it, and one straight to the apiserver;
// on every other node also the node's CoreDNS-shaped consumer behind the
// wrapper (its DNS view) and one straight to the apiserver. Bytes are
// compared by group: kube-proxy alone behind wrappers as they are, kube-proxy
// alone behind wrappers listing the summaries in full (before), kube-proxy
// and CoreDNS.
type stormNode struct {
	stormWrapper
	behindProxy, directProxy *stormConsumer
	behindDNS, directDNS     *stormConsumer // nil: no CoreDNS on this node
}

// runRestartScenarios runs scenarios one after the other with consumers
// behind the wrappers of ws and as many straight to the apiserver, each for
// the same node (stormNode). Each is counted from the SIGTERM until every
// watch is open again and nothing was listed or failed for 10 s, by the
// clients' taps and by the apiserver's audit log. The wrappers' bytes are
// compared with the direct clients' on the nodes with kube-proxy alone (the
// bytes goal) and on those with CoreDNS too.
func runRestartScenarios(b *testing.B, rec *benchrecord.Record, f *fleet, ws []stormWrapper, auditLog string, scenarios []stormScenario) {
	ctx := b.Context()
	proto := func(cfg *rest.Config, agent string) *rest.Config {
		cfg = rest.CopyConfig(cfg)
		cfg.UserAgent = agent
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = cfg.ContentType + ",application/json"
		return cfg
	}
	var nodes []*stormNode
	for x, w := range ws {
		name := fleetNodeName(w.node)
		behind := &rest.Config{Host: w.w.URL(), QPS: -1}
		sn := &stormNode{stormWrapper: w,
			behindProxy: startKubeProxyConsumer(b, proto(behind, stormBehindAgent+"/"+name), name),
			directProxy: startKubeProxyConsumer(b, proto(f.cp.Config, stormDirectAgent+"/"+name), name)}
		if x%2 == 1 {
			dns := &rest.Config{Host: w.w.URL() + wrapper.DNSPathPrefix, QPS: -1}
			sn.behindDNS = startCoreDNSConsumer(b, proto(dns, stormBehindAgent+"-coredns/"+name), name)
			sn.directDNS = startCoreDNSConsumer(b, proto(f.cp.Config, stormDirectAgent+"-coredns/"+name), name)
		}
		nodes = append(nodes, sn)
	}
	// Consumers and wrappers by group.
	consumers := func(of func(*stormNode) *stormConsumer, in func(*stormNode) bool) (cs []*stormConsumer) {
		for _, sn := range nodes {
			if c := of(sn); c != nil && in(sn) {
				cs = append(cs, c)
			}
		}
		return cs
	}
	every := func(*stormNode) bool { return true }
	proxyOnly := func(sn *stormNode) bool { return sn.behindDNS == nil && !sn.summariesInFull }
	proxyOnlyBefore := func(sn *stormNode) bool { return sn.behindDNS == nil && sn.summariesInFull }
	withDNS := func(sn *stormNode) bool { return sn.behindDNS != nil }
	behindProxy := func(sn *stormNode) *stormConsumer { return sn.behindProxy }
	directProxy := func(sn *stormNode) *stormConsumer { return sn.directProxy }
	behindDNS := func(sn *stormNode) *stormConsumer { return sn.behindDNS }
	directDNS := func(sn *stormNode) *stormConsumer { return sn.directDNS }
	all := slices.Concat(consumers(behindProxy, every), consumers(directProxy, every), consumers(behindDNS, every), consumers(directDNS, every))
	count := func(in func(*stormNode) bool) (n int) {
		for _, sn := range nodes {
			if in(sn) {
				n++
			}
		}
		return n
	}
	activity := func() (a int) {
		s := sumConsumers(all)
		a += total(s.lists) + total(s.failed)
		for _, sn := range nodes {
			t := sn.up.tally()
			a += t.lists + t.failed
		}
		return a
	}
	// Each wrapper's resources with a watch open upstream at the start: each
	// must have one open again. Not their number: a fetch on demand stops
	// once no client asked for 5 minutes (the cut link's check lists every
	// EndpointSlice of nodeunit 0's wrappers once), with its watches.
	watchedBy := make([][]string, len(nodes))
	settle := func(what string) {
		eventually(b, what, 10*time.Minute, func(context.Context) (bool, error) {
			if !allWatching(all) {
				return false, fmt.Errorf("consumers not watching everything they watch: behind the wrappers kube-proxy %v, CoreDNS %v; direct kube-proxy %v, CoreDNS %v",
					!allWatching(consumers(behindProxy, every)), !allWatching(consumers(behindDNS, every)),
					!allWatching(consumers(directProxy, every)), !allWatching(consumers(directDNS, every)))
			}
			short := 0
			for x, sn := range nodes {
				open := sn.kinds.counts().open
				if slices.ContainsFunc(watchedBy[x], func(r string) bool { return open[r] < 1 }) {
					short++
				}
			}
			if short > 0 {
				return false, fmt.Errorf("%d wrappers without a watch open upstream of a resource they watched before", short)
			}
			before := activity()
			time.Sleep(10 * time.Second)
			after := activity()
			return after == before, fmt.Errorf("%d lists or failed calls in 10 s", after-before)
		})
	}
	settle("every consumer watching")
	for x, sn := range nodes {
		for r, k := range sn.kinds.counts().open {
			if k > 0 {
				watchedBy[x] = append(watchedBy[x], r)
			}
		}
	}
	wrapperKinds := func(in func(*stormNode) bool) stormSide {
		var ks []*stormConsumer
		for _, sn := range nodes {
			if in(sn) {
				ks = append(ks, &stormConsumer{tap: sn.kinds})
			}
		}
		return sumConsumers(ks)
	}
	// Bytes from the apiserver by node: its wrapper's, its direct consumers'.
	type nodeBytes struct{ wrapper, direct int64 }
	bytesAt := func() []nodeBytes {
		var out []nodeBytes
		for _, sn := range nodes {
			x := sn.up.tally()
			nb := nodeBytes{wrapper: x.fullListBytes + x.otherBytes, direct: sn.directProxy.tap.counts().bytes}
			if sn.directDNS != nil {
				nb.direct += sn.directDNS.tap.counts().bytes
			}
			out = append(out, nb)
		}
		return out
	}
	// groupBytes: per wrapper, per node's direct consumers, and the ratio.
	groupBytes := func(b0, b1 []nodeBytes, in func(*stormNode) bool) (wrapperPer, directPer, ratio float64) {
		var w, d, k int64
		for x, sn := range nodes {
			if in(sn) {
				w, d, k = w+b1[x].wrapper-b0[x].wrapper, d+b1[x].direct-b0[x].direct, k+1
			}
		}
		return float64(w) / float64(max(k, 1)), float64(d) / float64(max(k, 1)), float64(w) / float64(max(d, 1))
	}
	_, auditAt := readAudit(b, auditLog, 0)
	var behindRelists, behindFailed, dnsRelists, dnsFailed int
	n, nProxy, nBefore, nDNS := len(nodes), count(proxyOnly), count(proxyOnlyBefore), count(withDNS)
	for _, sc := range scenarios {
		settle("quiet before the " + sc.name)
		type mark struct{ behind, direct, dns, directDNS, kinds, kindsProxy, kindsBefore, directProxyOnly stormSide }
		at := func() mark {
			return mark{sumConsumers(consumers(behindProxy, every)), sumConsumers(consumers(directProxy, every)),
				sumConsumers(consumers(behindDNS, every)), sumConsumers(consumers(directDNS, every)), wrapperKinds(every), wrapperKinds(proxyOnly),
				wrapperKinds(proxyOnlyBefore), sumConsumers(consumers(directProxy, proxyOnly))}
		}
		m0 := at()
		b0 := bytesAt()
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
		time.Sleep(time.Until(stopAt.Add(stopped + sc.down)))
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
			for _, c := range all {
				if _, ok, _ := c.services.GetStore().GetByKey(fleetNS + "/" + name); !ok {
					return false, nil
				}
			}
			return true, nil
		})
		cpu := readAPIServerLoad(b, f.cp, f.admin).cpuSeconds
		m1 := at()
		bh, d, dns, ddns, k, kp := m1.behind.since(m0.behind), m1.direct.since(m0.direct), m1.dns.since(m0.dns), m1.directDNS.since(m0.directDNS),
			m1.kinds.since(m0.kinds), m1.kindsProxy.since(m0.kindsProxy)
		kb, dp := m1.kindsBefore.since(m0.kindsBefore), m1.directProxyOnly.since(m0.directProxyOnly)
		b1 := bytesAt()
		wNow, dNow, rNow := groupBytes(b0, b1, proxyOnly)
		wBefore, dBefore, rBefore := groupBytes(b0, b1, proxyOnlyBefore)
		wDNS, dDNS, rDNS := groupBytes(b0, b1, withDNS)
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
		b.Logf("%s: apiserver stopped in %v, port closed %v, etcd compacted %v; every watch open again and 10 s quiet %v after the start",
			sc.name, stopped.Round(100*time.Millisecond), sc.down, sc.compact, settled.Round(100*time.Millisecond))
		b.Logf("%s, per kube-proxy-shaped consumer (%d each side), relists by resource: behind the wrappers %s (failed calls %d); straight to the apiserver %s (failed calls %s)",
			sc.name, n, perResource(bh.lists, n), total(bh.failed), perResource(d.lists, n), perResource(d.failed, n))
		b.Logf("%s, per CoreDNS-shaped consumer (%d each side), relists by resource: behind the wrappers %s (failed calls %s); straight to the apiserver %s (failed calls %s)",
			sc.name, nDNS, perResource(dns.lists, nDNS), perResource(dns.failed, nDNS), perResource(ddns.lists, nDNS), perResource(ddns.failed, nDNS))
		b.Logf("%s, per wrapper (%d), its own relists by resource: %s; failed calls %s",
			sc.name, n, perResource(k.lists, n), perResource(k.failed, n))
		b.Logf("%s, audit log per client: wrapper lists %s, failed %s; direct lists %s, failed %s; behind the wrappers (forwarded) lists %d, failed %d",
			sc.name, perResource(ofAgent(audit.lists, stormWrapperAgent), n), perResource(ofAgent(audit.failed, stormWrapperAgent), n),
			perResource(ofAgent(audit.lists, stormDirectAgent), n), perResource(ofAgent(audit.failed, stormDirectAgent), n),
			total(ofAgent(audit.lists, stormBehindAgent)), total(ofAgent(audit.failed, stormBehindAgent)))
		// A wrapper lists each kind once (the audit log once counted 1.05).
		for _, key := range slices.Sorted(maps.Keys(audit.byAgent)) {
			if strings.HasPrefix(key, stormWrapperAgent+"/") && len(audit.byAgent[key]) > 1 {
				b.Logf("%s, audit log: %s listed %d times: %s", sc.name, key, len(audit.byAgent[key]), strings.Join(audit.byAgent[key], "; "))
			}
		}
		b.Logf("%s, kube-proxy alone (%d nodes), bytes by resource per wrapper: lists %s; in all %s",
			sc.name, nProxy, perResource(kp.listBytes, max(nProxy, 1)), perResource(kp.bytesBy, max(nProxy, 1)))
		b.Logf("%s, kube-proxy alone, summaries listed in full (before, %d nodes), bytes by resource per wrapper: lists %s; in all %s",
			sc.name, nBefore, perResource(kb.listBytes, max(nBefore, 1)), perResource(kb.bytesBy, max(nBefore, 1)))
		b.Logf("%s, kube-proxy alone, bytes by resource per direct consumer: lists %s; in all %s",
			sc.name, perResource(dp.listBytes, max(nProxy, 1)), perResource(dp.bytesBy, max(nProxy, 1)))
		b.Logf("%s: bytes from the apiserver per wrapper / per node's direct consumers: kube-proxy alone %.0f / %.0f (%.4fx); the same, summaries listed in full (before) %.0f / %.0f (%.4fx); kube-proxy and CoreDNS %.0f / %.0f (%.4fx)",
			sc.name, wNow, dNow, rNow, wBefore, dBefore, rBefore, wDNS, dDNS, rDNS)
		b.Logf("%s: kube-apiserver CPU from the SIGTERM to the end %.1f s (the new process's, both sides together; the old one's shutdown not counted)", sc.name, cpu)
		behindRelists += total(bh.lists)
		behindFailed += total(bh.failed)
		dnsRelists += total(dns.lists)
		dnsFailed += total(dns.failed)
		for _, r := range slices.Sorted(maps.Keys(k.lists)) {
			if k.lists[r] != 0 || slices.Contains(stormResources, r) {
				rec.Report(float64(k.lists[r])/float64(n), r+"-relists/wrapper-"+sc.name)
			}
		}
		rec.Report(float64(total(d.lists))/float64(n), "relists/direct-"+sc.name)
		rec.Report(float64(total(d.failed))/float64(n), "failed/direct-"+sc.name)
		rec.Report(float64(total(ddns.lists))/float64(max(nDNS, 1)), "relists/direct-coredns-"+sc.name)
		rec.Report(float64(total(ofAgent(audit.lists, stormWrapperAgent))+total(ofAgent(audit.lists, stormBehindAgent))), "audit-relists-wrappers-"+sc.name)
		rec.Report(float64(total(ofAgent(audit.lists, stormDirectAgent))), "audit-relists-direct-"+sc.name)
		rec.Report(rNow, "bytes-wrapper/direct-"+sc.name)
		rec.Report(rBefore, "bytes-wrapper-full-summaries/direct-"+sc.name)
		rec.Report(rDNS, "bytes-wrapper/direct-with-coredns-"+sc.name)
		rec.Report(cpu, "apiserver-cpu-s-"+sc.name)
	}
	rec.Report(float64(behindRelists), "relists-behind-wrapper")
	rec.Report(float64(behindFailed), "failed-behind-wrapper")
	rec.Report(float64(dnsRelists), "coredns-relists-behind-wrapper")
	rec.Report(float64(dnsFailed), "coredns-failed-behind-wrapper")
}
