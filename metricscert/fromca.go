package metricscert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"sync/atomic"
	"time"

	"github.com/servicegroup/servicegroup/internal/pki"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

const (
	// fromCALifetime is the lifetime of a certificate the controller issues
	// itself; it is renewed after two thirds of it.
	fromCALifetime = 7 * 24 * time.Hour
	// fromCACheck is how often the CA Secret is reread (a CA made anew is
	// followed within it) and the certificate's age checked.
	fromCACheck = time.Minute
)

// ServeFromCA issues, straight from the CA in Secret opts.CASecretNamespace/
// opts.CASecretName (made when missing, as the signer does), a serving
// certificate for dnsNames, and keeps it renewed (before two thirds of its
// lifetime, and when the CA changes) until ctx ends. The returned function
// gives the current one, nil until issued (for
// securemetrics.Options.IssuedCertificate). The controller, which holds the
// CA, serves its own metrics this way: no CSR, no node to check.
func ServeFromCA(ctx context.Context, kube kubernetes.Interface, opts Options, dnsNames []string) (func() *tls.Certificate, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("a serving certificate from the CA names at least one DNS name")
	}
	logger := klog.FromContext(ctx).WithValues("secret", opts.CASecretNamespace+"/"+opts.CASecretName)
	var current atomic.Pointer[tls.Certificate]
	var caPEM []byte
	renew := func(ctx context.Context) {
		ca, err := ensureCA(ctx, kube, opts.CASecretNamespace, opts.CASecretName, time.Now())
		if err != nil {
			logger.Error(err, "Metrics serving CA not readable; keeping the current certificate")
			return
		}
		c := current.Load()
		if c != nil && bytes.Equal(ca.CertPEM, caPEM) && time.Now().Before(renewAt(c.Leaf)) {
			return
		}
		next, err := issueFromCA(ca, dnsNames, time.Now())
		if err != nil {
			logger.Error(err, "Issuing the metrics serving certificate")
			return
		}
		current.Store(next)
		caPEM = ca.CertPEM
		logger.Info("Serving a metrics certificate issued from the CA", "dnsNames", dnsNames, "notAfter", next.Leaf.NotAfter)
	}
	go wait.UntilWithContext(ctx, renew, fromCACheck)
	return current.Load, nil
}

// renewAt is two thirds into leaf's lifetime.
func renewAt(leaf *x509.Certificate) time.Time {
	return leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
}

// issueFromCA makes a key and a certificate for dnsNames signed by ca.
func issueFromCA(ca *pki.CA, dnsNames []string, now time.Time) (*tls.Certificate, error) {
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   now.Add(-clockSlack),
		NotAfter:    now.Add(fromCALifetime),
	})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &pair, nil // X509KeyPair sets Leaf
}
