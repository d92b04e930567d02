package wrapper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testcoredns"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// dnsAnswer is what a test compares of a DNS answer: the rcode and the
// answer and authority records, TTLs zeroed (each server's cache counts its
// own down), sorted.
func dnsAnswer(port int, name string, qtype uint16) (string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "", err
	}
	var rrs []string
	for _, rr := range slices.Concat(r.Answer, r.Ns) {
		rr.Header().Ttl = 0
		if soa, ok := rr.(*dns.SOA); ok {
			soa.Serial = 0 // the kubernetes plugin's serial is its last change's time
		}
		rrs = append(rrs, rr.String())
	}
	slices.Sort(rrs)
	return dns.RcodeToString[r.Rcode] + " " + strings.Join(rrs, " | "), nil
}

func createDNSService(t testing.TB, c kubernetes.Interface, ns, name string, headless bool, topologyKeys string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if topologyKeys != "" {
		svc.Annotations = map[string]string{superedgev1.AnnotationTopologyKeys: topologyKeys}
	}
	out, err := c.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dnsSlice(ns, svc, name string, headless bool, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	port, proto, portName := int32(8080), corev1.ProtocolTCP, "http"
	labels := map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "wrapper-test"}
	if headless {
		labels[corev1.IsHeadlessService] = ""
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
}

func createDNSSlice(t testing.TB, c kubernetes.Interface, sl *discoveryv1.EndpointSlice) {
	t.Helper()
	if _, err := c.DiscoveryV1().EndpointSlices(sl.Namespace).Create(t.Context(), sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createHeadlessWithHostname creates the headless Service "headless" with
// two endpoints: ip0 on node0 named web-0, ip1 on node1 (another nodeunit).
func createHeadlessWithHostname(t testing.TB, c kubernetes.Interface, ns, ip0, ip1 string) {
	t.Helper()
	createDNSService(t, c, ns, "headless", true, "")
	web0 := endpoint(ip0, "node0")
	hostname := "web-0"
	web0.Hostname = &hostname
	createDNSSlice(t, c, dnsSlice(ns, "headless", "headless-a", true, web0, endpoint(ip1, "node1")))
}

// addDNSEndpoint adds ep to the EndpointSlice ns/name.
func addDNSEndpoint(t testing.TB, c kubernetes.Interface, ns, name string, ep discoveryv1.Endpoint) {
	t.Helper()
	sl, err := c.DiscoveryV1().EndpointSlices(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints = append(sl.Endpoints, ep)
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Update(t.Context(), sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startDNSCluster is startTestCluster(t, ns) holding what both CoreDNS
// tests ask about: the Service "plain" (topologyKeys ["zone1"], endpoints
// net.0.1 on node0 and net.0.2 on node1) and the headless Service
// "headless" (createHeadlessWithHostname, net.1.1 and net.1.2). net is the
// first two octets, e.g. "10.2".
func startDNSCluster(t *testing.T, ns, net string) (cp *controlplane.ControlPlane, admin kubernetes.Interface, plain *corev1.Service) {
	t.Helper()
	cp, admin = startTestCluster(t, ns)
	plain = createDNSService(t, admin, ns, "plain", false, `["zone1"]`)
	createSlice(t, admin, ns, "plain", "plain-a", endpoint(net+".0.1", "node0"), endpoint(net+".0.2", "node1"))
	createHeadlessWithHostname(t, admin, ns, net+".1.1", net+".1.2")
	return cp, admin, plain
}

type dnsQuery struct {
	name  string
	qtype uint16
}

// dnsAnswers asks each port every query; answers[i][j] is port i's
// answer to queries[j] (see dnsAnswer).
func dnsAnswers(queries []dnsQuery, ports ...int) ([][]string, error) {
	answers := make([][]string, len(ports))
	for i, port := range ports {
		for _, q := range queries {
			a, err := dnsAnswer(port, q.name, q.qtype)
			if err != nil {
				return nil, err
			}
			answers[i] = append(answers[i], a)
		}
	}
	return answers, nil
}

// labelled is answers to queries, one "name TYPE: answer" a line.
func labelled(queries []dnsQuery, answers []string) string {
	lines := make([]string, len(answers))
	for j, a := range answers {
		lines[j] = queries[j].name + " " + dns.TypeToString[queries[j].qtype] + ": " + a
	}
	return strings.Join(lines, "\n")
}

// TestCoreDNSThroughWrapperAnswersAsDirect: the real CoreDNS of
// corefile/Corefile.node, twice: one with both plugins on the apiserver
// (as before), one whose kubernetes plugin reads the wrapper's DNS view.
// Every answer (ClusterIP, headless records with endpoints in another
// nodeunit, SRV, endpoint hostnames, PTR, NXDOMAIN, namespaces) is the same,
// before and after changes (a topology headless Service is gridhosts'
// in both, and through the wrapper gridhosts reads Services and
// EndpointSlices from the DNS view: it asks the apiserver for neither);
// no StatefulSetGrid CRD is installed, so
// gridhosts falls through to kubernetes in both. The wrapper's kube-proxy
// view keeps its nodeunit filter beside it; a wrapper restart under the
// running CoreDNS loses no change.
func TestCoreDNSThroughWrapperAnswersAsDirect(t *testing.T) {
	t.Parallel() // its own control plane
	bin := testbin.Path(t, "coredns")
	ns := "dnsview"
	cp, admin, plain := startDNSCluster(t, ns, "10.2")
	ctx := t.Context()
	// A headless Service without topologyKeys ("headless"): the kubernetes
	// plugin answers it, with every endpoint. One with them: gridhosts
	// answers it for this node's nodeunit, in both.
	createDNSService(t, admin, ns, "topohl", true, `["zone1"]`)
	createDNSSlice(t, admin, dnsSlice(ns, "topohl", "topohl-a", true, endpoint("10.2.3.1", "node0"), endpoint("10.2.3.2", "node1")))
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org"}}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, ext, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	w := startWrapper(t, cp, "node0", "", wrapper.Options{})
	direct := startShippedCoreDNS(t, bin, "Corefile.node", cp.Kubeconfig, "", "node0")
	// gridhosts' own requests to the apiserver, counted: Services and
	// EndpointSlices come from the wrapper's view instead.
	gridhostsUpstream := &byteCounter{bytes: map[string]int64{}}
	through := startShippedCoreDNS(t, bin, "Corefile.node", countingAPIProxy(t, cp.Config, gridhostsUpstream),
		plainKubeconfig(t, w.URL()+wrapper.DNSPathPrefix), "node0")
	noServicesUpstream := func() {
		t.Helper()
		gridhostsUpstream.mu.Lock()
		defer gridhostsUpstream.mu.Unlock()
		for _, u := range gridhostsUpstream.uris {
			if strings.Contains(u, "/services") || strings.Contains(u, "/endpointslices") {
				t.Errorf("gridhosts asked the apiserver %s: Services and EndpointSlices must come from the wrapper's DNS view", u)
			}
		}
		if len(gridhostsUpstream.uris) == 0 {
			t.Error("gridhosts asked the apiserver nothing: is its kubeconfig the counting proxy?")
		}
	}

	queries := []dnsQuery{
		{"plain.dnsview.svc.cluster.local", dns.TypeA},
		{"plain.dnsview.svc.cluster.local", dns.TypeAAAA},
		{"_http._tcp.plain.dnsview.svc.cluster.local", dns.TypeSRV},
		{"headless.dnsview.svc.cluster.local", dns.TypeA},
		{"topohl.dnsview.svc.cluster.local", dns.TypeA},
		{"_http._tcp.headless.dnsview.svc.cluster.local", dns.TypeSRV},
		{"web-0.headless.dnsview.svc.cluster.local", dns.TypeA},
		{"1.1.2.10.in-addr.arpa", dns.TypePTR},
		{"2.1.2.10.in-addr.arpa", dns.TypePTR},
		{"ext.dnsview.svc.cluster.local", dns.TypeCNAME},
		{"missing.dnsview.svc.cluster.local", dns.TypeA},
		{"dnsview.svc.cluster.local", dns.TypeA},
		{"nonamespace.svc.cluster.local", dns.TypeA},
		{"later.dnsview.svc.cluster.local", dns.TypeA},
		{"later.newns.svc.cluster.local", dns.TypeA},
		{"kubernetes.default.svc.cluster.local", dns.TypeA},
		{"dns-version.cluster.local", dns.TypeTXT},
	}
	same := func(what string, must map[dnsQuery]string) {
		t.Helper()
		var diff string
		eventually(t, what, 3*time.Minute, func(context.Context) (bool, error) {
			diff = ""
			answers, err := dnsAnswers(queries, direct, through)
			if err != nil {
				return false, err
			}
			for j, q := range queries {
				a, b := answers[0][j], answers[1][j]
				if a != b {
					diff += fmt.Sprintf("\n%s %s: direct %q, through the wrapper %q", q.name, dns.TypeToString[q.qtype], a, b)
				}
				if want, ok := must[q]; ok && !strings.Contains(a, want) {
					diff += fmt.Sprintf("\n%s %s: direct %q lacks %q", q.name, dns.TypeToString[q.qtype], a, want)
				}
			}
			return diff == "", fmt.Errorf("answers differ:%s", diff)
		})
	}
	same("the same answers", map[dnsQuery]string{
		{"plain.dnsview.svc.cluster.local", dns.TypeA}:          plain.Spec.ClusterIP,
		{"headless.dnsview.svc.cluster.local", dns.TypeA}:       "10.2.1.2", // node1: another nodeunit
		{"topohl.dnsview.svc.cluster.local", dns.TypeA}:         "10.2.3.1", // gridhosts: node0's nodeunit only
		{"web-0.headless.dnsview.svc.cluster.local", dns.TypeA}: "10.2.1.1",
		{"2.1.2.10.in-addr.arpa", dns.TypePTR}:                  "headless.dnsview.svc.cluster.local.",
		{"missing.dnsview.svc.cluster.local", dns.TypeA}:        "NXDOMAIN",
	})

	// kube-proxy's view keeps the nodeunit filter: node0's endpoint only.
	proxy := startInformers(t, w.URL(), protobuf, "node0")
	eventually(t, "kube-proxy's filtered view", 2*time.Minute, func(context.Context) (bool, error) {
		got := sliceState(proxy.slices.GetStore().List(), ns)
		return slices.Equal(got["plain-a"], []string{"10.2.0.1@node0"}), fmt.Errorf("kube-proxy's view: %v", got)
	})

	// Changes reach both alike: an endpoint added, a Service deleted, a
	// namespace and a Service created.
	addDNSEndpoint(t, admin, ns, "headless-a", endpoint("10.2.1.3", "node2"))
	addDNSEndpoint(t, admin, ns, "topohl-a", endpoint("10.2.3.3", "node0"))
	if err := admin.CoreV1().Services(ns).Delete(ctx, "ext", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, admin, "newns")
	later := createDNSService(t, admin, "newns", "later", false, "")
	createDNSService(t, admin, ns, "later", false, "")
	same("the same answers after changes", map[dnsQuery]string{
		{"headless.dnsview.svc.cluster.local", dns.TypeA}: "10.2.1.3",
		{"later.newns.svc.cluster.local", dns.TypeA}:      later.Spec.ClusterIP,
		{"ext.dnsview.svc.cluster.local", dns.TypeCNAME}:  "NXDOMAIN",
		{"topohl.dnsview.svc.cluster.local", dns.TypeA}:   "10.2.3.3",
	})

	// The wrapper restarts under the running CoreDNS (its watches resume or
	// relist, as from the apiserver's 410); a change made meanwhile
	// reaches it.
	addr := w.addr
	w.Stop()
	if err := admin.CoreV1().Services(ns).Delete(ctx, "later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	startWrapper(t, cp, "node0", addr, wrapper.Options{})
	same("the same answers after a wrapper restart", map[dnsQuery]string{
		{"later.dnsview.svc.cluster.local", dns.TypeA}: "NXDOMAIN",
	})
	noServicesUpstream()
}

// startKubernetesCoreDNS runs the real CoreDNS with only the kubernetes
// plugin, configured as in corefile/Corefile.node, reading kubeconfig; it
// returns the process and its DNS port.
func startKubernetesCoreDNS(t testing.TB, bin, kubeconfig string) (*testcoredns.Process, int) {
	t.Helper()
	port, ready := testcoredns.FreePort(t), testcoredns.FreePort(t)
	corefile := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    ready 127.0.0.1:%d
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
}
`, port, ready, kubeconfig)
	return testcoredns.Start(t, bin, corefile, fmt.Sprintf("http://127.0.0.1:%d/ready", ready)), port
}

// TestCoreDNSThroughWrapperFromSnapshot: the kubernetes plugin of a real
// CoreDNS reads the wrapper's DNS view and answers as one reading the
// apiserver; the wrapper stops (writing its snapshot), the apiserver goes
// away, the wrapper starts again from its snapshot and a new CoreDNS (a
// reboot) gives the same answers as before, with no apiserver.
func TestCoreDNSThroughWrapperFromSnapshot(t *testing.T) {
	t.Parallel() // its own control plane
	bin := testbin.Path(t, "coredns")
	ns := "dnssnap"
	cp, admin, plain := startDNSCluster(t, ns, "10.3")
	ctx := t.Context()

	opts := wrapper.Options{StateDir: t.TempDir(), SnapshotInterval: 100 * time.Millisecond}
	w := startWrapper(t, cp, "node0", "", opts)
	addr := w.addr
	viaWrapper := plainKubeconfig(t, w.URL()+wrapper.DNSPathPrefix)
	_, direct := startKubernetesCoreDNS(t, bin, cp.Kubeconfig)
	through, throughPort := startKubernetesCoreDNS(t, bin, viaWrapper)

	queries := []dnsQuery{
		{"plain.dnssnap.svc.cluster.local", dns.TypeA},
		{"_http._tcp.plain.dnssnap.svc.cluster.local", dns.TypeSRV},
		{"headless.dnssnap.svc.cluster.local", dns.TypeA},
		{"_http._tcp.headless.dnssnap.svc.cluster.local", dns.TypeSRV},
		{"web-0.headless.dnssnap.svc.cluster.local", dns.TypeA},
		{"2.1.3.10.in-addr.arpa", dns.TypePTR},
		{"missing.dnssnap.svc.cluster.local", dns.TypeA},
		{"dnssnap.svc.cluster.local", dns.TypeA},
		{"nonamespace.svc.cluster.local", dns.TypeA},
		{"kubernetes.default.svc.cluster.local", dns.TypeA},
	}
	var before []string
	eventually(t, "the same answers through the wrapper as direct", 3*time.Minute, func(context.Context) (bool, error) {
		answers, err := dnsAnswers(queries, direct, throughPort)
		if err != nil {
			return false, err
		}
		a, b := answers[0], answers[1]
		joined := labelled(queries, a)
		for _, want := range []string{plain.Spec.ClusterIP, "10.3.1.2", "10.3.1.1", "NXDOMAIN"} {
			if !strings.Contains(joined, want) {
				return false, fmt.Errorf("direct answers lack %s:\n%s", want, joined)
			}
		}
		before = a
		return slices.Equal(a, b), fmt.Errorf("direct:\n%s\nthrough the wrapper:\n%s", joined, labelled(queries, b))
	})

	// A reboot with the cloud away: everything on the node stops, the
	// apiserver is unreachable, the wrapper and CoreDNS start again.
	_ = through.Cmd.Process.Signal(os.Interrupt)
	<-through.Done
	w.Stop() // writes the snapshot
	cp.StopAPIServer()
	startWrapper(t, cp, "node0", addr, opts) // returns once ready: from the snapshot
	_, again := startKubernetesCoreDNS(t, bin, viaWrapper)
	eventually(t, "the answers from the wrapper's snapshot", 2*time.Minute, func(context.Context) (bool, error) {
		answers, err := dnsAnswers(queries, again)
		if err != nil {
			return false, err
		}
		return slices.Equal(answers[0], before), fmt.Errorf("before the outage:\n%s\nfrom the snapshot:\n%s", labelled(queries, before), labelled(queries, answers[0]))
	})

	// The cloud comes back: upstream confirms the snapshot's objects (none
	// is dropped under the running CoreDNS) and a change reaches it.
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Services(ns).Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the answers once upstream is back", 2*time.Minute, func(context.Context) (bool, error) {
		answers, err := dnsAnswers(queries, again, direct)
		if err != nil {
			return false, err
		}
		a, b := labelled(queries, answers[0]), labelled(queries, answers[1])
		return a == b && strings.Contains(a, "plain.dnssnap.svc.cluster.local A: NXDOMAIN") && strings.Contains(a, "10.3.1.2"),
			fmt.Errorf("direct:\n%s\nthrough the wrapper:\n%s", b, a)
	})
}

// TestDNSViewServesWhatTheAPIServerServes: unmodified client-go informers
// (protobuf and JSON, every namespace, no selector: the kubernetes plugin's
// shape) through the DNS view hold every Service, EndpointSlice and
// Namespace exactly as the apiserver has them (but resourceVersion and
// managedFields): topology Services' slices unfiltered, headless and other
// proxies' ones included, and follow changes; a watch from a version the
// wrapper does not know gets 410 Expired, as from the apiserver.
func TestDNSViewServesWhatTheAPIServerServes(t *testing.T) {
	t.Parallel() // its own control plane
	ns := "dnsview2"
	cp, admin := startTestCluster(t, ns)
	ctx := t.Context()
	createService(t, admin, ns, "topo", `["zone1"]`)
	createSlice(t, admin, ns, "topo", "topo-a", endpoint("10.4.0.1", "node0"), endpoint("10.4.0.2", "node1"))
	createDNSService(t, admin, ns, "headless", true, "")
	createDNSSlice(t, admin, dnsSlice(ns, "headless", "headless-a", true, endpoint("10.4.1.1", "node2")))
	other := dnsSlice(ns, "other", "other-a", false, endpoint("10.4.2.1", "node1"))
	other.Labels["service.kubernetes.io/service-proxy-name"] = "other-proxy"
	createDNSSlice(t, admin, other)
	w := startWrapper(t, cp, "node0", "", wrapper.Options{})

	// bareOf is o's JSON without what differs by design: the wrapper's
	// resourceVersion, the managedFields it drops, and the TypeMeta a
	// decoder may or may not fill.
	bareOf := func(o metav1.Object) string {
		o.SetResourceVersion("")
		o.SetManagedFields(nil)
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "kind")
		delete(m, "apiVersion")
		b, err = json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := func() (map[string]string, error) {
		out := map[string]string{}
		svcs, err := admin.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range svcs.Items {
			out["svc "+svcs.Items[i].Namespace+"/"+svcs.Items[i].Name] = bareOf(&svcs.Items[i])
		}
		sls, err := admin.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range sls.Items {
			out["slice "+sls.Items[i].Namespace+"/"+sls.Items[i].Name] = bareOf(&sls.Items[i])
		}
		nss, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range nss.Items {
			out["ns "+nss.Items[i].Name] = bareOf(&nss.Items[i])
		}
		return out, nil
	}
	type view struct {
		name              string
		svcs, slices, nss cache.SharedIndexInformer
	}
	var views []view
	for _, ct := range []string{protobuf, jsonType} {
		f := informers.NewSharedInformerFactory(clientFor(t, w.URL()+wrapper.DNSPathPrefix, ct), 0)
		v := view{ct, f.Core().V1().Services().Informer(), f.Discovery().V1().EndpointSlices().Informer(), f.Core().V1().Namespaces().Informer()}
		f.Start(ctx.Done())
		t.Cleanup(f.Shutdown)
		views = append(views, v)
	}
	got := func(v view) map[string]string {
		out := map[string]string{}
		for _, o := range v.svcs.GetStore().List() {
			s := o.(*corev1.Service).DeepCopy()
			out["svc "+s.Namespace+"/"+s.Name] = bareOf(s)
		}
		for _, o := range v.slices.GetStore().List() {
			s := o.(*discoveryv1.EndpointSlice).DeepCopy()
			out["slice "+s.Namespace+"/"+s.Name] = bareOf(s)
		}
		for _, o := range v.nss.GetStore().List() {
			n := o.(*corev1.Namespace).DeepCopy()
			out["ns "+n.Name] = bareOf(n)
		}
		return out
	}
	sameAsAPIServer := func(what string) {
		t.Helper()
		eventually(t, what, 2*time.Minute, func(context.Context) (bool, error) {
			exp, err := want()
			if err != nil {
				return false, err
			}
			for _, v := range views {
				g := got(v)
				for k, e := range exp {
					if g[k] != e {
						return false, fmt.Errorf("%s: %s served %q, the apiserver has %q", v.name, k, g[k], e)
					}
				}
				if len(g) != len(exp) {
					return false, fmt.Errorf("%s: %d objects served, the apiserver has %d", v.name, len(g), len(exp))
				}
			}
			return true, nil
		})
	}
	sameAsAPIServer("the DNS view as the apiserver's")

	addDNSEndpoint(t, admin, ns, "topo-a", endpoint("10.4.0.3", "node2"))
	if err := admin.CoreV1().Services(ns).Delete(ctx, "headless", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, admin, "dnsview3")
	sameAsAPIServer("the DNS view as the apiserver's after changes")

	// kube-proxy's view beside it: node0's endpoint of the topology Service.
	proxy := startInformers(t, w.URL(), protobuf, "node0")
	if got := sliceState(proxy.slices.GetStore().List(), ns)["topo-a"]; !slices.Equal(got, []string{"10.4.0.1@node0"}) {
		t.Fatalf("kube-proxy's view of topo-a: %v", got)
	}

	wi, err := clientFor(t, w.URL()+wrapper.DNSPathPrefix, protobuf).CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	expectGone(t, wi, "a watch from an unknown version")
}

// expectGone fails t unless the first event of w (what) is an ERROR with
// 410 Gone (the client must relist), within 2 minutes.
func expectGone(t *testing.T, w watch.Interface, what string) {
	t.Helper()
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != http.StatusGone {
			t.Fatalf("%s: %s %#v, want an ERROR with 410", what, ev.Type, ev.Object)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: no event", what)
	}
}
