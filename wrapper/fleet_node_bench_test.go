package wrapper_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testcoredns"
	"github.com/servicegroup/servicegroup/wrapper"
)

// countingAPIProxy serves plain HTTP on loopback and forwards every request
// to the apiserver, as its admin, through c's counting transport: a process
// that cannot be handed a wrapped transport (CoreDNS) is counted exactly as
// the in-process clients are (response bodies as client-go reads them). It
// returns a kubeconfig pointing at it.
func countingAPIProxy(tb testing.TB, cfg *rest.Config, c *byteCounter) string {
	tb.Helper()
	rt, err := rest.TransportFor(c.wrap(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		tb.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// Let the counting transport negotiate (and undo) compression
			// itself, as it does for the in-process clients.
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:     rt,
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://%s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n", ln.Addr())
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// plainKubeconfig writes a kubeconfig for a plain-HTTP server URL.
func plainKubeconfig(tb testing.TB, server string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n", server)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// nodeDNSKubeconfigLine is Corefile.node's kubernetes plugin reading the
// node's wrapper (the kubeconfig --cert-dir writes).
const nodeDNSKubeconfigLine = "kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig"

// startShippedCoreDNS runs the custom CoreDNS with a Corefile of corefile/
// made local: loopback ports, gridhosts reading through kubeconfig and the
// kubernetes plugin (and, in Corefile.node, gridhosts' Services and
// EndpointSlices) through kubeKubeconfig (the same when empty), a
// snapshot in a temporary directory, forward to a closed port.
// It returns the DNS port.
func startShippedCoreDNS(tb testing.TB, bin, file, kubeconfig, kubeKubeconfig, node string) int {
	return startShippedCoreDNSEdited(tb, bin, file, kubeconfig, kubeKubeconfig, node, nil)
}

// startShippedCoreDNSEdited is startShippedCoreDNS with edit applied to the
// Corefile last (another build's Corefile).
func startShippedCoreDNSEdited(tb testing.TB, bin, file, kubeconfig, kubeKubeconfig, node string, edit func(string) string) int {
	if kubeKubeconfig == "" {
		kubeKubeconfig = kubeconfig
	}
	tb.Helper()
	// go test runs a package's tests and benchmarks in its directory
	// (runtime.Caller names no file under -trimpath, make test's setting).
	data, err := os.ReadFile(filepath.Join("..", "corefile", file))
	if err != nil {
		tb.Fatal(err)
	}
	port, health, ready, prom := testcoredns.FreePort(tb), testcoredns.FreePort(tb), testcoredns.FreePort(tb), testcoredns.FreePort(tb)
	text := string(data)
	kubernetesKubeconfig := [2]string{"kubernetes cluster.local in-addr.arpa ip6.arpa {", "kubernetes cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig " + kubeKubeconfig}
	// Corefile.node: gridhosts' Services and EndpointSlices and the
	// kubernetes plugin read the wrapper's DNS view.
	servicesKubeconfig := [2]string{}
	if strings.Contains(text, nodeDNSKubeconfigLine) {
		kubernetesKubeconfig = [2]string{" " + nodeDNSKubeconfigLine, " kubeconfig " + kubeKubeconfig}
		servicesKubeconfig = [2]string{"services_" + nodeDNSKubeconfigLine, "services_kubeconfig " + kubeKubeconfig}
	}
	for _, r := range [][2]string{
		{".:53 {", fmt.Sprintf(".:%d {\n    bind 127.0.0.1", port)},
		{"    bind 169.254.20.10\n", ""},
		{"health {", fmt.Sprintf("health 127.0.0.1:%d {", health)},
		{"health 127.0.0.1:8180 {", fmt.Sprintf("health 127.0.0.1:%d {", health)},
		{"    ready\n", fmt.Sprintf("    ready 127.0.0.1:%d\n", ready)},
		{"    ready 127.0.0.1:8181\n", fmt.Sprintf("    ready 127.0.0.1:%d\n", ready)},
		{"prometheus 127.0.0.1:9153", fmt.Sprintf("prometheus 127.0.0.1:%d", prom)},
		{"prometheus 127.0.0.1:9180", fmt.Sprintf("prometheus 127.0.0.1:%d", prom)},
		{"gridhosts cluster.local {", "gridhosts cluster.local {\n        kubeconfig " + kubeconfig},
		servicesKubeconfig,
		kubernetesKubeconfig,
		{"forward . /etc/resolv.conf", "forward . 127.0.0.1:9"},
		{"snapshot /var/lib/coredns-gridhosts/gridhosts.snapshot", "snapshot " + filepath.Join(tb.TempDir(), "gridhosts.snapshot")},
	} {
		text = strings.Replace(text, r[0], r[1], 1)
	}
	if edit != nil {
		text = edit(text)
	}
	testcoredns.Start(tb, bin, text, fmt.Sprintf("http://127.0.0.1:%d/ready", ready), "NODE_NAME="+node)
	return port
}

// edgeLink is one client's link to the apiserver, counted twice: the
// response bodies as client-go decodes them, and what crosses the wire
// (TLS records, HTTP/2 frames, both directions).
type edgeLink struct {
	body *byteCounter
	wire *wireCounter
}

func newEdgeLink() *edgeLink {
	return &edgeLink{body: &byteCounter{bytes: map[string]int64{}}, wire: newWireCounter()}
}

// wrap is cfg through both counters.
func (l *edgeLink) wrap(tb testing.TB, cfg *rest.Config) *rest.Config {
	return l.body.wrap(l.wire.wrap(tb, cfg))
}

// proxy is a kubeconfig for a process (CoreDNS) whose requests reach the
// apiserver through both counters: countingAPIProxy's one HTTP/2
// connection carries them as client-go in the process would.
func (l *edgeLink) proxy(tb testing.TB, cfg *rest.Config) string {
	return countingAPIProxy(tb, l.wire.wrap(tb, cfg), l.body)
}

func (l *edgeLink) bodies() int64 {
	l.body.mu.Lock()
	defer l.body.mu.Unlock()
	var n int64
	for _, v := range l.body.bytes {
		n += v
	}
	return n
}

// BenchmarkEdgeNodeFleet: everything the project runs on an edge node, summed.
// The fleet of BenchmarkFleet (one real kube-apiserver with kube-controller-
// manager's endpointslice and endpoints controllers, SG_FLEET_NODES (300)
// Nodes in 6 nodeunits whose kubelets write their Leases and status at
// kubelet's cadence, 100 topology Services with 2 ready pods each, the
// controller's summary writer); on SG_FLEET_DNS_NODES (3) edge nodes the
// real wrapper and the real CoreDNS of corefile/Corefile.node (kubernetes
// and gridhosts' Services and EndpointSlices through the wrapper's DNS
// view, the rest of gridhosts on the apiserver), next to two kube-proxy-
// shaped informer sets pointed straight at the apiserver for the same
// nodes (one on its first watch, a compressed watch-list, one as it reads
// on the watches after it: BenchmarkFleet's two baselines), and one CoreDNS
// of corefile/Corefile.clients (the clients mode's one shared server). A
// StatefulSetGrid with a child and 3 pods per nodeunit, its headless grid
// Service and a headless topology Service give the changes the node's DNS
// answers depend on. Per kind of event, bytes each exchanged with the
// apiserver: decoded response bodies, and on the wire (below TLS, both
// directions). SG_FLEET_OLD_COREDNS=PATH runs another build's CoreDNS (an
// older commit) beside each node's, with Corefile.node as that build had
// it (no services_kubeconfig), counted apart: before and after in one run.
func BenchmarkEdgeNodeFleet(b *testing.B) {
	b.Cleanup(testbin.Cleanup)
	benchRec := benchrecord.Start(b, "docs/benchmarks/wrapper-fleet.md")
	nodesN, edgeN := envInt("SG_FLEET_NODES", 300), envInt("SG_FLEET_DNS_NODES", 3)
	const units, servicesN, churn = fleetUnits, 100, 20
	bin := testbin.Path(b, "coredns")
	f := startFleet(b, nodesN, servicesN)
	kubelets := startKubelets(b, f)
	grids := startFleetGrids(b, f)
	cp, admin, ctx := f.cp, f.admin, b.Context()
	oldBin := os.Getenv("SG_FLEET_OLD_COREDNS")
	withoutServicesKubeconfig := func(text string) string {
		var out []string
		for _, l := range strings.Split(text, "\n") {
			if f := strings.Fields(l); len(f) == 0 || f[0] != "services_kubeconfig" {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	nodeName, unitOf := fleetNodeName, fleetUnitOf

	// Edge nodes outside nodeunit 5, where the churn happens.
	var edge []int
	for i := 0; i < nodesN && len(edge) < edgeN; i++ {
		if unitOf(i) != units-1 {
			edge = append(edge, i)
		}
	}
	isEdge := func(i int) bool { return slices.Contains(edge, i) }
	// The edge nodes' own kubelets report no status while their bytes are
	// counted: each report reaches the node's wrapper and both kube-proxies
	// (all watch their own Node): a whole Node in a window of 20 events,
	// against the zero rows' bound of 10 bytes an event (goals.md), at
	// random. The status row changes other nodes only; nothing on an edge
	// node watches Leases, so they go on.
	defer kubelets.holdStatus(isEdge)()
	links := func() []*edgeLink {
		ls := make([]*edgeLink, len(edge))
		for x := range ls {
			ls[x] = newEdgeLink()
		}
		return ls
	}
	viaWrapper, nodeDNS, direct, rewatch := links(), links(), links(), links()
	var oldDNS []*edgeLink
	var synced []func() bool
	for x, i := range edge {
		w := startWrapper(b, cp, nodeName(i), "", wrapper.Options{Upstream: viaWrapper[x].wrap(b, cp.Config)})
		// The kubernetes plugin and gridhosts' Services and EndpointSlices
		// read the wrapper's DNS view: their bytes from the apiserver are
		// the wrapper's.
		startShippedCoreDNS(b, bin, "Corefile.node", nodeDNS[x].proxy(b, cp.Config),
			plainKubeconfig(b, "http://"+w.addr+wrapper.DNSPathPrefix), nodeName(i))
		if oldBin != "" {
			l := newEdgeLink()
			oldDNS = append(oldDNS, l)
			startShippedCoreDNSEdited(b, oldBin, "Corefile.node", l.proxy(b, cp.Config),
				plainKubeconfig(b, "http://"+w.addr+wrapper.DNSPathPrefix), nodeName(i), withoutServicesKubeconfig)
		}
		s, _ := kubeProxyInformers(b, direct[x].wrap(b, cp.Config), nodeName(i))
		c := kubernetes.NewForConfigOrDie(kubeProxyConfig(rewatch[x].wrap(b, cp.Config)))
		r, _ := kubeProxyInformersOf(b, rewatchingKubeProxy{c}, nodeName(i))
		synced = append(synced, s, r)
	}
	shared := []*edgeLink{newEdgeLink()}
	startShippedCoreDNS(b, bin, "Corefile.clients", shared[0].proxy(b, cp.Config), "", "")
	eventually(b, "kube-proxy-shaped informers synced", 5*time.Minute, func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	total := func(ls []*edgeLink, wire bool) int64 {
		var n int64
		for _, l := range ls {
			if wire {
				n += l.wire.total()
			} else {
				n += l.bodies()
			}
		}
		return n
	}
	// settle waits until the compared counters have moved by no more than
	// BOOKMARKs and health pings for 3 s: every edge node has received what
	// the changes sent it. The clients-mode CoreDNS is left out: it watches
	// every Node, and the kubelets' background status reports (one a second
	// at 300 nodes) never let it rest; its figures hold its share of them.
	compared := slices.Concat(viaWrapper, nodeDNS, direct, rewatch, oldDNS)
	settle := func(what string) {
		start, last, still := time.Now(), int64(-1), 0
		for still < 6 {
			time.Sleep(500 * time.Millisecond)
			cur := total(compared, false) + total(compared, true)
			if last >= 0 && cur-last < 4096 {
				still++
			} else {
				still = 0
			}
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("%s: the edge nodes' counters still move by %d bytes each half second after 5 minutes", what, cur-last)
			}
			last = cur
		}
	}
	settle("initial sync")
	perNode := func(ls []*edgeLink, wire bool) float64 {
		if len(ls) == 0 {
			return 0
		}
		return float64(total(ls, wire)) / float64(len(ls))
	}
	type figures struct{ direct, rewatch, wrapper, dns, shared, oldDNS float64 }
	now := func(wire bool) figures {
		return figures{perNode(direct, wire), perNode(rewatch, wire), perNode(viaWrapper, wire), perNode(nodeDNS, wire),
			perNode(shared, wire), perNode(oldDNS, wire)}
	}
	b.Logf("%d nodes, %d Services, %d edge nodes with wrapper and CoreDNS (node mode), 1 CoreDNS in clients mode; load average %s",
		nodesN, servicesN, len(edge), loadAverage())
	// Below 10 bytes an event is BOOKMARK noise: nothing.
	ratio := func(d, w float64) string {
		switch {
		case d >= 10:
			return fmt.Sprintf("%.3fx", w/d)
		case w >= 10:
			return "more"
		}
		return "-"
	}
	b.Logf("bytes per edge node and event; direct: kube-proxy straight to the apiserver on its first watch (a compressed watch-list), rewatch: on its later plain watches; edge node: wrapper + node CoreDNS; clients-mode CoreDNS: its window holds its share of the kubelets' background status reports")
	line := func(kind string, body, wire figures) {
		unit := strings.ReplaceAll(kind, " ", "-")
		for _, side := range []struct {
			what   string
			f      figures
			suffix string
		}{{"bodies", body, "-B/"}, {"wire", wire, "-wire-B/"}} {
			f, sum := side.f, side.f.wrapper+side.f.dns
			before := ""
			if oldBin != "" {
				before = fmt.Sprintf(" | before: node CoreDNS %8.0f, edge node %8.0f", f.oldDNS, f.wrapper+f.oldDNS)
				b.ReportMetric(f.oldDNS, "old-node-coredns"+side.suffix+unit)
				b.ReportMetric(f.wrapper+f.oldDNS, "old-edge-node"+side.suffix+unit)
			}
			b.Logf("%-52s %-6s direct %8.0f, rewatch %8.0f | wrapper %8.0f + node CoreDNS %8.0f = edge node %8.0f (%s direct, %s rewatch)%s | clients-mode CoreDNS %8.0f",
				kind, side.what, f.direct, f.rewatch, f.wrapper, f.dns, sum, ratio(f.direct, sum), ratio(f.rewatch, sum), before, f.shared)
			benchRec.Report(f.direct, "direct"+side.suffix+unit)
			benchRec.Report(sum, "edge-node"+side.suffix+unit)
			if side.what == "wire" {
				benchRec.Report(f.rewatch, "rewatch"+side.suffix+unit)
				benchRec.Report(f.wrapper, "wrapper"+side.suffix+unit)
				benchRec.Report(f.dns, "node-coredns"+side.suffix+unit)
			} else {
				b.ReportMetric(f.rewatch, "rewatch"+side.suffix+unit)
				b.ReportMetric(f.wrapper, "wrapper"+side.suffix+unit)
				b.ReportMetric(f.dns, "node-coredns"+side.suffix+unit)
			}
			b.ReportMetric(f.shared, "clients-coredns"+side.suffix+unit)
		}
	}
	line("initial sync", now(false), now(true))
	report := func(kind string, events int, change func()) {
		before, beforeWire := now(false), now(true)
		change()
		settle(kind)
		per := func(a, b figures) figures {
			e := float64(events)
			return figures{(a.direct - b.direct) / e, (a.rewatch - b.rewatch) / e, (a.wrapper - b.wrapper) / e, (a.dns - b.dns) / e,
				(a.shared - b.shared) / e, (a.oldDNS - b.oldDNS) / e}
		}
		line(kind, per(now(false), before), per(now(true), beforeWire))
	}
	notEdge := func(i int) bool { return !isEdge(i) }
	for range b.N {
		report("another node's status report", nodesN-len(edge), func() { f.statusRound(b, notEdge) })
		report("another node's Lease renewal", nodesN-len(edge), func() { kubelets.leaseRound(b, notEdge) })
		report("a non-topology label change on another node", churn, func() {
			for k := range churn {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/rack":"r%d-%d"}}}`, k, time.Now().UnixNano())
				if _, err := admin.CoreV1().Nodes().Patch(ctx, nodeName(units-1+(k%(nodesN/units))*units), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		report("an endpoint change in another nodeunit", churn, func() {
			for k := range churn {
				// Pods on nodes of nodeunit 5, which holds no edge node.
				f.addPod(b, k, units-1+((k*5)%(nodesN/units))*units)
			}
		})
		report("a Service change", churn, func() { f.touchServices(b, churn) })
		report("a StatefulSet pod status change in another nodeunit", churn, func() { grids.podStatusChanges(b, units-1, churn) })
		report("a headless endpoint change in another nodeunit", churn, func() {
			grids.headlessEndpointChanges(b, units-1, churn)
			// gridhosts writes its changed index's snapshot at most every
			// DefaultWriteInterval, probing the apiserver's /version first:
			// that probe is this row's, not the next (a zero row's).
			time.Sleep(snapshottrust.DefaultWriteInterval)
		})
		report("a child StatefulSet status change in another nodeunit", churn, func() { grids.childStatusChanges(b, units-1, churn) })
	}
}
