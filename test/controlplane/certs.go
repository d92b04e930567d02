package controlplane

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/servicegroup/servicegroup/internal/pki"
)

// controlPlanePKI is the set of keys and certificates one control plane
// uses.
type controlPlanePKI struct {
	ca                         *pki.CA
	servingCertPEM, servingKey []byte
	adminCertPEM, adminKeyPEM  []byte
	saPublicPEM, saPrivatePEM  []byte
}

// newPKI makes a CA, a serving certificate valid for the given IPs and the
// usual in-cluster DNS names, an admin client certificate in system:masters,
// and a service-account signing key pair.
func newPKI(ips []net.IP) (*controlPlanePKI, error) {
	now := time.Now()
	ca, err := pki.NewCA("servicegroup-test-ca", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		return nil, err
	}
	p := &controlPlanePKI{ca: ca}
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

	saKey, saKeyPEM, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	p.saPrivatePEM = saKeyPEM
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
func (p *controlPlanePKI) Issue(subject pkix.Name, usage []x509.ExtKeyUsage, ips []net.IP, dnsNames []string) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	return p.ca.Issue(pki.Leaf{
		Subject:     subject,
		DNSNames:    dnsNames,
		IPs:         ips,
		ExtKeyUsage: usage,
		KeyUsage:    x509.KeyUsageKeyEncipherment,
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(24 * time.Hour),
	})
}

// writeFiles puts every key and certificate under dir and returns their paths.
func (p *controlPlanePKI) writeFiles(dir string) (map[string]string, error) {
	files := map[string][]byte{
		"ca.crt":      p.ca.CertPEM,
		"ca.key":      p.ca.KeyPEM,
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
