package gridcli

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/explain"
	"github.com/servicegroup/servicegroup/trafficmode"
)

// TestTrafficModeExplainAndDoctor: explain follows kube-proxy's zone-hint
// rule for a native-mode Service (the node's zone's endpoints while it has
// a ready one, every endpoint otherwise), and doctor names the native-mode
// grids the controller refuses and the nodes whose zone disagrees with
// their nodeunit. Wants are written out by hand from those rules.
func TestTrafficModeExplainAndDoctor(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	ctx := t.Context()
	zone := trafficmode.ZoneLabel
	// node1: written by the controller; node2: a cloud's zone; node3: none yet.
	for node, change := range map[string]func(*corev1.Node){
		"node1": func(n *corev1.Node) {
			n.Labels[zone] = "nodeunit1"
			n.Annotations = map[string]string{trafficmode.ZoneWrittenAnnotation: "nodeunit1"}
		},
		"node2": func(n *corev1.Node) { n.Labels[zone] = "cloud-a" },
	} {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(n)
		c.must(c.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}))
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "native-svc", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "x"},
			TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferSameZone)},
	}
	c.must(c.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}))
	hinted := func(ip, node, z string, ready bool) discoveryv1.Endpoint {
		ep := endpoint(ip, node, ready, ready)
		ep.Zone = ptr.To(z)
		ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: z}}}
		return ep
	}
	c.must(c.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "native-a", Labels: map[string]string{discoveryv1.LabelServiceName: "native-svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{hinted("10.0.0.1", "node1", "nodeunit1", true), hinted("10.0.0.2", "node3", "nodeunit2", true),
			hinted("10.0.0.3", "node1", "nodeunit1", false)},
	}, metav1.CreateOptions{}))
	for _, tc := range []struct {
		node, zone, served, fallback string
	}{
		{"node1", "nodeunit1", "10.0.0.1,10.0.0.3", ""},
		{"node2", "cloud-a", "10.0.0.1,10.0.0.2,10.0.0.3", `no ready endpoint in zone "cloud-a"`},
		{"node3", "", "10.0.0.1,10.0.0.2,10.0.0.3", "the node has no topology.kubernetes.io/zone label"},
	} {
		var r explain.ServiceReport
		c.runJSON(&r, "explain", "svc/native-svc", "--node", tc.node)
		if r.Mode != explain.ModeNative || r.Zone != tc.zone || servedIPs(r) != tc.served || !strings.Contains(r.Fallback, tc.fallback) || (tc.fallback == "") != (r.Fallback == "") {
			t.Errorf("%s: mode %s zone %q served %s fallback %q; want native %q %s %q", tc.node, r.Mode, r.Zone, servedIPs(r), r.Fallback, tc.zone, tc.served, tc.fallback)
		}
	}
	out, err := c.run("explain", "svc/native-svc", "--node", "node1")
	if err != nil || !strings.Contains(out, "Native mode (trafficDistribution: PreferSameZone") || !strings.Contains(out, "Keeps to zone nodeunit1") {
		t.Errorf("explain text: %v\n%s", err, out)
	}

	// The controller, writing zones from zone1; grids in each mode.
	c.must(c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}, metav1.CreateOptions{}))
	labels := map[string]string{nameLabel: controllerName}
	c.must(c.kube.AppsV1().Deployments(controllerNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: controllerName, Namespace: controllerNamespace},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "i",
				Args: []string{"--leader-elect=false", "--zone-from-grid-key=zone1"}}}},
		}},
	}, metav1.CreateOptions{}))
	for name, g := range map[string]struct{ key, mode string }{
		"native-ok": {"zone1", "native"}, "native-other": {"zone2", "native"}, "odd": {"zone1", "strict"}, "plain": {"zone2", "wrapper"},
	} {
		c.must(c.grids.SuperedgeV1().ServiceGrids("default").Create(ctx, &superedgev1.ServiceGrid{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{trafficmode.Annotation: g.mode}},
			Spec:       superedgev1.ServiceGridSpec{GridUniqKey: g.key, Template: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		}, metav1.CreateOptions{}))
	}
	var r doctorReport
	out, _ = c.run("doctor", "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, p := range r.Problems {
		if strings.HasPrefix(p.Subject, "servicegrid ") || (strings.HasPrefix(p.Subject, "node ") && strings.Contains(p.Problem, zone)) {
			got[p.Subject] = p.Problem + " | " + p.Fix
		}
	}
	want := map[string][]string{
		"servicegrid default/native-other": {`native-mode grid on key "zone2", which is not the zone source (zone1)`, "key the grid on zone1"},
		"servicegrid default/odd":          {`servicegroup.io/traffic-mode "strict" is not a traffic mode`},
		"node node2":                       {`topology.kubernetes.io/zone is "cloud-a", set by someone else, and its nodeunit (zone1) is "nodeunit1"`, "kubectl label node node2 topology.kubernetes.io/zone-"},
		"node node3":                       {`topology.kubernetes.io/zone is missing and its nodeunit (zone1) is "nodeunit2": the controller has not written it yet`},
	}
	if len(got) != len(want) {
		t.Errorf("findings %v, want subjects of %v", got, want)
	}
	for subject, parts := range want {
		for _, p := range parts {
			if !strings.Contains(got[subject], p) {
				t.Errorf("%s: %q, want it to contain %q", subject, got[subject], p)
			}
		}
	}
}
