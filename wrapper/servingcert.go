package wrapper

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/pki"
	"github.com/servicegroup/servicegroup/internal/statefile"
)

// Files of a serving certificate directory (--cert-dir).
const (
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
	// ClientKubeconfigFile is a kubeconfig for the wrapper's clients
	// (kube-proxy in the static pod) that pins ServingCertFile.
	ClientKubeconfigFile = "kubeconfig"
)

// Lifetime of a self-signed serving certificate, and how long before it
// ends a new one is made (at start-up).
const (
	servingCertMaxAge  = 10 * 365 * 24 * time.Hour
	servingCertRenewal = 30 * 24 * time.Hour
)

// servingCertNotBefore is where a self-signed serving certificate's
// validity starts: the Unix epoch, where a device without a real-time
// clock starts counting at boot. Its clients run on the same node, on the
// same clock; a start an hour before the certificate was made (client-go's
// choice) would fail every new handshake of kube-proxy and CoreDNS once
// that clock is stepped back further, until both restart.
var servingCertNotBefore = time.Unix(0, 0).UTC()

// EnsureServingCert keeps a self-signed serving certificate for host (an IP
// or a name, plus "localhost") in dir and returns its files. It is made at
// the first start and kept while it is valid for host for more than 30
// days: clients pin ServingCertFile, so a new one (state wiped, expiry)
// means clients that read it only at start must restart. The certificate's
// signer is made with it and its key thrown away, so nothing else can ever
// be signed under what clients pin; the key is only readable by the
// wrapper's user.
func EnsureServingCert(logger klog.Logger, dir, host string) (certFile, keyFile string, err error) {
	if host == "" || net.ParseIP(host).IsUnspecified() {
		return "", "", fmt.Errorf("a self-signed certificate needs the address clients use, not %q: give a concrete --bind-address", host)
	}
	certFile, keyFile = filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile)
	why := servingCertUnusable(certFile, keyFile, host, time.Now())
	if why == "" {
		return certFile, keyFile, nil
	}
	certPEM, keyPEM, err := selfSignedServingCert(host, time.Now())
	if err != nil {
		return "", "", err
	}
	// The key first: a certificate on disk always has its key beside it.
	if err := writeFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeFile(certFile, certPEM, 0o644); err != nil {
		return "", "", err
	}
	logger.Info("Made a self-signed serving certificate; clients pin it (kube-proxy started before this must restart)", "file", certFile, "reason", why)
	return certFile, keyFile, nil
}

// servingCertUnusable says why the pair in certFile/keyFile cannot be
// served for host at now, "" when it can.
func servingCertUnusable(certFile, keyFile, host string, now time.Time) string {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if errors.Is(err, os.ErrNotExist) {
		return "none yet"
	}
	if err != nil {
		return err.Error()
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return err.Error()
		}
	}
	switch {
	case leaf.VerifyHostname(host) != nil:
		return "not for " + host
	case now.Before(leaf.NotBefore):
		// One an older version made, valid only from an hour before it was
		// made, with the clock now stepped back beyond that. (A usable one
		// is kept: its clients pinned it at their start.)
		return "not valid before " + leaf.NotBefore.String()
	case now.Add(servingCertRenewal).After(leaf.NotAfter):
		return "expires " + leaf.NotAfter.String()
	}
	return ""
}

// selfSignedServingCert makes a serving certificate for host (an IP or a
// name) and "localhost", valid from servingCertNotBefore to
// servingCertMaxAge after now, signed by a CA made with it whose key is
// thrown away (as client-go's certutil does); the certificate PEM holds
// the leaf, then the CA.
func selfSignedServingCert(host string, now time.Time) (certPEM, keyPEM []byte, err error) {
	notAfter := now.Add(servingCertMaxAge)
	ca, err := pki.NewCA(fmt.Sprintf("%s-ca@%d", host, now.Unix()), servingCertNotBefore, notAfter)
	if err != nil {
		return nil, nil, err
	}
	leaf := pki.Leaf{
		Subject:     pkix.Name{CommonName: fmt.Sprintf("%s@%d", host, now.Unix())},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   servingCertNotBefore,
		NotAfter:    notAfter,
	}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPs = []net.IP{ip}
	} else {
		leaf.DNSNames = append(leaf.DNSNames, host)
	}
	certPEM, keyPEM, err = ca.Issue(leaf)
	if err != nil {
		return nil, nil, err
	}
	return append(certPEM, ca.CertPEM...), keyPEM, nil
}

// WriteClientKubeconfig writes a kubeconfig for a client of the wrapper at
// server (https://host:port) that trusts only the certificate in caFile,
// named by path so a client that reloads it follows a new one.
func WriteClientKubeconfig(path, server, caFile string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["application-grid-wrapper"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos["none"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "application-grid-wrapper", AuthInfo: "none"}
	cfg.CurrentContext = "default"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFile(path, data, 0o644)
}

// writeFile replaces path with data atomically (statefile.WriteAtomic), then
// gives it mode.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if _, err := statefile.WriteAtomic(filepath.Dir(path), filepath.Base(path), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}
