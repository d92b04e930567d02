package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/servicegroup/servicegroup/autonomy"
)

// TestNodesLastReadOnFailure: when reading a node or a nodeunit fails (a
// loaded apiserver), the last read answers if it is younger than
// lastReadFor; without one, or older, the failure is returned (and the
// write goes through).
func TestNodesLastReadOnFailure(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(time.Unix(1000, 0)),
		}}},
	}
	kube := fake.NewClientset(node)
	failing := false
	kube.PrependReactor("*", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing {
			return true, nil, errors.New("the apiserver is too slow")
		}
		return false, nil, nil
	})
	now := time.Unix(2000, 0)
	n := newNodes(kube, func() time.Time { return now })
	unit := autonomy.Unit{Key: "zone", Value: "a"}

	// Read once, while the apiserver answers.
	got, err := n.node(ctx, "edge-1")
	if err != nil || !got.Unreachable {
		t.Fatalf("node: %+v, %v; want it unreachable", got, err)
	}
	members, err := n.unit(ctx, unit)
	if err != nil || len(members) != 1 || !members[0].Unreachable {
		t.Fatalf("unit: %+v, %v; want edge-1, unreachable", members, err)
	}

	// Failing, past unitTTL but within lastReadFor: the last read answers.
	failing = true
	now = now.Add(lastReadFor - time.Second)
	if got, err := n.node(ctx, "edge-1"); err != nil || got.Name != "edge-1" || !got.Unreachable {
		t.Errorf("node, a read failing %s after the last: %+v, %v; want the last read", lastReadFor-time.Second, got, err)
	}
	if members, err := n.unit(ctx, unit); err != nil || len(members) != 1 || members[0].Name != "edge-1" {
		t.Errorf("unit, a read failing %s after the last: %+v, %v; want the last read", lastReadFor-time.Second, members, err)
	}

	// Older than lastReadFor, or never read: the failure.
	now = now.Add(2 * time.Second)
	if _, err := n.node(ctx, "edge-1"); err == nil {
		t.Errorf("node, a read failing %s after the last: no error", lastReadFor+time.Second)
	}
	if _, err := n.unit(ctx, unit); err == nil {
		t.Errorf("unit, a read failing %s after the last: no error", lastReadFor+time.Second)
	}
	if _, err := n.node(ctx, "edge-2"); err == nil {
		t.Errorf("node never read, its read failing: no error")
	}

	// Answering again: read afresh.
	failing = false
	if _, err := n.node(ctx, "edge-1"); err != nil {
		t.Errorf("node, the apiserver answering again: %v", err)
	}
}
