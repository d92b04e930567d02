package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

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
// with want (each once), on every edge node of names.
func expectDoctor(ctx context.Context, t *testing.T, kubeconfig string, names []string, what string, want ...string) {
	t.Helper()
	var seen []string
	eventually(ctx, t, 0, "kubectl grid doctor: "+what, func(ctx context.Context) error {
		nodes, problems, err := doctorProblems(ctx, kubeconfig)
		if err != nil {
			return err
		}
		seen = problems
		if !slices.Equal(nodes, names) {
			return fmt.Errorf("edge nodes %v, want %v", nodes, names)
		}
		if len(problems) != len(want) {
			return fmt.Errorf("problems %q, want %q", problems, want)
		}
		for _, w := range want {
			if n := len(slices.DeleteFunc(slices.Clone(problems), func(p string) bool { return !strings.HasPrefix(p, w) })); n != 1 {
				return fmt.Errorf("problems %q: %q %d times, want once", problems, w, n)
			}
		}
		return nil
	})
	t.Logf("kubectl grid doctor, %s: %q", what, seen)
}

// checkDoctor: on the installed cluster doctor finds nothing, then each
// problem injected once is named, and gone once undone. The wrapper on
// snapshotNode is restarted while its uid may not reach the apiserver (an
// iptables rule in the node's network namespace; the kubelet, root, still
// can), so it serves its snapshot; its kube-proxy label goes (kube-proxy-edge
// leaves, the stock kube-proxy returns); the controller is scaled to zero
// and a CRD edited, then it comes back without managing CRDs (the CRD
// differs from the leader's schema) and with; SuperEdge's wrapper DaemonSet and wide binding appear.
func checkDoctor(ctx context.Context, t *testing.T, client kubernetes.Interface, cp *controlplane.ControlPlane, snapshotNode *Node, names []string) {
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
	if out, err := snapshotNode.Net.NS.Run(ctx, "iptables", append([]string{"-D"}, rule...)...); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	ruleIn = false
	expectDoctor(ctx, t, kubeconfig, sorted, "the wrapper on "+snapshotNode.Name+" back on the apiserver's data")

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
	manageCRDs := func(manage bool) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := client.AppsV1().Deployments("servicegroup-system").Get(ctx, "application-grid-controller", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := &d.Spec.Template.Spec.Containers[0]
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--manage-crds=") })
			if !manage {
				c.Args = append(c.Args, "--manage-crds=false")
			}
			d.Spec.Replicas = ptr.To[int32](2)
			_, err = client.AppsV1().Deployments("servicegroup-system").Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	manageCRDs(false)
	expectDoctor(ctx, t, kubeconfig, sorted, "a controller with --manage-crds=false leads, the CRD still edited",
		"crd servicegrids.superedge.io: differs from the schema the leading controller application-grid-controller-")
	manageCRDs(true)
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
	expectDoctor(ctx, t, kubeconfig, sorted, "SuperEdge leftovers",
		"daemonset edge-system/application-grid-wrapper-node: SuperEdge leftover",
		"clusterrolebinding application-grid-wrapper: SuperEdge leftover")
	if err := client.AppsV1().DaemonSets("edge-system").Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectDoctor(ctx, t, kubeconfig, sorted, "SuperEdge's leftovers removed")
}

// firstDaemonSetNode is a node whose components are the DaemonSets' pods.
func firstDaemonSetNode(nodes []*Node) *Node {
	for _, n := range nodes {
		if n.Name != staticNode {
			return n
		}
	}
	panic("every node is the static-pod node")
}
