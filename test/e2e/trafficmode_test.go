package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/controller"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
	"github.com/servicegroup/servicegroup/trafficmode"
)

// TestNativeModeKubeProxy: with kube-proxy reading the apiserver directly (no
// wrapper), a native-mode ServiceGrid's ClusterIP, from each node, reaches
// only its nodeunit's pod while the nodeunit has a ready one, and every pod
// once it has none; the zones come from the controller's zone-label writer
// (--zone-from-grid-key=zone1), the hints from kube-controller-manager.
func TestNativeModeKubeProxy(t *testing.T) {
	t.Parallel() // each mode its own cluster and network
	for _, mode := range []string{harness.ProxyModeIPTables, harness.ProxyModeNFTables} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			nativeModeKubeProxy(t, mode)
		})
	}
}

func nativeModeKubeProxy(t *testing.T, mode string) {
	unit := func(v string) map[string]string { return map[string]string{harness.GridKey: v} }
	ctx, c := startCluster(t, harness.Options{ProxyMode: mode, Nodes: []harness.NodeSpec{
		{Name: "node0", Labels: unit("nodeunit1")}, {Name: "node1", Labels: unit("nodeunit2")}, {Name: "node2", Labels: unit("nodeunit2")},
	}})
	o := controller.DefaultOptions()
	o.Config = c.CP.Config
	o.LeaderElect = false
	o.MetricsBindAddress, o.HealthBindAddress = "0", "0"
	o.ZoneFromGridKey = harness.GridKey
	m, err := controller.NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(cctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("controller did not stop")
		}
	})
	eventually(ctx, t, time.Minute, "zones written", func(ctx context.Context) error {
		for _, n := range c.Nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if node.Labels[harness.ZoneKey] != node.Labels[harness.GridKey] {
				return fmt.Errorf("%s: zone %q", n.Name, node.Labels[harness.ZoneKey])
			}
		}
		return nil
	})
	eventually(ctx, t, time.Minute, "ServiceGrid CRD served", func(ctx context.Context) error {
		_, err := c.Grids.SuperedgeV1().ServiceGrids("default").List(ctx, metav1.ListOptions{})
		return err
	})
	svc := echoService("nat", nil, false)
	if _, err := c.Grids.SuperedgeV1().ServiceGrids("default").Create(ctx, &superedgev1.ServiceGrid{
		ObjectMeta: metav1.ObjectMeta{Name: "nat", Namespace: "default", Annotations: map[string]string{trafficmode.Annotation: "native"}},
		Spec:       superedgev1.ServiceGridSpec{GridUniqKey: harness.GridKey, Template: svc.Spec},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"nodeunit1", "nodeunit2"} {
		d := echoDeployment("nat", 1, unit(u))
		d.Name = "nat-" + u
		if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pods map[string]string
	eventually(ctx, t, 2*time.Minute, "2 nat pods ready", func(ctx context.Context) error {
		pods, err = readyPods(ctx, c, "app=nat")
		if err == nil && len(pods) != 2 {
			err = fmt.Errorf("ready: %v", pods)
		}
		return err
	})
	var clusterIP string
	eventually(ctx, t, time.Minute, "nat-svc native", func(ctx context.Context) error {
		s, err := c.Client.CoreV1().Services("default").Get(ctx, "nat-svc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ptr.Deref(s.Spec.TrafficDistribution, "") != corev1.ServiceTrafficDistributionPreferSameZone {
			return fmt.Errorf("trafficDistribution %v", s.Spec.TrafficDistribution)
		}
		clusterIP = s.Spec.ClusterIP
		return nil
	})
	url := "http://" + net.JoinHostPort(clusterIP, "80")
	nodeUnit := map[string]string{"node0": "nodeunit1", "node1": "nodeunit2", "node2": "nodeunit2"}
	inUnit := func(u string) map[string]string {
		out := map[string]string{}
		for pod, node := range pods {
			if nodeUnit[node] == u {
				out[pod] = node
			}
		}
		return out
	}
	// stays: 20 requests in a row, each answered inside want.
	stays := func(ctx context.Context, n *harness.Node, want map[string]string) error {
		for range 20 {
			if err := reachAll(ctx, n, url, want, 1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range c.Nodes {
		want := inUnit(nodeUnit[n.Name])
		eventually(ctx, t, time.Minute, n.Name+" reaches only its nodeunit's pod", func(ctx context.Context) error {
			return stays(ctx, n, want)
		})
	}

	// Switching the grid to the wrapper mode and back fails no request (the
	// Service changes in place; without a wrapper the wrapper mode is not
	// filtered here, so node1 may reach both pods meanwhile).
	setMode := func(m string) {
		t.Helper()
		g, err := c.Grids.SuperedgeV1().ServiceGrids("default").Get(ctx, "nat", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g.Annotations[trafficmode.Annotation] = m
		if _, err := c.Grids.SuperedgeV1().ServiceGrids("default").Update(ctx, g, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitDistribution := func(want string) {
		t.Helper()
		eventually(ctx, t, time.Minute, "nat-svc trafficDistribution "+want, func(ctx context.Context) error {
			s, err := c.Client.CoreV1().Services("default").Get(ctx, "nat-svc", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := ptr.Deref(s.Spec.TrafficDistribution, ""); got != want || s.Spec.ClusterIP != clusterIP {
				return fmt.Errorf("trafficDistribution %q clusterIP %s", got, s.Spec.ClusterIP)
			}
			return nil
		})
	}
	type tally struct {
		ok, failed int
		first      error
	}
	stop, counted := make(chan struct{}), make(chan tally)
	go func() {
		var r tally
		for {
			select {
			case <-stop:
				counted <- r
				return
			default:
			}
			if _, err := c.Nodes[1].Get(ctx, url); err != nil {
				r.failed++
				if r.first == nil {
					r.first = err
				}
			} else {
				r.ok++
			}
		}
	}()
	setMode("wrapper")
	waitDistribution("")
	time.Sleep(2 * time.Second)
	setMode("native")
	waitDistribution(corev1.ServiceTrafficDistributionPreferSameZone)
	time.Sleep(2 * time.Second)
	close(stop)
	r := <-counted
	if r.failed > 0 || r.ok < 10 {
		t.Errorf("requests from node1 while switching modes: %d ok, %d failed (first: %v)", r.ok, r.failed, r.first)
	}
	t.Logf("switching to the wrapper mode and back: %d requests from node1, none failed", r.ok)
	eventually(ctx, t, time.Minute, "node1 back in its nodeunit", func(ctx context.Context) error {
		return stays(ctx, c.Nodes[1], inUnit("nodeunit2"))
	})

	// kube-proxy's own rules for the Service on node0 hold nodeunit1's pod only.
	podIPs := func(ctx context.Context, u string) ([]string, error) {
		l, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=nat"})
		if err != nil {
			return nil, err
		}
		var ips []string
		for _, p := range l.Items {
			if nodeUnit[p.Spec.NodeName] == u && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				ips = append(ips, p.Status.PodIP)
			}
		}
		slices.Sort(ips)
		return ips, nil
	}
	rulesHold := func(what, u string) {
		t.Helper()
		eventually(ctx, t, time.Minute, what, func(ctx context.Context) error {
			want, err := podIPs(ctx, u)
			if err != nil {
				return err
			}
			rules, err := c.Nodes[0].ProxyRules(ctx, mode)
			if err != nil {
				return err
			}
			if got := harness.ProxyEndpoints(mode, rules, "default", "nat-svc"); len(want) == 0 || !slices.Equal(got, want) {
				return fmt.Errorf("node0's rules for nat-svc load-balance to %v, want %v (%s's)", got, want, u)
			}
			return nil
		})
	}
	rulesHold("node0's rules hold nodeunit1's endpoint only", "nodeunit1")

	// nodeunit1 loses its pod: node0 falls back to nodeunit2's.
	if _, err := c.Client.AppsV1().Deployments("default").Patch(ctx, "nat-nodeunit1", "application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 2*time.Minute, "node0 falls back to nodeunit2", func(ctx context.Context) error {
		return stays(ctx, c.Nodes[0], inUnit("nodeunit2"))
	})
	rulesHold("node0's rules hold nodeunit2's endpoint once nodeunit1 has none", "nodeunit2")
}
