package metricscert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// nodeAddressRefresh is how often a requester rereads its Node's addresses
// for the certificate it asks for (a changed address asks again).
const nodeAddressRefresh = time.Minute

// RequestServingCertificate asks signer, through the CertificateSigningRequest
// API with kube's credentials (a pod-bound token: the signer checks the
// names against that pod's node), for a serving certificate naming nodeName
// and the Node's addresses, with subject commonName, and keeps it renewed
// until ctx ends. The returned function gives the current one, nil until
// issued (for securemetrics.Options.IssuedCertificate). The wrapper and the
// node's CoreDNS ask this way.
func RequestServingCertificate(ctx context.Context, kube kubernetes.Interface, signer, nodeName, commonName string) (func() *tls.Certificate, error) {
	if nodeName == "" {
		return nil, errors.New("a metrics serving certificate names the node: no node name")
	}
	logger := klog.FromContext(ctx).WithValues("signer", signer)
	var template atomic.Pointer[x509.CertificateRequest]
	refresh := func(ctx context.Context) {
		node, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			logger.Error(err, "Reading this node's addresses for the metrics serving certificate", "node", nodeName)
			return
		}
		var ips []net.IP
		for _, a := range node.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
		template.Store(&x509.CertificateRequest{
			Subject:  pkix.Name{CommonName: commonName},
			DNSNames: []string{nodeName}, IPAddresses: ips,
		})
	}
	refresh(ctx)
	m, err := certificate.NewManager(&certificate.Config{
		Name:             "secure-metrics",
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return kube, nil },
		GetTemplate:      func() *x509.CertificateRequest { return template.Load() },
		SignerName:       signer,
		Usages:           []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		CertificateStore: &memoryStore{},
		Ctx:              &ctx,
	})
	if err != nil {
		return nil, err
	}
	m.Start()
	go func() {
		wait.UntilWithContext(ctx, refresh, nodeAddressRefresh)
		m.Stop()
	}()
	// Say when a certificate is issued (or renewed), and when none is.
	go func() {
		var last *tls.Certificate
		wait.UntilWithContext(ctx, func(context.Context) {
			if c := m.Current(); c != last {
				if last = c; c != nil {
					logger.Info("Serving an issued metrics certificate", "dnsNames", c.Leaf.DNSNames, "ips", c.Leaf.IPAddresses, "notAfter", c.Leaf.NotAfter)
				} else {
					logger.Info("No issued metrics certificate: serving the self-signed one")
				}
			}
		}, 5*time.Second)
	}()
	return m.Current, nil
}

// memoryStore keeps the issued certificate in memory only: a restarted
// requester asks again (the self-signed one serves meanwhile).
type memoryStore struct {
	mu   sync.Mutex
	cert *tls.Certificate
}

func (s *memoryStore) Current() (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert == nil {
		noCert := certificate.NoCertKeyError("no metrics serving certificate issued yet")
		return nil, &noCert
	}
	return s.cert, nil
}

func (s *memoryStore) Update(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	if len(pair.Certificate) == 0 {
		return nil, errors.New("no certificate")
	}
	if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cert = &pair
	return s.cert, nil
}
