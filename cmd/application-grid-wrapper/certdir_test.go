package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/servicegroup/servicegroup/wrapper"
)

func TestServingModeRequired(t *testing.T) {
	err := run(t.Context(), []string{"application-grid-wrapper", "--kubeconfig", "/nonexistent", "--node-name", "n"})
	if err == nil || !strings.Contains(err.Error(), "--cert-dir") || !strings.Contains(err.Error(), "--insecure-plain-http") {
		t.Fatalf("got %v, want a refusal naming --cert-dir and --insecure-plain-http", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestCertDirPinnedAndTakenPortWaited runs the command with --cert-dir on a
// port another server holds: it does not exit, /readyz on the ops address
// names the taken port, and a client of the kubeconfig it writes refuses
// the other server; once that server goes, the wrapper binds and the same
// client is served. A restart keeps the certificate clients pinned.
func TestCertDirPinnedAndTakenPortWaited(t *testing.T) {
	cp := startWithNode0(t)
	addr, ops := freeAddr(t), freeAddr(t)
	// The impostor: TLS for 127.0.0.1 under a certificate of its own.
	impCert, impKey, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "imp.crt"), impCert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "imp.key"), impKey, 0o600); err != nil {
		t.Fatal(err)
	}
	impLn, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var impostorRequests atomic.Int32
	impostor := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		impostorRequests.Add(1)
		_, _ = w.Write([]byte(`{"kind":"ServiceList","apiVersion":"v1","items":[]}`))
	})}
	go func() { _ = impostor.ServeTLS(impLn, filepath.Join(dir, "imp.crt"), filepath.Join(dir, "imp.key")) }()

	certDir := filepath.Join(dir, "pki")
	start := func(ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"application-grid-wrapper", "--kubeconfig", cp.Kubeconfig, "--node-name", "node0",
				"--bind-address", addr, "--cert-dir", certDir, "--metrics-bind-address", ops})
		}()
		return done
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := start(ctx)
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + ops + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	poll := func(what string, cond func() (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			select {
			case err := <-done:
				t.Fatalf("wrapper exited while %s: %v", what, err)
			default:
			}
			return cond()
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll("/readyz names the taken port", func() (bool, error) {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, addr+" is in use by another process"), nil
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(certDir, wrapper.ClientKubeconfigFile))
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	if _, err := client.CoreV1().Services("").List(t.Context(), metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client pinning the wrapper's certificate listed from the impostor (err %v)", err)
	}
	if n := impostorRequests.Load(); n != 0 {
		t.Fatalf("the impostor was sent %d requests", n)
	}
	_ = impostor.Close()
	poll("the wrapper serves once the port is free", func() (bool, error) {
		svcs, err := client.CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
		return err == nil && len(svcs.Items) > 0, nil
	})
	poll("/readyz ok", func() (bool, error) { code, _ := readyz(); return code == http.StatusOK, nil })
	// dns.kubeconfig pins the same certificate and reaches the DNS view.
	dnsCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(certDir, wrapper.DNSKubeconfigFile))
	if err != nil {
		t.Fatal(err)
	}
	dnsClient := kubernetes.NewForConfigOrDie(dnsCfg)
	poll("the DNS view serves Namespaces through "+wrapper.DNSKubeconfigFile, func() (bool, error) {
		nss, err := dnsClient.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		return err == nil && len(nss.Items) > 0, nil
	})
	pinned, err := os.ReadFile(filepath.Join(certDir, wrapper.ServingCertFile))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(certDir, wrapper.ServingKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("serving key: %v, mode %v, want 0600", err, st.Mode())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	done = start(ctx)
	poll("served again after a restart", func() (bool, error) {
		_, err := client.CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
		return err == nil, nil
	})
	if again, _ := os.ReadFile(filepath.Join(certDir, wrapper.ServingCertFile)); !bytes.Equal(again, pinned) {
		t.Fatal("the restart made a new certificate: clients that pinned the old one are cut off")
	}
}
