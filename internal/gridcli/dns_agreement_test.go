package gridcli

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/internal/explain"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testcoredns"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

// TestMain removes the CoreDNS the tests built.
func TestMain(m *testing.M) { testbin.Main(m) }

// testFinalizer keeps a deleted object half-deleted (deletionTimestamp set)
// until the test removes it.
const testFinalizer = "servicegroup.test/keep"

// TestExplainDNSAgreesWithCoreDNS: for every way the unified-name rule can
// decide, kubectl grid explain dns and a real CoreDNS with gridhosts (our
// binary, asked over UDP) read the same objects from a real apiserver and
// must say the same: resolved with the same addresses, or NXDOMAIN. In
// clients mode one CoreDNS answers every node; in node mode (--mode node)
// each node has its own, run from the shipped corefile/Corefile.node (grids
// read from their children, pods selected by name up to the replicas,
// kubernetes behind it). Each case also names the step and reason expected
// in each mode, written by hand, so a check missing on both sides fails too.
func TestExplainDNSAgreesWithCoreDNS(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	ctx := t.Context()
	bin := testbin.Path(t, "coredns")

	// Clients mode: one CoreDNS answers each node by the query's source
	// address, the node's InternalIP.
	nodeIPs := map[string]string{"node1": "127.0.0.41", "node3": "127.0.0.43", "node4": "127.0.0.44"}
	for name, ip := range nodeIPs {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		c.must(c.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}))
	}
	const unknownClient = "127.0.0.49" // no node has it: the view of node9, which does not exist

	c.service("servicegrid-demo-svc", `["zone1"]`, nil)
	c.service("nogridkey-svc", `["zone1"]`, nil)
	svc, err := c.kube.CoreV1().Services("default").Get(ctx, "nogridkey-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(svc.Labels, superedgev1.LabelGridUniqKey)
	c.must(c.kube.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}))

	demo, err := c.grids.SuperedgeV1().StatefulSetGrids("default").Get(ctx, "statefulsetgrid-demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// nodeunit1's child serves; nodeunit2's is being deleted.
	u1 := c.childSet(demo, "nodeunit1", nil)
	u2 := c.childSet(demo, "nodeunit2", nil)
	c.pod(u1, 0, "10.0.1.1", corev1.PodRunning, nil)
	c.pod(u1, 1, "", corev1.PodPending, nil)
	c.pod(u1, 2, "10.0.1.3", corev1.PodRunning, nil)
	c.pod(u1, 3, "10.0.1.4", corev1.PodFailed, nil)
	c.pod(u1, 4, "10.0.1.5", corev1.PodSucceeded, nil)
	c.pod(u1, 5, "10.0.1.6", corev1.PodRunning, func(p *corev1.Pod) { p.OwnerReferences = nil })
	// Healthy and controlled, but beyond the 3 replicas (made directly, as
	// a StatefulSet scaled down while its pod stays): answered in clients
	// mode, not held by the node's DNS (issue 49's disagreement).
	c.pod(u1, 7, "10.0.1.8", corev1.PodRunning, nil)
	c.pod(u2, 0, "10.0.2.1", corev1.PodRunning, nil)
	c.terminate(&corev1.Pod{}, "statefulsetgrid-demo-nodeunit1-2")
	c.terminate(&appsv1.StatefulSet{}, u2.Name)

	// One grid per StatefulSet or Service defect, each with a healthy pod.
	defects := map[string]func(s *appsv1.StatefulSet){
		"g-owner":    func(s *appsv1.StatefulSet) { s.OwnerReferences = nil },
		"g-selector": func(s *appsv1.StatefulSet) { s.Labels[superedgev1.LabelGridSelector] = "other" },
		"g-key":      func(s *appsv1.StatefulSet) { s.Labels[superedgev1.LabelGridUniqKey] = "zone9" },
		"g-svcname":  func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other-svc" },
		"g-nodesel":  func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.NodeSelector["zone1"] = "nodeunit2" },
		"g-nosvc":    func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "missing-svc" },
		"g-svckey":   func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "nogridkey-svc" },
	}
	for name, defect := range defects {
		g := demo.DeepCopy()
		g.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: "default"}
		g, err := c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx, g, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.pod(c.childSet(g, "nodeunit1", defect), 0, "10.0.9.1", corev1.PodRunning, nil)
	}

	// A grid keyed by a key a kubelet cannot set on its own Node: its
	// children and Service carry it in the annotation, the label holds
	// its lossy encoding. The shipped Corefiles trust every key; both
	// sides must still read the key from the annotation.
	const trustedKey = "node-restriction.kubernetes.io/unit"
	n1, err := c.kube.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n1.Labels[trustedKey] = "nodeunit1"
	c.must(c.kube.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}))
	keyed := func(o *metav1.ObjectMeta) {
		o.Labels[superedgev1.LabelGridUniqKey] = superedgev1.GridUniqKeyLabelValue(trustedKey)
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[superedgev1.AnnotationGridUniqKey] = trustedKey
	}
	c.service("restricted-svc", `["`+trustedKey+`"]`, nil)
	rsvc, err := c.kube.CoreV1().Services("default").Get(ctx, "restricted-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keyed(&rsvc.ObjectMeta)
	c.must(c.kube.CoreV1().Services("default").Update(ctx, rsvc, metav1.UpdateOptions{}))
	rg := demo.DeepCopy()
	rg.ObjectMeta = metav1.ObjectMeta{Name: "g-restricted", Namespace: "default"}
	rg.Spec.GridUniqKey = trustedKey
	if rg, err = c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx, rg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.pod(c.childSet(rg, "nodeunit1", func(s *appsv1.StatefulSet) {
		keyed(&s.ObjectMeta)
		s.Spec.ServiceName = "restricted-svc"
	}), 0, "10.0.8.1", corev1.PodRunning, nil)

	// node5 is node1's twin (nodeunit1, the trusted key) whose own CoreDNS
	// sets require_node_restricted_keys: a Corefile.node with the option,
	// kept in a ConfigMap that its coredns-gridhosts pod (made directly: no
	// kubelet here) mounts, where explain reads it. The other nodes have no
	// such pod: explain says it cannot tell and explains without the option,
	// as their shipped Corefile runs.
	c.must(c.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node5",
		Labels: map[string]string{"zone1": "nodeunit1", trustedKey: "nodeunit1"}}}, metav1.CreateOptions{}))
	n5, err := c.kube.CoreV1().Nodes().Get(ctx, "node5", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeIPs["node5"] = "127.0.0.45"
	n5.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIPs["node5"]}}
	c.must(c.kube.CoreV1().Nodes().UpdateStatus(ctx, n5, metav1.UpdateOptions{}))
	restricted := testcoredns.ShippedCorefile(t, "Corefile.node", c.kubeconfig, c.kubeconfig)
	const restrictOption = "        require_node_restricted_keys\n"
	gridhostsBlock := "    gridhosts cluster.local {\n"
	if !strings.Contains(restricted.Text, gridhostsBlock) {
		t.Fatalf("no %q in the shipped Corefile.node", gridhostsBlock)
	}
	restricted.Text = strings.Replace(restricted.Text, gridhostsBlock, gridhostsBlock+restrictOption, 1)
	c.must(c.kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns-gridhosts-node5"},
		Data: map[string]string{"Corefile": restricted.Text}}, metav1.CreateOptions{}))
	c.must(c.kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns-gridhosts-node5", Labels: map[string]string{"app.kubernetes.io/name": "coredns-gridhosts"}},
		Spec: corev1.PodSpec{NodeName: "node5", Containers: []corev1.Container{{Name: "coredns", Image: "registry.invalid/coredns",
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns"}}}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "coredns-gridhosts-node5"}}}}}},
	}, metav1.CreateOptions{}))

	ready := testcoredns.FreePort(t)
	port := testcoredns.FreePort(t)
	corefile := fmt.Sprintf("cluster.local:%d {\n  bind 127.0.0.1\n  ready 127.0.0.1:%d\n  gridhosts {\n    kubeconfig %s\n    clients\n  }\n}\n",
		port, ready, c.kubeconfig)
	server := fmt.Sprintf("127.0.0.1:%d", port)
	testcoredns.Start(t, bin, corefile, fmt.Sprintf("http://127.0.0.1:%d/ready", ready))
	nodeServers := map[string]string{}
	for _, node := range []string{"node1", "node3", "node4", "node9"} {
		sc := testcoredns.ShippedCorefile(t, "Corefile.node", c.kubeconfig, c.kubeconfig)
		testcoredns.Start(t, bin, sc.Text, sc.ReadyURL(), "NODE_NAME="+node)
		nodeServers[node] = sc.Server()
	}
	testcoredns.Start(t, bin, restricted.Text, restricted.ReadyURL(), "NODE_NAME=node5")
	nodeServers["node5"] = restricted.Server()

	demoName := func(ord int) string {
		return fmt.Sprintf("statefulsetgrid-demo-%d.servicegrid-demo-svc.default.svc.cluster.local.", ord)
	}
	gridName := func(grid, svc string) string { return grid + "-0." + svc + ".default.svc.cluster.local." }
	type agreeCase struct {
		name, node string
		want       gridname.Reason
		// wantNode is the node's own DNS's reason where it differs: the
		// demo grid has 3 replicas, so pods 3 to 5 are not selected there;
		// a child without a controller names no grid, and a child's grid key
		// is the grid's there.
		wantNode *gridname.Reason
	}
	reason := func(r gridname.Reason) *gridname.Reason { return &r }
	cases := []agreeCase{
		{demoName(0), "node1", gridname.Resolved, nil},
		{demoName(1), "node1", gridname.PodNoAddress, nil},
		{demoName(2), "node1", gridname.PodTerminating, nil},
		{demoName(3), "node1", gridname.PodFinished, reason(gridname.PodNotFound)},
		{demoName(4), "node1", gridname.PodFinished, reason(gridname.PodNotFound)},
		{demoName(5), "node1", gridname.PodNotControlled, reason(gridname.PodNotFound)},
		{demoName(6), "node1", gridname.PodNotFound, nil},
		{demoName(7), "node1", gridname.Resolved, reason(gridname.PodNotFound)},
		{demoName(0), "node3", gridname.SetTerminating, nil},
		{demoName(0), "node4", gridname.NodeNoValue, nil},
		{demoName(0), "node9", gridname.NodeNotFound, nil},
		{gridName("nogrid", "servicegrid-demo-svc"), "node1", gridname.GridNotFound, nil},
		{gridName("g-owner", "servicegrid-demo-svc"), "node1", gridname.SetNotControlled, reason(gridname.GridNotFound)},
		{gridName("g-selector", "servicegrid-demo-svc"), "node1", gridname.SetGridSelector, nil},
		{gridName("g-key", "servicegrid-demo-svc"), "node1", gridname.SetGridKey, reason(gridname.NodeNoValue)},
		{gridName("g-svcname", "servicegrid-demo-svc"), "node1", gridname.SetServiceName, nil},
		{gridName("g-nodesel", "servicegrid-demo-svc"), "node1", gridname.SetNodeSelector, nil},
		{gridName("g-nosvc", "missing-svc"), "node1", gridname.ServiceNotFound, nil},
		{gridName("g-svckey", "nogridkey-svc"), "node1", gridname.ServiceGridKey, nil},
		{gridName("g-svckey", "nogridkey-svc"), "node3", gridname.SetNotFound, nil},
		{gridName("g-restricted", "restricted-svc"), "node1", gridname.Resolved, nil},
		{gridName("g-restricted", "restricted-svc"), "node3", gridname.NodeNoValue, nil},
		// node5's own CoreDNS sets require_node_restricted_keys: zone1, a key
		// a node can set on itself, matches no node there; the trusted key
		// does. The shared CoreDNS (clients mode) trusts every key.
		{demoName(0), "node5", gridname.Resolved, reason(gridname.NodeKeyNotTrusted)},
		{gridName("g-restricted", "restricted-svc"), "node5", gridname.Resolved, nil},
	}
	source := func(node string) string {
		if ip, ok := nodeIPs[node]; ok {
			return ip
		}
		return unknownClient
	}
	// agree compares the explanation with CoreDNS's answer for one case,
	// in clients mode and in node mode.
	agree := func(tc agreeCase) error {
		wantNode := tc.want
		if tc.wantNode != nil {
			wantNode = *tc.wantNode
		}
		for _, m := range []struct {
			mode, src, server string
			want              gridname.Reason
		}{
			{"clients", source(tc.node), server, tc.want},
			{"node", "127.0.0.1", nodeServers[tc.node], wantNode},
		} {
			var r explain.DNSReport
			c.runJSON(&r, "explain", "dns", tc.name, "--node", tc.node, "--mode", m.mode)
			if r.Reason != m.want.String() {
				return fmt.Errorf("%s mode: explain says %q, want %q", m.mode, r.Reason, m.want)
			}
			if m.mode == "node" {
				wantCorefile := "cannot tell whether the node's gridhosts sets require_node_restricted_keys: no pod app.kubernetes.io/name=coredns-gridhosts on node " + tc.node
				if tc.node == "node5" {
					wantCorefile = "require_node_restricted_keys set (read from ConfigMap default/coredns-gridhosts-node5 of pod default/coredns-gridhosts-node5)"
				}
				if !strings.HasPrefix(r.Corefile, wantCorefile) {
					return fmt.Errorf("node mode: explain's Corefile line %q, want it to start %q", r.Corefile, wantCorefile)
				}
			}
			rcode, got, err := queryA(m.src, m.server, tc.name)
			if err != nil {
				return err
			}
			switch {
			case r.Resolved && (rcode != dns.RcodeSuccess || !slices.Equal(got, sorted(r.Answers))):
				return fmt.Errorf("%s mode: explain resolves to %v, CoreDNS answers %s %v", m.mode, r.Answers, dns.RcodeToString[rcode], got)
			case !r.Resolved && rcode != dns.RcodeNameError:
				return fmt.Errorf("%s mode: explain fails at %s (%s), CoreDNS answers %s %v", m.mode, m.want.Step(), r.Reason, dns.RcodeToString[rcode], got)
			}
		}
		return nil
	}
	// The informers catch up first; then every case must agree at once.
	for _, tc := range cases {
		testwait.Eventually(ctx, t, 0, tc.name+" on "+tc.node+": explain and CoreDNS agree", func(context.Context) error { return agree(tc) })
	}
	for _, tc := range cases {
		if err := agree(tc); err != nil {
			t.Errorf("%s on %s: %v", tc.name, tc.node, err)
		}
	}
	covered := map[gridname.Reason]bool{}
	for _, tc := range cases {
		covered[tc.want] = true
		if tc.wantNode != nil {
			covered[*tc.wantNode] = true
		}
	}
	for r := gridname.Resolved; r <= gridname.PodNoAddress; r++ {
		if !covered[r] && r != gridname.GridNoKey { // the CRD rejects an empty gridUniqKey
			t.Errorf("no case for reason %q", r)
		}
	}
}

// childSet creates grid's child StatefulSet for nodeunit value as the
// controller makes it, changed by defect when set.
func (c *cluster) childSet(grid *superedgev1.StatefulSetGrid, value string, defect func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	c.t.Helper()
	s := &appsv1.StatefulSet{ObjectMeta: childMeta(grid.Name+"-"+value, grid, "StatefulSetGrid"), Spec: *grid.Spec.Template.DeepCopy()}
	s.Spec.Template.Spec.NodeSelector = map[string]string{grid.Spec.GridUniqKey: value}
	if defect != nil {
		defect(s)
	}
	s, err := c.kube.AppsV1().StatefulSets("default").Create(c.t.Context(), s, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// pod creates set's pod of ordinal with ip ("" for none) and phase, as
// kube-controller-manager and a kubelet would, changed by edit when set.
func (c *cluster) pod(set *appsv1.StatefulSet, ordinal int, ip string, phase corev1.PodPhase, edit func(*corev1.Pod)) {
	c.t.Helper()
	ctx := c.t.Context()
	name := fmt.Sprintf("%s-%d", set.Name, ordinal)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "default", Finalizers: []string{testFinalizer},
		Labels:          map[string]string{appsv1.StatefulSetPodNameLabel: name}, // the StatefulSet controller's
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
	}, Spec: *set.Spec.Template.Spec.DeepCopy()}
	p.Spec.NodeName = "node1"
	if edit != nil {
		edit(p)
	}
	p, err := c.kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: phase}
	if ip != "" {
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	}
	c.must(c.kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}))
}

// terminate deletes a pod or StatefulSet that holds the test finalizer, so
// it stays with a deletionTimestamp.
func (c *cluster) terminate(kind any, name string) {
	c.t.Helper()
	ctx := c.t.Context()
	var err error
	switch kind.(type) {
	case *corev1.Pod:
		err = c.kube.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	case *appsv1.StatefulSet:
		var s *appsv1.StatefulSet
		if s, err = c.kube.AppsV1().StatefulSets("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
			s.Finalizers = append(s.Finalizers, testFinalizer)
			if _, err = c.kube.AppsV1().StatefulSets("default").Update(ctx, s, metav1.UpdateOptions{}); err == nil {
				err = c.kube.AppsV1().StatefulSets("default").Delete(ctx, name, metav1.DeleteOptions{})
			}
		}
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// queryA asks server for name's A records over UDP from source address src.
func queryA(src, server, name string) (int, []string, error) {
	cl := &dns.Client{Net: "udp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}}
	r, _, err := cl.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), server)
	if err != nil {
		return 0, nil, err
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return r.Rcode, out, nil
}
