package webhook

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

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
		want action
		node string
	}{
		{"pod Ready True to False", review(t, "pods", "status", podReady("n1", corev1.ConditionFalse), podReady("n1", corev1.ConditionTrue)), markNotReady, "n1"},
		{"pod Ready False to False", review(t, "pods", "status", podReady("n1", corev1.ConditionFalse), podReady("n1", corev1.ConditionFalse)), "", ""},
		{"pod Ready False to True", review(t, "pods", "status", podReady("n1", corev1.ConditionTrue), podReady("n1", corev1.ConditionFalse)), "", ""},
		{"pod not bound", review(t, "pods", "status", podReady("", corev1.ConditionFalse), podReady("", corev1.ConditionTrue)), "", ""},
		{"pod main resource", review(t, "pods", "", podReady("n1", corev1.ConditionFalse), podReady("n1", corev1.ConditionTrue)), "", ""},
		{"unreachable NoExecute added", review(t, "nodes", "", tainted(unreachableNoSchedule, unreachableNoExecute), tainted(unreachableNoSchedule)), taintNoExecute, "n"},
		{"unreachable NoExecute kept", review(t, "nodes", "", tainted(unreachableNoExecute), tainted(unreachableNoExecute)), "", ""},
		{"NoSchedule only", review(t, "nodes", "", tainted(unreachableNoSchedule), tainted()), "", ""},
		{"node status", review(t, "nodes", "status", tainted(unreachableNoExecute), tainted()), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := readReview(c.body)
			if err != nil {
				t.Fatal(err)
			}
			if r.action != c.want || r.node != c.node {
				t.Fatalf("got action %q node %q, want %q %q", r.action, r.node, c.want, c.node)
			}
		})
	}
	for _, bad := range []string{``, `{}`, `{"request":{"resource":{"resource":"pods"},"subResource":"status","operation":"UPDATE","object":"x"}}`} {
		if _, err := readReview([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestRespond(t *testing.T) {
	r, err := readReview(review(t, "nodes", "", tainted(unreachableNoExecute), tainted()))
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(r.respond(false, "why"), &out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.UID != "u1" || out.Response.Allowed || out.Response.Result.Message != "why" || out.Kind != "AdmissionReview" {
		t.Fatalf("got %+v", out.Response)
	}
}

func FuzzReadReview(f *testing.F) {
	f.Add([]byte(`{"request":{"uid":"x","resource":{"resource":"nodes"},"operation":"UPDATE","object":{"spec":{"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}},"oldObject":{}}}`))
	f.Add([]byte(`{"request":{"resource":{"resource":"pods"},"subResource":"status","operation":"UPDATE","object":{},"oldObject":{}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := readReview(body)
		if err != nil {
			return
		}
		if r.action != "" && r.node == "" {
			t.Fatalf("action %q about no node", r.action)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(r.respond(false, "m"), &out); err != nil || out.Response == nil {
			t.Fatalf("response: %v", err)
		}
	})
}

func TestOptionsValidate(t *testing.T) {
	good := DefaultOptions()
	good.BindAddress = ":9443"
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults with a port: %v", err)
	}
	off := DefaultOptions()
	if off.BindAddress != "" || off.Enabled() {
		t.Fatal("the webhook is on by default")
	}
	for name, change := range map[string]func(*Options){
		"--autonomy-webhook-bind-address":     func(o *Options) { o.BindAddress = "9443" },
		"--autonomy-webhook-service":          func(o *Options) { o.Service = "no-slash" },
		"--autonomy-webhook-url":              func(o *Options) { o.URL = "http://127.0.0.1:9443"; o.SecretNamespace = "ns" },
		"--autonomy-webhook-secret-namespace": func(o *Options) { o.URL = "https://127.0.0.1:9443" },
		"--autonomy-decision-window":          func(o *Options) { o.DecisionWindow = 0 },
		"--autonomy-node-lifecycle-users":     func(o *Options) { o.NodeLifecycleUsers = []string{"a'b"} },
		"--autonomy-webhook-timeout":          func(o *Options) { o.Timeout = 31 * time.Second },
		"--autonomy-webhook-configuration":    func(o *Options) { o.ConfigurationName = "Bad_Name" },
	} {
		o := good
		change(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// A serving certificate is kept while valid for the webhook's names with
// more than servingRenewBefore left, and made anew otherwise.
func TestServingCertRenewal(t *testing.T) {
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	c := &servingCert{namespace: "ns", name: "s", dns: []string{"svc.ns.svc"}}
	s, err := c.newSecret(now)
	if err != nil {
		t.Fatal(err)
	}
	if why, err := c.renewal(s, now); err != nil || why != "" {
		t.Fatalf("fresh: %q %v", why, err)
	}
	if why, _ := c.renewal(s, now.Add(servingLifetime-servingRenewBefore+time.Hour)); !strings.HasPrefix(why, "expires") {
		t.Fatalf("near its end: %q", why)
	}
	other := &servingCert{namespace: "ns", name: "s", ips: []net.IP{net.ParseIP("127.0.0.1")}}
	if why, _ := other.renewal(s, now); !strings.HasPrefix(why, "not for") {
		t.Fatalf("another name: %q", why)
	}
	renewed, err := c.renewed(s, now.Add(300*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if string(renewed.Data[secretCAKey]) != string(s.Data[secretCAKey]) {
		t.Fatal("renewing changed the CA")
	}
	if why, err := c.renewal(renewed, now.Add(300*24*time.Hour)); err != nil || why != "" {
		t.Fatalf("renewed: %q %v", why, err)
	}
	broken := s.DeepCopy()
	broken.Data[caKeyName] = []byte("junk")
	if _, err := c.renewal(broken, now); err == nil {
		t.Fatal("a Secret with a broken CA key accepted")
	}
}
