package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/internal/gridcli"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// doctorProblems runs `kubectl grid doctor -o json` in-process and returns
// its edge nodes and its problems as "subject: problem" lines.
func doctorProblems(ctx context.Context, kubeconfig string) (nodes, problems []string, err error) {
	var out, errOut bytes.Buffer
	cmd := gridcli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "doctor", "-o", "json"})
	runErr := cmd.ExecuteContext(ctx)
	var r struct {
		EdgeNodes []string `json:"edgeNodes"`
		Problems  []struct{ Subject, Problem, Fix string }
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, nil, fmt.Errorf("doctor: %v (%v): %s%s", err, runErr, out.String(), errOut.String())
	}
	for _, p := range r.Problems {
		problems = append(problems, p.Subject+": "+p.Problem)
	}
	if (runErr != nil) != (len(problems) > 0) {
		return nil, nil, fmt.Errorf("doctor exited with %v for %d problems", runErr, len(problems))
	}
	slices.Sort(r.EdgeNodes)
	return r.EdgeNodes, problems, nil
}

// expectDoctor waits until doctor reports exactly the problems that start
// with want (a prefix listed k times matches k problems), on every edge
// node of names.
func expectDoctor(ctx context.Context, t *testing.T, kubeconfig string, names []string, what string, want ...string) {
	t.Helper()
	var seen []string
	start := time.Now()
	var mismatch error // the last answer that was not the one wanted
	eventually(ctx, t, 0, "kubectl grid doctor: "+what, func(ctx context.Context) error {
		err := doctorMatches(ctx, kubeconfig, names, want, &seen)
		if err != nil && ctx.Err() != nil && mismatch != nil {
			// The wait's end cut the last run short: say what the one
			// before found.
			return fmt.Errorf("%v; before that: %v", err, mismatch)
		}
		mismatch = err
		return err
	})
	t.Logf("kubectl grid doctor, %s (%s): %q", what, time.Since(start).Round(100*time.Millisecond), seen)
}

// doctorMatches: doctor reports exactly want's problems (see expectDoctor)
// on edge nodes names; seen gets what it reported.
func doctorMatches(ctx context.Context, kubeconfig string, names, want []string, seen *[]string) error {
	nodes, problems, err := doctorProblems(ctx, kubeconfig)
	if err != nil {
		return err
	}
	*seen = problems
	if !slices.Equal(nodes, names) {
		return fmt.Errorf("edge nodes %v, want %v (problems %q)", nodes, names, problems)
	}
	if len(problems) != len(want) {
		return fmt.Errorf("problems %q, want %q", problems, want)
	}
	for _, w := range want {
		k := len(slices.DeleteFunc(slices.Clone(want), func(o string) bool { return o != w }))
		if n := len(slices.DeleteFunc(slices.Clone(problems), func(p string) bool { return !strings.HasPrefix(p, w) })); n != k {
			return fmt.Errorf("problems %q: %q %d times, want %d", problems, w, n, k)
		}
	}
	return nil
}

// checkDoctor: on the installed cluster doctor finds nothing, then each
// problem injected once is named, and gone once undone. The wrapper on
// snapshotNode is restarted while its uid may not reach the apiserver (an
// iptables rule in the node's network namespace; the kubelet, root, still
// can), so it serves its snapshot; then, its snapshot removed, restarted
// again with nothing to serve (not ready), and the node's CoreDNS restarted
// behind it (not ready), while the apiserver cannot reach execNode's
// kubelet (no exec into its wrapper); its kube-proxy label goes
// (kube-proxy-edge leaves, the stock kube-proxy returns); the controller is
// scaled to zero and a CRD edited, then it comes back without managing CRDs
// (the CRD differs from the leader's schema), as two replicas without
// leader election, and as installed; SuperEdge's wrapper DaemonSet and wide
// binding appear, with a binding of a foreign role to our wrapper's account.
// The wrapper and CoreDNS DaemonSets are deleted (their pods orphaned) and
// created again.
func checkDoctor(ctx context.Context, t *testing.T, client kubernetes.Interface, cp *controlplane.ControlPlane, snapshotNode, execNode *Node, names []string) {
	kubeconfig := cp.Kubeconfig
	sorted := slices.Sorted(slices.Values(names))
	expectDoctor(ctx, t, kubeconfig, sorted, "no problem on the installed cluster")

	// The wrapper on its snapshot.
	host, port, err := net.SplitHostPort(strings.TrimPrefix(cp.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	rule := []string{"OUTPUT", "-m", "owner", "--uid-owner", "65532", "-d", host, "-p", "tcp", "--dport", port, "-j", "REJECT"}
	if out, err := snapshotNode.Net.NS.Run(ctx, "iptables", append([]string{"-I"}, rule...)...); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	ruleIn := true
	defer func() {
		if ruleIn {
			_, _ = snapshotNode.Net.NS.Run(context.Background(), "iptables", append([]string{"-D"}, rule...)...)
		}
	}()
	pods, err := client.CoreV1().Pods("edge-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=application-grid-wrapper", FieldSelector: "spec.nodeName=" + snapshotNode.Name})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the wrapper pod on %s: %v %d", snapshotNode.Name, err, len(pods.Items))
	}
	if err := client.CoreV1().Pods("edge-system").Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectDoctor(ctx, t, kubeconfig, sorted, "the restarted wrapper on "+snapshotNode.Name+" serves its snapshot",
		"node "+snapshotNode.Name+": wrapper application-grid-wrapper-")

	// Still cut off, with no snapshot: the wrapper restarted has nothing to
	// serve (not ready), and the node's CoreDNS restarted then cannot sync
	// its kubernetes plugin through it (not ready). Meanwhile the apiserver
	// cannot reach execNode's kubelet, so doctor cannot ask its wrapper.
	snapshot := snapshotNode.HostPath("/var/lib/application-grid-wrapper/snapshot.pb")
	if err := os.Remove(snapshot); err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{"application-grid-wrapper", "coredns-gridhosts"} {
		deletePodOn(ctx, t, client, "edge-system", "app.kubernetes.io/name="+component, snapshotNode.Name)
	}
	kubeletRule := []string{"INPUT", "-p", "tcp", "--dport", "10250", "-s", host, "-j", "REJECT", "--reject-with", "tcp-reset"}
	if out, err := execNode.Net.NS.Run(ctx, "iptables", append([]string{"-I"}, kubeletRule...)...); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	kubeletRuleIn := true
	defer func() {
		if kubeletRuleIn {
			_, _ = execNode.Net.NS.Run(context.Background(), "iptables", append([]string{"-D"}, kubeletRule...)...)
		}
	}()
	expectDoctor(ctx, t, kubeconfig, sorted, "the wrapper on "+snapshotNode.Name+" cut off with no snapshot, its CoreDNS restarted; "+execNode.Name+"'s kubelet unreachable from the apiserver",
		"node "+snapshotNode.Name+": application-grid-wrapper pod application-grid-wrapper-",
		"node "+snapshotNode.Name+": coredns-gridhosts pod coredns-gridhosts-",
		"node "+execNode.Name+": cannot ask wrapper application-grid-wrapper-")
	if out, err := execNode.Net.NS.Run(ctx, "iptables", append([]string{"-D"}, kubeletRule...)...); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	kubeletRuleIn = false
	if out, err := snapshotNode.Net.NS.Run(ctx, "iptables", append([]string{"-D"}, rule...)...); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	ruleIn = false
	expectDoctor(ctx, t, kubeconfig, sorted, "the wrapper on "+snapshotNode.Name+" back on the apiserver's data")
	// The reboot step serves this snapshot again: the wrapper rewrites it
	// within seconds of upstream answering.
	eventually(ctx, t, 0, snapshotNode.Name+": the wrapper's snapshot written again", func(context.Context) error {
		_, err := os.Stat(snapshot)
		return err
	})

	// kube-proxy-edge off the node, the stock kube-proxy back.
	label := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"servicegroup.io/kube-proxy":%s}}}`, value)
		if _, err := client.CoreV1().Nodes().Patch(ctx, snapshotNode.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Each way through "handover" (neither DaemonSet's), the old
	// kube-proxy gone before the other starts, as the guides move a node:
	// the sampler holds the whole run to one kube-proxy per node.
	gone := func(selector string) {
		t.Helper()
		if err := waitUntil(ctx, 3*time.Minute, func() error {
			pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + snapshotNode.Name})
			if err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("pod %s still there", pods.Items[0].Name)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s off %s: %v", selector, snapshotNode.Name, err)
		}
	}
	label(`"handover"`)
	gone("app.kubernetes.io/name=kube-proxy-edge")
	label("null")
	expectDoctor(ctx, t, kubeconfig, sorted, "the stock kube-proxy instead of kube-proxy-edge on "+snapshotNode.Name,
		"node "+snapshotNode.Name+": no kube-proxy-edge pod",
		"node "+snapshotNode.Name+": the stock kube-proxy (pod kube-proxy-")
	label(`"handover"`)
	gone("k8s-app=kube-proxy")
	label(`"edge"`)
	expectDoctor(ctx, t, kubeconfig, sorted, "kube-proxy-edge back on "+snapshotNode.Name)

	// No controller, and a CRD edited while none keeps it.
	scale := func(n int) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := client.AppsV1().Deployments("servicegroup-system").Patch(ctx, "application-grid-controller", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(0)
	expectDoctor(ctx, t, kubeconfig, sorted, "no controller",
		"deployment servicegroup-system/application-grid-controller: no ready replica",
		"lease servicegroup-system/application-grid-controller: no controller leads")
	crdPatch := []byte(`{"spec":{"names":{"categories":["superedge","edited"]}}}`)
	if _, err := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, "servicegrids.superedge.io", types.MergePatchType, crdPatch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expectDoctor(ctx, t, kubeconfig, sorted, "no controller and an edited CRD",
		"deployment servicegroup-system/application-grid-controller: no ready replica",
		"lease servicegroup-system/application-grid-controller: no controller leads",
		"crd servicegrids.superedge.io: missing or different")
	// Back, but leaving CRDs alone: the edited CRD now differs from the
	// schema the leader publishes it was built with.
	controllerArgs := func(manageCRDs, leaderElect bool) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := client.AppsV1().Deployments("servicegroup-system").Get(ctx, "application-grid-controller", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := &d.Spec.Template.Spec.Containers[0]
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool {
				return strings.HasPrefix(a, "--manage-crds=") || strings.HasPrefix(a, "--leader-elect=")
			})
			if !manageCRDs {
				c.Args = append(c.Args, "--manage-crds=false")
			}
			if !leaderElect {
				c.Args = append(c.Args, "--leader-elect=false")
			}
			// Through zero replicas: both new pods start at once, not one
			// after the other's readiness as a rolling update would.
			d.Spec.Replicas = ptr.To[int32](0)
			_, err = client.AppsV1().Deployments("servicegroup-system").Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		scale(2)
	}
	controllerArgs(false, true)
	expectDoctor(ctx, t, kubeconfig, sorted, "a controller with --manage-crds=false leads, the CRD still edited",
		"crd servicegrids.superedge.io: differs from the schema the leading controller application-grid-controller-")
	// Two replicas that both reconcile (they re-apply the CRDs, this
	// release's, which doctor compares with when no leader publishes).
	controllerArgs(true, false)
	expectDoctor(ctx, t, kubeconfig, sorted, "two controller replicas without leader election",
		"deployment servicegroup-system/application-grid-controller: 2 replicas without leader election would all reconcile")
	controllerArgs(true, true)
	expectDoctor(ctx, t, kubeconfig, sorted, "the controller back, leading, its CRDs re-applied")

	// SuperEdge's wrapper DaemonSet (on no node) and its wide binding.
	labels := map[string]string{"app": "application-grid-wrapper-node"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "application-grid-wrapper-node", Namespace: "edge-system"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{NodeSelector: map[string]string{"doctor-test": "no-such-node"}, Containers: []corev1.Container{{Name: "wrapper", Image: "superedge/application-grid-wrapper:v0.7.0"}}},
		}},
	}
	if _, err := client.AppsV1().DaemonSets("edge-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "application-grid-wrapper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "edge-system", Name: "application-grid-wrapper"}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// And a binding that gives our wrapper's account a role of someone
	// else's (SuperEdge's wide one).
	foreign := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "doctor-foreign-wrapper-role"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "edge-system", Name: "servicegroup-wrapper"}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectDoctor(ctx, t, kubeconfig, sorted, "SuperEdge leftovers, a foreign role bound to our wrapper's account",
		"daemonset edge-system/application-grid-wrapper-node: SuperEdge leftover",
		"clusterrolebinding application-grid-wrapper: SuperEdge leftover",
		"clusterrolebinding doctor-foreign-wrapper-role: gives the wrapper's ServiceAccount edge-system/servicegroup-wrapper the ClusterRole cluster-admin")
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, foreign.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.AppsV1().DaemonSets("edge-system").Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectDoctor(ctx, t, kubeconfig, sorted, "SuperEdge's leftovers removed")

	// Our wrapper's DaemonSet, then CoreDNS's, deleted with its pods
	// orphaned (they keep serving), then created again: it adopts them.
	for _, c := range []struct {
		name, problem string
		edgeNodes     []string
	}{
		{"application-grid-wrapper", "daemonset edge-system/application-grid-wrapper: missing: no edge node has a wrapper", nil},
		{"coredns-gridhosts", "daemonset edge-system/coredns-gridhosts: missing: no edge node has its own CoreDNS", sorted},
	} {
		dss := client.AppsV1().DaemonSets("edge-system")
		ds, err := dss.Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := dss.Delete(ctx, c.name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
			t.Fatal(err)
		}
		expectDoctor(ctx, t, kubeconfig, c.edgeNodes, "daemonset "+c.name+" deleted, its pods orphaned", c.problem)
		ds.ObjectMeta = metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Labels, Annotations: ds.Annotations}
		ds.Status = appsv1.DaemonSetStatus{}
		if ds, err = dss.Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, 0, "daemonset "+c.name+" created again, its pods adopted", func(ctx context.Context) error {
			pods, err := client.CoreV1().Pods("edge-system").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
			if err != nil {
				return err
			}
			if len(pods.Items) != len(names)-1 {
				return fmt.Errorf("%d pods, want %d", len(pods.Items), len(names)-1)
			}
			for _, p := range pods.Items {
				if o := metav1.GetControllerOf(&p); o == nil || o.UID != ds.UID {
					return fmt.Errorf("pod %s not adopted (controller %v)", p.Name, o)
				}
			}
			return nil
		})
		expectDoctor(ctx, t, kubeconfig, sorted, "daemonset "+c.name+" back")
	}
}

// deletePodOn deletes the pod of selector on node (there must be one).
func deletePodOn(ctx context.Context, t *testing.T, client kubernetes.Interface, namespace, selector, node string) {
	t.Helper()
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	live := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	if len(live) != 1 {
		t.Fatalf("%d pods %s on %s, want 1", len(live), selector, node)
	}
	if err := client.CoreV1().Pods(namespace).Delete(ctx, live[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// controllerInNodeunit is doctor's finding for each controller pod when the
// controller runs on cloudNode, itself in nodeunit1 (this cluster's cloud
// node is a member of a nodeunit whose grids opted into autonomy).
func controllerInNodeunit(ctx context.Context, t *testing.T, client kubernetes.Interface) []string {
	t.Helper()
	var want []string
	eventually(ctx, t, 0, "the controller's pods on "+cloudNode+" only", func(ctx context.Context) error {
		pods, err := client.CoreV1().Pods("servicegroup-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=application-grid-controller"})
		if err != nil {
			return err
		}
		want = nil
		for _, p := range pods.Items {
			if p.Spec.NodeName != cloudNode || p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s on %q (deleted: %v)", p.Name, p.Spec.NodeName, p.DeletionTimestamp != nil)
			}
			want = append(want, "pod servicegroup-system/"+p.Name+": runs on "+cloudNode+", in nodeunit "+gridKey+"=nodeunit1 that ")
		}
		return nil
	})
	return want
}

// checkDoctorWebhook: with grids opted into autonomy, the webhook's
// registration as the controller wrote it is edited (one webhook left,
// failing closed, with no CA), deleted, then created again as it was with
// its Service selecting no pod; doctor names each, beside the controller
// placement findings (placement) that hold all along, and nothing more once
// the Service selects the controller again. The controller re-applies the
// registration only when what it would write changes, so the test restores
// it.
func checkDoctorWebhook(ctx context.Context, t *testing.T, client kubernetes.Interface, kubeconfig string, edgeNodes, placement []string) {
	t.Helper()
	configs := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	saved, err := configs.Get(ctx, autonomy.WebhookConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subject := "ValidatingWebhookConfiguration " + autonomy.WebhookConfigurationName + ": "
	edited := saved.DeepCopy()
	i := slices.IndexFunc(edited.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == autonomy.PodsWebhookName })
	if i < 0 || len(edited.Webhooks) != 2 {
		t.Fatalf("the registration's webhooks: %d, no %s: %v", len(edited.Webhooks), autonomy.PodsWebhookName, i < 0)
	}
	w := edited.Webhooks[i]
	w.FailurePolicy, w.ClientConfig.CABundle = ptr.To(admissionregistrationv1.Fail), nil
	edited.Webhooks = []admissionregistrationv1.ValidatingWebhook{w}
	if _, err := configs.Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := keepInjected(ctx, t, "the edited registration", func(ctx context.Context) error {
		cur, err := configs.Get(ctx, edited.Name, metav1.GetOptions{})
		if err != nil || len(cur.Webhooks) == 1 {
			return err
		}
		cur.Webhooks = edited.Webhooks
		_, err = configs.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	expectDoctor(ctx, t, kubeconfig, edgeNodes, "the webhook's registration edited", append(slices.Clone(placement),
		subject+"webhook "+autonomy.PodsWebhookName+" has no caBundle",
		subject+"webhook "+autonomy.PodsWebhookName+" does not fail open",
		subject+"webhook "+autonomy.NodesWebhookName+" missing")...)
	stop()
	if err := configs.Delete(ctx, autonomy.WebhookConfigurationName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stop = keepInjected(ctx, t, "the deleted registration", func(ctx context.Context) error {
		err := configs.Delete(ctx, autonomy.WebhookConfigurationName, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	expectDoctor(ctx, t, kubeconfig, edgeNodes, "the webhook's registration deleted", append(slices.Clone(placement),
		subject+"missing while grids carry")...)
	stop()

	services := client.CoreV1().Services("servicegroup-system")
	svc, err := services.Get(ctx, "application-grid-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selector := svc.Spec.Selector
	setSelector := func(sel map[string]string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := services.Get(ctx, svc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Selector = sel
			_, err = services.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	restore := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels, Annotations: saved.Annotations},
		Webhooks:   saved.Webhooks,
	}
	if _, err := configs.Create(ctx, restore, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setSelector(map[string]string{"app.kubernetes.io/name": "no-such-pod"})
	expectDoctor(ctx, t, kubeconfig, edgeNodes, "the webhook registered again, its Service selecting no pod", append(slices.Clone(placement),
		"service servicegroup-system/application-grid-controller: no ready endpoint")...)
	setSelector(selector)
	expectDoctor(ctx, t, kubeconfig, edgeNodes, "the webhook's Service selecting the controller again", placement...)
}

// keepInjected applies an injected state every half second until stop: a
// controller replica that takes the lead just after a rollout registers the
// webhook anew, which undid the injection before doctor saw it (a CI run).
func keepInjected(ctx context.Context, t *testing.T, what string, apply func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := apply(ctx); err != nil && ctx.Err() == nil {
				t.Logf("keeping %s: %v", what, err)
			}
		}
	}()
	return func() { cancel(); <-done }
}
