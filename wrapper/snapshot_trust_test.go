package wrapper_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// TestSnapshotOnlyForAnOutage: a snapshot stands in for an unreachable
// upstream only. Started against an apiserver that refuses the wrapper's
// credentials (403), or whose certificate does not match (a certificate
// error), the wrapper does not serve the snapshot: not ready, the refusal on
// /readyz, 429 to clients. Started against an apiserver whose Node has
// another UID than the snapshot's (the cluster reinstalled behind the same
// URL), it refuses the snapshot and serves upstream's state once synced.
func TestSnapshotOnlyForAnOutage(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	admin := adminClient(cp)
	createNodes(t, admin)
	ns := "trust"
	createNamespace(t, admin, ns)
	createService(t, admin, ns, "old", "")

	stateDir := filepath.Join(t.TempDir(), "state")
	w := startWrapper(t, cp, "node0", "", wrapper.Options{StateDir: stateDir, SnapshotInterval: 100 * time.Millisecond})
	w.Stop() // a clean stop writes the snapshot

	// start runs a wrapper on upstream cfg without waiting for it to be ready.
	start := func(cfg *rest.Config) (string, func()) {
		t.Helper()
		srv, err := wrapper.New(wrapper.Options{NodeName: "node0", Upstream: cfg, StateDir: stateDir})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv.Handler())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Run(ctx) }()
		return ts.URL, func() { cancel(); <-done; ts.Close() }
	}
	get := func(ctx context.Context, url string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	certPEM, keyPEM, err := cp.IssueClientCertificate("nobody")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := &rest.Config{Host: cp.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertificate(), CertData: certPEM, KeyData: keyPEM}}
	wrongName := rest.CopyConfig(cp.Config)
	wrongName.TLSClientConfig.ServerName = "not-the-apiserver.example"
	for _, tc := range []struct {
		name, want string
		cfg        *rest.Config
	}{
		{"403", "forbidden", forbidden},
		{"certificate", "x509", wrongName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedBefore := metricValue(t, "application_grid_wrapper_snapshots_refused_total", map[string]string{"reason": "upstream-refuses"})
			url, stop := start(tc.cfg)
			defer stop()
			eventually(t, "/readyz names the refusal", 2*time.Minute, func(ctx context.Context) (bool, error) {
				code, body, err := get(ctx, url+"/readyz")
				if err != nil {
					return false, err
				}
				if code == http.StatusOK {
					t.Fatalf("/readyz %d %q: the snapshot is served although upstream refuses the wrapper", code, body)
				}
				return strings.Contains(body, "not serving the snapshot") && strings.Contains(body, tc.want), nil
			})
			if code, body, err := get(t.Context(), url+"/api/v1/namespaces/trust/services/old"); err != nil || code != http.StatusTooManyRequests {
				t.Fatalf("GET a snapshot Service: %d %.200s %v; want 429", code, body, err)
			}
			if v := metricValue(t, "application_grid_wrapper_snapshots_refused_total", map[string]string{"reason": "upstream-refuses"}); v != refusedBefore+1 {
				t.Fatalf("snapshots_refused_total{upstream-refuses} went from %v to %v, want +1", refusedBefore, v)
			}
		})
	}

	t.Run("another cluster", func(t *testing.T) {
		// The cluster behind the URL is not the snapshot's: node0 has
		// another UID, and the Service "old" is gone.
		if err := admin.CoreV1().Services(ns).Delete(t.Context(), "old", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		n, err := admin.CoreV1().Nodes().Get(t.Context(), "node0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.CoreV1().Nodes().Delete(t.Context(), "node0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node0", Labels: n.Labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		identityBefore := metricValue(t, "application_grid_wrapper_snapshots_refused_total", map[string]string{"reason": "identity"})
		url, stop := start(cp.Config)
		defer stop()
		eventually(t, "upstream's state served", 2*time.Minute, func(ctx context.Context) (bool, error) {
			code, body, err := get(ctx, url+"/readyz")
			return err == nil && code == http.StatusOK && body == "ok", err
		})
		if v := metricValue(t, "application_grid_wrapper_snapshots_refused_total", map[string]string{"reason": "identity"}); v != identityBefore+1 {
			t.Fatalf("snapshots_refused_total{identity} went from %v to %v, want +1", identityBefore, v)
		}
		if code, _, err := get(t.Context(), url+"/api/v1/namespaces/trust/services/old"); err != nil || code != http.StatusNotFound {
			t.Fatalf("GET the old cluster's Service: %d %v; want 404", code, err)
		}
	})
}
