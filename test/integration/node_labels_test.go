package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestNodesCannotGrantThemselvesOurLabels: on an apiserver with the Node
// authorizer and NodeRestriction (as kubeadm runs it), a kubelet's identity
// may label its own Node servicegroup.io/data-plane and servicegroup.io/site
// (which bring the wrapper's and CoreDNS's tokens to it and make it a site
// stream member) until the shipped policy is in; then it may neither add,
// change nor remove them, at registration or later, while its other labels,
// its status and the operator's `kubectl label` keep working.
func TestNodesCannotGrantThemselvesOurLabels(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{APIServerArgs: []string{
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
	}})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	asNode := func(name string) kubernetes.Interface {
		cfg := rest.CopyConfig(cp.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + name, Groups: []string{"system:nodes", "system:authenticated"}}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node0",
		Labels: map[string]string{"servicegroup.io/data-plane": "edge", "servicegroup.io/site": "shop"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node0 := asNode("node0")
	label := func(c kubernetes.Interface, key string, value *string) error {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: value}}})
		_, err := c.CoreV1().Nodes().Patch(ctx, "node0", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	str := func(s string) *string { return &s }

	// Without the policy: what NodeRestriction lets a kubelet do.
	if err := label(node0, "servicegroup.io/site", str("elsewhere")); err != nil {
		t.Fatalf("before the policy, node0 could not relabel itself (the test's node identity is wrong): %v", err)
	}
	if err := label(admin, "servicegroup.io/site", str("shop")); err != nil {
		t.Fatal(err)
	}

	newKubectl(t, cp).must("apply", "--server-side", "-f", manifestDir("wrapper", "node-label-policy.yaml"))

	// The policy takes effect once the apiserver has compiled it.
	refused := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "servicegroup.io/site") && strings.Contains(err.Error(), "system:node:node0")
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = label(node0, "servicegroup.io/site", str("elsewhere"))
		if last == nil {
			// Not yet in force: undo, and ask again.
			return false, label(admin, "servicegroup.io/site", str("shop"))
		}
		return refused(last), nil
	}); err != nil {
		t.Fatalf("node0 still relabels its site: %v (last answer %v)", err, last)
	}
	for _, tc := range []struct {
		what  string
		key   string
		value *string
	}{
		{"remove its data-plane label", "servicegroup.io/data-plane", nil},
		{"change its data-plane label", "servicegroup.io/data-plane", str("other")},
		{"remove its site label", "servicegroup.io/site", nil},
	} {
		if err := label(node0, tc.key, tc.value); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("node0 may %s: %v", tc.what, err)
		}
	}
	// At registration.
	for name, labels := range map[string]map[string]string{
		"node1": {"servicegroup.io/data-plane": "edge"},
		"node2": {"servicegroup.io/site": "shop"},
	} {
		_, err := asNode(name).CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s registered itself with %v: %v", name, labels, err)
		}
	}

	// What must keep working.
	if _, err := asNode("node3").CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node3",
		Labels: map[string]string{"example.com/rack": "r1"}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("a kubelet registering without our labels: %v", err)
	}
	if err := label(node0, "example.com/rack", str("r2")); err != nil {
		t.Errorf("node0 setting a label of its own: %v", err)
	}
	n, err := node0.CoreV1().Nodes().Get(ctx, "node0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := node0.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Errorf("node0 posting its status: %v", err)
	}
	for _, v := range []*string{str("shop-2"), nil} {
		if err := label(admin, "servicegroup.io/site", v); err != nil {
			t.Errorf("the operator setting the site label to %v: %v", v, err)
		}
	}
	got, err := admin.CoreV1().Nodes().Get(ctx, "node0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "edge"; got.Labels["servicegroup.io/data-plane"] != want {
		t.Errorf("node0's data-plane label is %q, want %q", got.Labels["servicegroup.io/data-plane"], want)
	}
	t.Logf("node0's labels at the end: %v", got.Labels)
}
