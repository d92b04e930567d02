package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testmonitoring"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/metricscert"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// controllerMetricsNames are the DNS names of the controller's metrics
// Service (servicemonitors.yaml), which its certificate names.
var controllerMetricsNames = []string{
	"application-grid-controller-metrics.servicegroup-system.svc",
	"application-grid-controller-metrics.servicegroup-system.svc.cluster.local",
}

// TestMonitoringComponent installs build/manifests/default with the
// monitoring component for real (prometheus-operator's own CRDs installed
// first, so ServiceMonitors and the PrometheusRule meet their real schema),
// then runs each of our binaries with its own ServiceAccount and the secure
// metrics flag the component sets, and scrapes it as Prometheus would: no
// credentials, a token without the shipped role and Prometheus's own token
// are refused, the token the ServiceMonitors send (the shipped
// servicegroup-metrics-reader's, filled in by kube-controller-manager's token
// controller) is served the component's metrics, and may do nothing else.
func TestMonitoringComponent(t *testing.T) {
	t.Parallel() // its own control plane
	crds := testmonitoring.CRDs(t)
	// The token controller fills the shipped token Secrets.
	cp := controlplane.StartForTest(t, controlplane.Options{ControllerManager: true, Controllers: "serviceaccount-token"})
	k := newKubectl(t, cp)
	applyNamespaces(k)
	for _, crd := range crds {
		k.must("apply", "--server-side", "-f", crd)
	}
	waitEstablished(k, "crd/servicemonitors.monitoring.coreos.com", "crd/podmonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	applyPrerequisites(k)
	overlay := defaultWithComponent(t, "monitoring")
	rendered := k.must("kustomize", overlay)
	for _, want := range []string{
		"--secure-metrics-bind-address=:8443", "--secure-metrics-bind-address=:51008", "-secure-metrics-bind-address=:9443",
		"--metrics-serving-signer", "--secure-metrics-csr-signer=" + metricscert.SignerName, "-secure-metrics-csr-signer=" + metricscert.SignerName,
		"--secure-metrics-ca-dns-names=" + strings.Join(controllerMetricsNames, ","),
		"kind: ServiceMonitor", "kind: PrometheusRule",
	} {
		if !strings.Contains(rendered, want) {
			t.Errorf("default + monitoring renders no %q", want)
		}
	}
	k.must("apply", "--server-side", "-k", overlay)

	// What each side needs, and no more: the scrape token reads metrics
	// and nothing else; Prometheus's own token is not needed.
	const (
		readerEdge = "system:serviceaccount:edge-system:servicegroup-metrics-reader"
		readerCtrl = "system:serviceaccount:servicegroup-system:servicegroup-metrics-reader"
	)
	for _, tc := range []struct {
		as, verb, what, want string
	}{
		{readerEdge, "get", "/metrics", "yes"},
		{readerEdge, "get", "/metrics/kube-proxy", "yes"},
		{readerCtrl, "get", "/metrics", "yes"},
		{readerEdge, "get", "/debug/pprof/", "no"},
		{readerEdge, "list", "pods -A", "no"},
		{readerEdge, "get", "secrets -n edge-system", "no"},
		{readerCtrl, "get", "secrets -n servicegroup-system", "no"},
		{readerEdge, "list", "nodes", "no"},
		{readerEdge, "create", "tokenreviews.authentication.k8s.io", "no"},
		{readerEdge, "create", "serviceaccounts/token -n edge-system", "no"},
		{"system:serviceaccount:monitoring:prometheus-k8s", "get", "/metrics", "no"},
		// The wrappers' serving certificates: the wrapper asks, the
		// controller approves and signs for that signer only.
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "create", "certificatesigningrequests.certificates.k8s.io", "yes"},
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "update", "certificatesigningrequests.certificates.k8s.io --subresource=approval", "no"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "create", "certificatesigningrequests.certificates.k8s.io", "yes"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "watch", "certificatesigningrequests.certificates.k8s.io", "yes"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "update", "certificatesigningrequests.certificates.k8s.io --subresource=approval", "no"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "update", "certificatesigningrequests.certificates.k8s.io --subresource=status", "no"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "get", "secrets/servicegroup-metrics-serving-ca -n servicegroup-system", "no"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "update", "configmaps/servicegroup-metrics-serving-ca -n servicegroup-system", "yes"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "create", "configmaps -n servicegroup-system", "yes"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "update", "configmaps/other -n servicegroup-system", "no"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "get", "secrets/servicegroup-metrics-serving-ca -n servicegroup-system", "yes"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "update", "configmaps/servicegroup-metrics-serving-ca -n edge-system", "yes"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "update", "configmaps/coredns-gridhosts -n edge-system", "no"},
		{"system:serviceaccount:monitoring:other", "get", "/metrics", "no"},
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "create", "tokenreviews.authentication.k8s.io", "yes"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "create", "subjectaccessreviews.authorization.k8s.io", "yes"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "create", "tokenreviews.authentication.k8s.io", "yes"},
		// Prometheus's own identity gets nothing from us; checking a
		// scrape gives the components no read of their own.
		{"system:serviceaccount:monitoring:prometheus-k8s", "get", "/metrics/kube-proxy", "no"},
		{"system:serviceaccount:monitoring:prometheus-k8s", "list", "pods", "no"},
		{"system:serviceaccount:monitoring:prometheus-k8s", "get", "secrets", "no"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "list", "services", "no"},
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "list", "secrets", "no"},
	} {
		if got := k.canI(append([]string{tc.verb}, append(strings.Fields(tc.what), "--as="+tc.as)...)...); got != tc.want {
			t.Errorf("%s may %s %s: %q, want %q", tc.as, tc.verb, tc.what, got, tc.want)
		}
	}

	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	// Signers' names hold a slash, which kubectl auth can-i cannot take:
	// the SubjectAccessReview the apiserver itself makes for them.
	for _, tc := range []struct {
		user, verb, signer string
		want               bool
	}{
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "approve", metricscert.SignerName, true},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "sign", metricscert.SignerName, true},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "approve", "kubernetes.io/kube-apiserver-client", false},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "sign", "kubernetes.io/kubelet-serving", false},
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "approve", metricscert.SignerName, false},
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "sign", metricscert.SignerName, false},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "approve", metricscert.SignerName, false},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "sign", metricscert.SignerName, false},
	} {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: tc.user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "signers", Name: tc.signer, Verb: tc.verb},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.want {
			t.Errorf("%s may %s for signer %s: %v, want %v", tc.user, tc.verb, tc.signer, sar.Status.Allowed, tc.want)
		}
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		t.Helper()
		if _, err := admin.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	prometheus, stranger := token("prometheus-k8s"), token("other")
	// What the ServiceMonitors send: the token Secret each names, in its
	// own namespace.
	monitors := map[string]string{}
	// The server name each ServiceMonitor verifies ("": the address it
	// dials, the pod's).
	serverNames := map[string]string{}
	for _, sm := range servedServiceMonitors(t, k) {
		for _, ep := range sm.Spec.Endpoints {
			if ep.BearerTokenFile != "" || ep.Authorization == nil || ep.Authorization.Credentials.Name != "servicegroup-metrics-reader-token" || ep.Authorization.Credentials.Key != "token" {
				t.Errorf("ServiceMonitor %s/%s %s: want authorization.credentials servicegroup-metrics-reader-token/token and no bearerTokenFile, got %+v",
					sm.Namespace, sm.Name, ep.Path, ep)
			}
			// Every scrape verifies, against the published bundle.
			tc := ep.TLSConfig
			if tc.InsecureSkipVerify || tc.CA.ConfigMap == nil || tc.CA.ConfigMap.Name != "servicegroup-metrics-serving-ca" || tc.CA.ConfigMap.Key != "ca.crt" {
				t.Errorf("ServiceMonitor %s/%s %s: want tlsConfig.ca.configMap servicegroup-metrics-serving-ca/ca.crt and no insecureSkipVerify, got %+v",
					sm.Namespace, sm.Name, ep.Path, tc)
			}
			serverNames[sm.Name] = tc.ServerName
		}
		monitors[sm.Name] = sm.Namespace
	}
	if got := serverNames["application-grid-controller"]; !slices.Contains(controllerMetricsNames, got) {
		t.Errorf("the controller's ServiceMonitor verifies server name %q, want one of its certificate's %q", got, controllerMetricsNames)
	}
	readerToken := map[string]string{}
	for _, ns := range []string{"edge-system", "servicegroup-system"} {
		readerToken[ns] = shippedToken(t, admin, ns, "servicegroup-metrics-reader-token")
		// The token itself, at the apiserver: metrics, and nothing else.
		asReader := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Config.Host, BearerToken: readerToken[ns],
			TLSClientConfig: rest.TLSClientConfig{CAFile: cp.Config.CAFile, CAData: cp.Config.CAData}})
		if _, err := asReader.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the %s scrape token lists Secrets: %v, want forbidden", ns, err)
		}
		if _, err := asReader.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the %s scrape token lists Pods: %v, want forbidden", ns, err)
		}
		if _, err := asReader.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); err != nil {
			t.Errorf("the %s scrape token reads the apiserver's /metrics: %v", ns, err)
		}
	}
	// checkVerified scrapes addr as ServiceMonitor monitor does: verifying
	// against the bundle in its namespace with its server name. It waits
	// until the component serves its issued certificate, then checks that a
	// process holding its own certificate fails the handshake and never
	// sees the token.
	checkVerified := func(t *testing.T, c *component, monitor, addr string) {
		t.Helper()
		ns := monitors[monitor]
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "servicegroup-metrics-serving-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the bundle beside ServiceMonitor %s/%s: %v", ns, monitor, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
			t.Fatalf("ConfigMap %s/servicegroup-metrics-serving-ca holds no CA certificate", ns)
		}
		verifying := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverNames[monitor]}}}
		scrape := func(ctx context.Context, url string) (int, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+readerToken[ns])
			resp, err := verifying.Do(req)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		testwait.Eventually(ctx, t, 0, "a scrape verifying as ServiceMonitor "+monitor+" is served by "+c.Name, func(ctx context.Context) error {
			code, err := scrape(ctx, "https://"+addr+"/metrics")
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("status %d", code)
			}
			if err != nil {
				for _, l := range strings.Split(c.Log(), "\n") {
					if strings.Contains(l, "ertificate") && !strings.Contains(l, "handshake") {
						t.Log(l)
					}
				}
				// What it serves instead.
				if conn, derr := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); derr == nil {
					leaf := conn.ConnectionState().PeerCertificates[0]
					err = fmt.Errorf("%w (served: subject %q issuer %q, DNS names %v, IPs %v)", err, leaf.Subject, leaf.Issuer, leaf.DNSNames, leaf.IPAddresses)
					conn.Close()
				}
			}
			return err
		})
		// Whatever else holds the port, with a certificate of its own CA
		// for the very name verified, fails the handshake and never sees
		// the token.
		host := serverNames[monitor]
		if host == "" {
			host = "127.0.0.1"
		}
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, []net.IP{net.ParseIP("127.0.0.1")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		var tokens atomic.Int32
		impostor := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				tokens.Add(1)
			}
		}))
		impostor.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
		impostor.StartTLS()
		defer impostor.Close()
		_, err = scrape(ctx, impostor.URL+"/metrics")
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) || tokens.Load() != 0 {
			t.Errorf("a scrape of an impostor on %s's port: %v, %d tokens received; want an unknown-authority error and no token", c.Name, err, tokens.Load())
		}
	}
	// signedCSRs: every request to the signer got its certificate.
	signedCSRs := func(t *testing.T) {
		t.Helper()
		csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, csr := range csrs.Items {
			if csr.Spec.SignerName == metricscert.SignerName && len(csr.Status.Certificate) == 0 {
				t.Errorf("CSR %s of %s not signed: %+v", csr.Name, csr.Spec.Username, csr.Status.Conditions)
			}
		}
	}
	// node0 listens on 127.0.0.1 here: the address its certificates name.
	node0At127 := func(t *testing.T) {
		t.Helper()
		node, err := admin.CoreV1().Nodes().Get(ctx, "node0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// signer runs a controller that signs, with its own ServiceAccount.
	signer := func(t *testing.T) {
		startComponent(t, "application-grid-controller", testbin.Path(t, "application-grid-controller"),
			"--kubeconfig="+saKubeconfig(t, cp, "servicegroup-system", "application-grid-controller"),
			"--leader-elect=false", "--manage-crds=false", "--metrics-bind-address=0", "--health-bind-address=0",
			"--metrics-serving-signer")
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node0", Labels: map[string]string{"zone1": "nodeunit1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Every metric family the three components serve, from their answers.
	var familiesMu sync.Mutex
	families := map[string]bool{}
	// checkScrapes waits until the scrape ServiceMonitor monitor sends has
	// family, then asserts the four answers.
	checkScrapes := func(t *testing.T, c *component, monitor, addr, family string) {
		t.Helper()
		ns, ok := monitors[monitor]
		if !ok {
			t.Fatalf("no ServiceMonitor %s", monitor)
		}
		reader := readerToken[ns]
		testwait.Eventually(ctx, t, 0, fmt.Sprintf("%s serves %s on %s", c.Name, family, addr), func(ctx context.Context) error {
			_, body, err := testmonitoring.Scrape(ctx, addr, "/metrics", reader)
			if err == nil && !strings.Contains(body, "# TYPE "+family+" ") {
				err = fmt.Errorf("no %s in the answer", family)
			}
			return err
		})
		for _, tc := range []struct {
			name, bearer string
			want         int
		}{
			{"no credentials", "", http.StatusUnauthorized},
			{"a token without the reader role", stranger, http.StatusForbidden},
			{"Prometheus's own token", prometheus, http.StatusForbidden},
			{"the ServiceMonitor's token", reader, http.StatusOK},
		} {
			code, body, err := testmonitoring.Scrape(ctx, addr, "/metrics", tc.bearer)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if code != tc.want {
				t.Errorf("%s: status %d, want %d: %.300s", tc.name, code, tc.want, body)
			}
			if got := strings.Contains(body, "\n"+family+"{") || strings.Contains(body, "\n"+family+" "); got != (tc.want == http.StatusOK) {
				t.Errorf("%s: %s in the answer = %v: %.300s", tc.name, family, got, body)
			}
			if tc.want == http.StatusOK {
				familiesMu.Lock()
				for _, l := range strings.Split(body, "\n") {
					if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
						families[strings.Fields(rest)[0]] = true
					}
				}
				familiesMu.Unlock()
			}
		}
		c.assertNoForbidden(t)
	}

	t.Run("controller", func(t *testing.T) {
		addr, webhookAddr := controlplane.FreeAddress(t), controlplane.FreeAddress(t)
		c := startComponent(t, "application-grid-controller", testbin.Path(t, "application-grid-controller"),
			"--kubeconfig="+saKubeconfig(t, cp, "servicegroup-system", "application-grid-controller"),
			"--leader-elect=false", "--manage-crds=false", "--metrics-bind-address=0", "--health-bind-address=0",
			"--secure-metrics-bind-address="+addr, "--metrics-serving-signer", "--secure-metrics-ca-dns-names="+strings.Join(controllerMetricsNames, ","),
			"--autonomy-webhook-bind-address="+webhookAddr, "--autonomy-webhook-url=https://"+webhookAddr,
			"--autonomy-webhook-secret-namespace=servicegroup-system")
		// A grid, so its Ready gauge exists.
		grids := versioned.NewForConfigOrDie(cp.Config)
		createExamples(t, grids, "")
		checkScrapes(t, c, "application-grid-controller", addr, "application_grid_controller_grid_ready")
		// Prometheus dials the pod's address and verifies the Service's name.
		checkVerified(t, c, "application-grid-controller", addr)
		// An autonomous nodeunit whose node the node lifecycle controller
		// marked unreachable, so the autonomy gauges have a series.
		if _, err := grids.SuperedgeV1().DeploymentGrids("default").Patch(ctx, "deploymentgrid-demo", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+autonomy.DurationAnnotation+`":"1h"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		node, err := admin.CoreV1().Nodes().Get(ctx, "node0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The node lifecycle controller's first write about it (no
		// kube-controller-manager here: its identity, impersonated) is what
		// brings the nodeunit to the webhook's attention.
		pod, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-node0"},
			Spec: corev1.PodSpec{NodeName: "node0", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if pod, err = admin.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		asNodeLifecycle := rest.CopyConfig(cp.Config)
		asNodeLifecycle.Impersonate.UserName = "system:serviceaccount:kube-system:node-controller"
		nodeLifecycle := kubernetes.NewForConfigOrDie(asNodeLifecycle)
		var last error
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			// Ready again (as its kubelet would say) after a write that got
			// through before the webhook was registered.
			if pod, last = admin.CoreV1().Pods("default").Get(ctx, "on-node0", metav1.GetOptions{}); last != nil {
				return false, nil
			}
			if pod.Status.Conditions[0].Status != corev1.ConditionTrue {
				pod.Status.Conditions[0].Status = corev1.ConditionTrue
				if pod, last = admin.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); last != nil {
					return false, nil
				}
			}
			pod.Status.Conditions[0].Status = corev1.ConditionFalse
			_, last = nodeLifecycle.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			// Refused once the webhook is registered: node0 is its
			// nodeunit's only node, cut off.
			return last != nil && strings.Contains(last.Error(), "servicegroup autonomy"), nil
		})
		if err != nil {
			t.Fatalf("the node lifecycle controller's write was never withheld: %v (last: %v)", err, last)
		}
		checkScrapes(t, c, "application-grid-controller", addr, "application_grid_controller_autonomy_nodeunit_autonomous_until_timestamp_seconds")
		checkScrapes(t, c, "application-grid-controller", addr, "application_grid_controller_autonomy_nodeunit_state")
		if !families["application_grid_controller_reconcile_errors_total"] {
			t.Error("application_grid_controller_reconcile_errors_total is not served before the first error")
		}
	})
	t.Run("wrapper", func(t *testing.T) {
		addr := controlplane.FreeAddress(t)
		// The wrapper asks with a token bound to its pod on node0, whose
		// address is where it listens here.
		signer(t)
		node0At127(t)
		c := startComponent(t, "application-grid-wrapper", testbin.Path(t, "application-grid-wrapper"),
			"--kubeconfig="+podBoundKubeconfig(t, cp, admin, "edge-system", "servicegroup-wrapper", "node0"), "--node-name=node0",
			"--bind-address="+controlplane.FreeAddress(t), "--insecure-plain-http",
			"--secure-metrics-bind-address="+addr, "--bookmark-interval=1s",
			"--secure-metrics-csr-signer="+metricscert.SignerName)
		// served_objects is set once it serves, at each bookmark interval.
		checkScrapes(t, c, "application-grid-wrapper", addr, "application_grid_wrapper_served_objects")

		// A scrape as the ServiceMonitor makes it: verified against the
		// published CA, by the address it dials.
		checkVerified(t, c, "application-grid-wrapper", addr)
		signedCSRs(t)
	})
	t.Run("coredns", func(t *testing.T) {
		kubeconfig := saKubeconfig(t, cp, "edge-system", "coredns-gridhosts")
		// Its certificate is asked for with a token bound to its pod on
		// node0, as the DaemonSet's in-cluster one is.
		signer(t)
		node0At127(t)
		podBound := podBoundKubeconfig(t, cp, admin, "edge-system", "coredns-gridhosts", "node0")
		dns, promAddr, addr := controlplane.FreeAddress(t), controlplane.FreeAddress(t), controlplane.FreeAddress(t)
		_, dnsPort, _ := net.SplitHostPort(dns)
		corefile := filepath.Join(t.TempDir(), "Corefile")
		body := fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    gridhosts cluster.local {\n        kubeconfig %s\n        node node0\n        fallthrough\n    }\n}\n", dnsPort, promAddr, kubeconfig)
		if err := os.WriteFile(corefile, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := startComponent(t, "coredns", testbin.Path(t, "coredns"), "-conf", corefile,
			"-secure-metrics-bind-address="+addr, "-secure-metrics-kubeconfig="+podBound,
			"-secure-metrics-csr-signer="+metricscert.SignerName, "-secure-metrics-node-name=node0")
		checkScrapes(t, c, "coredns-gridhosts", addr, "coredns_gridhosts_requests_total")
		checkVerified(t, c, "coredns-gridhosts", addr)
		signedCSRs(t)
	})
	if !t.Failed() {
		checkSeriesServed(t, families)
	}
}

// serviceMonitor is what these tests read of prometheus-operator's
// ServiceMonitor: how each endpoint authenticates.
type serviceMonitor struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Endpoints []struct {
			Path            string `json:"path"`
			BearerTokenFile string `json:"bearerTokenFile"`
			Authorization   *struct {
				Credentials struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"credentials"`
			} `json:"authorization"`
			TLSConfig struct {
				InsecureSkipVerify bool   `json:"insecureSkipVerify"`
				ServerName         string `json:"serverName"`
				CA                 struct {
					ConfigMap *struct {
						Name string `json:"name"`
						Key  string `json:"key"`
					} `json:"configMap"`
				} `json:"ca"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// servedServiceMonitors are the ServiceMonitors the apiserver holds (as
// applied, through prometheus-operator's schema).
func servedServiceMonitors(t *testing.T, k *kubectlRunner) []serviceMonitor {
	t.Helper()
	var list struct {
		Items []serviceMonitor `json:"items"`
	}
	if err := json.Unmarshal([]byte(k.must("get", "servicemonitors", "-A", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d ServiceMonitors, want 3", len(list.Items))
	}
	return list.Items
}

// shippedToken waits for the token controller to fill the
// service-account-token Secret namespace/name, and returns the token.
func shippedToken(t *testing.T, admin kubernetes.Interface, namespace, name string) string {
	t.Helper()
	var token string
	testwait.Eventually(t.Context(), t, 0, "Secret "+namespace+"/"+name+" holds a token", func(ctx context.Context) error {
		s, err := admin.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Type != corev1.SecretTypeServiceAccountToken {
			t.Fatalf("Secret %s/%s is of type %s", namespace, name, s.Type)
		}
		if token = string(s.Data[corev1.ServiceAccountTokenKey]); token == "" {
			return fmt.Errorf("no token yet")
		}
		return nil
	})
	return token
}

// podBoundKubeconfig is a kubeconfig with a token of ServiceAccount
// namespace/name bound to a new pod of it on node, as the kubelet gives a
// DaemonSet's pod: the apiserver then names the node in the user's extra.
func podBoundKubeconfig(t *testing.T, cp *controlplane.ControlPlane, admin kubernetes.Interface, namespace, name, node string) string {
	t.Helper()
	ctx := t.Context()
	pod, err := admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: name, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.Config.CAData, CertificateAuthority: cp.Config.CAFile}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "pod-bound.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
