package wrapper_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// TestKubeProxyRefusesImpostor: an unprivileged process (uid nobody) holds
// the wrapper's port when the wrapper starts, serving TLS for 127.0.0.1
// under a certificate of its own. The real kube-proxy, with the kubeconfig
// that pins the wrapper's self-signed certificate, refuses it (its log
// names the unknown authority, the impostor is sent no request, no rules
// are written); the wrapper waits with /readyz naming the taken port, and
// once the impostor goes it binds and kube-proxy programs the real rules.
func TestKubeProxyRefusesImpostor(t *testing.T) {
	proxyBin := kubeProxyHost(t, "network namespaces and to run the impostor as nobody", "openssl", "setpriv")
	const addr = "127.0.0.1:51006"
	cp, admin := startTestCluster(t, "kp")
	createService(t, admin, "kp", "svc", `["zone1"]`)
	createSlice(t, admin, "kp", "svc", "svc-a", endpoint("10.9.0.1", "node0"))

	ns := newNetns(t, "sgimp")

	// The impostor's key pair, readable by nobody.
	impDir, err := os.MkdirTemp("", "sgimpostor")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(impDir) })
	impCert, impKey, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"imp.crt": impCert, "imp.key": impKey} {
		if err := os.WriteFile(filepath.Join(impDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(impDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// s_server prints what a client sends once a handshake succeeds; its
	// stdin stays open (at EOF it would hang up).
	stdin, keepOpen, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keepOpen.Close(); stdin.Close() })
	// setpriv's change of uid clears the parent-death signal StartProcess
	// sets: --pdeathsig sets it again, so a test killed midway leaves no
	// s_server behind.
	impCmd := exec.Command("ip", "netns", "exec", ns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--pdeathsig=KILL",
		"openssl", "s_server", "-accept", addr, "-cert", filepath.Join(impDir, "imp.crt"), "-key", filepath.Join(impDir, "imp.key"))
	impCmd.Stdin = stdin
	impostor := controlplane.StartProcessForTest(t, "impostor", impCmd)
	eventually(t, "the impostor listens", 2*time.Minute, func(context.Context) (bool, error) {
		if exited, err := impostor.Exited(); exited {
			t.Fatalf("impostor exited: %v\n%s", err, impostor.LogTail(20))
		}
		return strings.Contains(impostor.LogTail(20), "ACCEPT"), nil
	})
	if out := run(t, "ip", "netns", "exec", ns, "ss", "-Hltnp", "sport = :51006"); !strings.Contains(out, "openssl") {
		t.Fatalf("the impostor does not hold %s: %s", addr, out)
	}

	certDir := t.TempDir()
	certFile, keyFile, err := wrapper.EnsureServingCert(klog.Background(), certDir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(certDir, wrapper.ClientKubeconfigFile)
	if err := wrapper.WriteClientKubeconfig(kubeconfig, "https://"+addr, certFile); err != nil {
		t.Fatal(err)
	}
	srv, err := wrapper.New(wrapper.Options{NodeName: "node0", Upstream: cp.Config})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = srv.Run(ctx) }()
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	t.Cleanup(func() { _ = hs.Close() })
	bound := make(chan error, 1)
	go func() {
		ln, err := srv.Listen(ctx, addr, func() (net.Listener, error) { return listenInNetns(ns, addr) })
		bound <- err
		if err == nil {
			_ = hs.ServeTLS(ln, certFile, keyFile)
		}
	}()
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		req.Host = "127.0.0.1:51007" // as the kubelet's probe (host: 127.0.0.1) sends it
		srv.OpsHandler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	eventually(t, "/readyz names the taken port", 2*time.Minute, func(context.Context) (bool, error) {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, addr+" is in use by another process"), nil
	})

	kp := startKubeProxyInNetns(t, proxyBin, ns, kubeconfig, "-v=2")
	eventually(t, "kube-proxy refuses the impostor's certificate", 2*time.Minute, func(context.Context) (bool, error) {
		return strings.Contains(kp.proc.LogTail(200), "certificate signed by unknown authority"), nil
	})
	if log := impostor.LogTail(200); strings.Contains(log, "GET ") || strings.Contains(log, "POST ") {
		t.Fatalf("kube-proxy sent the impostor requests:\n%s", log)
	}
	if out := run(t, "ip", "netns", "exec", ns, "iptables-save", "-t", "nat"); strings.Contains(out, "10.9.0.1") {
		t.Fatalf("kube-proxy programmed rules while only the impostor answered:\n%s", out)
	}
	select {
	case err := <-bound:
		t.Fatalf("the wrapper bound the impostor's port (err %v)", err)
	default:
	}

	impostor.Stop(5 * time.Second)
	select {
	case err := <-bound:
		if err != nil {
			t.Fatalf("the wrapper did not bind once the port was free: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the wrapper did not bind within 2 minutes of the port being free")
	}
	eventually(t, "kube-proxy's rules from the wrapper", 2*time.Minute, func(ctx context.Context) (bool, error) {
		kp.alive(t)
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "iptables-save", "-t", "nat").CombinedOutput()
		return err == nil && strings.Contains(string(out), "--to-destination 10.9.0.1:8080"), err
	})
	eventually(t, "/readyz ok", 2*time.Minute, func(context.Context) (bool, error) {
		code, _ := readyz()
		return code == http.StatusOK, nil
	})
}
