package wrapper_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// apiserverRequests sums the apiserver's own apiserver_request_total over the
// series whose labels include every one given: what reached it.
func apiserverRequests(t *testing.T, admin kubernetes.Interface, labels map[string]string) float64 {
	t.Helper()
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
lines:
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		for k, v := range labels {
			if !strings.Contains(line, k+`="`+v+`"`) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// send sends req and returns the answer's status code and body.
func send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestForwardOnlyWhatKubeProxyNeeds: requests kube-proxy never makes, and any
// request asking to impersonate, are refused with a 403 Status and never
// reach the apiserver; what kube-proxy needs is forwarded without the
// client's identity headers.
func TestForwardOnlyWhatKubeProxyNeeds(t *testing.T) {
	t.Parallel() // its own control plane
	cp, admin := startTestCluster(t, "")
	w := startWrapper(t, cp, "node0", "", wrapper.Options{})

	do := func(method, path, body string, header http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, w.URL()+path, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return send(t, req)
	}
	event := `{"apiVersion":"v1","kind":"Event","metadata":{"name":"e%s","namespace":"default"},"involvedObject":{"kind":"Node","name":"node0"},"reason":"Test","message":"m","type":"Normal"}`
	impersonate := http.Header{"Impersonate-User": {"admin"}, "Impersonate-Group": {"system:masters"}}

	for _, tc := range []struct {
		name, method, path, body string
		header                   http.Header
		upstream                 map[string]string // the apiserver's metric labels of this request
	}{
		{"secrets", "GET", "/api/v1/secrets", "", nil, map[string]string{"resource": "secrets"}},
		{"delete a Service", "DELETE", "/api/v1/namespaces/default/services/kubernetes", "", nil, map[string]string{"resource": "services", "verb": "DELETE"}},
		{"another node", "GET", "/api/v1/nodes/node1", "", nil, map[string]string{"resource": "nodes", "verb": "GET"}},
		{"all nodes", "GET", "/api/v1/nodes", "", nil, map[string]string{"resource": "nodes", "verb": "LIST"}},
		{"node status", "PATCH", "/api/v1/nodes/node0/status", `{}`, nil, map[string]string{"resource": "nodes", "subresource": "status"}},
		{"pods", "POST", "/api/v1/namespaces/default/pods", `{}`, nil, map[string]string{"resource": "pods"}},
		{"impersonating event", "POST", "/api/v1/namespaces/default/events", strings.Replace(event, "%s", "1", 1), impersonate, map[string]string{"resource": "events", "verb": "POST"}},
		// v1 ServiceCIDRs are served from the wrapper's store; another version is forwarded.
		{"impersonating ServiceCIDR list", "GET", "/apis/networking.k8s.io/v1beta1/servicecidrs", "", impersonate, map[string]string{"resource": "servicecidrs"}},
		// apiserver_request_total has no path label: this one checks only the answer.
		{"non-resource path", "GET", "/logs/", "", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := 0.0
			if tc.upstream != nil {
				before = apiserverRequests(t, admin, tc.upstream)
			}
			code, body := do(tc.method, tc.path, tc.body, tc.header)
			var status metav1.Status
			if err := json.Unmarshal([]byte(body), &status); err != nil || code != http.StatusForbidden ||
				status.Kind != "Status" || status.Reason != metav1.StatusReasonForbidden || status.Code != http.StatusForbidden {
				t.Fatalf("%s %s: %d %.300s; want 403 with a Forbidden Status", tc.method, tc.path, code, body)
			}
			if tc.upstream == nil {
				return
			}
			if after := apiserverRequests(t, admin, tc.upstream); after != before {
				t.Fatalf("%s %s reached the apiserver (%v -> %v requests)", tc.method, tc.path, before, after)
			}
		})
	}

	// Forwarded: what kube-proxy needs. The client's own credentials are
	// dropped (a bogus token would otherwise be a 401 upstream).
	bogus := http.Header{"Authorization": {"Bearer not-a-token"}, "X-Remote-User": {"admin"}}
	eventsPosted := map[string]string{"resource": "events", "verb": "POST"}
	before := apiserverRequests(t, admin, eventsPosted)
	for _, tc := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/api/v1/namespaces/default/events", strings.Replace(event, "%s", "2", 1), http.StatusCreated},
		{"POST", "/apis/events.k8s.io/v1/namespaces/default/events", `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e3","namespace":"default"},"eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"kube-proxy","reportingInstance":"kube-proxy-node0","action":"Test","reason":"Test","type":"Normal","regarding":{"kind":"Node","name":"node0"}}`, http.StatusCreated},
		{"GET", "/apis/networking.k8s.io/v1/servicecidrs", "", http.StatusOK},
		{"GET", "/version", "", http.StatusOK},
		{"GET", "/apis/discovery.k8s.io/v1", "", http.StatusOK},
	} {
		if code, body := do(tc.method, tc.path, tc.body, bogus); code != tc.code {
			t.Errorf("%s %s: %d %.300s; want %d", tc.method, tc.path, code, body, tc.code)
		}
	}
	// The counter the refusals were checked against does see forwarded requests.
	if after := apiserverRequests(t, admin, eventsPosted); after != before+2 {
		t.Fatalf("the apiserver counted %v event POSTs, want 2", after-before)
	}
}

// TestRefusesForeignHostsAndEncodedPaths: a request under a host name that
// is not loopback (what a browser sends after DNS rebinding) gets a 421 and
// nothing of the cluster; a path with encoded dot segments, slashes or
// double encoding, which the apiserver would resolve only after the
// wrapper's checks, is a 400 Status and is not forwarded.
func TestRefusesForeignHostsAndEncodedPaths(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	createNodes(t, adminClient(cp))
	w := startWrapper(t, cp, "node0", "", wrapper.Options{})
	_, port, _ := strings.Cut(w.addr, ":")

	do := func(host, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, w.URL()+path, nil)
		req.Host = host
		return send(t, req)
	}
	for _, host := range []string{"rebind.example:" + port, "rebind.example", "192.0.2.1:" + port, "localhost.rebind.example:" + port} {
		for _, path := range []string{"/api/v1/services", "/api/v1/nodes/node0", "/readyz", "/version"} {
			if code, body := do(host, path); code != http.StatusMisdirectedRequest || strings.Contains(body, "kubernetes") || strings.Contains(body, "node0") {
				t.Errorf("Host %s GET %s: %d %.200s; want 421 and nothing served", host, path, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST.:" + port, "127.0.0.2:" + port, "[::1]:" + port} {
		if code, body := do(host, "/api/v1/namespaces/default/services/kubernetes"); code != http.StatusOK {
			t.Errorf("Host %s: %d %.200s; want 200", host, code, body)
		}
	}

	for _, path := range []string{
		"/apis/%2e%2e/api", "/apis/%2E%2E/api/v1", "/api/%2e%2e", "/apis/apps/%2e%2e", "/apis/apps/%2e",
		"/apis/x%2fy", "/apis/%252e%252e/api", "/api/v1/namespaces/%2e%2e/services",
	} {
		code, body := do("127.0.0.1:"+port, path)
		var status metav1.Status
		if err := json.Unmarshal([]byte(body), &status); err != nil || code != http.StatusBadRequest || status.Reason != metav1.StatusReasonBadRequest {
			t.Errorf("GET %s: %d %.300s; want 400 with a BadRequest Status", path, code, body)
		}
	}
}
