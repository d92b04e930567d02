package gridhosts

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/topology"
)

// TestNodeRestrictedKeys runs the apiserver with the Node authorizer and
// NodeRestriction. node-3's kubelet, compromised, labels its own Node
// zone1=a (NodeRestriction allows it) to join nodeunit a. A CoreDNS for
// node-3 without the option then answers nodeunit a's endpoints and member
// for names keyed on zone1; with require_node_restricted_keys zone1 never
// matches: a name keyed only on it is NXDOMAIN, one with "*" after it gets
// every endpoint, and a key under node-restriction.kubernetes.io/ still
// follows the administrator's labels.
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
			testEndpoint{ip: "10.5.1.1", node: "node-1", ready: true},
			testEndpoint{ip: "10.5.2.1", node: "node-2", ready: true},
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

	expect(t, "", safe, name("forged"), dns.TypeA) // NXDOMAIN
	expect(t, "", safe, "_http._tcp."+name("forged"), dns.TypeSRV)
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
