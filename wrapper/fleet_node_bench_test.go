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
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

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
	_, self, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "corefile", file))
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

// BenchmarkEdgeNodeFleet: everything the project runs on an edge node, summed.
// The fleet of BenchmarkFleet (one real kube-apiserver with kube-controller-
// manager's endpointslice and endpoints controllers, SG_FLEET_NODES (300)
// Nodes in 6 nodeunits with kubelet-sized status, 100 topology Services with
// 2 ready pods each, the controller's summary writer); on SG_FLEET_DNS_NODES
// (3) edge nodes the real wrapper and the real CoreDNS of
// corefile/Corefile.node (kubernetes and gridhosts' Services and
// EndpointSlices through the wrapper's DNS view, the rest of gridhosts on
// the apiserver), next to kube-proxy-shaped informers pointed straight
// at the apiserver for the same nodes, and
// one CoreDNS of corefile/Corefile.clients (the clients mode's one shared
// server). A StatefulSetGrid with a child and 3 pods per nodeunit, its
// headless grid Service and a headless topology Service give the changes
// the node's DNS answers depend on. Per kind of event, bytes each received
// from the apiserver. SG_FLEET_OLD_COREDNS=PATH runs another build's CoreDNS
// (an older commit) beside each node's, with Corefile.node as that build had
// it (no services_kubeconfig), counted apart: before and after in one run.
func BenchmarkEdgeNodeFleet(b *testing.B) {
	b.Cleanup(testbin.Cleanup)
	nodesN, edgeN := envInt("SG_FLEET_NODES", 300), envInt("SG_FLEET_DNS_NODES", 3)
	const units, servicesN, churn = fleetUnits, 100, 20
	bin := testbin.Path(b, "coredns")
	f := startFleet(b, nodesN, servicesN)
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
	newCounter := func() *byteCounter { return &byteCounter{bytes: map[string]int64{}} }
	viaWrapper, nodeDNS, direct := make([]*byteCounter, len(edge)), make([]*byteCounter, len(edge)), make([]*byteCounter, len(edge))
	var oldDNS []*byteCounter
	var directSynced []func() bool
	for x, i := range edge {
		viaWrapper[x], nodeDNS[x], direct[x] = newCounter(), newCounter(), newCounter()
		w := startWrapper(b, cp, nodeName(i), "", wrapper.Options{Upstream: viaWrapper[x].wrap(cp.Config)})
		// The kubernetes plugin reads the wrapper's DNS view: its bytes
		// from the apiserver are the wrapper's.
		startShippedCoreDNS(b, bin, "Corefile.node", countingAPIProxy(b, cp.Config, nodeDNS[x]),
			plainKubeconfig(b, "http://"+w.addr+wrapper.DNSPathPrefix), nodeName(i))
		if oldBin != "" {
			c := newCounter()
			oldDNS = append(oldDNS, c)
			startShippedCoreDNSEdited(b, oldBin, "Corefile.node", countingAPIProxy(b, cp.Config, c),
				plainKubeconfig(b, "http://"+w.addr+wrapper.DNSPathPrefix), nodeName(i), withoutServicesKubeconfig)
		}
		synced, _ := kubeProxyInformers(b, direct[x].wrap(cp.Config), nodeName(i))
		directSynced = append(directSynced, synced)
	}
	shared := []*byteCounter{newCounter()}
	startShippedCoreDNS(b, bin, "Corefile.clients", countingAPIProxy(b, cp.Config, shared[0]), "", "")
	eventually(b, "kube-proxy-shaped informers synced", 5*time.Minute, func(context.Context) (bool, error) {
		for _, s := range directSynced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	total := func(cs []*byteCounter) int64 {
		var n int64
		for _, c := range cs {
			c.mu.Lock()
			for _, v := range c.bytes {
				n += v
			}
			c.mu.Unlock()
		}
		return n
	}
	all := slices.Concat(viaWrapper, nodeDNS, direct, shared, oldDNS)
	// settle waits until the counters have moved by no more than BOOKMARKs
	// for 3s: every client has received what the changes sent it.
	settle := func() {
		last, still := int64(-1), 0
		for still < 6 {
			time.Sleep(500 * time.Millisecond)
			cur := total(all)
			if last >= 0 && cur-last < 4096 {
				still++
			} else {
				still = 0
			}
			last = cur
		}
	}
	settle()
	perNode := func(cs []*byteCounter) float64 {
		if len(cs) == 0 {
			return 0
		}
		return float64(total(cs)) / float64(len(cs))
	}
	type figures struct{ direct, wrapper, dns, shared, oldDNS float64 }
	now := func() figures {
		return figures{perNode(direct), perNode(viaWrapper), perNode(nodeDNS), perNode(shared), perNode(oldDNS)}
	}
	b.Logf("%d nodes, %d Services, %d edge nodes with wrapper and CoreDNS (node mode), 1 CoreDNS in clients mode", nodesN, servicesN, len(edge))
	line := func(kind string, f figures) {
		sum := f.wrapper + f.dns
		ratio := "-"
		if f.direct > 0 {
			ratio = fmt.Sprintf("%.2fx", sum/f.direct)
		}
		before := ""
		if oldBin != "" {
			before = fmt.Sprintf(" | before: node CoreDNS %8.0f B, edge node %8.0f B", f.oldDNS, f.wrapper+f.oldDNS)
			b.ReportMetric(f.oldDNS, "old-node-coredns-B/"+strings.ReplaceAll(kind, " ", "-"))
		}
		b.Logf("%-52s kube-proxy direct %8.0f B | wrapper %8.0f B + node CoreDNS %8.0f B = edge node %8.0f B (%s)%s | clients-mode CoreDNS %8.0f B",
			kind, f.direct, f.wrapper, f.dns, sum, ratio, before, f.shared)
		unit := strings.ReplaceAll(kind, " ", "-")
		b.ReportMetric(f.direct, "direct-B/"+unit)
		b.ReportMetric(sum, "edge-node-B/"+unit)
		b.ReportMetric(f.dns, "node-coredns-B/"+unit)
		b.ReportMetric(f.shared, "clients-coredns-B/"+unit)
	}
	line("initial sync", now())
	report := func(kind string, events int, change func()) {
		before := now()
		change()
		settle()
		after := now()
		per := func(a, b float64) float64 { return (a - b) / float64(events) }
		line(kind, figures{per(after.direct, before.direct), per(after.wrapper, before.wrapper), per(after.dns, before.dns), per(after.shared, before.shared), per(after.oldDNS, before.oldDNS)})
	}
	for range b.N {
		report("another node's status report", nodesN-len(edge), func() {
			f.statusRound(b, func(i int) bool { return !slices.Contains(edge, i) })
		})
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
		report("a headless endpoint change in another nodeunit", churn, func() { grids.headlessEndpointChanges(b, units-1, churn) })
		report("a child StatefulSet status change in another nodeunit", churn, func() { grids.childStatusChanges(b, units-1, churn) })
	}
}
