package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// TestEdgeAutonomy: edge nodes keep working while the cloud is away, with
// every real component (iptables mode: one run keeps the suite's time in
// check), in two parts.
//
//   - A node whose rule tables are empty (as after a reboot) starts its
//     wrapper, kube-proxy and CoreDNS with the shipped manifests'
//     configuration and recovers: the `kubernetes` ClusterIP is unreachable
//     then, so the upstream must come from the manifests' upstream ConfigMap.
//   - With traffic running the apiserver stops; every node keeps its
//     nodeunit's ClusterIP traffic and grid names; one node reboots while it
//     is down, and another node's wrapper restarts under its running
//     kube-proxy (both need the wrapper's and gridhosts' snapshots); the apiserver
//     returns, a pod IP and a node label change and reach kube-proxy and DNS;
//     the wrapper's upstream LISTs and kube-proxy's relists are counted.
func TestEdgeAutonomy(t *testing.T) {
	t.Parallel() // its own cluster and network
	mode := harness.ProxyModeIPTables
	ctx, c := startCluster(t, harness.Options{ProxyMode: mode, Components: allComponents})
	if err := c.WaitGridCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyExamplesWithKey(ctx, harness.GridKey, harness.DemoExamples...); err != nil {
		t.Fatal(err)
	}
	units, err := c.Nodeunits(ctx, harness.GridKey)
	if err != nil {
		t.Fatal(err)
	}
	pods := waitGridPods(ctx, t, c, units)
	svc, err := c.Client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80")
	kubernetesSvc, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubernetesAddr := net.JoinHostPort(kubernetesSvc.Spec.ClusterIP, "443")

	// inUnit asserts node n's traffic and grid names against the pods as
	// last seen (no apiserver needed).
	inUnit := func(t *testing.T, n *harness.Node) {
		t.Helper()
		want := podsInUnit(pods, units, units[n.Name])
		assertProxyRulesOf(ctx, t, c, n, gridService, want, pods)
		assertClosedLoop(ctx, t, n, url, want)
		assertUnifiedNames(ctx, t, c, n, units[n.Name], pods)
	}

	t.Run("node starts from empty rule tables with the shipped configuration", func(t *testing.T) {
		n := c.Node("node0")
		c.StopNodeComponents(n)
		if err := n.FlushRules(ctx); err != nil {
			t.Fatal(err)
		}
		// Nothing routes the `kubernetes` ClusterIP: an upstream taken from it
		// (in-cluster defaults) could never be reached.
		if err := n.Unreachable(ctx, kubernetesAddr, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := n.RulesEmpty(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: no netfilter rule, %s (Service kubernetes) unreachable; starting wrapper, kube-proxy and CoreDNS from %s, %s, %s (upstream address substituted: %s)",
			n.Name, kubernetesAddr, harness.WrapperDaemonSet, harness.CoreDNSDaemonSet, harness.UpstreamEnvFile, c.CP.URL)
		if err := c.StartNodeComponents(ctx, n); err != nil {
			t.Fatal(err)
		}
		inUnit(t, n)
	})
	if t.Failed() {
		return
	}

	// Traffic runs on every node from before the outage until the apiserver
	// is back; no answer may ever come from outside the node's nodeunit.
	traffic := startTraffic(ctx, c, url, units, pods)

	proxyLogAt := kubeProxyLogSizes(t, c)
	c.CP.StopAPIServer()
	t.Log("kube-apiserver stopped")

	t.Run("apiserver down: every node stays in its nodeunit", func(t *testing.T) {
		for _, n := range c.Nodes {
			inUnit(t, n)
		}
	})

	rebooted := c.Node("node1")
	var fromSnapshot []*harness.Node // wrappers started while the apiserver was away
	t.Run("apiserver down: a node reboots and stays in its nodeunit", func(t *testing.T) {
		if why := harness.SnapshotsMissing(); why != "" {
			testenv.Missing(t, "the shipped manifests configure no node-local snapshot, which this case exists to check: %s", why)
		}
		c.StopNodeComponents(rebooted)
		if err := rebooted.FlushRules(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.StartNodeComponents(ctx, rebooted); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			inUnit(t, n)
		}
		// The restarted kube-proxy's first lists are its start, not relists.
		initial, err := harness.Relists(rebooted.KubeProxy, proxyLogAt[rebooted.Name])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: restarted kube-proxy's initial lists from the wrapper's snapshot: %v", rebooted.Name, initial)
		proxyLogAt[rebooted.Name], err = harness.LogSize(rebooted.KubeProxy)
		if err != nil {
			t.Fatal(err)
		}
		fromSnapshot = append(fromSnapshot, rebooted)
	})

	t.Run("apiserver down: a wrapper restarts under a running kube-proxy", func(t *testing.T) {
		if why := harness.SnapshotsMissing(); why != "" {
			testenv.Missing(t, "the shipped manifests configure no node-local snapshot, which this case exists to check: %s", why)
		}
		// kube-proxy's watches break and resume on the new wrapper, seeded
		// from its snapshot: no relist (checked with the counts below).
		n := c.Node("node2")
		if err := c.RestartWrapper(ctx, n); err != nil {
			t.Fatal(err)
		}
		inUnit(t, n)
		fromSnapshot = append(fromSnapshot, n)
	})

	upstreamBefore, err := c.UpstreamLists()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CP.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("kube-apiserver started again")
	answered, outside := traffic.stop()
	t.Logf("traffic during the outage: %v answers per node", answered)
	if len(outside) > 0 {
		t.Errorf("answers from outside the nodeunit during the outage: %v", outside)
	}

	t.Run("after the outage a pod IP change reaches kube-proxy and DNS", func(t *testing.T) {
		// The scheduler and controllers relist after the apiserver returns;
		// a change made before their informers are back can be missed
		// (seen once: "Scheduler cache is corrupted", the recreated pod
		// never scheduled). A canary pod scheduled and run first shows
		// they are back.
		canary := echoDeployment("canary", 1, map[string]string{"kubernetes.io/hostname": "node0"})
		if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, canary, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, 3*time.Minute, "canary pod scheduled and running after the outage", func(ctx context.Context) error {
			ready, err := readyPods(ctx, c, "app=canary")
			if err == nil && len(ready) != 1 {
				err = fmt.Errorf("ready: %v", ready)
			}
			return err
		})
		unit := units["node0"]
		name := fmt.Sprintf("%s-%s-0", statefulGrid, unit)
		old := podByName(pods, name)
		if err := c.Client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, 2*time.Minute, name+" recreated on a new IP", func(ctx context.Context) error {
			if pods, err = c.Pods(ctx, echoSelector); err != nil {
				return err
			}
			p := podByName(pods, name)
			if !p.Ready || p.IP == "" || p.IP == old.IP {
				return fmt.Errorf("%s: %+v (was %s)", name, p, old.IP)
			}
			return nil
		})
		newIP := podByName(pods, name).IP
		t.Logf("%s: %s -> %s", name, old.IP, newIP)
		// kube-controller-manager's EndpointSlice controller catches up after
		// the outage at its own pace: wait for the apiserver's EndpointSlice
		// first, so that what follows times only the wrapper's path.
		eventually(ctx, t, 3*time.Minute, "EndpointSlice of "+gridService+" lists "+newIP, func(ctx context.Context) error {
			slices, err := c.Client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + gridService})
			if err != nil {
				return err
			}
			for _, sl := range slices.Items {
				for _, ep := range sl.Endpoints {
					if containsString(ep.Addresses, newIP) && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
						return nil
					}
				}
			}
			return fmt.Errorf("not yet")
		})
		for _, n := range c.Nodes {
			if units[n.Name] == unit {
				inUnit(t, n)
			}
		}
	})

	t.Run("after the outage a node label change reaches kube-proxy and DNS", func(t *testing.T) {
		node2 := c.Node("node2")
		if err := c.SetNodeLabel(ctx, node2.Name, harness.GridKey, "nodeunit1"); err != nil {
			t.Fatal(err)
		}
		if units, err = c.Nodeunits(ctx, harness.GridKey); err != nil {
			t.Fatal(err)
		}
		inUnit(t, node2)
	})

	t.Run("upstream LISTs and kube-proxy relists", func(t *testing.T) {
		// The wrapper's own informers, apart from kube-proxy's requests it
		// forwards upstream (ServiceCIDRs, which it does not serve itself).
		own := func(l harness.UpstreamList) bool { return !strings.HasPrefix(l.UserAgent, "kube-proxy/") }
		informers := map[string]map[string]bool{} // node -> its wrapper's informers
		for _, l := range upstreamBefore {
			if own(l) && l.Kind != "resume" {
				if informers[l.Node] == nil {
					informers[l.Node] = map[string]bool{}
				}
				informers[l.Node][l.Informer] = true
			}
		}
		var after map[string]map[string]int // node -> informer -> relists since the apiserver returned
		var resumed, forwarded, byMetadata, completed map[string]int
		tally := func(all []harness.UpstreamList) {
			after = map[string]map[string]int{}
			resumed, forwarded = map[string]int{}, map[string]int{}
			byMetadata, completed = map[string]int{}, map[string]int{} // metadata-only relists, and those a full list completed
			for _, l := range all[len(upstreamBefore):] {
				switch {
				case !own(l):
					if l.Kind != "resume" {
						forwarded[l.Node+" "+l.Resource]++
					}
				case l.Kind == "resume":
					resumed[l.Node]++
				default:
					// A relist of the summaries asks their metadata first, and
					// lists them in full only when one changed: one relist.
					key := l.Node + " " + l.Informer
					if l.Kind == "metadata-list" {
						byMetadata[key]++
					} else if byMetadata[key] > completed[key] {
						completed[key]++
						continue
					}
					if after[l.Node] == nil {
						after[l.Node] = map[string]int{}
					}
					after[l.Node][l.Informer]++
				}
			}
		}
		// Other nodes' labels come from the summaries or, while the
		// controller has written none (a wrapper that started before it),
		// from every Node: a restarted wrapper may rightly use the other
		// source than before, so the two count as one informer.
		labelSource := func(inf string) string {
			if inf == "nodes" || inf == "nodelabelsummaries" {
				return "node labels (nodes or nodelabelsummaries)"
			}
			return inf
		}
		fetchedBy := func(node string) map[string]int {
			fetched := map[string]int{}
			for inf, count := range after[node] {
				fetched[labelSource(inf)] += count
			}
			return fetched
		}
		// A reflector still in client-go's backoff when the apiserver
		// returned (up to 30s, jittered to a minute) lists later: the
		// counts are read once every informer of a wrapper started from
		// its snapshot has fetched, and a second fetch would show then.
		eventually(ctx, t, testwait.Floor, "every informer of the wrappers started from their snapshots fetched upstream", func(context.Context) error {
			all, err := c.UpstreamLists()
			if err != nil {
				return err
			}
			tally(all)
			for _, n := range fromSnapshot {
				fetched := fetchedBy(n.Name)
				for inf := range informers[n.Name] {
					if fetched[labelSource(inf)] == 0 {
						return fmt.Errorf("%s: %s not yet", n.Name, labelSource(inf))
					}
				}
			}
			return nil
		})
		t.Logf("wrapper relists upstream (LIST, watch-list, or LIST of metadata completed by a LIST when it differed) since the apiserver returned, by node and informer: %v; of them by metadata: %v, completed in full: %v; watches resumed: %v; kube-proxy's fetches the wrappers forwarded: %v", after, byMetadata, completed, resumed, forwarded)
		for _, n := range c.Nodes {
			for inf, count := range after[n.Name] {
				// A wrapper that kept running relists once when the apiserver
				// returns (or resumes its watches): never more.
				if count > 1 {
					t.Errorf("%s: wrapper relisted %s upstream %d times after the apiserver returned, want at most once", n.Name, inf, count)
				}
			}
		}
		for _, n := range fromSnapshot {
			// Started from its snapshot while the apiserver was away: exactly
			// one full fetch per informer when it returns.
			t.Logf("wrapper informers of %s: %v", n.Name, keys(informers[n.Name]))
			fetched := fetchedBy(n.Name)
			for inf := range informers[n.Name] {
				if got := fetched[labelSource(inf)]; got != 1 {
					t.Errorf("%s: wrapper started from its snapshot fetched %s upstream %d times after the apiserver returned, want exactly once", n.Name, labelSource(inf), got)
				}
			}
		}

		for _, n := range c.Nodes {
			relists, err := harness.Relists(n.KubeProxy, proxyLogAt[n.Name])
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: kube-proxy relists during and after the outage: %v", n.Name, relists)
			for typ, count := range relists {
				switch {
				case typ == forwardedType:
					// Not served by the wrapper: the forwarded watch broke
					// with the apiserver, one relist when it returns.
					if count > 1 {
						t.Errorf("%s: kube-proxy relisted %s %d times, want at most once", n.Name, typ, count)
					}
				default:
					// Served from the wrapper, whose event log always
					// reaches back far enough here: kube-proxy resumes.
					t.Errorf("%s: kube-proxy relisted %s %d times from the wrapper, want no relist", n.Name, typ, count)
				}
			}
		}
	})
}

// forwardedType is the informer type kube-proxy reads through the wrapper's
// pass-through to the apiserver rather than from the wrapper's state.
const forwardedType = "*v1.ServiceCIDR"

// kubeProxyLogSizes marks where each node's kube-proxy log stands.
func kubeProxyLogSizes(t *testing.T, c *harness.Cluster) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range c.Nodes {
		size, err := harness.LogSize(n.KubeProxy)
		if err != nil {
			t.Fatal(err)
		}
		out[n.Name] = size
	}
	return out
}

func containsString(list []string, s string) bool { return slices.Contains(list, s) }

func podByName(pods []harness.PodInfo, name string) harness.PodInfo {
	if i := slices.IndexFunc(pods, func(p harness.PodInfo) bool { return p.Name == name }); i >= 0 {
		return pods[i]
	}
	return harness.PodInfo{}
}

// traffic sends requests to a ClusterIP from every node until stopped,
// counting answers and any answer from a pod outside the node's nodeunit.
type traffic struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	answers map[string]int
	outside []string
}

func startTraffic(ctx context.Context, c *harness.Cluster, url string, units map[string]string, pods []harness.PodInfo) *traffic {
	ctx, cancel := context.WithCancel(ctx)
	tr := &traffic{cancel: cancel, answers: map[string]int{}}
	units = maps.Clone(units)
	for _, n := range c.Nodes {
		want := podsInUnit(pods, units, units[n.Name])
		tr.wg.Go(func() {
			for ctx.Err() == nil {
				e, err := n.Get(ctx, url)
				if err != nil { // a rebooting node has no rules for a while
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
					continue
				}
				tr.mu.Lock()
				tr.answers[n.Name]++
				if _, ok := want[e.Pod]; !ok {
					tr.outside = append(tr.outside, n.Name+" <- "+e.Pod)
				}
				tr.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	return tr
}

func (tr *traffic) stop() (map[string]int, []string) {
	tr.cancel()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return maps.Clone(tr.answers), slices.Clone(tr.outside)
}
