package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

func TestNodeNameRequired(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	err := run(t.Context(), []string{"application-grid-wrapper", "--kubeconfig", "/nonexistent"})
	if err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Fatalf("got %v, want an error naming --node-name", err)
	}
}

// A non-loopback address without client-certificate verification would hand
// the wrapper's credentials to anyone who reaches it.
func TestRefusesNonLoopbackWithoutClientCA(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:51006", ":51006", "[::]:51006", "192.0.2.1:51006", "example.com:51006"} {
		err := run(t.Context(), []string{"application-grid-wrapper", "--kubeconfig", "/nonexistent", "--node-name", "n", "--bind-address", addr, "--insecure-plain-http"})
		if err == nil || !strings.Contains(err.Error(), "--client-ca-file") {
			t.Errorf("--bind-address %s: got %v, want a refusal naming --client-ca-file", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:51006", "[::1]:51006", "localhost:51006"} {
		err := run(t.Context(), []string{"application-grid-wrapper", "--kubeconfig", "/nonexistent", "--node-name", "n", "--bind-address", addr, "--insecure-plain-http"})
		if err == nil || strings.Contains(err.Error(), "--client-ca-file") {
			t.Errorf("--bind-address %s: got %v, want only the missing kubeconfig to fail", addr, err)
		}
	}
}

// startWithNode0 starts a control plane holding the Node node0, the
// --node-name of these tests: the wrapper is ready once its own Node exists.
func startWithNode0(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cp := controlplane.StartForTest(t, controlplane.Options{})
	if _, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Nodes().Create(t.Context(),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestServesTLSWithClientCertificates runs the command against a real
// apiserver with TLS, a client CA and --client-allowed-names: clients without
// a certificate signed by it are refused, and so are clients with a
// certificate of that CA for another name; kube-proxy's is served.
func TestServesTLSWithClientCertificates(t *testing.T) {
	cp := startWithNode0(t)
	dir := t.TempDir()
	certPEM, keyPEM, err := cp.IssueServingCertificate([]net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := cp.IssueClientCertificate("kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := cp.IssueClientCertificate("system:node:node0", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"application-grid-wrapper", "--kubeconfig", cp.Kubeconfig, "--node-name", "node0",
			"--bind-address", addr, "--tls-cert-file", write("tls.crt", certPEM), "--tls-private-key-file", write("tls.key", keyPEM),
			"--client-ca-file", cp.CAFile(), "--client-allowed-names", "kube-proxy, system:kube-proxy"})
	}()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.CACertificate())
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
	without := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := withCert.Get("https://" + addr + "/api/v1/namespaces/default/services/kubernetes")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Errorf("served over %s, want HTTP/2 as client-go negotiates", resp.Proto)
		}
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"kubernetes"`), nil
	}); err != nil {
		t.Fatal("wrapper did not serve a client with a certificate")
	}
	if resp, err := without.Get("https://" + addr + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatalf("client without certificate got %d", resp.StatusCode)
	}
	otherPair, err := tls.X509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	otherName := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{otherPair}}}}
	if resp, err := otherName.Get("https://" + addr + "/api/v1/namespaces/default/services/kubernetes"); err == nil {
		resp.Body.Close()
		t.Fatalf("client certificate for system:node:node0 got %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("wrapper did not stop")
	}
}

func TestClientAllowedNamesNeedClientCA(t *testing.T) {
	err := run(t.Context(), []string{"application-grid-wrapper", "--kubeconfig", "/nonexistent", "--node-name", "n", "--client-allowed-names", "kube-proxy", "--insecure-plain-http"})
	if err == nil || !strings.Contains(err.Error(), "--client-ca-file") {
		t.Fatalf("got %v, want a refusal naming --client-ca-file", err)
	}
}

func TestAllowedHosts(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:51006": "", "localhost:51006": "", "[::1]:51006": "",
		"0.0.0.0:51006": "*", ":51006": "*", "[::]:51006": "*", "192.0.2.1:51006": "192.0.2.1", "edge.example:51006": "edge.example",
	} {
		if got := strings.Join(allowedHosts(addr), ","); got != want {
			t.Errorf("allowedHosts(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestLocalEndpointRangesFlag(t *testing.T) {
	err := run(t.Context(), []string{"application-grid-wrapper", "--kubeconfig", "/nonexistent", "--node-name", "n", "--local-endpoint-ranges", "127.0.0.1", "--insecure-plain-http"})
	if err == nil || !strings.Contains(err.Error(), "--local-endpoint-ranges") {
		t.Fatalf("got %v, want a refusal naming --local-endpoint-ranges", err)
	}
	ps, err := parsePrefixes("127.0.0.0/8, 169.254.20.11/32")
	if err != nil || len(ps) != 2 || prefixList(ps) != "127.0.0.0/8,169.254.20.11/32" {
		t.Fatalf("parsePrefixes: %v %v", ps, err)
	}
}

func TestChownStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	for _, bad := range []string{"65532", "a:b", "-1:0", "1:"} {
		if err := run(t.Context(), []string{"application-grid-wrapper", "--state-dir", dir, "--chown-state-dir", bad}); err == nil {
			t.Fatalf("--chown-state-dir %q accepted", bad)
		}
	}
	if err := run(t.Context(), []string{"application-grid-wrapper", "--chown-state-dir", "65532:65532"}); err == nil {
		t.Fatal("--chown-state-dir without --state-dir accepted")
	}
	testenv.Root(t, "chown")
	if err := run(t.Context(), []string{"application-grid-wrapper", "--state-dir", dir, "--chown-state-dir", "65532:65532"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Uid != 65532 || sys.Gid != 65532 || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir %d:%d %v, want 65532:65532 0700", sys.Uid, sys.Gid, st.Mode().Perm())
	}
}
