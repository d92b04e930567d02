package superedge

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// wrapperAddr is where SuperEdge's manifests bind its wrapper (plain HTTP),
// inside the node's network namespace.
const wrapperAddr = "127.0.0.1:51006"

// kubeProxyRun is one kube-proxy behind SuperEdge's wrapper in a node's
// namespace.
type kubeProxyRun struct {
	node  *harness.FabricNode
	proxy *controlplane.Process
}

// startBehindWrapper runs SuperEdge's application-grid-wrapper in node's
// namespace as its manifest does (--hostname, plain HTTP on 51006, the
// EndpointSlice support on), reading the apiserver with the admin
// kubeconfig, and the cached kube-proxy in iptables mode reading the wrapper
// (a kubeconfig naming http://127.0.0.1:51006, as edgeadm writes it), with
// featureGates (kube-proxy's --feature-gates) and the flags that keep it off
// host-global conntrack sysctls.
func startBehindWrapper(t *testing.T, e *env, node *harness.FabricNode, kubeProxy, featureGates string) *kubeProxyRun {
	t.Helper()
	dir := filepath.Join(e.cp.Dir, node.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper, err := controlplane.StartProcess("superedge-wrapper", node.NS.Command(context.WithoutCancel(e.ctx), filepath.Join(e.build.BinDir, "application-grid-wrapper"),
		"--kubeconfig="+e.cp.Kubeconfig, "--bind-address="+wrapperAddr, "--hostname="+node.Name,
		"--notify-channel-size=10000", "--support-endpointslice=true"), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("SuperEdge's wrapper on %s:\n%s", node.Name, wrapper.LogTail(30))
		}
		wrapper.Stop(5 * time.Second)
	})
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: node.NS.DialContext}}
	testwait.Eventually(e.ctx, t, 0, "SuperEdge's wrapper answers on "+node.Name, func(ctx context.Context) error {
		if done, err := wrapper.Exited(); done {
			return fmt.Errorf("wrapper exited: %v\n%s", err, wrapper.LogTail(20))
		}
		resp, err := client.Get("http://" + wrapperAddr + "/api/v1/services")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/v1/services: %s", resp.Status)
		}
		return nil
	})
	kubeconfig := filepath.Join(dir, "kube-proxy.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: http://"+wrapperAddr+"\n  name: default\ncontexts:\n- context:\n    cluster: default\n    user: default\n  name: default\ncurrent-context: default\nusers:\n- name: default\n  user: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig, "--hostname-override=" + node.Name, "--proxy-mode=iptables",
		"--cluster-cidr=10.244.0.0/16", "--healthz-bind-address=127.0.0.1:10256", "--metrics-bind-address=127.0.0.1:10249",
		"--conntrack-max-per-core=0", "--conntrack-min=0", "--conntrack-tcp-timeout-established=0s", "--conntrack-tcp-timeout-close-wait=0s", "--v=2",
	}
	if featureGates != "" {
		args = append(args, "--feature-gates="+featureGates)
	}
	proxy, err := controlplane.StartProcess("kube-proxy", node.NS.Command(context.WithoutCancel(e.ctx), kubeProxy, args...), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-proxy on %s:\n%s", node.Name, proxy.LogTail(30))
		}
		proxy.Stop(5 * time.Second)
	})
	return &kubeProxyRun{node: node, proxy: proxy}
}

// rules is the node's iptables nat table.
func (k *kubeProxyRun) rules(ctx context.Context) (string, error) {
	return k.node.NS.Run(ctx, "iptables-save", "-t", "nat")
}

// gridService makes Service grid (topologyKeys on zone1, as SuperEdge's
// controller writes a ServiceGrid's Service) with one endpoint on each node
// (10.244.N.10), and returns its clusterIP.
func gridService(ctx context.Context, t *testing.T, kube kubernetes.Interface, nodes []string) string {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "grid", Namespace: ns, Annotations: map[string]string{"topologyKeys": `["` + gridKey + `"]`}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	svc, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "grid-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "grid", discoveryv1.LabelManagedBy: "test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for i, n := range nodes {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.%d.10", i)},
			NodeName:   ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// TestSuperEdgeWrapperKubeProxy: kube-proxy behind SuperEdge's own wrapper
// (as edgeadm points it there) on node0 of nodeunit1 and node1 of
// nodeunit2, for a Service with one endpoint in each nodeunit. The newest
// release the wrapper can serve (SUPEREDGE_KUBE_PROXY, v1.33) programs the
// caller's nodeunit's endpoint only; the release the project pins (v1.37)
// programs nothing, WatchListClient=false or not: from v1.34 on kube-proxy
// waits at start for its informer of its own Node, whose list the wrapper
// answers with 404. build/MIGRATION.md's prerequisites say so.
func TestSuperEdgeWrapperKubeProxy(t *testing.T) {
	// Parallel: its own control plane and network (the package's only
	// fabric: one per process at a time).
	t.Parallel()
	testenv.Root(t, "network namespaces")
	build := RequireBuild(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	fabric, err := harness.NewFabric(ctx, harness.FabricOptions{Nodes: []string{"node0", "node1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fabric.Close)
	cp, err := controlplane.Start(ctx, controlplane.Options{BindAddress: fabric.RootIP.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	e := &env{ctx: ctx, build: build, cp: cp, kube: kubernetes.NewForConfigOrDie(cp.Config)}
	for i, n := range []string{"node0", "node1"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{gridKey: units[i]}}}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ip := gridService(ctx, t, e.kube, []string{"node0", "node1"})
	pinnedProxy, err := controlplane.Binary(controlplane.KubeProxy)
	if err != nil {
		t.Fatal(err)
	}
	old := startBehindWrapper(t, e, fabric.Nodes[0], build.KubeProxy, "WatchListClient=false")
	current := startBehindWrapper(t, e, fabric.Nodes[1], pinnedProxy, "WatchListClient=false")

	testwait.Eventually(ctx, t, 0, "kube-proxy "+build.KubeProxyVersion+" on node0 programs "+ip+" with nodeunit1's endpoint only", func(ctx context.Context) error {
		nat, err := old.rules(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(nat, ip+"/32") || !strings.Contains(nat, "10.244.0.10:8080") {
			return fmt.Errorf("no rule for %s to 10.244.0.10:8080 yet", ip)
		}
		if strings.Contains(nat, "10.244.1.10:8080") {
			return fmt.Errorf("node0's rules reach nodeunit2's endpoint 10.244.1.10:8080:\n%s", nat)
		}
		return nil
	})
	// The same wait for the pinned release: nothing, and why.
	time.Sleep(30 * time.Second)
	nat, err := current.rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(nat, ip+"/32") {
		t.Errorf("kube-proxy %s programmed %s behind SuperEdge's wrapper: build/MIGRATION.md and hack/superedge-versions.env say it cannot", controlplane.KubernetesVersion, ip)
	}
	if log := current.proxy.Log(); !strings.Contains(log, "failed to list *v1.Node: the server could not find the requested resource") {
		t.Errorf("kube-proxy %s's log shows no 404 for its Node list:\n%s", controlplane.KubernetesVersion, current.proxy.LogTail(20))
	}
}
