package gridcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/internal/controllerlease"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestDoctor builds an installation's objects on a real apiserver (no
// kubelets: pod readiness is written by the test), one healthy edge node
// and one with every node problem, then adds each cluster-wide problem, and
// checks doctor names each once, with its fix, and exits non-zero. Asking
// a wrapper through kubectl exec needs a kubelet: test/realnode covers it;
// here the ready wrapper's exec fails and doctor says so.
func TestDoctor(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{edgeNamespace, controllerNamespace} {
		must(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	}
	edgeLabel := map[string]string{"servicegroup.io/data-plane": "edge"}
	for name, l := range map[string]map[string]string{"edge-a": edgeLabel, "edge-b": edgeLabel, "cloud-c": nil} {
		must(kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{}))
	}
	daemonSet := func(ns, name string, selector map[string]string) {
		t.Helper()
		createDaemonSet(t, kube, ns, name, selector)
	}
	daemonSet(edgeNamespace, wrapperName, edgeLabel)
	daemonSet(edgeNamespace, corednsName, edgeLabel)
	daemonSet("kube-system", kubeProxyEdgeName, map[string]string{"servicegroup.io/kube-proxy": "edge"})
	pod := func(ns, name, node string, labels map[string]string, ready bool) {
		t.Helper()
		createWrapperPod(t, kube, ns, name, node, labels, ready)
	}
	// edge-a: everything ready. edge-b: the wrapper missing, CoreDNS not
	// ready, no kube-proxy-edge, the stock kube-proxy.
	pod(edgeNamespace, "wrapper-a", "edge-a", map[string]string{nameLabel: wrapperName}, true)
	pod(edgeNamespace, "coredns-a", "edge-a", map[string]string{nameLabel: corednsName}, true)
	pod("kube-system", "kube-proxy-edge-a", "edge-a", map[string]string{nameLabel: kubeProxyEdgeName}, true)
	pod(edgeNamespace, "coredns-b", "edge-b", map[string]string{nameLabel: corednsName}, false)
	pod("kube-system", "kube-proxy-b", "edge-b", map[string]string{"k8s-app": "kube-proxy"}, true)
	pod("kube-system", "kube-proxy-c", "cloud-c", map[string]string{"k8s-app": "kube-proxy"}, true)

	// The controller: its Deployment with one ready replica, its pod, and
	// the Lease that pod holds.
	labels := map[string]string{nameLabel: controllerName}
	deploy, err := kube.AppsV1().Deployments(controllerNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: controllerName, Namespace: controllerNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "controller", Image: "i", Args: []string{"--leader-elect=true", "--leader-elect-namespace=" + controllerNamespace},
			}}}},
		},
	}, metav1.CreateOptions{})
	must(deploy, err)
	deploy.Status.Replicas, deploy.Status.ReadyReplicas = 2, 2
	must(kube.AppsV1().Deployments(controllerNamespace).UpdateStatus(ctx, deploy, metav1.UpdateOptions{}))
	pod(controllerNamespace, "controller-x", "cloud-c", labels, true)
	// What a controller of release v9.9.9-test built with this tree's CRDs
	// publishes on its Lease.
	fingerprints, err := crds.Fingerprints()
	if err != nil {
		t.Fatal(err)
	}
	published := controllerlease.Labels("v9.9.9-test", fingerprints)
	renewLease := func(holder string, renewed time.Time, labels map[string]string) {
		t.Helper()
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: controllerName, Namespace: controllerNamespace, Labels: labels},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime: &metav1.MicroTime{Time: renewed}},
		}
		old, err := kube.CoordinationV1().Leases(controllerNamespace).Get(ctx, controllerName, metav1.GetOptions{})
		if err != nil {
			must(kube.CoordinationV1().Leases(controllerNamespace).Create(ctx, lease, metav1.CreateOptions{}))
			return
		}
		old.Spec, old.Labels = lease.Spec, labels
		must(kube.CoordinationV1().Leases(controllerNamespace).Update(ctx, old, metav1.UpdateOptions{}))
	}
	// Renewed an hour ahead: live for the whole test.
	renewLease("controller-x_1234", time.Now().Add(time.Hour), published)

	// Our wrapper's binding, and the monitoring component's: not problems.
	for name, role := range map[string]string{"servicegroup:application-grid-wrapper": "servicegroup:application-grid-wrapper", "servicegroup:metrics-auth-delegator": "system:auth-delegator"} {
		must(kube.RbacV1().ClusterRoleBindings().Create(ctx, wrapperBinding(name, role), metav1.CreateOptions{}))
	}

	c := &cluster{t: t, kubeconfig: cp.Kubeconfig, kube: kube}
	nodeProblems := []string{
		"node edge-a: cannot ask wrapper wrapper-a whether it serves its snapshot",
		"node edge-b: no application-grid-wrapper pod",
		"node edge-b: coredns-gridhosts pod coredns-b is not ready",
		"node edge-b: no kube-proxy-edge pod",
		"node edge-b: the stock kube-proxy (pod kube-proxy-b) runs on an edge node",
	}
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, nodeProblems)
	// edge-a unreachable (the node lifecycle controller's Ready Unknown):
	// its wrapper is not asked, and doctor says why.
	setReady := func(status corev1.ConditionStatus) {
		t.Helper()
		n, err := kube.CoreV1().Nodes().Get(ctx, "edge-a", metav1.GetOptions{})
		must(n, err)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.Now(), Reason: "NodeStatusUnknown"}}
		must(kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}))
	}
	setReady(corev1.ConditionUnknown)
	unreachable := slices.Clone(nodeProblems)
	unreachable[0] = "node edge-a: cannot ask wrapper wrapper-a whether it serves its snapshot: the node is unreachable (Ready Unknown since "
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, unreachable)
	setReady(corev1.ConditionTrue)
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, nodeProblems)
	jsonOut, _ := c.run("doctor", "-o", "json")
	var r doctorReport
	if err := json.Unmarshal([]byte(jsonOut), &r); err != nil || r.ControllerVersion != "v9.9.9-test" {
		t.Errorf("doctor -o json: controllerVersion %q (%v), want the leader's v9.9.9-test:\n%s", r.ControllerVersion, err, jsonOut)
	}

	// Each cluster-wide problem, added one by one. First the leader built
	// with another servicegrids schema and a CRD this cluster lacks.
	other := maps.Clone(published)
	other[controllerlease.CRDLabelPrefix+"servicegrids.superedge.io"] = strings.Repeat("0", 32)
	other[controllerlease.CRDLabelPrefix+"extragrids.superedge.io"] = strings.Repeat("1", 32)
	renewLease("controller-x_1234", time.Now().Add(time.Hour), other)
	leader := "the leading controller controller-x_1234 (release v9.9.9-test)"
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, append(slices.Clone(nodeProblems),
		"crd extragrids.superedge.io: missing: "+leader+" needs it",
		"crd servicegrids.superedge.io: differs from the schema "+leader+" was built with"))
	renewLease("controller-x_1234", time.Now().Add(time.Hour), published)

	// A CRD edited in the cluster: against the leader's schema, then (no
	// leader) against this release's.
	var crd = "deploymentgrids.superedge.io"
	live, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd, metav1.GetOptions{})
	must(live, err)
	live.Spec.Versions[0].AdditionalPrinterColumns = nil
	must(ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, live, metav1.UpdateOptions{}))
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, append(slices.Clone(nodeProblems), "crd "+crd+": differs from the schema "+leader+" was built with"))
	crdProblem := "crd " + crd + ": missing or different from release"

	renewLease("controller-x_1234", time.Now().Add(-time.Minute), published)
	leaseProblem := "lease " + controllerNamespace + "/" + controllerName + ": no controller leads: controller-x_1234's lease ran out"
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, append(nodeProblems, crdProblem, leaseProblem))

	renewLease("elsewhere_1", time.Now().Add(time.Hour), nil)
	strangerProblem := "lease " + controllerNamespace + "/" + controllerName + `: held by "elsewhere_1", which is not a pod of deployment`
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, append(nodeProblems, crdProblem, strangerProblem))

	daemonSet(edgeNamespace, "application-grid-wrapper-node", map[string]string{"superedge.io/edge-node": "enable"})
	// SuperEdge's account and binding (on its own account, not ours), and
	// a stray binding on ours.
	must(kube.CoreV1().ServiceAccounts(edgeNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "application-grid-wrapper"}}, metav1.CreateOptions{}))
	superEdgeBinding := wrapperBinding("application-grid-wrapper", "application-grid-wrapper")
	superEdgeBinding.Subjects[0].Name = "application-grid-wrapper"
	must(kube.RbacV1().ClusterRoleBindings().Create(ctx, superEdgeBinding, metav1.CreateOptions{}))
	must(kube.RbacV1().ClusterRoleBindings().Create(ctx, wrapperBinding("stray", "cluster-admin"), metav1.CreateOptions{}))
	checkDoctor(t, c, []string{"edge-a", "edge-b"}, append(nodeProblems, crdProblem, strangerProblem,
		"daemonset edge-system/application-grid-wrapper-node: SuperEdge leftover: SuperEdge's wrapper holds 127.0.0.1:51006 on edge nodes",
		"serviceaccount edge-system/application-grid-wrapper: SuperEdge leftover: SuperEdge's wrapper's account",
		"clusterrolebinding application-grid-wrapper: SuperEdge leftover: SuperEdge's binding gives every verb on Secrets",
		"clusterrolebinding stray: gives the wrapper's ServiceAccount edge-system/servicegroup-wrapper the ClusterRole cluster-admin beyond what it needs"))

	// With the wrapper missing cluster-wide: one line, not one per node.
	must(nil, kube.AppsV1().DaemonSets(edgeNamespace).Delete(ctx, wrapperName, metav1.DeleteOptions{}))
	must(kube.AppsV1().Deployments(controllerNamespace).Patch(ctx, controllerName, types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"controller","image":"i","args":["--leader-elect=false"]}]}}}}`), metav1.PatchOptions{}))
	checkDoctor(t, c, []string{}, []string{crdProblem,
		"daemonset edge-system/application-grid-wrapper: missing: no edge node has a wrapper",
		"deployment servicegroup-system/application-grid-controller: 2 replicas without leader election would all reconcile",
		"daemonset edge-system/application-grid-wrapper-node: SuperEdge leftover",
		"serviceaccount edge-system/application-grid-wrapper: SuperEdge leftover",
		"clusterrolebinding application-grid-wrapper: SuperEdge leftover",
		"clusterrolebinding stray: gives the wrapper's ServiceAccount"})
}

func wrapperBinding(name, role string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: edgeNamespace, Name: wrapperServiceAccount}},
	}
}

// checkDoctor runs doctor as text and as JSON: each wanted problem (a
// prefix of "subject: problem") exactly once, nothing else, every problem
// with a fix, and a non-zero exit.
func checkDoctor(t *testing.T, c *cluster, wantNodes, want []string) {
	t.Helper()
	text, err := c.run("doctor")
	if want := problemsFound(len(want)); !errors.Is(err, want) {
		t.Errorf("doctor exits with %v, want %v; output:\n%s", err, want, text)
	}
	jsonOut, _ := c.run("doctor", "-o", "json")
	var r doctorReport
	if err := json.Unmarshal([]byte(jsonOut), &r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, jsonOut)
	}
	sort.Strings(r.EdgeNodes)
	if fmt.Sprint(r.EdgeNodes) != fmt.Sprint(wantNodes) {
		t.Errorf("edge nodes %v, want %v", r.EdgeNodes, wantNodes)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != len(r.Problems) {
		t.Errorf("%d lines for %d problems:\n%s", len(lines), len(r.Problems), text)
	}
	matched := make([]int, len(want))
	for _, p := range r.Problems {
		got := p.Subject + ": " + p.Problem
		if p.Fix == "" || !strings.Contains(text, got+". Fix: "+p.Fix) {
			t.Errorf("problem %q has no fix on its line:\n%s", got, text)
		}
		n := 0
		for i, w := range want {
			if strings.HasPrefix(got, w) {
				matched[i]++
				n++
			}
		}
		if n != 1 {
			t.Errorf("problem %q matches %d of the wanted ones", got, n)
		}
	}
	for i, w := range want {
		if matched[i] != 1 {
			t.Errorf("%q reported %d times, want once; output:\n%s", w, matched[i], text)
		}
	}
}

// createDaemonSet makes DaemonSet ns/name (pods labelled nameLabel=name)
// running on the nodes selector selects.
func createDaemonSet(t *testing.T, kube kubernetes.Interface, ns, name string, selector map[string]string) {
	t.Helper()
	labels := map[string]string{nameLabel: name}
	if _, err := kube.AppsV1().DaemonSets(ns).Create(t.Context(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createWrapperPod makes pod ns/name on node, running, ready or not, with
// a wrapper container whose readiness probe doctor's exec would ask.
func createWrapperPod(t *testing.T, kube kubernetes.Interface, ns, name, node string, labels map[string]string, ready bool) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	p, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: wrapperContainer, Image: "i",
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/readyz", Port: intstr.FromInt32(51007)}}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if p, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}
