package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of keys and certificates one control plane uses.
type pki struct {
	caCertPEM, caKeyPEM        []byte
	servingCertPEM, servingKey []byte
	adminCertPEM, adminKeyPEM  []byte
	saPublicPEM, saPrivatePEM  []byte
	caCert                     *x509.Certificate
	caKey                      crypto.Signer
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// newPKI makes a CA, a serving certificate valid for the given IPs and the
// usual in-cluster DNS names, an admin client certificate in system:masters,
// and a service-account signing key pair.
func newPKI(ips []net.IP) (*pki, error) {
	p := &pki{}
	now := time.Now()

	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "servicegroup-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	p.caCert, err = x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caKey = caKey
	p.caCertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if p.caKeyPEM, err = keyPEM(caKey); err != nil {
		return nil, err
	}

	p.servingCertPEM, p.servingKey, err = p.Issue(pkix.Name{CommonName: "kube-apiserver"},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, ips,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, err
	}
	p.adminCertPEM, p.adminKeyPEM, err = p.Issue(pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	if err != nil {
		return nil, err
	}

	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	if p.saPrivatePEM, err = keyPEM(saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	p.saPublicPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return p, nil
}

// Issue signs a new leaf certificate with the control plane's CA and returns
// it with its key, both PEM-encoded. Tests use it for client certificates
// (e.g. a node's identity) and for serving certificates of their own servers.
func (p *pki) Issue(subject pkix.Name, usage []x509.ExtKeyUsage, ips []net.IP, dnsNames []string) (certPEM, keyPEMBytes []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %q: %w", subject.CommonName, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

// writeFiles puts every key and certificate under dir and returns their paths.
func (p *pki) writeFiles(dir string) (map[string]string, error) {
	files := map[string][]byte{
		"ca.crt":      p.caCertPEM,
		"ca.key":      p.caKeyPEM,
		"serving.crt": p.servingCertPEM,
		"serving.key": p.servingKey,
		"admin.crt":   p.adminCertPEM,
		"admin.key":   p.adminKeyPEM,
		"sa.pub":      p.saPublicPEM,
		"sa.key":      p.saPrivatePEM,
	}
	paths := map[string]string{}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
		paths[name] = path
	}
	return paths, nil
}
