package securemetrics

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/testmonitoring"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// shippedReaderRole is the ClusterRole the monitoring component gives
// scrapers, read from the manifests so the test checks what ships.
func shippedReaderRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "build", "manifests", "monitoring", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "ClusterRole" && role.Name == "servicegroup:metrics-reader" {
			return &role
		}
	}
	t.Fatal("build/manifests/monitoring/rbac.yaml has no ClusterRole servicegroup:metrics-reader")
	return nil
}

// TestScrapeNeedsTokenAndRBAC: against a real apiserver, the endpoint refuses
// a scrape without credentials and with a token the apiserver does not
// know (401), refuses a valid token without the reader role (403), and
// serves one bound to the shipped reader role; the component itself
// reviews with a ServiceAccount holding only system:auth-delegator.
func TestScrapeNeedsTokenAndRBAC(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	ctx := t.Context()
	admin, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	for _, sa := range []string{"component", "scraper", "stranger"} {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(name, role, sa string) {
		t.Helper()
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := shippedReaderRole(t)
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind("component-auth-delegator", "system:auth-delegator", "component")
	bind("scraper-reads-metrics", role.Name, "scraper")
	token := func(sa string) string {
		t.Helper()
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	_, componentCfg, err := cp.ServiceAccountKubeconfig(ctx, ns, "component")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.BindAddress = "127.0.0.1:0"
	s, err := New(o, componentCfg, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# TYPE probe_metric counter\nprobe_metric 1\n")
	}))
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(serveCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	for _, tc := range []struct {
		name, bearer, path string
		want               int
	}{
		{"no credentials", "", "/metrics", http.StatusUnauthorized},
		{"a token the apiserver does not know", "not-a-token", "/metrics", http.StatusUnauthorized},
		{"a token without the reader role", token("stranger"), "/metrics", http.StatusForbidden},
		{"the reader role, another path", token("scraper"), "/debug/pprof/", http.StatusForbidden},
		{"a token with the reader role", token("scraper"), "/metrics", http.StatusOK},
	} {
		code, body, err := testmonitoring.Scrape(ctx, s.Addr(), tc.path, tc.bearer)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if code != tc.want {
			t.Errorf("%s: status %d, want %d: %s", tc.name, code, tc.want, body)
		}
		if got := strings.Contains(body, "probe_metric 1"); got != (tc.want == http.StatusOK) {
			t.Errorf("%s: metrics in the answer = %v: %s", tc.name, got, body)
		}
	}
}

// TestOptionsErrors: a half-given certificate pair or no bind address is a
// clear error, not a panic or a plain-HTTP fallback.
func TestOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "no bind address"},
		{Options{BindAddress: "127.0.0.1:0", CertFile: "x.crt"}, "go together"},
		{Options{BindAddress: "127.0.0.1:0", Kubeconfig: "/nonexistent/kubeconfig"}, "--secure-metrics-kubeconfig"},
	} {
		_, err := New(tc.o, nil, http.NotFoundHandler())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.o, err, tc.want)
		}
	}
}

// TestReusePortBindsBesideAnother: with ReusePort a second server binds the
// port a first one holds (a host-network DaemonSet's new pod beside the old
// during a surge update); without it the bind is refused.
func TestReusePortBindsBesideAnother(t *testing.T) {
	own := &rest.Config{Host: "https://127.0.0.1:1"} // never asked: nothing is scraped
	o := DefaultOptions()
	o.BindAddress, o.ReusePort = "127.0.0.1:0", true
	first, err := New(o, own, http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.listener.Close() })
	o.BindAddress = first.Addr()
	second, err := New(o, own, http.NotFoundHandler())
	if err != nil {
		t.Fatalf("second server with ReusePort on %s: %v", o.BindAddress, err)
	}
	_ = second.listener.Close()
	o.ReusePort = false
	if third, err := New(o, own, http.NotFoundHandler()); err == nil {
		_ = third.listener.Close()
		t.Fatalf("a server without ReusePort bound %s beside another", o.BindAddress)
	}
}
