package wrapper_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

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
	ns := "trust"
	cp, admin := startTestCluster(t, ns)
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

// TestVersionsNeverRepeatAfterCrashAndClockStepBack: the wrapper hands out
// versions after its last snapshot, then crashes (no final snapshot: the
// state directory keeps the earlier one), and the next process starts with
// its clock an hour behind. Its versions must start above everything the
// crashed one served, or a watcher resuming from one of those would get
// another object's events under it, or none.
func TestVersionsNeverRepeatAfterCrashAndClockStepBack(t *testing.T) {
	ns := "clock"
	cp, admin := startTestCluster(t, ns)
	stateDir := filepath.Join(t.TempDir(), "state")
	snapPath := filepath.Join(stateDir, "snapshot.pb")
	now := uint64(time.Now().UnixNano())
	opts := wrapper.Options{StateDir: stateDir, SnapshotInterval: time.Hour, StartVersion: now}
	w := startWrapper(t, cp, "node0", "", opts)

	// The snapshot written once ready; later changes are not in it.
	var early []byte
	eventually(t, "the first snapshot", 2*time.Minute, func(context.Context) (bool, error) {
		b, err := os.ReadFile(snapPath)
		early = b
		return err == nil && len(b) > 0, nil
	})
	listRV := func(url string) uint64 {
		t.Helper()
		l, err := clientFor(t, url, "").CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i := range 5 {
		createService(t, admin, ns, fmt.Sprintf("after-snapshot-%d", i), "")
	}
	eventually(t, "the new Services served", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := clientFor(t, w.URL(), "").CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 5, err
	})
	served := listRV(w.URL())

	// The crash: the final snapshot a clean stop writes never reaches the
	// disk, which keeps the early one.
	w.Stop()
	if err := os.WriteFile(snapPath, early, 0o600); err != nil {
		t.Fatal(err)
	}
	opts.StartVersion = now - uint64(time.Hour) // the clock stepped back an hour
	w = startWrapper(t, cp, "node0", "", opts)
	createService(t, admin, ns, "after-restart", "")
	eventually(t, "the restarted wrapper serves the new Service", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := clientFor(t, w.URL(), "").CoreV1().Services(ns).Get(ctx, "after-restart", metav1.GetOptions{})
		return err == nil, nil
	})
	// Every version of the new process, from its start on, is above what
	// the crashed one served.
	l, err := clientFor(t, w.URL(), "").CoreV1().Services(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		v, _ := strconv.ParseUint(s.ResourceVersion, 10, 64)
		if v <= served {
			t.Errorf("Service %s served at version %d by the restarted wrapper; the crashed one had served up to %d", s.Name, v, served)
		}
	}
	// A watch resuming from the crashed process's last version is told to
	// relist (410), never resumed in another history.
	wi, err := clientFor(t, w.URL(), "").CoreV1().Services("").Watch(t.Context(), metav1.ListOptions{ResourceVersion: strconv.FormatUint(served, 10)})
	if err != nil {
		t.Fatal(err)
	}
	expectGone(t, wi, fmt.Sprintf("watch from the crashed process's version %d", served))
}

// TestSnapshotTakenOffWhenUpstreamReturnsRefusing: the wrapper starts
// during an outage and serves its snapshot; upstream comes back but now
// refuses the wrapper (its RBAC was removed meanwhile). That is no longer an
// outage: the snapshot is taken off (not ready, 429), and /readyz says why.
func TestSnapshotTakenOffWhenUpstreamReturnsRefusing(t *testing.T) {
	cp, admin := startTestCluster(t, "")
	createNamespace(t, admin, "trust")
	createService(t, admin, "trust", "old", "")
	ctx := t.Context()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "wrapper-reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "wrapper-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wrapper-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "wrapper-user"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := cp.IssueClientCertificate("wrapper-user")
	if err != nil {
		t.Fatal(err)
	}
	opts := wrapper.Options{StateDir: filepath.Join(t.TempDir(), "state"), SnapshotInterval: 100 * time.Millisecond,
		Upstream: &rest.Config{Host: cp.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertificate(), CertData: certPEM, KeyData: keyPEM}}}
	w := startWrapper(t, cp, "node0", "", opts)
	w.Stop()

	if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, "wrapper-reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.StopAPIServer()
	w = startWrapper(t, cp, "node0", "", opts) // ready from the snapshot: upstream is away
	if code, body := readyz(t, w); code != http.StatusOK || !strings.Contains(body, "serving the snapshot") {
		t.Fatalf("/readyz during the outage: %d %q", code, body)
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the snapshot taken off with the refusal on /readyz", 2*time.Minute, func(context.Context) (bool, error) {
		code, body := readyz(t, w)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not serving the snapshot") && strings.Contains(body, "forbidden"), nil
	})
	resp, err := http.Get(w.URL() + "/api/v1/namespaces/trust/services/old")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("GET a snapshot Service after upstream refused: %d, want 429", resp.StatusCode)
	}
}
