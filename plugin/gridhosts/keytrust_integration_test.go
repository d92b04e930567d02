package gridhosts

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testcoredns"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/topology"
)

// TestNodeRestrictedKeys runs the apiserver with the Node authorizer and
// NodeRestriction. node-3's kubelet, compromised, labels its own Node
// zone1=a (NodeRestriction allows it) to join nodeunit a. A CoreDNS for
// node-3 without the option then answers nodeunit a's endpoints and member
// for names keyed on zone1; with require_node_restricted_keys zone1 never
// matches: a headless Service keyed only on it gets no endpoints (NODATA, as
// the wrapper serves it), a member name of a grid on it is NXDOMAIN, one
// with "*" after it gets every endpoint, and a key under
// node-restriction.kubernetes.io/ still follows the administrator's labels.
func TestNodeRestrictedKeys(t *testing.T) {
	t.Parallel() // its own control plane
	c := startClusterWith(t, controlplane.Options{APIServerArgs: []string{
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
	}})
	bin := coreDNSBinary(t)
	ctx := t.Context()
	const ns, restricted = "trust", topology.NodeRestrictionDomain + "/zone"
	for name, labels := range map[string]map[string]string{
		"node-1": {"zone1": "a", restricted: "a"},
		"node-2": {"zone1": "b", restricted: "b"},
		"node-3": {restricted: "b"},
	} {
		must(c.kube.CoreV1().Nodes().Create(ctx, newNode(name, labels, ""), metav1.CreateOptions{}))(t)
	}
	certPEM, keyPEM, err := c.cp.IssueClientCertificate("system:node:node-3", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	kubelet := kubernetes.NewForConfigOrDie(&rest.Config{Host: c.cp.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.cp.CACertificate(), CertData: certPEM, KeyData: keyPEM}})
	if _, err := kubelet.CoreV1().Nodes().Patch(ctx, "node-3", types.MergePatchType, []byte(`{"metadata":{"labels":{"zone1":"a"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the kubelet could not label its own Node (the threat this option answers): %v", err)
	}

	must(c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))(t)
	// A label value cannot hold the restricted key's "/": that Service names
	// it in topologyKeys.
	for svc, keys := range map[string]string{"forged": "", "fallback": `["zone1","*"]`, "trusted": fmt.Sprintf(`[%q]`, restricted)} {
		s := newService(ns, svc, "zone1", true)
		if keys != "" {
			s.Annotations = map[string]string{superedgev1.AnnotationTopologyKeys: keys}
		}
		must(c.kube.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}))(t)
		must(c.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, newSlice(ns, svc+"-1", svc, 8080,
			testEndpoint{IP: "10.5.1.1", Node: "node-1", Ready: true},
			testEndpoint{IP: "10.5.2.1", Node: "node-2", Ready: true},
		), metav1.CreateOptions{}))(t)
	}
	// A grid on zone1 made before the controller's option: nodeunit a's pod.
	grid := newGrid(ns, "g", "zone1", "")
	grid.Spec.Template.ServiceName = "gsvc"
	grid = must(c.grids.SuperedgeV1().StatefulSetGrids(ns).Create(ctx, grid, metav1.CreateOptions{}))(t)
	must(c.kube.CoreV1().Services(ns).Create(ctx, newService(ns, "gsvc", "zone1", false), metav1.CreateOptions{}))(t)
	set := must(c.kube.AppsV1().StatefulSets(ns).Create(ctx, newSet(grid, "a", "gsvc", "", 1), metav1.CreateOptions{}))(t)
	c.createPod(t, newPod(set, 0, "node-1", "10.6.1.1"))

	start := func(option string, metrics int) string {
		port, ready := freePort(t), freePort(t)
		corefile := fmt.Sprintf("cluster.local:%d {\n  bind 127.0.0.1\n  ready 127.0.0.1:%d\n  gridhosts {\n    kubeconfig %s\n    node node-3\n%s  }\n",
			port, ready, c.cp.Kubeconfig, option)
		if metrics != 0 {
			corefile += fmt.Sprintf("  prometheus 127.0.0.1:%d\n", metrics)
		}
		startCoreDNS(t, bin, corefile+"}\n", fmt.Sprintf("http://127.0.0.1:%d/ready", ready))
		return fmt.Sprintf("127.0.0.1:%d", port)
	}
	metrics := freePort(t)
	open, safe := start("", 0), start("    require_node_restricted_keys\n", metrics)
	name := func(svc string) string { return svc + "." + ns + ".svc.cluster.local." }
	const member = "g-0.gsvc." + ns + ".svc.cluster.local."

	expect(t, "", open, name("forged"), dns.TypeA, "10.5.1.1")
	expect(t, "", open, name("fallback"), dns.TypeA, "10.5.1.1")
	expect(t, "", open, name("trusted"), dns.TypeA, "10.5.2.1")
	expect(t, "", open, member, dns.TypeA, "10.6.1.1")

	expectNoData(t, "", safe, name("forged"), dns.TypeA)
	expectNoData(t, "", safe, "_http._tcp."+name("forged"), dns.TypeSRV)
	expect(t, "", safe, name("fallback"), dns.TypeA, "10.5.1.1", "10.5.2.1")
	expect(t, "", safe, name("trusted"), dns.TypeA, "10.5.2.1")
	expect(t, "", safe, member, dns.TypeA)

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("coredns_gridhosts_forgeable_keys_ignored_total 3")) {
		t.Errorf("metrics lack coredns_gridhosts_forgeable_keys_ignored_total 3 (forged, fallback, grid g)")
	}
}

// TestUntrustedKeysOneOutcome: with the node-restricted-keys option on both,
// the node's real wrapper (kube-proxy's view) and the node's DNS, the real
// CoreDNS of the shipped corefile/Corefile.node reading Services and
// EndpointSlices through that wrapper's DNS view, give each headless
// topology Service the same endpoints. node-3 labelled itself zone1=a: a
// Service keyed only on zone1 gets none from either (behind gridhosts, the
// kubernetes plugin would answer it with every nodeunit's endpoints), one
// with "*" after it every endpoint, one on a node-restricted key node-3's
// nodeunit's.
func TestUntrustedKeysOneOutcome(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	bin := coreDNSBinary(t)
	wrapperBin := testbin.Path(t, "application-grid-wrapper")
	ctx := t.Context()
	const ns, restricted = "trust", topology.NodeRestrictionDomain + "/zone"
	for name, labels := range map[string]map[string]string{
		"node-1": {"zone1": "a", restricted: "a"},
		"node-2": {"zone1": "b", restricted: "b"},
		"node-3": {"zone1": "a", restricted: "b"}, // zone1=a set by its own kubelet
	} {
		must(c.kube.CoreV1().Nodes().Create(ctx, newNode(name, labels, ""), metav1.CreateOptions{}))(t)
	}
	must(c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))(t)
	// What each Service must get on node-3, stated apart from both rules.
	want := map[string][]string{
		"forged":   nil,
		"fallback": {"10.5.1.1", "10.5.2.1"},
		"trusted":  {"10.5.2.1"},
	}
	for svc, keys := range map[string]string{"forged": `["zone1"]`, "fallback": `["zone1","*"]`, "trusted": fmt.Sprintf(`[%q]`, restricted)} {
		s := newService(ns, svc, "", true)
		s.Annotations = map[string]string{superedgev1.AnnotationTopologyKeys: keys}
		must(c.kube.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}))(t)
		must(c.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, newSlice(ns, svc+"-1", svc, 8080,
			testEndpoint{IP: "10.5.1.1", Node: "node-1", Ready: true},
			testEndpoint{IP: "10.5.2.1", Node: "node-2", Ready: true},
		), metav1.CreateOptions{}))(t)
	}

	addr := controlplane.FreeAddress(t)
	controlplane.StartProcessForTest(t, "application-grid-wrapper", exec.Command(wrapperBin,
		"--kubeconfig="+c.cp.Kubeconfig, "--node-name=node-3", "--bind-address="+addr, "--insecure-plain-http",
		"--require-node-restricted-topology-keys"))
	viaWrapper := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	dnsView := filepath.Join(t.TempDir(), "dns.kubeconfig")
	if err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"wrapper": {Server: "http://" + addr + "/dns"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"dns": {}},
		Contexts:       map[string]*clientcmdapi.Context{"dns": {Cluster: "wrapper", AuthInfo: "dns"}},
		CurrentContext: "dns",
	}, dnsView); err != nil {
		t.Fatal(err)
	}

	sc := testcoredns.ShippedCorefile(t, "Corefile.node", c.cp.Kubeconfig, dnsView)
	const gridhostsBlock = "gridhosts cluster.local {\n"
	if !strings.Contains(sc.Text, gridhostsBlock) {
		t.Fatalf("Corefile.node has no %q", gridhostsBlock)
	}
	text := strings.Replace(sc.Text, gridhostsBlock, gridhostsBlock+"        require_node_restricted_keys\n", 1)
	startCoreDNS(t, bin, text, fmt.Sprintf("http://127.0.0.1:%d/ready", sc.Ready), "NODE_NAME=node-3")
	server := fmt.Sprintf("127.0.0.1:%d", sc.Port)

	wrapperAddrs := func(svc string) ([]string, error) {
		list, err := viaWrapper.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				out = append(out, e.Addresses...)
			}
		}
		slices.Sort(out)
		return out, nil
	}
	for svc, w := range want {
		poll(t, 30*time.Second, "the wrapper's endpoints of "+svc, func() error {
			got, err := wrapperAddrs(svc)
			if err == nil && !slices.Equal(got, w) {
				err = fmt.Errorf("the wrapper serves kube-proxy %v, want %v", got, w)
			}
			return err
		})
		name := svc + "." + ns + ".svc.cluster.local."
		if w == nil {
			expectNoData(t, "", server, name, dns.TypeA)
			expectNoData(t, "", server, "_http._tcp."+name, dns.TypeSRV)
			continue
		}
		expect(t, "", server, name, dns.TypeA, w...)
	}
}
