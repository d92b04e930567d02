package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

func TestIssuedCertificateVerifiesAgainstItsCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test-ca", now.Add(-time.Minute), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(Leaf{
		Subject:     pkix.Name{CommonName: "server"},
		DNSNames:    []string{"server.example"},
		IPs:         []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   now.Add(-time.Minute),
		NotAfter:    now.Add(24 * time.Hour), // past the CA's end
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(keyPEM) == 0 {
		t.Fatal("no key")
	}
	leaf := mustOneCert(t, certPEM)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, name := range []string{"server.example", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if !leaf.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("leaf ends %v, want the CA's end %v", leaf.NotAfter, ca.Cert.NotAfter)
	}
	if leaf.IsCA || !leaf.BasicConstraintsValid {
		t.Errorf("leaf: IsCA %v, basic constraints %v; want an explicit CA:FALSE", leaf.IsCA, leaf.BasicConstraintsValid)
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("leaf key usage %v, want digital signature only", leaf.KeyUsage)
	}
	other, err := NewCA("other-ca", now.Add(-time.Minute), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other.Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "server.example", Roots: otherRoots}); err == nil {
		t.Error("leaf verified against another CA")
	}
}

func TestParseCARoundTripAndErrors(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test-ca", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCA(ca.CertPEM, ca.KeyPEM, "ca.crt", "ca.key")
	if err != nil {
		t.Fatal(err)
	}
	if !back.Cert.Equal(ca.Cert) {
		t.Error("parsed certificate differs")
	}
	// The parsed CA signs what verifies against the original.
	certPEM, err := back.Sign(Leaf{Subject: pkix.Name{CommonName: "c"}, NotBefore: now, NotAfter: now.Add(time.Minute)}, ca.Key.Public())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := mustOneCert(t, certPEM).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("signed by the parsed CA: %v", err)
	}

	other, err := NewCA("other-ca", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		certPEM, keyP []byte
		want          string
	}{
		{"garbage certificate", []byte("nope"), ca.KeyPEM, "ca.crt is not one certificate"},
		{"two certificates", append(append([]byte{}, ca.CertPEM...), other.CertPEM...), ca.KeyPEM, "ca.crt is not one certificate"},
		{"garbage key", ca.CertPEM, []byte("nope"), "ca.key: "},
		{"another CA's key", ca.CertPEM, other.KeyPEM, "ca.key does not match ca.crt"},
	} {
		_, err := ParseCA(tc.certPEM, tc.keyP, "ca.crt", "ca.key")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestSerialIsPositiveAndFitsRFC5280(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n, err := Serial()
		if err != nil {
			t.Fatal(err)
		}
		if n.Sign() <= 0 || n.BitLen() > 128 {
			t.Fatalf("serial %v: want positive and at most 128 bits", n)
		}
		if seen[n.String()] {
			t.Fatalf("serial %v twice in 1000", n)
		}
		seen[n.String()] = true
	}
}

func mustOneCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) != 1 {
		t.Fatalf("want one certificate: %v, %d", err, len(certs))
	}
	return certs[0]
}
