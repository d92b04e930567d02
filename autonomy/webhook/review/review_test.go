package review

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func review(t *testing.T, resource, sub string, obj, old any) []byte {
	t.Helper()
	raw := func(o any) runtime.RawExtension {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "u1",
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: resource},
			Operation: admissionv1.Update, SubResource: sub,
			Object: raw(obj), OldObject: raw(old),
		},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func podReady(node string, status corev1.ConditionStatus) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
}

func tainted(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: taints}}
}

var (
	unreachableNoExecute  = corev1.Taint{Key: UnreachableTaint, Effect: corev1.TaintEffectNoExecute}
	unreachableNoSchedule = corev1.Taint{Key: UnreachableTaint, Effect: corev1.TaintEffectNoSchedule}
)

// Only the two writes the webhook may withhold are read as actions; every
// other request it could be sent is let through.
func TestReadReview(t *testing.T) {
	cases := []struct {
		name string
		body []byte
		want Action
		node string
	}{
		{"pod Ready True to False", review(t, "pods", "status", podReady("n1", corev1.ConditionFalse), podReady("n1", corev1.ConditionTrue)), MarkNotReady, "n1"},
		{"pod Ready False to False", review(t, "pods", "status", podReady("n1", corev1.ConditionFalse), podReady("n1", corev1.ConditionFalse)), "", ""},
		{"pod Ready False to True", review(t, "pods", "status", podReady("n1", corev1.ConditionTrue), podReady("n1", corev1.ConditionFalse)), "", ""},
		{"pod not bound", review(t, "pods", "status", podReady("", corev1.ConditionFalse), podReady("", corev1.ConditionTrue)), "", ""},
		{"pod main resource", review(t, "pods", "", podReady("n1", corev1.ConditionFalse), podReady("n1", corev1.ConditionTrue)), "", ""},
		{"unreachable NoExecute added", review(t, "nodes", "", tainted(unreachableNoSchedule, unreachableNoExecute), tainted(unreachableNoSchedule)), TaintNoExecute, "n"},
		{"unreachable NoExecute kept", review(t, "nodes", "", tainted(unreachableNoExecute), tainted(unreachableNoExecute)), "", ""},
		{"NoSchedule only", review(t, "nodes", "", tainted(unreachableNoSchedule), tainted()), "", ""},
		{"node status", review(t, "nodes", "status", tainted(unreachableNoExecute), tainted()), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Read(c.body)
			if err != nil {
				t.Fatal(err)
			}
			if r.Action != c.want || r.Node != c.node {
				t.Fatalf("got action %q node %q, want %q %q", r.Action, r.Node, c.want, c.node)
			}
		})
	}
	for _, bad := range []string{``, `{}`, `{"request":{"resource":{"resource":"pods"},"subResource":"status","operation":"UPDATE","object":"x"}}`} {
		if _, err := Read([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestRespond(t *testing.T) {
	r, err := Read(review(t, "nodes", "", tainted(unreachableNoExecute), tainted()))
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(r.Respond(false, "why"), &out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.UID != "u1" || out.Response.Allowed || out.Response.Result.Message != "why" || out.Kind != "AdmissionReview" {
		t.Fatalf("got %+v", out.Response)
	}
}
