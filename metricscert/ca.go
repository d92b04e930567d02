package metricscert

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/servicegroup/servicegroup/internal/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

// ensureCA reads the CA from Secret namespace/name, making it when there is
// none (replicas racing: the loser reads the winner's).
func ensureCA(ctx context.Context, kube kubernetes.Interface, namespace, name string, now time.Time) (*pki.CA, error) {
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
	ca, err := pki.NewCA("servicegroup-metrics-serving-ca", now.Add(-clockSlack), now.Add(caLifetime))
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "servicegroup"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{CAKey: ca.CertPEM, caKeyKey: ca.KeyPEM},
	}, nil
}

func parseCA(s *corev1.Secret) (*pki.CA, error) {
	return pki.ParseCA(s.Data[CAKey], s.Data[caKeyKey], CAKey, caKeyKey)
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
func sign(ca *pki.CA, req *x509.CertificateRequest, keyEncipherment bool, lifetime time.Duration, now time.Time) ([]byte, error) {
	var usage x509.KeyUsage
	if keyEncipherment {
		usage = x509.KeyUsageKeyEncipherment
	}
	return ca.Sign(pki.Leaf{
		Subject:     req.Subject,
		DNSNames:    req.DNSNames,
		IPs:         req.IPAddresses,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:    usage,
		NotBefore:   now.Add(-clockSlack),
		NotAfter:    now.Add(lifetime),
	}, req.PublicKey)
}
