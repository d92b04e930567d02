package watchcache

import (
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// One routing rule: get, list and watch of the view's resources, no
// subresource, and of Nodes only the view's own node; the rest goes to
// Unrouted. Routed requests pass the view's Admit hook, which sees the
// verb and the label selector (none for a get).
func TestViewRoutesAndAdmits(t *testing.T) {
	clock := NewClock(1000, nil)
	limits := LogLimits{Bytes: 1 << 20, MaxLagBytes: 1 << 20}
	nodes, services := Nodes.NewStore(clock, limits), Services.NewStore(clock, limits)
	nodes.Set("n0", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}})
	ready := NewReady(nil)
	ready.Live()
	var admitted []string
	v := NewView(ViewConfig{
		Served: []*Served{{Resource: Nodes, Store: nodes}, {Resource: Services, Store: services}},
		Node:   "n0",
		Ready:  ready,
		Admit: func(w http.ResponseWriter, req *http.Request, verb string, r *Served, sel labels.Selector) bool {
			selected := "no selector"
			if sel != nil {
				selected = sel.String()
			}
			admitted = append(admitted, verb+" "+r.Name+" "+selected)
			if selected == "refuse" {
				w.WriteHeader(http.StatusTeapot)
				return false
			}
			return true
		},
		Unrouted: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusMisdirectedRequest) }),
	})
	h := WithRequestInfo(v)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/api/v1/nodes/n0", http.StatusOK},
		{"GET", "/api/v1/nodes/n1", http.StatusMisdirectedRequest},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn0", http.StatusOK},
		{"GET", "/api/v1/nodes", http.StatusMisdirectedRequest},
		{"GET", "/api/v1/nodes/n0/status", http.StatusMisdirectedRequest},
		{"PATCH", "/api/v1/nodes/n0", http.StatusMisdirectedRequest},
		{"GET", "/api/v1/namespaces/ns/services/a", http.StatusNotFound},
		{"GET", "/api/v1/services?labelSelector=a%3Db", http.StatusOK},
		{"GET", "/api/v1/services?labelSelector=refuse", http.StatusTeapot},
		{"GET", "/api/v1/endpoints", http.StatusMisdirectedRequest},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, "http://127.0.0.1"+tc.path, nil))
		if rec.Code != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.code)
		}
	}
	want := []string{"get nodes no selector", "list nodes ", "get services no selector", "list services a=b", "list services refuse"}
	if len(admitted) != len(want) {
		t.Fatalf("admitted %q, want %q", admitted, want)
	}
	for i := range want {
		if admitted[i] != want[i] {
			t.Fatalf("admitted %q, want %q", admitted, want)
		}
	}
}
