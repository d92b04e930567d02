package controlplane

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"testing"
	"time"
)

// StartForTest starts a control plane for t and stops it when t ends. It
// skips t when the binaries are missing and $CI is unset; under CI it fails.
func StartForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if _, err := Binary(KubeAPIServer); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("real control plane unavailable (%v); CI=true makes this a failure", err)
		}
		t.Fatalf("real control plane required under CI: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
