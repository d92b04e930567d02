package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/servicegroup/servicegroup/internal/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Keys of the webhook's Secret.
const (
	secretCAKey   = "ca.crt"
	secretCertKey = corev1.TLSCertKey
	secretKeyKey  = corev1.TLSPrivateKeyKey
)

// Lifetimes: the CA signs the serving certificates the replicas share; a
// serving certificate is renewed (by whichever replica sees it first) when
// less than servingRenewBefore of it is left. A new CA comes only with a new
// Secret (deleting it makes the replicas start over).
const (
	caLifetime         = 10 * 365 * 24 * time.Hour
	servingLifetime    = 365 * 24 * time.Hour
	servingRenewBefore = 90 * 24 * time.Hour
	// clockSlack: certificates start this much before they are made, for
	// an apiserver whose clock is a little behind.
	clockSlack = 5 * time.Minute
)

// servingCert keeps the serving certificate the replicas share in a Secret
// and serves the current one.
type servingCert struct {
	kube            kubernetes.Interface
	namespace, name string
	dns             []string
	ips             []net.IP
	current         atomic.Pointer[certState]
}

type certState struct {
	cert     *tls.Certificate
	caPEM    []byte
	notAfter time.Time
	version  string
}

// GetCertificate is tls.Config's: the current serving certificate.
func (c *servingCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	st := c.current.Load()
	if st == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return st.cert, nil
}

// caBundle is the CA the apiserver must trust.
func (c *servingCert) caBundle() []byte {
	if st := c.current.Load(); st != nil {
		return st.caPEM
	}
	return nil
}

// ensure makes sure the Secret holds a CA and a serving certificate for the
// webhook's names with more than servingRenewBefore left, and loads it.
// Replicas race on creating and renewing it; the loser reads the winner's.
func (c *servingCert) ensure(ctx context.Context, now time.Time) error {
	for attempt := 0; attempt < 5; attempt++ {
		secret, err := c.kube.CoreV1().Secrets(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			secret, err = c.newSecret(now)
			if err != nil {
				return err
			}
			created, err := c.kube.CoreV1().Secrets(c.namespace).Create(ctx, secret, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("creating Secret %s/%s: %w", c.namespace, c.name, err)
			}
			return c.load(created)
		}
		if err != nil {
			return fmt.Errorf("reading Secret %s/%s: %w", c.namespace, c.name, err)
		}
		why, err := c.renewal(secret, now)
		if err != nil {
			return err
		}
		if why == "" {
			return c.load(secret)
		}
		renewed, err := c.renewed(secret, now)
		if err != nil {
			return err
		}
		updated, err := c.kube.CoreV1().Secrets(c.namespace).Update(ctx, renewed, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("renewing the serving certificate in Secret %s/%s (%s): %w", c.namespace, c.name, why, err)
		}
		return c.load(updated)
	}
	return fmt.Errorf("Secret %s/%s kept changing under us", c.namespace, c.name)
}

// load serves the Secret's certificate.
func (c *servingCert) load(s *corev1.Secret) error {
	if st := c.current.Load(); st != nil && st.version == s.ResourceVersion {
		return nil
	}
	pair, err := tls.X509KeyPair(s.Data[secretCertKey], s.Data[secretKeyKey])
	if err != nil {
		return fmt.Errorf("Secret %s/%s: %w", c.namespace, c.name, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return err
	}
	pair.Leaf = leaf
	c.current.Store(&certState{cert: &pair, caPEM: s.Data[secretCAKey], notAfter: leaf.NotAfter, version: s.ResourceVersion})
	return nil
}

// renewal says why the Secret's serving certificate must be made anew, ""
// when it need not.
func (c *servingCert) renewal(s *corev1.Secret, now time.Time) (string, error) {
	ca, err := parseCA(s)
	if err != nil {
		return "", fmt.Errorf("Secret %s/%s: %w (delete it to make a new CA)", c.namespace, c.name, err)
	}
	pair, err := tls.X509KeyPair(s.Data[secretCertKey], s.Data[secretKeyKey])
	if err != nil {
		return "unreadable: " + err.Error(), nil
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "unreadable: " + err.Error(), nil
	}
	if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
		return "not signed by the Secret's CA", nil
	}
	for _, name := range c.dns {
		if leaf.VerifyHostname(name) != nil {
			return "not for " + name, nil
		}
	}
	for _, ip := range c.ips {
		if leaf.VerifyHostname(ip.String()) != nil {
			return "not for " + ip.String(), nil
		}
	}
	if now.Add(servingRenewBefore).After(leaf.NotAfter) {
		return "expires " + leaf.NotAfter.UTC().Format(time.RFC3339), nil
	}
	return "", nil
}

// newSecret makes a CA and a serving certificate.
func (c *servingCert) newSecret(now time.Time) (*corev1.Secret, error) {
	ca, err := pki.NewCA("servicegroup-autonomy-webhook-ca", now.Add(-clockSlack), now.Add(caLifetime))
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "servicegroup"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{secretCAKey: ca.CertPEM, caKeyName: ca.KeyPEM},
	}
	return c.renewed(s, now)
}

// caKeyName holds the CA's key beside the certificates, so any replica can
// renew the serving certificate.
const caKeyName = "ca.key"

// renewed returns a copy of s with a new serving certificate from its CA.
func (c *servingCert) renewed(s *corev1.Secret, now time.Time) (*corev1.Secret, error) {
	ca, err := parseCA(s)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{
		Subject:     pkix.Name{CommonName: "servicegroup-autonomy-webhook"},
		DNSNames:    c.dns,
		IPs:         c.ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   now.Add(-clockSlack),
		NotAfter:    now.Add(servingLifetime),
	})
	if err != nil {
		return nil, err
	}
	out := s.DeepCopy()
	out.Data[secretCertKey] = certPEM
	out.Data[secretKeyKey] = keyPEM
	return out, nil
}

func parseCA(s *corev1.Secret) (*pki.CA, error) {
	return pki.ParseCA(s.Data[secretCAKey], s.Data[caKeyName], secretCAKey, caKeyName)
}
