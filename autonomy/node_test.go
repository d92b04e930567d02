package autonomy

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeOf: only the Ready condition counts; Unknown is unreachable,
// False is reachable and not Ready, since its last transition.
func TestNodeOf(t *testing.T) {
	at := time.Unix(1000, 0)
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}},
			Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := func(s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s, LastTransitionTime: metav1.NewTime(at)}
	}
	pressure := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(at.Add(time.Hour))}
	for _, c := range []struct {
		name string
		n    *corev1.Node
		want Node
	}{
		{"unknown", node(pressure, ready(corev1.ConditionUnknown)), Node{Unreachable: true, Since: at}},
		{"true", node(ready(corev1.ConditionTrue), pressure), Node{Ready: true, Since: at}},
		{"false", node(ready(corev1.ConditionFalse)), Node{Since: at}},
		{"no Ready condition", node(pressure), Node{}},
	} {
		got := NodeOf(c.n)
		if got.Name != "n" || got.Labels["zone"] != "a" || got.Unreachable != c.want.Unreachable || got.Ready != c.want.Ready || !got.Since.Equal(c.want.Since) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
