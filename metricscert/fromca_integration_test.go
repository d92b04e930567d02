package metricscert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/internal/pki"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestServeFromCA: against a real apiserver, the controller's own serving
// certificate is issued straight from the CA in the Secret (made when
// missing), for the Service's names only; a scraper verifying against that
// CA with the Service's name as server name completes a handshake with it
// and sends its token, and refuses an impostor's self-signed certificate
// for the same name before sending it.
func TestServeFromCA(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	opts := DefaultOptions()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.CASecretNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{"application-grid-controller-metrics.servicegroup-system.svc", "application-grid-controller-metrics.servicegroup-system.svc.cluster.local"}
	if _, err := ServeFromCA(ctx, admin, opts, nil); err == nil {
		t.Error("ServeFromCA with no DNS names: no error")
	}
	current, err := ServeFromCA(ctx, admin, opts, names)
	if err != nil {
		t.Fatal(err)
	}
	var cert *tls.Certificate
	testwait.Eventually(ctx, t, 0, "a certificate is issued from the CA", func(context.Context) error {
		if cert = current(); cert == nil {
			return errors.New("none yet")
		}
		return nil
	})
	secret, err := admin.CoreV1().Secrets(opts.CASecretNamespace).Get(ctx, opts.CASecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CA Secret: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret.Data[CAKey]) {
		t.Fatal("the CA Secret holds no CA certificate")
	}
	for _, name := range names {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the certificate for %s: %v", name, err)
		}
	}
	for _, other := range []string{"node0", "application-grid-wrapper-metrics.edge-system.svc", "127.0.0.1"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: other}); err == nil {
			t.Errorf("the certificate verifies for %s", other)
		}
	}
	if life := cert.Leaf.NotAfter.Sub(cert.Leaf.NotBefore); life > fromCALifetime+clockSlack || life < fromCALifetime {
		t.Errorf("lifetime %v, want %v (+%v slack)", life, fromCALifetime, clockSlack)
	}
	if got, want := renewAt(cert.Leaf), cert.Leaf.NotBefore.Add(cert.Leaf.NotAfter.Sub(cert.Leaf.NotBefore)*2/3); !got.Equal(want) || !got.After(time.Now()) {
		t.Errorf("renewed at %v, want %v, in the future", got, want)
	}
	if again := current(); again != cert {
		t.Error("the certificate changed before its renewal time, with the same CA")
	}

	impostor, err := issueFromCA(mustSelfSignedCA(t), names, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: names[0]}}}
	for _, tc := range []struct {
		name   string
		cert   *tls.Certificate
		served bool
	}{
		{"the controller's certificate", cert, true},
		{"an impostor's certificate from another CA", impostor, false},
	} {
		var tokens atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				tokens.Add(1)
			}
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*tc.cert}}
		srv.StartTLS()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer scrape-token")
		resp, err := scraper.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		srv.Close()
		var unknown x509.UnknownAuthorityError
		switch {
		case tc.served && (err != nil || tokens.Load() != 1):
			t.Errorf("%s: %v, %d tokens received; want served with the token", tc.name, err, tokens.Load())
		case !tc.served && (!errors.As(err, &unknown) || tokens.Load() != 0):
			t.Errorf("%s: %v, %d tokens received; want an unknown-authority error and no token", tc.name, err, tokens.Load())
		}
	}
}

// mustSelfSignedCA is a CA of its own, as an impostor would make.
func mustSelfSignedCA(t *testing.T) *pki.CA {
	t.Helper()
	s, err := newCASecret("ns", "impostor", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := parseCA(s)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
