package gridhosts

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The "never worse" tests run two CoreDNS side by side: the reference with
// the kubernetes plugin alone, and the same Corefile with gridhosts in
// front. Every name that is not a grid name must get the same answer from
// both, whatever state gridhosts is in.

// nonGridNames are names the kubernetes plugin answers (positively or not)
// and that are no grid names: a Service, a missing one, a headless
// Service's pod hostnames (one that exists, one that does not: the shape
// of a unified name), SRV, the apex, a pod name.
var nonGridNames = []struct {
	name  string
	qtype uint16
}{
	{"kubernetes.default.svc.cluster.local.", dns.TypeA},
	{"nothing.default.svc.cluster.local.", dns.TypeA},
	{"web-0.websvc.default.svc.cluster.local.", dns.TypeA},
	{"web-9.websvc.default.svc.cluster.local.", dns.TypeA},
	{"websvc.default.svc.cluster.local.", dns.TypeA},
	{"_https._tcp.kubernetes.default.svc.cluster.local.", dns.TypeSRV},
	{"cluster.local.", dns.TypeSOA},
	{"10-1-2-3.default.pod.cluster.local.", dns.TypeA},
}

// answerOf is what two servers must agree on: rcode, the answer section,
// and the owner names and types of the authority section (the SOA serial
// is each process's own).
func answerOf(network, server, name string, qtype uint16) (string, error) {
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), server)
	if err != nil {
		return "", err
	}
	var ans, ns []string
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Serial = 0 // each process's own
		}
		ans = append(ans, rr.String())
	}
	for _, rr := range r.Ns {
		ns = append(ns, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
	}
	slices.Sort(ans)
	return fmt.Sprintf("%s answer=%q ns=%q", dns.RcodeToString[r.Rcode], ans, ns), nil
}

// sameAnswers checks, over UDP and TCP, that server answers every non-grid
// name as ref does. Both must have settled: it retries for a while so that
// informers catching up in either process are not mistaken for a
// difference.
func sameAnswers(t *testing.T, ref, server string) {
	t.Helper()
	poll(t, 20*time.Second, "same answers as the kubernetes plugin alone", func() error {
		for _, q := range nonGridNames {
			for _, network := range []string{"udp", "tcp"} {
				want, err := answerOf(network, ref, q.name, q.qtype)
				if err != nil {
					return err
				}
				got, err := answerOf(network, server, q.name, q.qtype)
				if err != nil {
					return err
				}
				if got != want {
					return fmt.Errorf("%s %s %s: got %s, kubernetes alone: %s", network, dns.TypeToString[q.qtype], q.name, got, want)
				}
			}
		}
		return nil
	})
}

// rcodeOf asks over UDP and TCP and returns the rcode both gave.
func rcodeOf(t *testing.T, server, name string, qtype uint16) int {
	t.Helper()
	var codes []int
	for _, network := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: network, Timeout: 2 * time.Second}
		r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), server)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, r.Rcode)
	}
	if codes[0] != codes[1] {
		t.Fatalf("%s: UDP %s, TCP %s", name, dns.RcodeToString[codes[0]], dns.RcodeToString[codes[1]])
	}
	return codes[0]
}

// dnsPair is a reference CoreDNS (kubernetes alone) and one with gridhosts.
type dnsPair struct {
	ref, server string
	ready       string // gridhosts CoreDNS /ready URL
	proc        *coreDNS
}

// startPair runs both CoreDNS; kubernetes uses kubeKubeconfig in both,
// gridhosts gridKubeconfig. It waits until both serve DNS, not for ready.
func startPair(t *testing.T, bin, kubeKubeconfig, gridKubeconfig string) *dnsPair {
	t.Helper()
	kube := fmt.Sprintf("  kubernetes cluster.local {\n    kubeconfig %s\n  }\n", kubeKubeconfig)
	p := &dnsPair{}
	for _, withGrid := range []bool{false, true} {
		port, ready := freePort(t), freePort(t)
		corefile := fmt.Sprintf("cluster.local:%d {\n  bind 127.0.0.1\n  ready 127.0.0.1:%d\n", port, ready)
		if withGrid {
			corefile += fmt.Sprintf("  gridhosts {\n    kubeconfig %s\n    node node-1\n    fallthrough\n  }\n", gridKubeconfig)
		}
		corefile += kube + "}\n"
		server := fmt.Sprintf("127.0.0.1:%d", port)
		proc := startCoreDNSServing(t, bin, corefile, server)
		if withGrid {
			p.server, p.ready, p.proc = server, fmt.Sprintf("http://127.0.0.1:%d/ready", ready), proc
		} else {
			p.ref = server
		}
	}
	return p
}

// startCoreDNSServing runs bin with corefile and waits until server answers
// a query (any rcode): the server is up, ready or not.
func startCoreDNSServing(t *testing.T, bin, corefile, server string) *coreDNS {
	t.Helper()
	// Reuse startCoreDNS's process handling with a readiness probe that
	// only needs DNS to answer.
	probe := newProbe(t, server)
	return startCoreDNS(t, bin, corefile, probe)
}

// newProbe serves an HTTP 200 once server answers DNS at all, for
// startCoreDNS's ready poll.
func newProbe(t *testing.T, server string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c := &dns.Client{Timeout: time.Second}
		if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("cluster.local.", dns.TypeSOA), server); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// readyState returns the ready plugin's status and body.
func readyState(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// expectNotReady checks gridhosts is reported not ready and its log says
// why in exactly one line containing each of want.
func expectNotReady(t *testing.T, p *dnsPair, want ...string) {
	t.Helper()
	code, body := readyState(p.ready)
	if code == http.StatusOK || !strings.Contains(body, pluginName) {
		t.Fatalf("ready: %d %q, want gridhosts listed as not ready", code, body)
	}
	poll(t, 10*time.Second, "one log line saying why", func() error {
		var lines []string
		for _, l := range strings.Split(p.proc.Log.String(), "\n") {
			if strings.Contains(l, "Cannot serve grid names yet") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 {
			return fmt.Errorf("%d lines: %q", len(lines), lines)
		}
		for _, w := range want {
			if !strings.Contains(lines[0], w) {
				return fmt.Errorf("line %q lacks %q", lines[0], w)
			}
		}
		return nil
	})
}

// seedNonGrid creates what nonGridNames resolve against: a headless
// Service with one named endpoint.
func (c *cluster) seedNonGrid(t *testing.T) {
	ctx := t.Context()
	must(c.kube.CoreV1().Services("default").Create(ctx, newService("default", "websvc", "", true), metav1.CreateOptions{}))(t)
	must(c.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, newSlice("default", "websvc-1", "websvc", 80,
		testEndpoint{IP: "10.8.0.1", Node: "node-1", Hostname: "web-0", Ready: true}), metav1.CreateOptions{}))(t)
}

// TestNeverWorseWithoutCRD: the StatefulSetGrid CRD is not installed.
// gridhosts is ready (there can be no unified names; headless grid Services
// still work), says so in one line, and every other name is the kubernetes
// plugin's. Once the CRD and a grid appear, its names are served.
func TestNeverWorseWithoutCRD(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	c := &cluster{cp: cp, kube: kubernetes.NewForConfigOrDie(cp.Config), grids: versioned.NewForConfigOrDie(cp.Config)}
	c.seedNonGrid(t)
	bin := coreDNSBinary(t)
	p := startPair(t, bin, cp.Kubeconfig, cp.Kubeconfig)

	poll(t, 30*time.Second, "gridhosts ready without the CRD", func() error {
		if code, body := readyState(p.ready); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	sameAnswers(t, p.ref, p.server)
	if !strings.Contains(p.proc.Log.String(), "StatefulSetGrid CRD not installed") {
		t.Fatalf("no log line about the missing CRD:\n%s", p.proc.Log.String())
	}

	// Install the CRD and SuperEdge's grid: served once the informer's
	// retry lists it.
	if err := crds.Install(t.Context(), apiextensionsclient.NewForConfigOrDie(cp.Config), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c.seedDemo(t)
	waitDemoAnswer(t, p.server, "unified name after the CRD appears", "10.0.1.1")
	sameAnswers(t, p.ref, p.server)
}

// gridhostsResources are the resources gridhosts reads, as RBAC names them.
var gridhostsResources = []struct{ group, resource string }{
	{"superedge.io", "statefulsetgrids"},
	{"apps", "statefulsets"},
	{"", "pods"},
	{"", "services"},
	{"", "nodes"},
	{"discovery.k8s.io", "endpointslices"},
}

// TestNeverWorseForbidden: CoreDNS runs with a ServiceAccount that may read
// everything it needs but one of gridhosts' resources. gridhosts is not
// ready and says why in one line (but for StatefulSetGrids, which node
// mode does not read: it is ready and serves the unified name); every non-grid name is answered as the
// kubernetes plugin alone answers it with the same account; the unified
// name is never denied (SERVFAIL, which no client caches).
func TestNeverWorseForbidden(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedNonGrid(t)
	c.seedDemo(t)
	bin := coreDNSBinary(t)
	for _, forbidden := range gridhostsResources {
		t.Run(forbidden.resource, func(t *testing.T) {
			t.Parallel() // an account, roles and CoreDNS pair of its own
			ctx := t.Context()
			name := "coredns-no-" + forbidden.resource
			var rules []rbacv1.PolicyRule
			for _, r := range gridhostsResources {
				if r != forbidden {
					rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.group}, Resources: []string{r.resource}, Verbs: []string{"get", "list", "watch"}})
				}
			}
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}})
			must(c.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))(t)
			must(c.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}))(t)
			must(c.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}},
			}, metav1.CreateOptions{}))(t)
			kubeconfig, _ := must2(c.cp.ServiceAccountKubeconfig(ctx, "default", name))(t)

			p := startPair(t, bin, kubeconfig, kubeconfig)
			sameAnswers(t, p.ref, p.server)
			if forbidden.resource == "statefulsetgrids" {
				// Node mode (startPair's) reads grids from their children
				// and asks for no StatefulSetGrid: it needs no such right.
				poll(t, 2*time.Minute, "ready without reading StatefulSetGrids", func() error {
					if code, body := readyState(p.ready); code != http.StatusOK {
						return fmt.Errorf("%d %s", code, body)
					}
					return nil
				})
				waitDemoAnswer(t, p.server, "unified name without reading StatefulSetGrids", "10.0.1.1")
				return
			}
			expectNotReady(t, p, forbidden.resource, "Forbidden")
			if code := rcodeOf(t, p.server, demoNames(0), dns.TypeA); code != dns.RcodeServerFailure {
				t.Fatalf("unified name: %s, want SERVFAIL (never a cacheable denial)", dns.RcodeToString[code])
			}
		})
	}
}

// TestNeverWorseApiserverAway: CoreDNS reaches the apiserver through a
// proxy the test controls. Unreachable at start-up: gridhosts is not ready,
// says why in one line, the unified name is never denied and every other
// name is answered as by the kubernetes plugin alone; once reachable, all is
// served. Going away later: answers continue from the last known state;
// back again, changes are followed.
func TestNeverWorseApiserverAway(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedNonGrid(t)
	c.seedDemo(t)
	bin := coreDNSBinary(t)

	proxyAddr := controlplane.FreeAddress(t)
	proxy := &tcpProxy{target: strings.TrimPrefix(c.cp.URL, "https://")}
	kubeconfig := proxiedKubeconfig(t, c, proxyAddr)

	p := startPair(t, bin, kubeconfig, kubeconfig)
	t.Run("unreachable at start-up", func(t *testing.T) {
		sameAnswers(t, p.ref, p.server)
		expectNotReady(t, p, "unreachable")
		if code := rcodeOf(t, p.server, demoNames(0), dns.TypeA); code != dns.RcodeServerFailure {
			t.Fatalf("unified name: %s, want SERVFAIL", dns.RcodeToString[code])
		}
	})

	t.Run("reachable", func(t *testing.T) {
		proxy.start(t, proxyAddr)
		poll(t, 90*time.Second, "ready once the apiserver is reachable", func() error {
			if code, body := readyState(p.ready); code != http.StatusOK {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
		expect(t, "", p.server, demoNames(0), dns.TypeA, "10.0.1.1")
		sameAnswers(t, p.ref, p.server)
	})

	t.Run("going away later", func(t *testing.T) {
		proxy.stop()
		expect(t, "", p.server, demoNames(0), dns.TypeA, "10.0.1.1")
		sameAnswers(t, p.ref, p.server)
		if code, body := readyState(p.ready); code != http.StatusOK {
			t.Fatalf("ready %d %s: the last known state is still served", code, body)
		}

		c.setPodIPs(t, "default", "statefulsetgrid-demo-nodeunit1-0", "10.0.1.77")
		proxy.start(t, proxyAddr)
		waitDemoAnswer(t, p.server, "change followed after the apiserver is back", "10.0.1.77")
		sameAnswers(t, p.ref, p.server)
	})
}

// proxiedKubeconfig is the admin kubeconfig with the server moved to the
// proxy's address (127.0.0.1 is in the serving certificate).
func proxiedKubeconfig(t *testing.T, c *cluster, addr string) string {
	cfg, err := clientcmd.LoadFromFile(c.cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + addr
	}
	path := t.TempDir() + "/proxied.kubeconfig"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// tcpProxy forwards connections to target while started; stop closes the
// listener and every open connection, as an apiserver going away does.
type tcpProxy struct {
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func (p *tcpProxy) start(t *testing.T, addr string) {
	t.Helper()
	var ln net.Listener
	poll(t, 10*time.Second, "proxy listen", func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	t.Cleanup(p.stop)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func must2[A, B any](a A, b B, err error) func(testing.TB) (A, B) {
	return func(t testing.TB) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

// waitDemoAnswer waits until server answers the first demo name's A query
// with want alone.
func waitDemoAnswer(t *testing.T, server, what, want string) {
	t.Helper()
	poll(t, 90*time.Second, what, func() error {
		_, got, err := query("udp", "", server, demoNames(0), dns.TypeA)
		if err != nil || !slices.Equal(got, []string{want}) {
			return fmt.Errorf("got %v, %v", got, err)
		}
		return nil
	})
}
