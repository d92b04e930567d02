package metricscert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestSignerApprovesOnlyTheRequestersNode: against a real apiserver, a
// wrapper and a node's CoreDNS, each with a token bound to its pod on node0,
// ask for certificates. One naming node0 and node0's address is approved and
// signed by the CA the signer publishes (in every bundle namespace); one
// naming node1 or node1's address, one asked with a token bound to no pod,
// and one asked by a ServiceAccount that is no requester are denied with a
// reason and get no certificate.
// A client verifying against the published bundle then completes a
// handshake with a server holding the issued certificate, and refuses an
// impostor's self-signed one before sending its token.
func TestSignerApprovesOnlyTheRequestersNode(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	opts := DefaultOptions()
	for _, ns := range []string{"edge-system", "servicegroup-system"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The wrapper and the node's CoreDNS may ask; "other" is not a requester.
	serviceAccounts := []string{"servicegroup-wrapper", "coredns-gridhosts", "other"}
	for _, sa := range serviceAccounts {
		if _, err := admin.CoreV1().ServiceAccounts("edge-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ask"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ask"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ask"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "edge-system", Name: "servicegroup-wrapper"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "edge-system", Name: "coredns-gridhosts"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: "edge-system", Name: "other"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addresses := map[string]string{"node0": "10.0.0.5", "node1": "10.0.0.6"}
	for name, ip := range addresses {
		n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// as is serviceAccount's client with a token bound to a new pod of it on
	// node0 (as the kubelet gives a DaemonSet's pod), or to none.
	as := func(serviceAccount string, podBound bool) kubernetes.Interface {
		t.Helper()
		var bound *authenticationv1.BoundObjectReference
		if podBound {
			pod, err := admin.CoreV1().Pods("edge-system").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount + "-node0"},
				Spec: corev1.PodSpec{NodeName: "node0", ServiceAccountName: serviceAccount, Containers: []corev1.Container{{Name: "c", Image: "c"}}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			bound = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
		}
		tr, err := admin.CoreV1().ServiceAccounts("edge-system").CreateToken(ctx, serviceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: bound}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Config.Host, BearerToken: tr.Status.Token,
			TLSClientConfig: rest.TLSClientConfig{CAFile: cp.Config.CAFile, CAData: cp.Config.CAData}})
	}
	onNode0, unbound := as("servicegroup-wrapper", true), as("servicegroup-wrapper", false)
	coreDNSOnNode0, otherOnNode0 := as("coredns-gridhosts", true), as("other", true)

	s := New(opts, admin)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	type asked struct {
		name string
		key  *ecdsa.PrivateKey
	}
	ask := func(kube kubernetes.Interface, name string, dns []string, ips ...string) asked {
		t.Helper()
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		var netIPs []net.IP
		for _, ip := range ips {
			netIPs = append(netIPs, net.ParseIP(ip))
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "servicegroup-wrapper-metrics"}, DNSNames: dns, IPAddresses: netIPs}, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kube.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: SignerName, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating CSR %s: %v", name, err)
		}
		return asked{name, key}
	}
	good := ask(onNode0, "node0-own", []string{"node0"}, addresses["node0"])
	coreDNSGood := ask(coreDNSOnNode0, "coredns-node0-own", []string{"node0"}, addresses["node0"])
	denied := []struct {
		asked
		reason, mentions string
	}{
		{ask(onNode0, "node0-asks-node1-name", []string{"node0", "node1"}, addresses["node0"]), ReasonNotRequestersNode, `"node1"`},
		{ask(onNode0, "node0-asks-node1-address", nil, addresses["node1"]), ReasonNotRequestersNode, addresses["node1"]},
		{ask(unbound, "no-pod-binding", []string{"node0"}), ReasonNoNodeBinding, NodeNameExtra},
		{ask(coreDNSOnNode0, "coredns-node0-asks-node1-name", []string{"node1"}), ReasonNotRequestersNode, `"node1"`},
		{ask(coreDNSOnNode0, "coredns-node0-asks-node1-address", []string{"node0"}, addresses["node1"]), ReasonNotRequestersNode, addresses["node1"]},
		{ask(otherOnNode0, "not-a-requester", []string{"node0"}), ReasonNotAllowedRequester, "system:serviceaccount:edge-system:other"},
	}

	signed := func(name string) *certificatesv1.CertificateSigningRequest {
		t.Helper()
		var issued *certificatesv1.CertificateSigningRequest
		testwait.Eventually(ctx, t, 0, "CSR "+name+" is signed", func(ctx context.Context) error {
			csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if hasCondition(csr, certificatesv1.CertificateDenied) {
				t.Fatalf("CSR %s denied: %+v", name, csr.Status.Conditions)
			}
			if len(csr.Status.Certificate) == 0 {
				return errors.New("no certificate yet")
			}
			issued = csr
			return nil
		})
		if !hasCondition(issued, certificatesv1.CertificateApproved) {
			t.Errorf("CSR %s signed without an Approved condition: %+v", name, issued.Status.Conditions)
		}
		return issued
	}
	issued := signed(good.name)
	coreDNSIssued := signed(coreDNSGood.name)
	for _, d := range denied {
		testwait.Eventually(ctx, t, 0, "CSR "+d.name+" is denied", func(ctx context.Context) error {
			csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range csr.Status.Conditions {
				if c.Type != certificatesv1.CertificateDenied {
					continue
				}
				if c.Reason != d.reason || !strings.Contains(c.Message, d.mentions) {
					t.Errorf("CSR %s denied with %s %q, want reason %s naming %s", d.name, c.Reason, c.Message, d.reason, d.mentions)
				}
				if len(csr.Status.Certificate) != 0 || hasCondition(csr, certificatesv1.CertificateApproved) {
					t.Errorf("CSR %s is denied but approved or signed: %+v", d.name, csr.Status)
				}
				return nil
			}
			return fmt.Errorf("not denied yet: %+v", csr.Status.Conditions)
		})
	}

	// The bundle the scrapers are given, and the certificate against it.
	// Published in every namespace a ServiceMonitor reads it from, alike.
	var bundle string
	for _, ns := range opts.BundleNamespaces {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, opts.BundleName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if bundle == "" {
			bundle = cm.Data[CAKey]
		}
		if cm.Data[CAKey] != bundle {
			t.Errorf("ConfigMap %s/%s holds another CA than %s/%s", ns, opts.BundleName, opts.BundleNamespaces[0], opts.BundleName)
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(bundle)) {
		t.Fatalf("ConfigMap %s/%s holds no CA certificate", opts.BundleNamespaces[0], opts.BundleName)
	}
	for _, csr := range []*certificatesv1.CertificateSigningRequest{issued, coreDNSIssued} {
		certs, err := certutil.ParseCertsPEM(csr.Status.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"node0", addresses["node0"]} {
			if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s's issued certificate for %s: %v", csr.Name, name, err)
			}
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: "node1"}); err == nil {
			t.Errorf("%s's issued certificate verifies for node1", csr.Name)
		}
	}

	// A scrape: verified against the bundle, the real holder is reached
	// and gets the token; an impostor on the port never does.
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(good.key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(issued.Status.Certificate, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	impostorCert, impostorKey, err := certutil.GenerateSelfSignedCertKey("node0", []net.IP{net.ParseIP(addresses["node0"])}, nil)
	if err != nil {
		t.Fatal(err)
	}
	impostorPair, err := tls.X509KeyPair(impostorCert, impostorKey)
	if err != nil {
		t.Fatal(err)
	}
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: addresses["node0"]}}}
	for _, tc := range []struct {
		name   string
		cert   tls.Certificate
		served bool
	}{
		{"the wrapper's issued certificate", pair, true},
		{"an impostor's self-signed certificate", impostorPair, false},
	} {
		var tokens atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				tokens.Add(1)
			}
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{tc.cert}}
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
