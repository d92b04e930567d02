package wrapper_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

func get(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestProtocol checks the apiserver semantics that client-go does not show
// directly: status codes, watch-list bookmarks, 410 for versions of another
// process, forwarding, and the default/kubernetes rewrite.
func TestProtocol(t *testing.T) {
	t.Parallel() // its own control plane
	cp, admin := startTestCluster(t, "")
	ctx := t.Context()

	// default/kubernetes with the local-endpoint annotations on its Endpoints.
	kep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", Annotations: map[string]string{
			"superedge.io/local-endpoint": "127.0.0.1", "superedge.io/local-port": "51003"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Name: "https", Port: 6443}}}},
	}
	if _, err := admin.CoreV1().Endpoints("default").Create(ctx, kep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createSlice(t, admin, "default", "kubernetes", "kubernetes", discoveryv1.Endpoint{Addresses: []string{"192.0.2.1"}})

	// Not synced yet: 429 with Retry-After.
	notStarted, err := wrapper.New(wrapper.Options{NodeName: "node0", Upstream: cp.Config})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "/api/v1/services", nil)
	notStarted.Handler().ServeHTTP(rec, req)
	if rec.code != http.StatusTooManyRequests || rec.header.Get("Retry-After") == "" {
		t.Fatalf("before sync: %d %v", rec.code, rec.header)
	}

	w := startWrapper(t, cp, "node0", "", wrapper.Options{})
	u := w.URL()

	for _, tc := range []struct {
		path, accept string
		code         int
		contains     string
	}{
		{"/api/v1/services", "application/json;as=Table;v=v1;g=meta.k8s.io", http.StatusNotAcceptable, ""},
		{"/api/v1/services", "text/html", http.StatusNotAcceptable, ""},
		{"/api/v1/services?fieldSelector=spec.bogus=1", "", http.StatusBadRequest, "field label not supported"},
		{"/api/v1/services?labelSelector=a%20in", "", http.StatusBadRequest, ""},
		{"/api/v1/services?fieldSelector=spec.clusterIP!%3DNone", "", http.StatusOK, `"kubernetes"`},
		{"/api/v1/namespaces/default/endpoints/kubernetes", "", http.StatusOK, `"127.0.0.1"`},
		{"/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", "", http.StatusOK, `"127.0.0.1"`},
		{"/api/v1/namespaces/default/services/missing", "", http.StatusNotFound, "NotFound"},
		{"/api/v1/nodes/node0", "", http.StatusOK, `"node0"`},
		{"/api/v1/nodes?fieldSelector=metadata.name%3Dnode0", "", http.StatusOK, `"node0"`},
		{"/api/v1/nodes", "", http.StatusForbidden, "Forbidden"},       // not ours: refused
		{"/api/v1/nodes/node1", "", http.StatusForbidden, "Forbidden"}, // refused
		{"/version", "", http.StatusOK, "gitVersion"},
		{"/apis/networking.k8s.io/v1/servicecidrs", "", http.StatusOK, "ServiceCIDRList"},
		{"/readyz", "", http.StatusOK, "ok"},
		{"/metrics", "", http.StatusOK, "application_grid_wrapper_requests_total"},
		{"/api/v1/services?watch=1&resourceVersion=1", "", http.StatusOK, `"code":410`},
		{"/api/v1/services?watch=1&sendInitialEvents=true", "", http.StatusUnprocessableEntity, "NotOlderThan"}, // as the apiserver
	} {
		resp, body := get(t, u+tc.path, tc.accept)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s (Accept %q): %d %.300s; want %d containing %q", tc.path, tc.accept, resp.StatusCode, body, tc.code, tc.contains)
		}
	}

	// A list's version resumes a watch; a watch-list ends with the bookmark.
	_, body := get(t, u+"/api/v1/services", "")
	var list corev1.ServiceList
	if err := json.Unmarshal([]byte(body), &list); err != nil || list.ResourceVersion == "" {
		t.Fatalf("list: %v %q", err, list.ResourceVersion)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, u+"/api/v1/services?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=5", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	added := 0
	deadline := time.AfterFunc(10*time.Second, func() { resp.Body.Close() })
	defer deadline.Stop()
	for sc.Scan() {
		var ev struct {
			Type   string
			Object metav1.PartialObjectMetadata
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "ADDED" {
			added++
			continue
		}
		if ev.Type != "BOOKMARK" || ev.Object.Annotations[metav1.InitialEventsAnnotationKey] != "true" || added != len(list.Items) {
			t.Fatalf("after %d ADDED: %s %+v", added, ev.Type, ev.Object)
		}
		return
	}
	t.Fatal("watch-list ended without the initial-events-end bookmark")
}

type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(c int)           { r.code = c }

// TestMalformedOptionsAnsweredAsByTheAPIServer sends each malformed list or
// watch request to the wrapper and to the apiserver: same status code and
// reason.
func TestMalformedOptionsAnsweredAsByTheAPIServer(t *testing.T) {
	t.Parallel() // its own control plane
	cp, admin := startTestCluster(t, "")
	w := startWrapper(t, cp, "node0", "", wrapper.Options{})
	for _, query := range []string{
		"watch=1&sendInitialEvents=true&timeoutSeconds=1",
		"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
		"sendInitialEvents=true",
		"sendInitialEvents=false",
		"resourceVersionMatch=NotOlderThan",
		"resourceVersionMatch=Exact&resourceVersion=0",
		"resourceVersionMatch=Bogus&resourceVersion=5",
		"watch=1&resourceVersionMatch=Exact&resourceVersion=5&timeoutSeconds=1",
		"watch=1&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
		"watch=1&timeoutSeconds=abc",
		"limit=abc",
		"labelSelector=a%20in",
		"fieldSelector=spec.bogus%3D1",
		"fieldSelector=%3D%3D",
	} {
		path := "/api/v1/services?" + query
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		var upstream int
		res := admin.CoreV1().RESTClient().Get().RequestURI(path).Do(ctx).StatusCode(&upstream)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.URL()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("?%s: %v", query, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("?%s: %v", query, err)
		}
		body := string(raw)
		var wantReason metav1.StatusReason
		if err := res.Error(); err != nil {
			wantReason = apierrors.ReasonForError(err)
		}
		var status metav1.Status
		_ = json.Unmarshal([]byte(body), &status)
		if resp.StatusCode != upstream || status.Reason != wantReason {
			t.Errorf("?%s: wrapper %d %s, apiserver %d %s (%.200s)", query, resp.StatusCode, status.Reason, upstream, wantReason, body)
		}
	}
}

// The wrapper serves nothing until its own Node is known: without its
// labels every topology Service would be served with no endpoints.
func TestReadyWaitsForOwnNode(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	admin := adminClient(cp)
	srv, err := wrapper.New(wrapper.Options{NodeName: "late", Upstream: cp.Config})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	eventually(t, "caches synced, waiting for the Node", 30*time.Second, func(context.Context) (bool, error) {
		resp, body := get(t, ts.URL+"/readyz", "")
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "waiting for Node late"), nil
	})
	if resp, _ := get(t, ts.URL+"/api/v1/services", ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("without its Node: services answered %d, want 429", resp.StatusCode)
	}
	if _, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "late", Labels: map[string]string{gridKey: "nodeunit1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ready once the Node exists", 30*time.Second, func(context.Context) (bool, error) {
		resp, _ := get(t, ts.URL+"/api/v1/services", "")
		return resp.StatusCode == http.StatusOK && srv.Ready(), nil
	})
}
