package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The native-mode phase's objects: a ServiceGrid in native mode over one
// echo Deployment per nodeunit (plain Deployments, so that a nodeunit can be
// emptied), and its clients on a wrapper node of each nodeunit and on the
// plain worker deadNode.
const (
	nativeGrid     = "native-demo"
	nativeService  = nativeGrid + "-svc"
	nativeApp      = "realnode-native-echo"
	nativeClient   = "realnode-native-client"
	trafficModeKey = "servicegroup.io/traffic-mode"
)

// nativeMode proves issue 47's native mode on the real nodes beside the
// wrapper-mode grids: deadNode runs the stock kube-proxy reading the
// apiserver itself; the zone writer is turned on by build/README.md's Helm
// block; a native-mode grid's ClusterIP stays in nodeunit1 from deadNode and
// from node0 (kube-proxy-edge behind the wrapper, which passes the hints)
// while nodeunit1 has ready endpoints and reaches nodeunit2 once it has
// none; the wrapper-mode grid still answers only from the caller's
// nodeunit; the grid switches wrapper -> native -> wrapper -> native with
// clients on node0, node1 and deadNode requesting it all along, none failing. The
// phase removes what it made and turns the writer off again (the same
// block, KEY empty), so the steps after it see the cluster as before.
// version is the build the Helm release runs.
func nativeMode(ctx context.Context, t *testing.T, client kubernetes.Interface, cp *controlplane.ControlPlane, op *Operator, helmRel *HelmRelease, version string, edgeNodes []string, ranSteps map[string]bool) {
	t.Helper()
	checkStockKubeProxy(ctx, t, client, cp.URL, deadNode)

	chartVersion, err := ChartVersionFor(op, version)
	if err != nil {
		t.Fatal(err)
	}
	zones := func(key string) {
		t.Helper()
		start := time.Now()
		out, err := helmRel.RunStep(ctx, op, HelmZoneStep, version, chartVersion, "KEY="+key)
		if err != nil {
			t.Fatal(err)
		}
		ranSteps["helm#"+HelmZoneStep] = true
		t.Logf("%s KEY=%s (%s):\n%s", HelmZoneStep, key, time.Since(start).Round(100*time.Millisecond), lastLines(out, 8))
	}

	// The grid as SuperEdge's manifests have it (the wrapper mode), its pods
	// and its clients, starting while the zone writer is turned on.
	gridFile := filepath.Join(filepath.Dir(op.Dir), "native-mode-grid.yaml")
	if err := os.WriteFile(gridFile, []byte(nativeGridYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(ctx, t, op, "apply", "-f", gridFile)
	units := map[string]string{deadNode: deadNodeUnit}
	for _, sn := range seedNodes {
		units[sn.name] = sn.unit
	}
	for _, u := range []string{"nodeunit1", "nodeunit2"} {
		if _, err := client.AppsV1().Deployments("default").Create(ctx, nativeDeployment(u), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// inMode: the Service is rendered in mode (native: trafficDistribution
	// PreferSameZone and no topologyKeys; wrapper: the reverse), always on
	// the ClusterIP it was given first.
	var clusterIP string
	inMode := func(ctx context.Context, mode string) error {
		s, err := client.CoreV1().Services("default").Get(ctx, nativeService, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if clusterIP == "" {
			clusterIP = s.Spec.ClusterIP
		} else if s.Spec.ClusterIP != clusterIP {
			return fmt.Errorf("clusterIP %s, was %s", s.Spec.ClusterIP, clusterIP)
		}
		dist, keys := ptr.Deref(s.Spec.TrafficDistribution, ""), s.Annotations["topologyKeys"]
		if (mode == "native") != (dist == corev1.ServiceTrafficDistributionPreferSameZone && keys == "") || (mode == "wrapper") != (dist == "" && keys != "") {
			return fmt.Errorf("trafficDistribution %q, topologyKeys %q", dist, keys)
		}
		return nil
	}
	eventually(ctx, t, 0, nativeService+" rendered in the wrapper mode", func(ctx context.Context) error { return inMode(ctx, "wrapper") })
	probe, err := client.CoreV1().Services("default").Get(ctx, probeService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	callers := map[string]string{} // client pod -> its node
	for _, node := range []string{"node0", "node1", deadNode} {
		p := clientPod(node, clusterIP)
		p.Name = "native-" + node
		p.Labels = map[string]string{"app": nativeClient}
		p.Spec.Containers[0].Command = probeCommand(clusterIP, probeName, probe.Spec.ClusterIP)
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		callers[p.Name] = node
	}
	clients := sortedKeys(mapOf(callers))
	removed := false
	defer func() {
		if !removed {
			removeNative(ctx, t, client, op, clients)
		}
	}()
	zones(gridKey)
	var native map[string]corev1.Pod
	eventually(ctx, t, 0, "the native grid's 4 pods Ready, its clients requesting it", func(ctx context.Context) error {
		l, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + nativeApp})
		if err != nil {
			return err
		}
		native = map[string]corev1.Pod{}
		for _, p := range l.Items {
			if podReady(&p) {
				native[p.Name] = p
			}
		}
		if len(native) != 4 {
			return fmt.Errorf("%d of 4 ready", len(native))
		}
		return clientsProbing(ctx, client, clients, "svc")
	})
	inUnit := func(unit string) map[string]bool {
		out := map[string]bool{}
		for name, p := range native {
			if units[p.Spec.NodeName] == unit {
				out[name] = true
			}
		}
		return out
	}
	// doctor: a traffic mode the controller refuses, and a zone label
	// someone else set on deadNode (the writer never overwrites it); then
	// the label removed, which the writer sets again.
	mustRun(ctx, t, op, "annotate", "servicegrid", nativeGrid, trafficModeKey+"=bogus")
	mustRun(ctx, t, op, "label", "node", deadNode, "topology.kubernetes.io/zone=elsewhere", "--overwrite")
	expectDoctor(ctx, t, cp.Kubeconfig, edgeNodes, "a refused traffic mode, a zone someone else set",
		"servicegrid default/"+nativeGrid+`: servicegroup.io/traffic-mode "bogus" is not a traffic mode`,
		"node "+deadNode+`: topology.kubernetes.io/zone is "elsewhere", set by someone else`)
	// Then the label removed while the apiserver refuses the controller's
	// zone writes (a ValidatingAdmissionPolicy): not written yet; the
	// policy gone, the writer sets it again.
	lift := refuseZoneWrites(ctx, t, client, cp, deadNode)
	mustRun(ctx, t, op, "annotate", "servicegrid", nativeGrid, trafficModeKey+"-")
	mustRun(ctx, t, op, "label", "node", deadNode, "topology.kubernetes.io/zone-")
	expectDoctor(ctx, t, cp.Kubeconfig, edgeNodes, deadNode+"'s zone label removed, the controller's writes refused",
		"node "+deadNode+": topology.kubernetes.io/zone is missing and its nodeunit ("+gridKey+") is \""+units[deadNode]+"\": the controller has not written it yet")
	lift()
	expectDoctor(ctx, t, cp.Kubeconfig, edgeNodes, "the annotation gone, "+deadNode+"'s zone written again by the controller")
	placed := map[string]string{}
	for name, p := range native {
		placed[name] = p.Spec.NodeName
	}
	t.Logf("native grid pods: %v", placed)
	url := "http://" + clusterIP + ":80/"
	// The 50-request checks of one moment run at once, from their clients.
	staysInUnit := func(what string) []*clusterIPCheck {
		var checks []*clusterIPCheck
		for _, c := range clients {
			checks = append(checks, &clusterIPCheck{name: what + " from " + callers[c], caller: c, url: url, want: inUnit(units[callers[c]])})
		}
		return checks
	}
	// The switches, as build/README.md says (the annotation), with the
	// clients requesting the ClusterIP all along: each window lasts from
	// the annotation until the Service shows the mode and 3 s more for
	// every kube-proxy to have synced it.
	var windows []window
	switchTo := func(mode string) {
		t.Helper()
		w := window{name: fmt.Sprintf("%d: traffic-mode=%s", len(windows)+1, mode), start: time.Now()}
		mustRun(ctx, t, op, "annotate", "servicegrid", nativeGrid, trafficModeKey+"="+mode, "--overwrite")
		eventually(ctx, t, 0, nativeService+" in "+mode+" mode, its ClusterIP kept", func(ctx context.Context) error { return inMode(ctx, mode) })
		time.Sleep(3 * time.Second)
		w.end = time.Now()
		windows = append(windows, w)
	}
	switchTo("native")
	// With the wrapper-mode grid beside it, checked as the checks step
	// checks it.
	var pods map[string]corev1.Pod
	eventually(ctx, t, 0, "the seeds' grids' 10 pods and the 3 client pods Running and Ready", func(ctx context.Context) error {
		var err error
		pods, err = readyPods(ctx, client, 10)
		return err
	})
	grid, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checks := staysInUnit("native ClusterIP stays in the nodeunit")
	for _, sn := range seedNodes {
		checks = append(checks, &clusterIPCheck{name: "wrapper-mode ClusterIP stays in " + sn.unit + " from " + sn.name + " beside the native grid",
			caller: "client-" + sn.name, url: "http://" + grid.Spec.ClusterIP + ":80/", want: podsInUnit(pods, sn.unit)})
	}
	checkClusterIPs(ctx, t, op, checks)

	switchTo("wrapper")
	switchTo("native")
	// Until the ClusterIP is seen in the nodeunits again, every kube-proxy
	// has the last change: its requests count too.
	after := window{name: "after the switch", start: time.Now()}
	checkClusterIPs(ctx, t, op, staysInUnit("native ClusterIP stays in the nodeunit after the switch back"))
	after.end = time.Now()
	windows = append(windows, after)
	report, table, err := trafficReport(ctx, client, clients, windows, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("traffic to %s while switching modes (failed of all attempts, longest time without a success):\n%s", nativeService, table)
	for _, w := range windows {
		for _, c := range clients {
			r := report[w.name][c]
			if svc := r["svc"]; svc.failed > 0 || svc.attempts < 5 {
				t.Errorf("%s: %s: %d of %d requests to %s failed (at %s)", w.name, c, svc.failed, svc.attempts, nativeService, strings.Join(svc.failures, "; "))
			}
			if dns := r["dns"]; dns.failed > 0 {
				t.Errorf("%s: %s: %d of %d DNS queries failed: %s", w.name, c, dns.failed, dns.attempts, strings.Join(dns.failures, "; "))
			}
		}
	}

	// nodeunit1 loses its endpoints: its callers fall back to nodeunit2's.
	if _, err := client.AppsV1().Deployments("default").Patch(ctx, nativeGrid+"-nodeunit1", "application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 0, "nodeunit1's native pods gone", func(ctx context.Context) error {
		l, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + nativeApp + ",unit=nodeunit1"})
		if err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d left", len(l.Items))
		}
		return nil
	})
	checks = nil
	for _, c := range clients {
		if units[callers[c]] == "nodeunit1" {
			checks = append(checks, &clusterIPCheck{name: "native ClusterIP reaches nodeunit2 from " + callers[c] + " once nodeunit1 has no endpoint", caller: c, url: url, want: inUnit("nodeunit2")})
		}
	}
	checkClusterIPs(ctx, t, op, checks)

	// The writer turned off while the grid is still native: the
	// controller refuses the grid, and doctor says why.
	zones("")
	expectDoctor(ctx, t, cp.Kubeconfig, edgeNodes, "the zone writer off under a native-mode grid",
		"servicegrid default/"+nativeGrid+`: native-mode grid on key "`+gridKey+`", which is not the zone source`)
	removeNative(ctx, t, client, op, clients)
	removed = true
	expectDoctor(ctx, t, cp.Kubeconfig, edgeNodes, "the native-mode phase's objects gone, the writer off")
}

// checkStockKubeProxy: node runs kubeadm's kube-proxy (DaemonSet
// kube-system/kube-proxy), Ready, reading the apiserver at apiserver itself
// (its ConfigMap's kubeconfig), and nothing of our data plane.
func checkStockKubeProxy(ctx context.Context, t *testing.T, client kubernetes.Interface, apiserver, node string) {
	t.Helper()
	l, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node, LabelSelector: "k8s-app=kube-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || !podReady(&l.Items[0]) {
		t.Fatalf("%s: want one Ready stock kube-proxy pod, got %d", node, len(l.Items))
	}
	p := l.Items[0]
	if o := metav1.GetControllerOf(&p); o == nil || o.Kind != "DaemonSet" || o.Name != "kube-proxy" {
		t.Fatalf("%s: kube-proxy pod %s not of DaemonSet kube-proxy: %v", node, p.Name, o)
	}
	var cm string
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil && strings.Contains(v.Name, "kube-proxy") {
			cm = v.ConfigMap.Name
		}
	}
	c, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, cm, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: kube-proxy's ConfigMap %q: %v", node, cm, err)
	}
	if kc := c.Data["kubeconfig.conf"]; !strings.Contains(kc, "server: "+apiserver+"\n") {
		t.Fatalf("%s: kube-proxy's kubeconfig (ConfigMap %s) does not name the apiserver %s:\n%s", node, cm, apiserver, kc)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"servicegroup.io/data-plane", "servicegroup.io/kube-proxy"} {
		if v, ok := n.Labels[k]; ok {
			t.Fatalf("%s: labelled %s=%s", node, k, v)
		}
	}
	ours, err := client.CoreV1().Pods("edge-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	if len(ours.Items) > 0 {
		t.Fatalf("%s runs %s of edge-system", node, ours.Items[0].Name)
	}
	t.Logf("%s: stock kube-proxy %s reading %s directly, no data plane of ours", node, p.Name, apiserver)
}

// removeNative deletes the phase's grid, Deployments and clients and waits
// until their pods are gone (the steps after count the pods in default).
func removeNative(ctx context.Context, t *testing.T, client kubernetes.Interface, op *Operator, clients []string) {
	t.Helper()
	del := metav1.DeleteOptions{}
	for _, c := range clients {
		if err := client.CoreV1().Pods("default").Delete(ctx, c, del); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	for _, u := range []string{"nodeunit1", "nodeunit2"} {
		if err := client.AppsV1().Deployments("default").Delete(ctx, nativeGrid+"-"+u, del); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	if out, err := op.Run(ctx, "delete", "servicegrid", nativeGrid, "--ignore-not-found"); err != nil {
		t.Errorf("delete servicegrid %s: %v: %s", nativeGrid, err, out)
	}
	eventually(ctx, t, 0, "the native phase's pods and Service gone", func(ctx context.Context) error {
		for _, sel := range []string{"app=" + nativeApp, "app=" + nativeClient} {
			l, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%s: %d pods left", sel, len(l.Items))
			}
		}
		if _, err := client.CoreV1().Services("default").Get(ctx, nativeService, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (%v)", nativeService, err)
		}
		return nil
	})
}

func nativeDeployment(unit string) *appsv1.Deployment {
	labels := map[string]string{"app": nativeApp, "unit": unit}
	env := []corev1.EnvVar{
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: nativeGrid + "-" + unit, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{gridKey: unit},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "echo", Image: "gcr.io/kubernetes-e2e-test-images/echoserver:2.2", ImagePullPolicy: corev1.PullIfNotPresent,
						Ports: []corev1.ContainerPort{{ContainerPort: echoPort}},
						Env:   env,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(echoPort)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
}

var nativeGridYAML = `apiVersion: superedge.io/v1
kind: ServiceGrid
metadata:
  name: ` + nativeGrid + `
  namespace: default
spec:
  gridUniqKey: ` + gridKey + `
  template:
    selector:
      app: ` + nativeApp + `
    ports:
    - protocol: TCP
      port: 80
      targetPort: ` + strconv.Itoa(echoPort) + `
`

func mapOf(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// refuseZoneWrites makes the apiserver refuse the controller's changes of
// nodes' zone label (a ValidatingAdmissionPolicy on its ServiceAccount),
// once it is seen refusing one (a dry run as that account on probeNode);
// lift removes it and touches probeNode, so that the writer, backing off,
// tries again at once.
func refuseZoneWrites(ctx context.Context, t *testing.T, client kubernetes.Interface, cp *controlplane.ControlPlane, probeNode string) (lift func()) {
	t.Helper()
	const name = "realnode-refuse-zone-writes"
	const user = "system:serviceaccount:servicegroup-system:application-grid-controller"
	zone := func(o string) string {
		return "(has(" + o + ".metadata.labels) && 'topology.kubernetes.io/zone' in " + o + ".metadata.labels ? " + o + ".metadata.labels['topology.kubernetes.io/zone'] : '')"
	}
	policies := client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "the-controller", Expression: "request.userInfo.username == '" + user + "'"}},
			Validations:     []admissionregistrationv1.Validation{{Expression: zone("object") + " == " + zone("oldObject"), Message: "realnode test: the controller's zone writes are refused"}},
		},
	}
	if _, err := policies.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	remove := func() {
		_ = bindings.Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = policies.Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	asController := kubernetes.NewForConfigOrDie(cfg)
	eventually(ctx, t, 0, "the apiserver refusing the controller's zone writes", func(ctx context.Context) error {
		patch := []byte(`{"metadata":{"labels":{"topology.kubernetes.io/zone":"realnode-probe"}}}`)
		_, err := asController.CoreV1().Nodes().Patch(ctx, probeNode, types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return fmt.Errorf("a zone write as %s let through", user)
		}
		if !strings.Contains(err.Error(), "zone writes are refused") {
			return fmt.Errorf("a zone write as %s: %v (not the policy's refusal)", user, err)
		}
		return nil
	})
	t.Cleanup(remove)
	return func() {
		t.Helper()
		if err := bindings.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := policies.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The refusal may still hold for a moment: touch the node until
		// its zone is written (an annotation change re-queues it at once).
		eventually(ctx, t, 0, probeNode+"'s zone written once the policy is gone", func(ctx context.Context) error {
			n, err := client.CoreV1().Nodes().Get(ctx, probeNode, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, ok := n.Labels["topology.kubernetes.io/zone"]; ok {
				return nil
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"realnode.servicegroup.io/touched":"%d"}}}`, time.Now().UnixNano())
			if _, err := client.CoreV1().Nodes().Patch(ctx, probeNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
			return fmt.Errorf("not yet")
		})
		patch := []byte(`{"metadata":{"annotations":{"realnode.servicegroup.io/touched":null}}}`)
		if _, err := client.CoreV1().Nodes().Patch(ctx, probeNode, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
