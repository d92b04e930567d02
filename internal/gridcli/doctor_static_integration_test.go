package gridcli

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestDoctorAsksNoStaticPodOnUnreachableNode: a node that runs the static
// pod (and is not one the wrapper DaemonSet selects) is judged by its own
// Ready condition, like the DaemonSet's nodes. Unreachable, its wrapper is
// not asked through kubectl exec, which would wait out its 30 s timeout on
// a real cluster, and doctor says why. (Asked, here with no kubelet, the
// exec fails at once with another finding.)
func TestDoctorAsksNoStaticPodOnUnreachableNode(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	c := &cluster{t: t, kubeconfig: cp.Kubeconfig, kube: kube}
	c.must(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: edgeNamespace}}, metav1.CreateOptions{}))
	createDaemonSet(t, kube, edgeNamespace, wrapperName, map[string]string{"servicegroup.io/data-plane": "edge"})

	const node = "static-s"
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	c.must(n, err)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.Now(), Reason: "NodeStatusUnknown"}}
	c.must(kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}))
	// The static pod's mirror, ready (the node lifecycle controller's
	// marking aside, as the autonomy webhook holds it off).
	p := createWrapperPod(t, kube, edgeNamespace, staticPodName+"-"+node, node, map[string]string{nameLabel: staticPodName}, true)

	out, _ := c.run("doctor", "-o", "json")
	var r doctorReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	want := "cannot ask wrapper " + p.Name + " whether it serves its snapshot: the node is unreachable (Ready Unknown since "
	var problems []string
	found := false
	for _, f := range r.Problems {
		problems = append(problems, f.Subject+": "+f.Problem)
		found = found || f.Subject == "node "+node && strings.HasPrefix(f.Problem, want)
	}
	if !found {
		t.Errorf("doctor's findings %q, want node %s: %q...", problems, node, want)
	}
}
