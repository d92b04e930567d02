package gridhosts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testcoredns"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The integration tests run the real CoreDNS binary of cmd/coredns against a
// real kube-apiserver and query it over UDP and TCP on loopback.

func TestMain(m *testing.M) { testbin.Main(m, stopSharedWorld) }

// coreDNSBinary is the CoreDNS command of cmd/coredns.
func coreDNSBinary(t testing.TB) string {
	t.Helper()
	return testbin.Path(t, "coredns")
}

// The CoreDNS processes of these tests (internal/testcoredns).
type coreDNS = testcoredns.Process

var (
	freePort     = testcoredns.FreePort
	startCoreDNS = testcoredns.Start
)

// pollFloor is the least any poll waits: the bound only ends a failing test,
// and the cluster tests run in parallel on busy 2-core machines.
const pollFloor = 2 * time.Minute

// poll calls f until it returns nil or max(timeout, pollFloor) passes.
func poll(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	timeout = max(timeout, pollFloor)
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// query asks server over network ("udp"/"tcp") from source address src
// ("" = any) and returns rcode and the answer's addresses, sorted.
func query(network, src, server, name string, qtype uint16) (int, []string, error) {
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	if src != "" {
		ip := net.ParseIP(src)
		if network == "tcp" {
			c.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 2 * time.Second}
		} else {
			c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: ip}, Timeout: 2 * time.Second}
		}
	}
	m := new(dns.Msg).SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, server)
	if err != nil {
		return 0, nil, err
	}
	var out []string
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.AAAA:
			out = append(out, v.AAAA.String())
		case *dns.SRV:
			out = append(out, fmt.Sprintf("%d %s", v.Port, v.Target))
		}
	}
	slices.Sort(out)
	return r.Rcode, out, nil
}

// expect polls until name answers want (nil = NXDOMAIN) over UDP and TCP.
func expect(t testing.TB, src, server, name string, qtype uint16, want ...string) {
	t.Helper()
	slices.Sort(want)
	poll(t, 30*time.Second, fmt.Sprintf("%s %s from %q at %s", dns.TypeToString[qtype], name, src, server), func() error {
		for _, network := range []string{"udp", "tcp"} {
			rcode, got, err := query(network, src, server, name, qtype)
			if err != nil {
				return err
			}
			if want == nil {
				if rcode != dns.RcodeNameError {
					return fmt.Errorf("%s: rcode %s %v, want NXDOMAIN", network, dns.RcodeToString[rcode], got)
				}
				continue
			}
			if rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
				return fmt.Errorf("%s: rcode %s %v, want %v", network, dns.RcodeToString[rcode], got, want)
			}
		}
		return nil
	})
}

// expectNoData polls until server answers name of qtype from src with
// NOERROR and no answer (NODATA), over UDP and TCP.
func expectNoData(t testing.TB, src, server, name string, qtype uint16) {
	t.Helper()
	poll(t, 30*time.Second, fmt.Sprintf("NODATA for %s %s from %q at %s", dns.TypeToString[qtype], name, src, server), func() error {
		for _, network := range []string{"udp", "tcp"} {
			rcode, got, err := query(network, src, server, name, qtype)
			if err != nil {
				return err
			}
			if rcode != dns.RcodeSuccess || len(got) != 0 {
				return fmt.Errorf("%s: rcode %s %v, want NOERROR without answers", network, dns.RcodeToString[rcode], got)
			}
		}
		return nil
	})
}

type cluster struct {
	kube  kubernetes.Interface
	grids versioned.Interface
	cp    *controlplane.ControlPlane
}

func startCluster(t testing.TB) *cluster {
	return startClusterWith(t, controlplane.Options{})
}

// startClusterWith starts a control plane with opts and installs the CRDs.
func startClusterWith(t testing.TB, opts controlplane.Options) *cluster {
	opts.CRDs = true
	cp := controlplane.StartForTest(t, opts)
	return &cluster{kube: kubernetes.NewForConfigOrDie(cp.Config), grids: versioned.NewForConfigOrDie(cp.Config), cp: cp}
}

// must(call())(t) fails t when call returned an error.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// createPod creates pod and fills its status as a kubelet would.
func (c *cluster) createPod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	status := pod.Status
	pod = pod.DeepCopy()
	pod.Status = corev1.PodStatus{}
	pod.UID = ""
	created := must(c.kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}))(t)
	created.Status = status
	return must(c.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}))(t)
}

func (c *cluster) setPodIPs(t testing.TB, ns, name string, ips ...string) {
	t.Helper()
	ctx := context.Background()
	p := must(c.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}))(t)
	setPodIPs(p, ips...)
	must(c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}))(t)
}

// seedDemo creates SuperEdge's StatefulSetGrid example: three nodeunits of
// zone1, one StatefulSet each owned by the grid, three pods each.
func (c *cluster) seedDemo(t testing.TB) {
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		must(c.kube.CoreV1().Nodes().Create(ctx, newNode(fmt.Sprintf("node-%d", i),
			map[string]string{"zone1": fmt.Sprintf("nodeunit%d", i)}, fmt.Sprintf("127.0.0.1%d", i)), metav1.CreateOptions{}))(t)
	}
	grid := newGrid("default", "statefulsetgrid-demo", "zone1", "")
	grid.Spec.Template.ServiceName = demoSvc
	grid = must(c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx, grid, metav1.CreateOptions{}))(t)
	must(c.kube.CoreV1().Services("default").Create(ctx, newService("default", demoSvc, "zone1", false), metav1.CreateOptions{}))(t)
	for u := 1; u <= 3; u++ {
		set := newSet(grid, fmt.Sprintf("nodeunit%d", u), demoSvc, "", 3)
		set = must(c.kube.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{}))(t)
		for i := range 3 {
			c.createPod(t, newPod(set, i, fmt.Sprintf("node-%d", u), fmt.Sprintf("10.0.%d.%d", u, i+1)))
		}
	}
	// A plain pod on node-3 whose IP is a loopback address a test client
	// can bind: clients mode maps it to node-3.
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "client"},
		Spec:       corev1.PodSpec{NodeName: "node-3", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x"}}},
	}
	setPodIPs(client, "127.0.0.23")
	c.createPod(t, client)
}

func demoNames(i int) string {
	return fmt.Sprintf("statefulsetgrid-demo-%d.%s.default.svc.cluster.local.", i, demoSvc)
}

func TestCoreDNSAgainstAPIServer(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	bin := coreDNSBinary(t)
	c.seedDemo(t)
	ctx := t.Context()

	// One CoreDNS per node in node mode (as the edge DaemonSet runs it),
	// and one in clients mode serving every nodeunit.
	ports := map[string]int{}
	var dnsd *coreDNS
	metrics := 0
	for _, view := range []string{"node-1", "node-2", "node-3", "clients"} {
		ports[view] = freePort(t)
		ready := freePort(t)
		mode := "node " + view
		if view == "clients" {
			mode = "clients"
		}
		corefile := fmt.Sprintf("cluster.local:%d {\n  bind 127.0.0.1\n  ready 127.0.0.1:%d\n  gridhosts {\n    kubeconfig %s\n    %s\n    ttl 5\n  }\n",
			ports[view], ready, c.cp.Kubeconfig, mode)
		if view == "node-1" {
			metrics = freePort(t)
			corefile += fmt.Sprintf("  prometheus 127.0.0.1:%d\n  reload 2s 1s\n", metrics)
		}
		corefile += "}\n"
		p := startCoreDNS(t, bin, corefile, fmt.Sprintf("http://127.0.0.1:%d/ready", ready))
		if view == "node-1" {
			dnsd = p
		}
	}
	server := func(view string) string { return fmt.Sprintf("127.0.0.1:%d", ports[view]) }

	t.Run("each nodeunit gets its own pods", func(t *testing.T) {
		for u := 1; u <= 3; u++ {
			for i := range 3 {
				expect(t, "", server(fmt.Sprintf("node-%d", u)), demoNames(i), dns.TypeA, fmt.Sprintf("10.0.%d.%d", u, i+1))
			}
		}
		expect(t, "", server("node-1"), demoNames(3), dns.TypeA) // no such ordinal
		rcode, got, err := query("udp", "", server("node-1"), demoNames(0), dns.TypeAAAA)
		if err != nil || rcode != dns.RcodeSuccess || len(got) != 0 {
			t.Fatalf("AAAA of a v4-only pod: %s %v %v, want NODATA", dns.RcodeToString[rcode], got, err)
		}
	})

	t.Run("clients mode answers per source address", func(t *testing.T) {
		expect(t, "127.0.0.11", server("clients"), demoNames(0), dns.TypeA, "10.0.1.1") // node-1 InternalIP
		expect(t, "127.0.0.12", server("clients"), demoNames(1), dns.TypeA, "10.0.2.2") // node-2 InternalIP
		expect(t, "127.0.0.23", server("clients"), demoNames(2), dns.TypeA, "10.0.3.3") // a pod on node-3
		expect(t, "127.0.0.99", server("clients"), demoNames(0), dns.TypeA)             // unknown: NXDOMAIN
	})

	t.Run("pod IP change", func(t *testing.T) {
		c.setPodIPs(t, "default", "statefulsetgrid-demo-nodeunit1-0", "10.0.1.100")
		expect(t, "", server("node-1"), demoNames(0), dns.TypeA, "10.0.1.100")
		expect(t, "127.0.0.11", server("clients"), demoNames(0), dns.TypeA, "10.0.1.100")
		expect(t, "", server("node-2"), demoNames(0), dns.TypeA, "10.0.2.1")
	})

	t.Run("pod delete", func(t *testing.T) {
		if err := c.kube.CoreV1().Pods("default").Delete(ctx, "statefulsetgrid-demo-nodeunit1-2", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		expect(t, "", server("node-1"), demoNames(2), dns.TypeA)
		expect(t, "", server("node-2"), demoNames(2), dns.TypeA, "10.0.2.3")
	})

	t.Run("service relabel", func(t *testing.T) {
		svc := must(c.kube.CoreV1().Services("default").Get(ctx, demoSvc, metav1.GetOptions{}))(t)
		svc.Labels[superedgev1.LabelGridUniqKey] = "zone9"
		svc = must(c.kube.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))(t)
		expect(t, "", server("node-2"), demoNames(1), dns.TypeA)
		svc.Labels[superedgev1.LabelGridUniqKey] = "zone1"
		must(c.kube.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))(t)
		expect(t, "", server("node-2"), demoNames(1), dns.TypeA, "10.0.2.2")
	})

	t.Run("node relabel", func(t *testing.T) {
		node := must(c.kube.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}))(t)
		node.Labels["zone1"] = "nodeunit2"
		node = must(c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}))(t)
		expect(t, "", server("node-1"), demoNames(0), dns.TypeA, "10.0.2.1")
		expect(t, "127.0.0.11", server("clients"), demoNames(0), dns.TypeA, "10.0.2.1")
		node.Labels["zone1"] = "nodeunit1"
		must(c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}))(t)
		expect(t, "", server("node-1"), demoNames(0), dns.TypeA, "10.0.1.100")
	})

	t.Run("statefulset delete", func(t *testing.T) {
		if err := c.kube.AppsV1().StatefulSets("default").Delete(ctx, "statefulsetgrid-demo-nodeunit3", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
			t.Fatal(err)
		}
		// Without a garbage collector the orphaning delete leaves it
		// half-deleted (deletionTimestamp + orphan finalizer): not served.
		expect(t, "", server("node-3"), demoNames(0), dns.TypeA)
		expect(t, "", server("node-1"), demoNames(0), dns.TypeA, "10.0.1.100")
		// Deleted for good; its pods remain but are no longer served.
		if err := c.kube.AppsV1().StatefulSets("default").Delete(ctx, "statefulsetgrid-demo-nodeunit2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		expect(t, "", server("node-2"), demoNames(1), dns.TypeA)
		expect(t, "", server("node-1"), demoNames(0), dns.TypeA, "10.0.1.100")
	})

	t.Run("headless grid service", func(t *testing.T) {
		must(c.kube.CoreV1().Services("default").Create(ctx, newService("default", "hl", "zone1", true), metav1.CreateOptions{}))(t)
		must(c.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, newSlice("default", "hl-1", "hl", 8080,
			testEndpoint{IP: "10.5.1.1", Node: "node-1", Hostname: "hl-a", Ready: true},
			testEndpoint{IP: "10.5.1.2", Node: "node-1", Ready: false},
			testEndpoint{IP: "10.5.2.1", Node: "node-2", Ready: true},
		), metav1.CreateOptions{}))(t)
		expect(t, "", server("node-1"), "hl.default.svc.cluster.local.", dns.TypeA, "10.5.1.1")
		expect(t, "", server("node-2"), "hl.default.svc.cluster.local.", dns.TypeA, "10.5.2.1")
		expect(t, "", server("node-3"), "hl.default.svc.cluster.local.", dns.TypeA, []string{}...) // NODATA
		expect(t, "", server("node-1"), "_http._tcp.hl.default.svc.cluster.local.", dns.TypeSRV, "8080 hl-a.hl.default.svc.cluster.local.")
		expect(t, "", server("node-2"), "_http._tcp.hl.default.svc.cluster.local.", dns.TypeSRV, "8080 10-5-2-1.hl.default.svc.cluster.local.")
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{
			`coredns_gridhosts_requests_total{result="answer"}`,
			`coredns_gridhosts_requests_total{result="nxdomain"}`,
			"coredns_gridhosts_records_served_total",
			"coredns_gridhosts_event_to_answerable_seconds_count",
		} {
			if !bytes.Contains(body, []byte(want)) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})

	t.Run("reload keeps serving", func(t *testing.T) {
		// Change the TTL of every block; keep querying while CoreDNS reloads.
		// Written aside and renamed into place: the reload plugin reads the
		// file on its own schedule, and a read between os.WriteFile's
		// truncation and its write reloads an empty Corefile (CoreDNS's
		// default server, this one's port closed).
		data := must(os.ReadFile(dnsd.Corefile))(t)
		next := dnsd.Corefile + ".next"
		if err := os.WriteFile(next, bytes.ReplaceAll(data, []byte("ttl 5"), []byte("ttl 7")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(next, dnsd.Corefile); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		failures, ok := 0, 0
		for {
			m := new(dns.Msg).SetQuestion(demoNames(0), dns.TypeA)
			r, err := dns.Exchange(m, server("node-1"))
			switch {
			case err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1:
				failures++
			case r.Answer[0].Header().Ttl == 7:
				ok++
			}
			if ok >= 20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("reload not seen within 30s (%d failures)", failures)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// A reload swaps servers; a query in flight at that moment may be
		// lost, but the new instance must answer right away.
		if failures > 2 {
			t.Fatalf("%d failed queries across a reload", failures)
		}
		expect(t, "127.0.0.11", server("clients"), demoNames(1), dns.TypeA, "10.0.1.2")
	})

	t.Run("shipped corefiles work beside kubernetes", func(t *testing.T) {
		for _, file := range []string{"Corefile.node", "Corefile.clients"} {
			runShipped(t, c, bin, file)
		}
	})
}

// runShipped runs one of corefile/ with only addresses and credentials
// changed, and checks gridhosts answers grid names while kubernetes still
// answers the rest.
func runShipped(t *testing.T, c *cluster, bin, file string) {
	sc := testcoredns.ShippedCorefile(t, file, c.cp.Kubeconfig, c.cp.Kubeconfig)
	text, port, ready, snapshot, wantSnapshot := sc.Text, sc.Port, sc.Ready, sc.Snapshot, sc.WantSnapshot
	startCoreDNS(t, bin, text, fmt.Sprintf("http://127.0.0.1:%d/ready", ready), "NODE_NAME=node-1")
	server := fmt.Sprintf("127.0.0.1:%d", port)
	if !strings.Contains(file, "clients") {
		expect(t, "", server, demoNames(0), dns.TypeA, "10.0.1.100")
	}
	expect(t, "", server, "kubernetes.default.svc.cluster.local.", dns.TypeA, "10.96.0.1")
	expect(t, "", server, "nothing.default.svc.cluster.local.", dns.TypeA)
	if strings.Contains(file, "clients") {
		// node-3's StatefulSet is half-deleted by now: its client gets
		// nothing; node-1's gets node-1's pod; a client the server cannot
		// place goes on to kubernetes, which knows no unified name.
		expect(t, "127.0.0.23", server, demoNames(0), dns.TypeA)
		expect(t, "127.0.0.11", server, demoNames(0), dns.TypeA, "10.0.1.100")
		expect(t, "127.0.0.99", server, demoNames(0), dns.TypeA)
	}
	if wantSnapshot {
		poll(t, 30*time.Second, "snapshot written by the shipped Corefile", func() error {
			_, err := os.Stat(snapshot)
			return err
		})
	}
}

// TestInProcessInformers runs the plugin's own informers in this process
// (so the race detector sees them) against the real apiserver: queries run
// while pod addresses change, and stop ends every informer goroutine.
func TestInProcessInformers(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	g := New([]string{"cluster.local."})
	g.Clients = true
	g.ClientConfig = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.cp.Kubeconfig}, &clientcmd.ConfigOverrides{})
	cfg := must(g.restConfig())(t)
	if err := g.watch(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			g.stop()
		}
	})
	poll(t, 30*time.Second, "ready", func() error {
		if !g.Ready() {
			return fmt.Errorf("not synced")
		}
		return nil
	})

	ask := func(remote string) []string { return aRecords(g, remote, demoNames(0)) }
	if got := ask("127.0.0.12"); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Fatalf("node-2 client got %v", got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, remote := range []string{"127.0.0.11", "127.0.0.12", "127.0.0.23", "127.0.0.99"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				ask(remote)
			}
		}()
	}
	var last string
	for i := range 20 {
		last = fmt.Sprintf("10.0.1.%d", 200+i)
		c.setPodIPs(t, "default", "statefulsetgrid-demo-nodeunit1-0", last)
	}
	poll(t, 30*time.Second, "last address", func() error {
		if got := ask("127.0.0.11"); !slices.Equal(got, []string{last}) {
			return fmt.Errorf("got %v, want %s", got, last)
		}
		return nil
	})
	cancel()
	wg.Wait()

	g.stop()
	stopped = true
	select {
	case <-g.watcher.Stopped():
	default:
		t.Fatal("informer goroutine still running after stop")
	}
}

// TestHeadlessWithEndpointSliceController lets kube-controller-manager
// build the EndpointSlices of a headless grid Service from real pods: the
// slices it writes must reach the plugin's (label-filtered) informer.
func TestHeadlessWithEndpointSliceController(t *testing.T) {
	t.Parallel() // its own control plane
	c := startClusterWith(t, controlplane.Options{ControllerManager: true})
	ctx := t.Context()
	for i := 1; i <= 2; i++ {
		must(c.kube.CoreV1().Nodes().Create(ctx, newNode(fmt.Sprintf("node-%d", i),
			map[string]string{"zone1": fmt.Sprintf("nodeunit%d", i)}, ""), metav1.CreateOptions{}))(t)
	}
	svc := newService("default", "hl", "zone1", true)
	svc.Spec.Selector = map[string]string{"app": "hl"}
	svc.Spec.Ports[0].TargetPort.IntVal = 8080
	must(c.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}))(t)
	for i := 1; i <= 2; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("hl-%d", i), Labels: map[string]string{"app": "hl"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i), Hostname: fmt.Sprintf("hl-%d", i), Subdomain: "hl",
				Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x"}}},
		}
		setPodIPs(p, fmt.Sprintf("10.7.%d.1", i))
		c.createPod(t, p)
	}

	g := c.startNodeMode(t, "node-1")

	ask := func(name string, qtype uint16) []string {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		g.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(name, qtype))
		var out []string
		if rec.Msg != nil {
			for _, rr := range rec.Msg.Answer {
				switch v := rr.(type) {
				case *dns.A:
					out = append(out, v.A.String())
				case *dns.SRV:
					out = append(out, fmt.Sprintf("%d %s", v.Port, v.Target))
				}
			}
		}
		return out
	}
	for name, want := range map[string][]string{
		"hl.default.svc.cluster.local.":            {"10.7.1.1"},
		"_http._tcp.hl.default.svc.cluster.local.": {"8080 hl-1.hl.default.svc.cluster.local."},
	} {
		qtype := dns.TypeA
		if strings.HasPrefix(name, "_") {
			qtype = dns.TypeSRV
		}
		poll(t, 30*time.Second, name, func() error {
			if got := ask(name, qtype); !slices.Equal(got, want) {
				return fmt.Errorf("got %v, want %v", got, want)
			}
			return nil
		})
	}
}

// aRecords asks g for name's A records as a client at remote ("": the test
// writer's default address) and returns their addresses.
func aRecords(g *GridHosts, remote, name string) []string {
	rec := dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: remote})
	g.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(name, dns.TypeA))
	var out []string
	if rec.Msg != nil {
		for _, rr := range rec.Msg.Answer {
			out = append(out, rr.(*dns.A).A.String())
		}
	}
	return out
}

// startNodeMode starts gridhosts in node mode as node against c, stopped
// when t ends; wraps wrap its clients' transport (to record requests).
func (c *cluster) startNodeMode(t *testing.T, node string, wraps ...transport.WrapperFunc) *GridHosts {
	t.Helper()
	g := New([]string{"cluster.local."})
	g.Node = node
	g.ClientConfig = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.cp.Kubeconfig}, &clientcmd.ConfigOverrides{})
	cfg := must(g.restConfig())(t)
	for _, w := range wraps {
		cfg.Wrap(w)
	}
	if err := g.watch(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stop() })
	return g
}

// askWhile asks g for the demo name without pause while change happens,
// until done holds (polled as what); every answer must be from, then (once
// seen) to, never anything else: a move between nodeunits answers no query
// wrong or not at all on the way.
func askWhile(t *testing.T, g *GridHosts, from, to, what string, change func(), done func() error) {
	t.Helper()
	var (
		stop    atomic.Bool
		asked   atomic.Int64
		sawTo   atomic.Bool
		mu      sync.Mutex
		wrong   []string
		stopped = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		for !stop.Load() {
			got := aRecords(g, "", demoNames(0))
			asked.Add(1)
			switch {
			case slices.Equal(got, []string{from}) && !sawTo.Load():
			case slices.Equal(got, []string{to}):
				sawTo.Store(true)
			case slices.Equal(got, []string{from}):
				mu.Lock()
				wrong = append(wrong, from+" again after "+to)
				mu.Unlock()
			default:
				mu.Lock()
				wrong = append(wrong, fmt.Sprintf("%v", got))
				mu.Unlock()
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	change()
	poll(t, 2*time.Minute, what, done)
	stop.Store(true)
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	if len(wrong) > 0 {
		t.Fatalf("%d of %d answers were wrong or missing, e.g. %v", len(wrong), asked.Load(), wrong[:min(5, len(wrong))])
	}
	t.Logf("%d answers, each %s then %s", asked.Load(), from, to)
}
