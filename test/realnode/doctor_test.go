package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
// problem injected once is named, and gone once undone. The controller is
// scaled to zero and a CRD edited, then it comes back without managing
// CRDs (the CRD differs from the leader's schema) while the wrapper of the
// static pod on static and execNode's kube-proxy-edge hang (SIGSTOP) until
// their readiness probes fail; they go on while the controller runs as two
// replicas without leader election, then as installed (the waits for the
// restarts and for the probes overlap). The wrapper on snapshotNode is
// restarted while its uid may not reach the apiserver (an
// iptables rule in the node's network namespace; the kubelet, root, still
// can), so it serves its snapshot; then, its snapshot removed, restarted
// again with nothing to serve (not ready), and the node's CoreDNS restarted
// behind it (not ready), while the apiserver cannot reach execNode's
// kubelet (no exec into its wrapper); its kube-proxy label goes
// (kube-proxy-edge leaves, the stock kube-proxy returns). SuperEdge's wrapper DaemonSets (edge
// and cloud nodes') and wide binding appear, with a binding of a foreign
// role to our wrapper's account. The wrapper and CoreDNS DaemonSets are
// deleted (their pods orphaned) and created again.
func checkDoctor(ctx context.Context, t *testing.T, client kubernetes.Interface, cp *controlplane.ControlPlane, snapshotNode, execNode, static *Node, names []string) {
	kubeconfig := cp.Kubeconfig
	sorted := slices.Sorted(slices.Values(names))
	expectDoctor(ctx, t, kubeconfig, sorted, "no problem on the installed cluster")

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
	// The Lease held by something that is not a controller pod, then run
	// out, then released as a leader that stops releases it.
	leases := client.CoordinationV1().Leases("servicegroup-system")
	setLease := func(holder string, renewed time.Time, seconds int32) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l, err := leases.Get(ctx, "application-grid-controller", metav1.GetOptions{})
			if err != nil {
				return err
			}
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, &seconds
			l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	const stranger = "elsewhere_0b5e"
	setLease(stranger, time.Now(), 3600)
	expectDoctor(ctx, t, kubeconfig, sorted, "no controller, the Lease held by something else",
		"deployment servicegroup-system/application-grid-controller: no ready replica",
		`lease servicegroup-system/application-grid-controller: held by "`+stranger+`", which is not a pod of deployment servicegroup-system/application-grid-controller`)
	setLease(stranger, time.Now().Add(-time.Hour), 15)
	expectDoctor(ctx, t, kubeconfig, sorted, "no controller, the Lease run out",
		"deployment servicegroup-system/application-grid-controller: no ready replica",
		"lease servicegroup-system/application-grid-controller: no controller leads: "+stranger+"'s lease ran out at ")
	setLease("", time.Now(), 1)
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
	// Then, at once: the controller back without managing CRDs (the CRD
	// still edited now differs from the schema the leader publishes), and
	// a hung wrapper in the static pod and a hung kube-proxy-edge, whose
	// readiness probes time out meanwhile. Doctor names all of it.
	var thaws []func() error
	thawAll := func() error {
		var errs []error
		for _, thaw := range thaws {
			errs = append(errs, thaw())
		}
		thaws = nil
		return errors.Join(errs...)
	}
	defer func() { _ = thawAll() }()
	for _, f := range []struct {
		node   *Node
		binary string
	}{{static, "application-grid-wrapper"}, {execNode, "kube-proxy"}} {
		thaw, err := f.node.Freeze(f.binary)
		if err != nil {
			t.Fatal(err)
		}
		thaws = append(thaws, thaw)
	}
	controllerArgs(false, true)
	expectDoctor(ctx, t, kubeconfig, sorted, "a controller with --manage-crds=false leads, the CRD still edited; the wrapper of "+static.Name+"'s static pod and "+execNode.Name+"'s kube-proxy-edge hung (SIGSTOP)",
		"crd servicegrids.superedge.io: differs from the schema the leading controller application-grid-controller-",
		"node "+static.Name+": static pod ",
		"node "+execNode.Name+": kube-proxy-edge pod kube-proxy-edge-")
	// Two replicas that both reconcile (they re-apply the CRDs, this
	// release's, which doctor compares with when no leader publishes),
	// while the hung ones go on.
	if err := thawAll(); err != nil {
		t.Fatal(err)
	}
	controllerArgs(true, false)
	expectDoctor(ctx, t, kubeconfig, sorted, "two controller replicas without leader election; the static pod's wrapper and kube-proxy-edge going again (SIGCONT)",
		"deployment servicegroup-system/application-grid-controller: 2 replicas without leader election would all reconcile")
	controllerArgs(true, true)
	expectDoctor(ctx, t, kubeconfig, sorted, "the controller back, leading, its CRDs re-applied")

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

	// No wrapper and no CoreDNS pod on the node: both deleted while
	// kube-controller-manager, whose DaemonSet controller would make them
	// again at once (the DaemonSets tolerate every taint), is stopped.
	cp.StopControllerManager()
	kcmStopped := true
	defer func() {
		if kcmStopped {
			_ = cp.RestartControllerManager(context.Background(), nil)
		}
	}()
	for _, component := range []string{"application-grid-wrapper", "coredns-gridhosts"} {
		deletePodOn(ctx, t, client, "edge-system", "app.kubernetes.io/name="+component, snapshotNode.Name)
	}
	expectDoctor(ctx, t, kubeconfig, sorted, "the wrapper and CoreDNS pods of "+snapshotNode.Name+" deleted, kube-controller-manager stopped",
		"node "+snapshotNode.Name+": no application-grid-wrapper pod",
		"node "+snapshotNode.Name+": no coredns-gridhosts pod")
	if err := cp.RestartControllerManager(ctx, nil); err != nil {
		t.Fatal(err)
	}
	kcmStopped = false
	expectDoctor(ctx, t, kubeconfig, sorted, "kube-controller-manager back, the DaemonSets' pods made again on "+snapshotNode.Name)

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

	// SuperEdge's wrapper DaemonSets, for edge and cloud nodes (on no
	// node), and its wide binding.
	var superEdgeWrappers []string
	for _, name := range []string{"application-grid-wrapper-node", "application-grid-wrapper-master"} {
		labels := map[string]string{"app": name}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "edge-system"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{NodeSelector: map[string]string{"doctor-test": "no-such-node"}, Containers: []corev1.Container{{Name: "wrapper", Image: "superedge/application-grid-wrapper:v0.7.0"}}},
			}},
		}
		if _, err := client.AppsV1().DaemonSets("edge-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		superEdgeWrappers = append(superEdgeWrappers, name)
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
		"daemonset edge-system/application-grid-wrapper-master: SuperEdge leftover",
		"clusterrolebinding application-grid-wrapper: SuperEdge leftover",
		"clusterrolebinding doctor-foreign-wrapper-role: gives the wrapper's ServiceAccount edge-system/servicegroup-wrapper the ClusterRole cluster-admin")
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, foreign.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range superEdgeWrappers {
		if err := client.AppsV1().DaemonSets("edge-system").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
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

// checkDoctorWebhook: with grids opted into autonomy, the leading
// controller puts its webhook's registration back when it is edited (one
// webhook left, failing closed, with no CA) and when it is deleted. Then,
// the controller scaled to zero (nothing puts it back; its Service has no
// ready endpoint), the same edit and deletion stay, and doctor names each
// beside the missing controller; scaled up again, the new leader registers
// the webhook as it writes it, and doctor finds only the controller
// placement findings (of the new pods) that hold all along.
func checkDoctorWebhook(ctx context.Context, t *testing.T, client kubernetes.Interface, kubeconfig string, edgeNodes []string) {
	t.Helper()
	configs := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	name := autonomy.WebhookConfigurationName
	saved, err := configs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	subject := "ValidatingWebhookConfiguration " + name + ": "
	edit := func() {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := configs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			i := slices.IndexFunc(cur.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == autonomy.PodsWebhookName })
			if i < 0 || len(cur.Webhooks) != 2 {
				return fmt.Errorf("the registration's webhooks: %d, no %s: %v", len(cur.Webhooks), autonomy.PodsWebhookName, i < 0)
			}
			w := cur.Webhooks[i]
			w.FailurePolicy, w.ClientConfig.CABundle = ptr.To(admissionregistrationv1.Fail), nil
			cur.Webhooks = []admissionregistrationv1.ValidatingWebhook{w}
			_, err = configs.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// registered: as the controller writes it (both webhooks, failing
	// open, with the CA), another object than before if gone is set.
	registered := func(gone *admissionregistrationv1.ValidatingWebhookConfiguration) func(context.Context) error {
		return func(ctx context.Context) error {
			cur, err := configs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if gone != nil && cur.UID == gone.UID {
				return fmt.Errorf("still the object that was deleted")
			}
			if len(cur.Webhooks) != len(saved.Webhooks) {
				return fmt.Errorf("%d webhooks, want %d", len(cur.Webhooks), len(saved.Webhooks))
			}
			for _, w := range cur.Webhooks {
				if len(w.ClientConfig.CABundle) == 0 || w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
					return fmt.Errorf("webhook %s: caBundle %d bytes, failure policy %v", w.Name, len(w.ClientConfig.CABundle), w.FailurePolicy)
				}
			}
			return nil
		}
	}
	restoredEvent := func(what string) func(context.Context) error {
		return func(ctx context.Context) error {
			events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=ValidatingWebhookConfiguration,involvedObject.name=" + name + ",reason=AutonomyWebhookRestored"})
			if err != nil {
				return err
			}
			for _, e := range events.Items {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, what) {
					return nil
				}
			}
			return fmt.Errorf("no Warning AutonomyWebhookRestored Event saying %q among %d", what, len(events.Items))
		}
	}

	// The leader repairs what it registered: one that took the lead a
	// moment ago (the placement rollout) registers at its first refresh
	// (within 5 s of its caches' sync), which restores too but says
	// nothing; so the leader has led for 15 s first.
	eventually(ctx, t, 0, "the controller's leader leading for 15 s", func(ctx context.Context) error {
		l, err := client.CoordinationV1().Leases("servicegroup-system").Get(ctx, "application-grid-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" || l.Spec.AcquireTime == nil {
			return fmt.Errorf("no holder")
		}
		if d := time.Since(l.Spec.AcquireTime.Time); d < 15*time.Second {
			return fmt.Errorf("%s leads since %s", *l.Spec.HolderIdentity, d.Round(time.Second))
		}
		return nil
	})
	start := time.Now()
	edit()
	eventually(ctx, t, 30*time.Second, "the leader puts the edited registration back", registered(nil))
	t.Logf("the edited registration put back in %s", time.Since(start).Round(100*time.Millisecond))
	eventually(ctx, t, 0, "an Event says the edit was undone", restoredEvent("was edited"))
	before, err := configs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := configs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 30*time.Second, "the leader puts the deleted registration back", registered(before))
	t.Logf("the deleted registration put back in %s", time.Since(start).Round(100*time.Millisecond))
	eventually(ctx, t, 0, "an Event says the deletion was undone", restoredEvent("was deleted"))

	// No controller: what is done to the registration stays.
	deployments := client.AppsV1().Deployments("servicegroup-system")
	scale := func(n int) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := deployments.Patch(ctx, "application-grid-controller", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// With no leader publishing its schemas, doctor compares the CRDs with
	// its own release's: the upgrade installed the next build's
	// deploymentgrids (a new field), which differs.
	noController := []string{
		"deployment servicegroup-system/application-grid-controller: no ready replica",
		"lease servicegroup-system/application-grid-controller: no controller leads",
		"crd deploymentgrids.superedge.io: missing or different from release",
	}
	installed, err := deployments.Get(ctx, "application-grid-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := int(ptr.Deref(installed.Spec.Replicas, 1))
	scale(0)
	eventually(ctx, t, 0, "no controller pod", func(ctx context.Context) error {
		pods, err := client.CoreV1().Pods("servicegroup-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=application-grid-controller"})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
	edit()
	expectDoctor(ctx, t, kubeconfig, edgeNodes, "no controller, the webhook's registration edited", append(slices.Clone(noController),
		"service servicegroup-system/application-grid-controller: no ready endpoint",
		subject+"webhook "+autonomy.PodsWebhookName+" has no caBundle",
		subject+"webhook "+autonomy.PodsWebhookName+" does not fail open",
		subject+"webhook "+autonomy.NodesWebhookName+" missing")...)
	deleted, err := configs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := configs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectDoctor(ctx, t, kubeconfig, edgeNodes, "no controller, the webhook's registration deleted", append(slices.Clone(noController),
		subject+"missing while grids carry")...)

	// Back: the new leader registers it as it writes it.
	scale(replicas)
	eventually(ctx, t, 0, "the leader back registers the webhook", registered(deleted))
	eventually(ctx, t, 0, "the controller's replicas ready", func(ctx context.Context) error {
		d, err := deployments.Get(ctx, "application-grid-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if int(d.Status.ReadyReplicas) != replicas || int(d.Status.Replicas) != replicas {
			return fmt.Errorf("%d of %d ready (%d pods)", d.Status.ReadyReplicas, replicas, d.Status.Replicas)
		}
		return nil
	})
	placement := controllerInNodeunit(ctx, t, client)
	expectDoctor(ctx, t, kubeconfig, edgeNodes, "the controller back, the webhook registered again", placement...)
}

// checkDoctorCRDMissing: a CRD deleted under a leading controller is
// named with the leader and its release, and doctor's fix (build/crds of
// that release, applied) ends it. The leader, with --manage-crds=true,
// puts the CRD back at its next check (every --crd-check-interval, a
// minute): a deletion it undid before doctor looked is made again. Run
// where no node uses our components, as the CRD's objects go with it.
func checkDoctorCRDMissing(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, op *Operator, name string) {
	t.Helper()
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	want := "crd " + name + ": missing: the leading controller "
	start := time.Now()
	var seen []string
	eventually(ctx, t, 0, "kubectl grid doctor: CRD "+name+" deleted under a leading controller", func(ctx context.Context) error {
		if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := waitUntil(ctx, time.Minute, func() error {
			if _, err := crds.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		}); err != nil {
			return err
		}
		_, problems, err := doctorProblems(ctx, cp.Kubeconfig)
		if err != nil {
			return err
		}
		seen = problems
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			return fmt.Errorf("no %q among %q", want, problems)
		}
		return nil
	})
	t.Logf("kubectl grid doctor, CRD %s deleted under a leading controller (%s): %q", name, time.Since(start).Round(100*time.Millisecond), seen)
	// The fix doctor gives.
	if _, err := op.Run(ctx, "apply", "--server-side", "-k", "build/crds"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 0, "kubectl grid doctor: CRD "+name+" applied again", func(ctx context.Context) error {
		_, problems, err := doctorProblems(ctx, cp.Kubeconfig)
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(problems, func(p string) bool { return strings.HasPrefix(p, "crd ") }); i >= 0 {
			return fmt.Errorf("still %q", problems[i])
		}
		return nil
	})
}
