package metricscert

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Keys of the CA Secret and of the published ConfigMap.
const (
	CAKey    = "ca.crt"
	caKeyKey = "ca.key"
)

const (
	caLifetime = 10 * 365 * 24 * time.Hour
	// clockSlack: certificates start this much before they are made, for
	// a scraper whose clock is a little behind.
	clockSlack = 5 * time.Minute
)

// authority is the signing CA.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// ensureCA reads the CA from Secret namespace/name, making it when there is
// none (replicas racing: the loser reads the winner's).
func ensureCA(ctx context.Context, kube kubernetes.Interface, namespace, name string, now time.Time) (*authority, error) {
	for range 3 {
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			ca, err := parseCA(s)
			if err != nil {
				return nil, fmt.Errorf("Secret %s/%s: %w (delete it to make a new CA; every wrapper then asks again)", namespace, name, err)
			}
			return ca, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		s, err = newCASecret(namespace, name, now)
		if err != nil {
			return nil, err
		}
		created, err := kube.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("creating Secret %s/%s: %w", namespace, name, err)
		}
		return parseCA(created)
	}
	return nil, fmt.Errorf("Secret %s/%s kept changing under us", namespace, name)
}

func newCASecret(namespace, name string, now time.Time) (*corev1.Secret, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "servicegroup-metrics-serving-ca"},
		NotBefore:             now.Add(-clockSlack),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "servicegroup"}},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			CAKey:    pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der}),
			caKeyKey: keyPEM,
		},
	}, nil
}

func parseCA(s *corev1.Secret) (*authority, error) {
	certs, err := certutil.ParseCertsPEM(s.Data[CAKey])
	if err != nil || len(certs) != 1 {
		return nil, fmt.Errorf("%s is not one certificate", CAKey)
	}
	key, err := keyutil.ParsePrivateKeyPEM(s.Data[caKeyKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", caKeyKey, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s is not a signing key", caKeyKey)
	}
	a, err1 := x509.MarshalPKIXPublicKey(signer.Public())
	b, err2 := x509.MarshalPKIXPublicKey(certs[0].PublicKey)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		return nil, fmt.Errorf("%s does not match %s", caKeyKey, CAKey)
	}
	return &authority{cert: certs[0], key: signer, pem: s.Data[CAKey]}, nil
}

// publish keeps the CA's certificate in ConfigMap namespace/name, key
// CAKey, for the scrapers.
func publish(ctx context.Context, kube kubernetes.Interface, namespace, name string, caPEM []byte) error {
	cms := kube.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "servicegroup"}},
			Data:       map[string]string{CAKey: string(caPEM)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return publish(ctx, kube, namespace, name, caPEM)
		}
	} else if err == nil && cm.Data[CAKey] != string(caPEM) {
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[CAKey] = string(caPEM)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("publishing the CA in ConfigMap %s/%s: %w", namespace, name, err)
	}
	return nil
}

// sign issues the certificate req asks for, valid for lifetime (within
// the CA's).
func (a *authority) sign(req *x509.CertificateRequest, keyEncipherment bool, lifetime time.Duration, now time.Time) ([]byte, error) {
	usage := x509.KeyUsageDigitalSignature
	if keyEncipherment {
		usage |= x509.KeyUsageKeyEncipherment
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      req.Subject,
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPAddresses,
		NotBefore:    now.Add(-clockSlack),
		NotAfter:     notAfter,
		KeyUsage:     usage,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, req.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
