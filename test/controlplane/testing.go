package controlplane

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// startBound bounds a whole control plane's start (etcd, kube-apiserver,
// the CRDs, kube-controller-manager): twice a component's default bound.
const startBound = 2 * defaultStartTimeout

// StartForTest starts a control plane for t and stops it when t ends. It
// skips t when the binaries are missing and $CI is unset; under CI it fails.
func StartForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	cp, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.Logs(40))
		}
		cp.Stop()
	})
	return cp
}

// StartProcessForTest runs cmd as name until t ends (its log in a
// directory of t's), stopping it then; the log's last lines are shown when
// t failed.
func StartProcessForTest(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p, err := StartProcess(name, cmd, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("----- %s log -----\n%s", name, p.LogTail(100))
		}
	})
	return p
}

// requireBinaries skips t when the binaries are missing and $CI is unset;
// under CI it fails.
func requireBinaries(t testing.TB) {
	t.Helper()
	BinaryForTest(t, KubeAPIServer)
}

// BinaryForTest returns the path of the cached binary name, or skips t when
// it is missing and $CI is unset; under CI a missing binary fails t.
func BinaryForTest(t testing.TB, name string) string {
	t.Helper()
	path, err := Binary(name)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("real %s unavailable (%v); CI=true makes this a failure", name, err)
		}
		t.Fatalf("real %s required under CI: %v", name, err)
	}
	return path
}

// Shared is one control plane for several tests of a package, started by
// the first that asks for it and stopped by Stop (from TestMain). Only tests
// whose objects cannot meet share one: their own names or namespaces, and
// nothing that watches or counts the whole cluster.
type Shared struct {
	Options Options

	once sync.Once
	cp   *ControlPlane
	err  error
}

// Get returns the shared control plane, starting it on first use; it skips
// or fails t as StartForTest does.
func (s *Shared) Get(t testing.TB) *ControlPlane {
	t.Helper()
	requireBinaries(t)
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startBound)
		defer cancel()
		s.cp, s.err = Start(ctx, s.Options)
	})
	if s.err != nil {
		t.Fatalf("start shared control plane: %v", s.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", s.cp.Logs(40))
		}
	})
	return s.cp
}

// Stop stops the control plane if one was started.
func (s *Shared) Stop() {
	if s.cp != nil {
		s.cp.Stop()
	}
}

// FreeAddress returns host:port of an unused TCP port on 127.0.0.1.
func FreeAddress(t testing.TB) string {
	t.Helper()
	port, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", itoa(port))
}

// IssueClientCertificate signs a client certificate for user (CN) in groups
// (O) with the control plane's CA.
func (cp *ControlPlane) IssueClientCertificate(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	return cp.pki.Issue(pkix.Name{CommonName: user, Organization: groups},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
}

// IssueServingCertificate signs a serving certificate for the given IPs and
// DNS names with the control plane's CA.
func (cp *ControlPlane) IssueServingCertificate(ips []net.IP, dnsNames ...string) (certPEM, keyPEM []byte, err error) {
	return cp.pki.Issue(pkix.Name{CommonName: "servicegroup-test-server"},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, ips, dnsNames)
}
