package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// SuperEdge's demo objects (examples/*.yaml) and what the controller makes of them.
const (
	gridService    = "servicegrid-demo-svc" // ServiceGrid servicegrid-demo's Service
	statefulGrid   = "statefulsetgrid-demo"
	echoSelector   = "appGrid=echo"
	demoPodsPerNU  = 2 + 3 // DeploymentGrid replicas + StatefulSetGrid replicas
	headlessGrid   = "servicegrid-headless"
	headlessSvc    = headlessGrid + "-svc"
	plainService   = "echo-everywhere"
	requestsPerRun = 50
)

var allComponents = harness.Components{Controller: true, Wrapper: true, CoreDNS: true}

// headlessServiceGrid is a ServiceGrid whose Service is headless: its
// per-nodeunit names are answered by gridhosts.
const headlessServiceGrid = `apiVersion: superedge.io/v1
kind: ServiceGrid
metadata:
  name: servicegrid-headless
  namespace: default
spec:
  gridUniqKey: %s
  template:
    clusterIP: None
    selector:
      appGrid: echo
    ports:
    - protocol: TCP
      port: 8080
`

// TestServiceGroup reproduces SuperEdge's demos with every real component:
// our controller turns examples/*.yaml into Deployments, StatefulSets and a
// Service; kube-controller-manager and kube-scheduler make and bind the Pods;
// each node's kube-proxy reads through that node's wrapper; each node runs
// our CoreDNS with gridhosts, and one more serves every node per client.
// The iptables run applies SuperEdge's grids as they are (gridUniqKey zone1);
// the nftables run keys the same grids on the prefixed label
// topology.kubernetes.io/zone.
func TestServiceGroup(t *testing.T) {
	t.Parallel() // each mode its own cluster and network
	for _, run := range []struct{ mode, key string }{
		{harness.ProxyModeIPTables, harness.GridKey},
		{harness.ProxyModeNFTables, harness.ZoneKey},
	} {
		t.Run(run.mode, func(t *testing.T) {
			t.Parallel()
			testServiceGroup(t, run.mode, run.key)
		})
	}
}

func testServiceGroup(t *testing.T, mode, gridKey string) {
	ctx, c := startCluster(t, harness.Options{ProxyMode: mode, Components: allComponents})
	if err := c.WaitGridCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyExamplesWithKey(ctx, gridKey, harness.DemoExamples...); err != nil {
		t.Fatal(err)
	}
	t.Logf("grids keyed on node label %q", gridKey)
	units, err := c.Nodeunits(ctx, gridKey)
	if err != nil {
		t.Fatal(err)
	}
	pods := waitGridPods(ctx, t, c, units)
	t.Logf("pods: %v", pods)
	var clusterIP string
	eventually(ctx, t, time.Minute, "ServiceGrid's Service", func(ctx context.Context) error {
		svc, err := c.Client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
		if err != nil {
			return err
		}
		clusterIP = svc.Spec.ClusterIP
		return nil
	})
	url := "http://" + net.JoinHostPort(clusterIP, "80")

	t.Run("ClusterIP stays in the nodeunit", func(t *testing.T) {
		for _, n := range c.Nodes {
			want := podsInUnit(pods, units, units[n.Name])
			// Rules first: once kube-proxy balances over exactly the nodeunit's
			// pods, every later answer must come from them.
			assertProxyRules(ctx, t, c, n, gridService, want)
			assertClosedLoop(ctx, t, n, url, want)
		}
	})

	t.Run("unified StatefulSetGrid names answer the nodeunit's pod", func(t *testing.T) {
		for _, n := range c.Nodes {
			assertUnifiedNames(ctx, t, c, n, units[n.Name], pods)
		}
	})

	t.Run("headless grid Service resolves to the nodeunit's pods", func(t *testing.T) {
		if err := c.CreateGrid(ctx, fmt.Appendf(nil, headlessServiceGrid, gridKey)); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			want := unitIPs(pods, units, units[n.Name])
			name := headlessSvc + ".default.svc.cluster.local"
			eventually(ctx, t, time.Minute, n.Name+": dig "+name, func(ctx context.Context) error {
				return digEquals(ctx, n, n.DNS.Addr, name, want)
			})
		}
	})

	t.Run("Service without topology reaches every pod", func(t *testing.T) {
		svc, err := c.Client.CoreV1().Services("default").Create(ctx, echoService(plainService, nil, false), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Spec.Selector = map[string]string{"appGrid": "echo"}
		if _, err := c.Client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		all := map[string]string{}
		for _, p := range readyOnly(pods) {
			all[p.Name] = p.Node
		}
		url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80")
		for _, n := range c.Nodes {
			eventually(ctx, t, time.Minute, n.Name+" reaches all "+fmt.Sprint(len(all))+" pods through "+plainService, func(ctx context.Context) error {
				return reachAll(ctx, n, url, all, 400)
			})
		}
	})

	t.Run("relabelled node follows its new nodeunit", func(t *testing.T) {
		node2 := c.Node("node2")
		relabelled := time.Now()
		if err := c.SetNodeLabel(ctx, node2.Name, gridKey, "nodeunit1"); err != nil {
			t.Fatal(err)
		}
		units, err := c.Nodeunits(ctx, gridKey)
		if err != nil {
			t.Fatal(err)
		}
		// Pods stay where they run; node2 and its pods now count as nodeunit1,
		// so node2 reaches node0's pods (and its own), never node1's.
		want := podsInUnit(pods, units, "nodeunit1")
		assertProxyRules(ctx, t, c, node2, gridService, want)
		t.Logf("node2's kube-proxy followed the relabel within %s (observed, not asserted)", time.Since(relabelled).Round(100*time.Millisecond))
		assertClosedLoop(ctx, t, node2, url, want)
		if mine := podsInUnit(pods, units, "nodeunit2"); len(mine) > 0 {
			assertProxyRules(ctx, t, c, c.Node("node1"), gridService, mine)
			assertClosedLoop(ctx, t, c.Node("node1"), url, mine)
		}
		assertUnifiedNames(ctx, t, c, node2, "nodeunit1", pods)
	})
}

// assertClosedLoop waits until node reaches every pod of want through url,
// then checks that many further requests are all answered from want.
func assertClosedLoop(ctx context.Context, t *testing.T, n *harness.Node, url string, want map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: no pods expected in its nodeunit: the cluster is not what the test assumes", n.Name)
	}
	eventually(ctx, t, time.Minute, n.Name+" reaches exactly its nodeunit's pods "+fmt.Sprint(keys(want)), func(ctx context.Context) error {
		return reachAll(ctx, n, url, want, 300)
	})
	tally, err := n.Tally(ctx, url, requestsPerRun)
	if err != nil {
		t.Fatal(err)
	}
	for pod, count := range tally {
		if _, ok := want[pod]; !ok {
			t.Fatalf("%s: %d of %d requests answered by %s, outside its nodeunit %v", n.Name, count, requestsPerRun, pod, keys(want))
		}
	}
	t.Logf("%s -> %s: %v", n.Name, url, tally)
}

// assertProxyRules checks that kube-proxy on the node balances the Service
// over exactly the wanted pods' IPs (what the wrapper served it).
func assertProxyRules(ctx context.Context, t *testing.T, c *harness.Cluster, n *harness.Node, service string, want map[string]string) {
	t.Helper()
	pods, err := c.Pods(ctx, echoSelector)
	if err != nil {
		t.Fatal(err)
	}
	assertProxyRulesOf(ctx, t, c, n, service, want, pods)
}

// assertProxyRulesOf is assertProxyRules with the pods' IPs taken from pods
// (no apiserver needed).
func assertProxyRulesOf(ctx context.Context, t *testing.T, c *harness.Cluster, n *harness.Node, service string, want map[string]string, pods []harness.PodInfo) {
	t.Helper()
	var err error
	var wantIPs []string
	for _, p := range pods {
		if _, ok := want[p.Name]; ok {
			wantIPs = append(wantIPs, p.IP)
		}
	}
	sort.Strings(wantIPs)
	var rules string
	var got []string
	// testwait.Floor, as every wait: right after an apiserver outage the
	// wrapper's reflectors may still be in client-go's backoff (up to 30s,
	// jittered to a minute); 30s failed TestEdgeAutonomy once under load.
	ctx2, cancel := context.WithTimeout(ctx, testwait.Floor)
	defer cancel()
	for {
		if rules, err = n.ProxyRules(ctx2, c.ProxyMode); err != nil {
			t.Fatal(err)
		}
		if got = harness.ProxyEndpoints(c.ProxyMode, rules, "default", service); slices.Equal(got, wantIPs) {
			return
		}
		select {
		case <-ctx2.Done():
			t.Fatalf("%s: kube-proxy (%s) balances %s over %v, want %v; rules:\n%s", n.Name, c.ProxyMode, service, got, wantIPs, rules)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// assertUnifiedNames checks, through the node's own CoreDNS and through the
// shared per-client CoreDNS, that statefulsetgrid-demo-{i}.servicegrid-demo-svc
// resolves to pod statefulsetgrid-demo-{unit}-{i}, and that HTTP to the name
// (resolved through the node's CoreDNS) reaches that pod.
func assertUnifiedNames(ctx context.Context, t *testing.T, c *harness.Cluster, n *harness.Node, unit string, pods []harness.PodInfo) {
	t.Helper()
	for i := range 3 {
		name := fmt.Sprintf("%s-%d.%s.default.svc.cluster.local", statefulGrid, i, gridService)
		podName := fmt.Sprintf("%s-%s-%d", statefulGrid, unit, i)
		idx := slices.IndexFunc(pods, func(p harness.PodInfo) bool { return p.Name == podName })
		if idx < 0 {
			t.Fatalf("pod %s not found among %v", podName, pods)
		}
		want := []string{pods[idx].IP}
		for _, dns := range []*harness.DNSServer{n.DNS, c.SharedDNS} {
			eventually(ctx, t, 30*time.Second, fmt.Sprintf("%s: dig @%s (%s) %s", n.Name, dns.Addr, dns.Mode, name), func(ctx context.Context) error {
				return digEquals(ctx, n, dns.Addr, name, want)
			})
		}
		// The shared CoreDNS also knows a pod's query by its pod IP.
		if from := slices.IndexFunc(pods, func(p harness.PodInfo) bool { return p.Node == n.Name && p.IP != "" }); from >= 0 {
			src := pods[from].IP
			eventually(ctx, t, 30*time.Second, fmt.Sprintf("%s: dig -b %s (pod %s) @%s %s", n.Name, src, pods[from].Name, c.SharedDNS.Addr, name), func(ctx context.Context) error {
				got, err := n.DigFrom(ctx, src, c.SharedDNS.Addr, name, "A")
				if err == nil && !slices.Equal(got, want) {
					err = fmt.Errorf("answer %v, want %v", got, want)
				}
				return err
			})
		}
		url := "http://" + net.JoinHostPort(name, "8080") + "/"
		e, err := n.GetVia(ctx, n.DNS.Addr, url)
		if err != nil {
			t.Fatal(err)
		}
		if e.Pod != podName {
			t.Fatalf("%s: %s answered by %s, want %s", n.Name, url, e.Pod, podName)
		}
	}
}

func digEquals(ctx context.Context, n *harness.Node, server, name string, want []string) error {
	got, err := n.Dig(ctx, server, name, "A")
	if err != nil {
		return err
	}
	w := slices.Clone(want)
	sort.Strings(w)
	if !slices.Equal(got, w) {
		return fmt.Errorf("answer %v, want %v", got, w)
	}
	return nil
}

// podsInUnit: ready pods on nodes whose grid key value is unit (name -> node).
func podsInUnit(pods []harness.PodInfo, units map[string]string, unit string) map[string]string {
	out := map[string]string{}
	for _, p := range readyOnly(pods) {
		if units[p.Node] == unit {
			out[p.Name] = p.Node
		}
	}
	return out
}

func readyOnly(pods []harness.PodInfo) []harness.PodInfo {
	var out []harness.PodInfo
	for _, p := range pods {
		if p.Ready {
			out = append(out, p)
		}
	}
	return out
}

// unitIPs: IPs of the ready pods on nodes whose grid key value is unit.
func unitIPs(pods []harness.PodInfo, units map[string]string, unit string) []string {
	var out []string
	for _, p := range readyOnly(pods) {
		if units[p.Node] == unit {
			out = append(out, p.IP)
		}
	}
	return out
}

func distinct(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		if v != "" {
			out[v] = true
		}
	}
	return out
}
