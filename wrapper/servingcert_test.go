package wrapper

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// A node's clock stepped back (a device without a real-time clock boots at
// the Unix epoch) must not break a handshake with the certificate its
// clients pinned, nor make the wrapper replace that certificate at its
// next start (the clients would have to restart).
func TestServingCertSurvivesAClockSteppedBack(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, err := EnsureServingCert(klog.Background(), dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, back := range []time.Time{time.Now().Add(-2 * time.Hour), time.Now().AddDate(-3, 0, 0), time.Unix(0, 0)} {
		if err := handshake(certFile, keyFile, pinned, back); err != nil {
			t.Errorf("clock at %s: the pinned certificate is refused: %v", back.UTC(), err)
		}
		if why := servingCertUnusable(certFile, keyFile, "127.0.0.1", back); why != "" {
			t.Errorf("clock at %s: a start would replace the certificate its clients pinned: %s", back.UTC(), why)
		}
	}
	if _, _, err := EnsureServingCert(klog.Background(), dir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(certFile); string(again) != string(pinned) {
		t.Error("a second start replaced a usable certificate")
	}
}

// A certificate an older version made (client-go's, valid from an hour
// before it was made) is kept while the clock is past its start (its
// clients pinned it: replacing it would cut them off until they restart),
// and replaced by one valid from the epoch once the clock is before it.
func TestServingCertFromAnOlderVersion(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKeyWithOptions(certutil.SelfSignedCertKeyOptions{Host: "127.0.0.1", AlternateDNS: []string{"localhost"}, MaxAge: servingCertMaxAge})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile)
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if why := servingCertUnusable(certFile, keyFile, "127.0.0.1", time.Now()); why != "" {
		t.Fatalf("a usable certificate its clients pinned would be replaced: %s", why)
	}
	back := time.Now().AddDate(-1, 0, 0)
	if why := servingCertUnusable(certFile, keyFile, "127.0.0.1", back); why == "" {
		t.Fatal("a certificate not yet valid is kept")
	}
	certPEM, keyPEM, err = selfSignedServingCert("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := handshake(certFile, keyFile, mustRead(t, certFile), time.Unix(0, 0)); err != nil {
		t.Errorf("the replacement is refused at the epoch: %v", err)
	}
}

// handshake serves certFile/keyFile on 127.0.0.1 and connects as the
// wrapper's clients do (pinning the file's certificates, verifying the
// address), both sides' clocks at now.
func handshake(certFile, keyFile string, pinned []byte, now time.Time) error {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	clock := func() time.Time { return now }
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, Time: clock})
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pinned)
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Time: clock})
	if err != nil {
		return err
	}
	return c.Close()
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
