package review

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// hack/fuzz-smoke.sh runs this in `make test`.

// Whatever the apiserver sends, an accepted review names the node of its
// action and gets an AdmissionReview back.
func FuzzReadReview(f *testing.F) {
	f.Add([]byte(`{"request":{"uid":"x","resource":{"resource":"nodes"},"operation":"UPDATE","object":{"spec":{"taints":[{"key":"node.kubernetes.io/unreachable","effect":"NoExecute"}]}},"oldObject":{}}}`))
	f.Add([]byte(`{"request":{"resource":{"resource":"pods"},"subResource":"status","operation":"UPDATE","object":{},"oldObject":{}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Read(body)
		if err != nil {
			return
		}
		if r.Action != "" && r.Node == "" {
			t.Fatalf("action %q about no node", r.Action)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(r.Respond(false, "m"), &out); err != nil || out.Response == nil {
			t.Fatalf("response: %v", err)
		}
	})
}
