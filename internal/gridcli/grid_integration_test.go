package gridcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/client/clientset/versioned/scheme"
	"github.com/servicegroup/servicegroup/internal/explain"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// cluster is SuperEdge's demo on a real apiserver: the three example grids,
// four nodes (node1, node2 in nodeunit1; node3 in nodeunit2; node4 in none),
// and the children and EndpointSlices the controller and kube-controller-
// manager would have made, written by the test so every value is known.
type cluster struct {
	t          *testing.T
	kubeconfig string
	kube       kubernetes.Interface
	grids      versioned.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	ctx := t.Context()
	c := &cluster{t: t, kubeconfig: cp.Kubeconfig, kube: kubernetes.NewForConfigOrDie(cp.Config), grids: versioned.NewForConfigOrDie(cp.Config)}
	c.createExamples()
	for name, unit := range map[string]string{"node1": "nodeunit1", "node2": "nodeunit1", "node3": "nodeunit2", "node4": ""} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if unit != "" {
			n.Labels["zone1"] = unit
		}
		c.must(c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}))
	}
	// No kube-controller-manager: the pods' ServiceAccount is made here.
	c.must(c.kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}))
	return c
}

func (c *cluster) must(_ any, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) createExamples() {
	ctx := c.t.Context()
	for _, f := range []string{"deploymentgrid.yaml", "statefulsetgrid.yaml", "servicegrid.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", f))
		if err != nil {
			c.t.Fatal(err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			c.t.Fatal(err)
		}
		switch o := obj.(type) {
		case *superedgev1.DeploymentGrid:
			c.must(c.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, o, metav1.CreateOptions{}))
		case *superedgev1.StatefulSetGrid:
			c.must(c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx, o, metav1.CreateOptions{}))
		case *superedgev1.ServiceGrid:
			c.must(c.grids.SuperedgeV1().ServiceGrids("default").Create(ctx, o, metav1.CreateOptions{}))
		}
	}
}

// childMeta is the metadata the controller puts on a child of grid.
func childMeta(name string, grid metav1.Object, kind string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name, Namespace: "default",
		Labels: map[string]string{superedgev1.LabelGridSelector: grid.GetName(), superedgev1.LabelGridUniqKey: "zone1"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(grid,
			superedgev1.SchemeGroupVersion.WithKind(kind))},
	}
}

// run executes kubectl grid with args against the cluster and returns stdout.
func (c *cluster) run(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", c.kubeconfig, "-n", "default"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func (c *cluster) runJSON(into any, args ...string) {
	c.t.Helper()
	out, err := c.run(append(args, "-o", "json")...)
	if err != nil {
		c.t.Fatalf("kubectl grid %s: %v", strings.Join(args, " "), err)
	}
	if err := json.Unmarshal([]byte(out), into); err != nil {
		c.t.Fatalf("kubectl grid %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func endpoint(ip, node string, ready, serving bool) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving}}
	if node != "" {
		ep.NodeName = ptr.To(node)
	}
	return ep
}

func (c *cluster) service(name, topologyKeys string, slices map[string][]discoveryv1.Endpoint) {
	ctx := c.t.Context()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels:      map[string]string{superedgev1.LabelGridUniqKey: "zone1"},
			Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: topologyKeys}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"appGrid": "echo"}},
	}
	c.must(c.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}))
	for sliceName, eps := range slices {
		c.must(c.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: sliceName, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		}, metav1.CreateOptions{}))
	}
}

func servedIPs(r explain.ServiceReport) string {
	var ips []string
	for _, e := range r.Served {
		ips = append(ips, e.Addresses...)
	}
	return strings.Join(ips, ",")
}

// TestExplainService: the expected key tables and served endpoints are
// written out by hand from the topologyKeys rule (package topology's doc),
// not computed by the code.
func TestExplainService(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.service("servicegrid-demo-svc", `["zone1"]`, map[string][]discoveryv1.Endpoint{
		"demo-a": {endpoint("10.0.0.1", "node1", true, true), endpoint("10.0.0.2", "node3", true, true),
			endpoint("10.0.0.3", "node2", false, false)},
		"demo-b": {endpoint("10.0.0.4", "node3", true, true), endpoint("10.0.0.5", "", true, true)},
	})
	c.service("fallback-svc", `["zone1","*"]`, map[string][]discoveryv1.Endpoint{
		"fallback-a": {endpoint("10.0.2.1", "node3", true, true), endpoint("10.0.2.2", "node3", false, true)},
	})
	c.service("plain-svc", `not json`, map[string][]discoveryv1.Endpoint{
		"plain-a": {endpoint("10.0.3.1", "node3", true, true)},
	})

	type key struct {
		key, value string
		usable     int
		qualified  bool
		won        bool
	}
	for _, tc := range []struct {
		svc, node, mode, winner, served string
		keys                            []key
	}{
		// node1's nodeunit has one usable endpoint (10.0.0.1); the unready
		// one on node2 is served too (kube-proxy sees it, marks it not ready).
		{svc: "servicegrid-demo-svc", node: "node1", mode: "topology", winner: "zone1", served: "10.0.0.1,10.0.0.3",
			keys: []key{{"zone1", "nodeunit1", 1, true, true}}},
		{svc: "servicegrid-demo-svc", node: "node3", mode: "topology", winner: "zone1", served: "10.0.0.2,10.0.0.4",
			keys: []key{{"zone1", "nodeunit2", 2, true, true}}},
		// node4 has no zone1 label: strict closed loop serves nothing.
		{svc: "servicegrid-demo-svc", node: "node4", mode: "topology", winner: "", served: "",
			keys: []key{{"zone1", "", 0, false, false}}},
		// nodeunit1 has no endpoint of fallback-svc: "*" wins, all served.
		{svc: "fallback-svc", node: "node1", mode: "topology", winner: "*", served: "10.0.2.1,10.0.2.2",
			keys: []key{{"zone1", "nodeunit1", 0, false, false}, {"*", "*", 2, true, true}}},
		{svc: "fallback-svc", node: "node3", mode: "topology", winner: "zone1", served: "10.0.2.1,10.0.2.2",
			keys: []key{{"zone1", "nodeunit2", 2, true, true}, {"*", "*", 2, true, false}}},
		{svc: "plain-svc", node: "node1", mode: "invalid", served: "10.0.3.1"},
	} {
		t.Run(tc.svc+"/"+tc.node, func(t *testing.T) {
			var r explain.ServiceReport
			c.runJSON(&r, "explain", "svc/"+tc.svc, "--node", tc.node)
			if r.Mode != tc.mode || r.Winner != tc.winner || servedIPs(r) != tc.served {
				t.Errorf("mode %q winner %q served %q, want %q %q %q", r.Mode, r.Winner, servedIPs(r), tc.mode, tc.winner, tc.served)
			}
			var got []key
			for _, k := range r.Keys {
				got = append(got, key{k.Key, k.Value, k.Usable, k.Qualified, k.Won})
			}
			if len(got) != len(tc.keys) {
				t.Fatalf("keys %+v, want %+v", got, tc.keys)
			}
			for i := range got {
				if got[i] != tc.keys[i] {
					t.Errorf("key %d: %+v, want %+v", i, got[i], tc.keys[i])
				}
			}
		})
	}

	table, err := c.run("explain", "svc/servicegrid-demo-svc", "--node", "node1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl grid explain svc/servicegrid-demo-svc --node node1\n%s", table)
	for _, want := range []string{"Service default/servicegrid-demo-svc seen from node node1", "zone1", "nodeunit1", "WINS",
		"Winner: zone1", "Endpoints served: 2 of 5", "10.0.0.1", "10.0.0.3"} {
		if !strings.Contains(table, want) {
			t.Errorf("table output lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "10.0.0.2") {
		t.Errorf("table output serves nodeunit2's 10.0.0.2 to node1:\n%s", table)
	}
	out, err := c.run("explain", "svc/servicegrid-demo-svc", "--node", "node1", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML explain.ServiceReport
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil || fromYAML.Winner != "zone1" {
		t.Errorf("-o yaml: winner %q, err %v\n%s", fromYAML.Winner, err, out)
	}
	if _, err := c.run("explain", "svc/missing", "--node", "node1"); err == nil {
		t.Error("explain of a missing Service succeeded")
	}
}

// TestExplainDNS walks the unified name of the demo StatefulSetGrid from
// each node: resolved in nodeunit1, failing at the right step elsewhere.
func TestExplainDNS(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	ctx := t.Context()
	ssg, err := c.grids.SuperedgeV1().StatefulSetGrids("default").Get(ctx, "statefulsetgrid-demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.service("servicegrid-demo-svc", `["zone1"]`, nil)
	set := &appsv1.StatefulSet{ObjectMeta: childMeta("statefulsetgrid-demo-nodeunit1", ssg, "StatefulSetGrid"), Spec: *ssg.Spec.Template.DeepCopy()}
	set.Spec.Template.Spec.NodeSelector = map[string]string{"zone1": "nodeunit1"}
	set, err = c.kube.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ip := range []string{"10.0.1.5", ""} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "statefulsetgrid-demo-nodeunit1-" + string(rune('0'+i)), Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
		}, Spec: *set.Spec.Template.Spec.DeepCopy()}
		pod.Spec.NodeName = "node1"
		pod, err = c.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip != "" {
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
			c.must(c.kube.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}))
		}
	}
	name := func(i string) string {
		return "statefulsetgrid-demo-" + i + ".servicegrid-demo-svc.default.svc.cluster.local"
	}
	for _, tc := range []struct {
		name, node, failed, answers string
	}{
		{name("0"), "node1", "", "10.0.1.5"},
		{name("0"), "node2", "", "10.0.1.5"},
		{name("1"), "node1", explain.StepAddresses, ""},
		{name("2"), "node1", explain.StepPod, ""},
		{name("0"), "node3", explain.StepStatefulSet, ""}, // nodeunit2 has no StatefulSet
		{name("0"), "node4", explain.StepNodeValue, ""},
		{name("0"), "node9", explain.StepNodeValue, ""},
		{"nogrid-0.servicegrid-demo-svc.default.svc.cluster.local", "node1", explain.StepGrid, ""},
	} {
		t.Run(tc.name+"/"+tc.node, func(t *testing.T) {
			var r explain.DNSReport
			c.runJSON(&r, "explain", "dns", tc.name, "--node", tc.node)
			failed := ""
			for _, s := range r.Steps {
				if !s.OK {
					failed = s.Step
				}
			}
			if failed != tc.failed || strings.Join(r.Answers, ",") != tc.answers || r.Resolved != (tc.failed == "") {
				t.Errorf("failed at %q answers %q resolved %v, want %q %q\n%+v", failed, r.Answers, r.Resolved, tc.failed, tc.answers, r.Steps)
			}
		})
	}
	table, err := c.run("explain", "dns", name("0"), "--node", "node1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl grid explain dns %s --node node1\n%s", name("0"), table)
	for _, want := range []string{"statefulsetgrid", "zone1=\"nodeunit1\"", "statefulsetgrid-demo-nodeunit1", "Answer: 10.0.1.5"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// TestStatus: nodeunit1 has a ready child, nodeunit2 none (create pending),
// and an old child for a vanished nodeunit3 is to be deleted.
func TestStatus(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	ctx := t.Context()
	dg, err := c.grids.SuperedgeV1().DeploymentGrids("default").Get(ctx, "deploymentgrid-demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for unit, ready := range map[string]int32{"nodeunit1": 2, "nodeunit3": 1} {
		d := &appsv1.Deployment{ObjectMeta: childMeta("deploymentgrid-demo-"+unit, dg, "DeploymentGrid"), Spec: *dg.Spec.Template.DeepCopy()}
		d.Spec.Template.Spec.NodeSelector = map[string]string{"zone1": unit}
		d, err = c.kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: ready, AvailableReplicas: ready}
		c.must(c.kube.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{}))
	}
	var r explain.StatusReport
	c.runJSON(&r, "status", "dg/deploymentgrid-demo")
	type unit struct{ unit, child, template, ready, pending string }
	want := []unit{
		{"nodeunit1", "deploymentgrid-demo-nodeunit1", "default", "2/2", ""},
		{"nodeunit2", "", "default", "0/0", "create deploymentgrid-demo-nodeunit2"},
		{"nodeunit3", "deploymentgrid-demo-nodeunit3", "", "1/2", "delete deploymentgrid-demo-nodeunit3 (no node has zone1=nodeunit3)"},
	}
	if r.Kind != "DeploymentGrid" || r.GridUniqKey != "zone1" || len(r.NodeUnits) != len(want) {
		t.Fatalf("report %+v", r)
	}
	for i, u := range r.NodeUnits {
		got := unit{u.NodeUnit, u.Child, u.Template, u.Ready, strings.Join(u.Pending, "; ")}
		if got != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got, want[i])
		}
	}
	// A template pool assigned per nodeunit (SuperEdge's fields) is shown;
	// the grid is read unstructured, so fields this binary's types lack work.
	table, err := c.run("status", "ssg/statefulsetgrid-demo")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl grid status ssg/statefulsetgrid-demo\n%s", table)
	if dgTable, err := c.run("status", "dg/deploymentgrid-demo"); err == nil {
		t.Logf("kubectl grid status dg/deploymentgrid-demo\n%s", dgTable)
	}
	for _, s := range []string{"StatefulSetGrid default/statefulsetgrid-demo", "nodeunit1", "nodeunit2", "create statefulsetgrid-demo-nodeunit1"} {
		if !strings.Contains(table, s) {
			t.Errorf("ssg table lacks %q:\n%s", s, table)
		}
	}
	c.service("servicegrid-demo-svc", `["zone1"]`, map[string][]discoveryv1.Endpoint{
		"sg-a": {endpoint("10.0.0.1", "node1", true, true), endpoint("10.0.0.2", "node2", false, false)},
	})
	var sg explain.StatusReport
	c.runJSON(&sg, "status", "sg/servicegrid-demo")
	if len(sg.NodeUnits) != 2 || sg.NodeUnits[0].Ready != "1/2" || sg.NodeUnits[1].Ready != "0/0" ||
		sg.NodeUnits[0].Child != "servicegrid-demo-svc" || len(sg.NodeUnits[1].Pending) != 1 ||
		// No controller runs here, so the grid's status was never written.
		strings.Join(sg.Pending, ";") != "controller has not observed generation 1 yet (observed 0)" {
		t.Errorf("servicegrid report %+v", sg)
	}
	if _, err := c.run("status", "xx/servicegrid-demo"); err == nil {
		t.Error("status of an unknown kind succeeded")
	}
}
