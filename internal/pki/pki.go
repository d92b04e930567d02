// Package pki makes the small certificate authorities servicegroup keeps
// for itself (the metrics CA, the autonomy webhook's CA, the wrapper's
// throw-away signer, the test control planes) and the certificates they
// sign: P-256 keys, random serials, PEM as client-go's cert and keyutil
// packages read it.
package pki

import (
	"bytes"
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
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// CA is a certificate authority: its certificate and signing key, and both
// PEM-encoded.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA named commonName, valid from notBefore to
// notAfter.
func NewCA(commonName string, notBefore, notAfter time.Time) (*CA, error) {
	key, keyPEM, err := NewKey()
	if err != nil {
		return nil, err
	}
	sn, err := Serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-signing CA %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// ParseCA reads a CA from its PEM certificate and key. certName and keyName
// say where each came from (a Secret's keys, files), for the error.
func ParseCA(certPEM, keyPEM []byte, certName, keyName string) (*CA, error) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil || len(certs) != 1 {
		return nil, fmt.Errorf("%s is not one certificate", certName)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyName, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s is not a signing key", keyName)
	}
	if !publicKeysEqual(signer.Public(), certs[0].PublicKey) {
		return nil, fmt.Errorf("%s does not match %s", keyName, certName)
	}
	return &CA{Cert: certs[0], Key: signer, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Leaf is a certificate for the CA to sign.
type Leaf struct {
	Subject  pkix.Name
	DNSNames []string
	IPs      []net.IP
	// ExtKeyUsage: server or client authentication.
	ExtKeyUsage []x509.ExtKeyUsage
	// KeyUsage is added to digital signature.
	KeyUsage x509.KeyUsage
	// NotAfter is cut to the CA's.
	NotBefore, NotAfter time.Time
}

// Sign signs leaf for the public key pub and returns the certificate, PEM.
func (ca *CA) Sign(leaf Leaf, pub crypto.PublicKey) ([]byte, error) {
	sn, err := Serial()
	if err != nil {
		return nil, err
	}
	notAfter := leaf.NotAfter
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               leaf.Subject,
		DNSNames:              leaf.DNSNames,
		IPAddresses:           leaf.IPs,
		NotBefore:             leaf.NotBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | leaf.KeyUsage,
		ExtKeyUsage:           leaf.ExtKeyUsage,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing %q: %w", leaf.Subject.CommonName, err)
	}
	return encodeCert(der), nil
}

// Issue makes a new key and signs leaf for it; it returns the certificate
// and the key, PEM.
func (ca *CA) Issue(leaf Leaf) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := NewKey()
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = ca.Sign(leaf, key.Public())
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// NewKey makes a P-256 key and returns it with its PEM.
func NewKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return key, keyPEM, nil
}

// Serial is a random certificate serial number in [1, 2^127]: positive and
// within RFC 5280's 20 octets.
func Serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der})
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ma, err1 := x509.MarshalPKIXPublicKey(a)
	mb, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && bytes.Equal(ma, mb)
}
