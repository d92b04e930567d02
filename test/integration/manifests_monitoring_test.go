package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testmonitoring"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestMonitoringComponent installs build/manifests/default with the
// monitoring component for real (prometheus-operator's own CRDs installed
// first, so ServiceMonitors and the PrometheusRule meet their real schema),
// then runs each of our binaries with its own ServiceAccount and the secure
// metrics flag the component sets, and scrapes it as Prometheus would: no
// credentials and a token without the shipped role are refused, the token of
// the ServiceAccount the shipped binding names is served the component's
// metrics.
func TestMonitoringComponent(t *testing.T) {
	t.Parallel() // its own control plane
	crds := testmonitoring.CRDs(t)
	cp := controlplane.StartForTest(t, controlplane.Options{})
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
		"kind: ServiceMonitor", "kind: PrometheusRule",
	} {
		if !strings.Contains(rendered, want) {
			t.Errorf("default + monitoring renders no %q", want)
		}
	}
	k.must("apply", "--server-side", "-k", overlay)

	// What each side needs, and no more.
	for _, tc := range []struct {
		as, verb, what, want string
	}{
		{"system:serviceaccount:monitoring:prometheus-k8s", "get", "/metrics", "yes"},
		{"system:serviceaccount:monitoring:prometheus-k8s", "get", "/debug/pprof/", "no"},
		{"system:serviceaccount:monitoring:other", "get", "/metrics", "no"},
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "create", "tokenreviews.authentication.k8s.io", "yes"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "create", "subjectaccessreviews.authorization.k8s.io", "yes"},
		{"system:serviceaccount:servicegroup-system:application-grid-controller", "create", "tokenreviews.authentication.k8s.io", "yes"},
		// A scraper reads metrics and nothing else; checking it gives the
		// components no read of their own.
		{"system:serviceaccount:monitoring:prometheus-k8s", "get", "/metrics/kube-proxy", "yes"},
		{"system:serviceaccount:monitoring:prometheus-k8s", "list", "pods", "no"},
		{"system:serviceaccount:monitoring:prometheus-k8s", "get", "secrets", "no"},
		{"system:serviceaccount:edge-system:coredns-gridhosts", "list", "services", "no"},
		{"system:serviceaccount:edge-system:servicegroup-wrapper", "list", "secrets", "no"},
	} {
		if got := k.canI(tc.verb, tc.what, "--as="+tc.as); got != tc.want {
			t.Errorf("%s may %s %s: %q, want %q", tc.as, tc.verb, tc.what, got, tc.want)
		}
	}

	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
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
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node0", Labels: map[string]string{"zone1": "nodeunit1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Every metric family the three components serve, from their answers.
	var familiesMu sync.Mutex
	families := map[string]bool{}
	// checkScrapes waits until Prometheus's scrape has family, then asserts
	// the three answers.
	checkScrapes := func(t *testing.T, c *component, addr, family string) {
		t.Helper()
		testwait.Eventually(ctx, t, 0, fmt.Sprintf("%s serves %s on %s", c.Name, family, addr), func(ctx context.Context) error {
			_, body, err := testmonitoring.Scrape(ctx, addr, "/metrics", prometheus)
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
			{"Prometheus's token", prometheus, http.StatusOK},
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
			"--secure-metrics-bind-address="+addr,
			"--autonomy-webhook-bind-address="+webhookAddr, "--autonomy-webhook-url=https://"+webhookAddr,
			"--autonomy-webhook-secret-namespace=servicegroup-system")
		// A grid, so its Ready gauge exists.
		grids := versioned.NewForConfigOrDie(cp.Config)
		createExamples(t, grids, "")
		checkScrapes(t, c, addr, "application_grid_controller_grid_ready")
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
		checkScrapes(t, c, addr, "application_grid_controller_autonomy_nodeunit_autonomous_until_timestamp_seconds")
		checkScrapes(t, c, addr, "application_grid_controller_autonomy_nodeunit_state")
		if !families["application_grid_controller_reconcile_errors_total"] {
			t.Error("application_grid_controller_reconcile_errors_total is not served before the first error")
		}
	})
	t.Run("wrapper", func(t *testing.T) {
		addr := controlplane.FreeAddress(t)
		c := startComponent(t, "application-grid-wrapper", testbin.Path(t, "application-grid-wrapper"),
			"--kubeconfig="+saKubeconfig(t, cp, "edge-system", "servicegroup-wrapper"), "--node-name=node0",
			"--bind-address="+controlplane.FreeAddress(t), "--insecure-plain-http",
			"--secure-metrics-bind-address="+addr, "--bookmark-interval=1s")
		// served_objects is set once it serves, at each bookmark interval.
		checkScrapes(t, c, addr, "application_grid_wrapper_served_objects")
	})
	t.Run("coredns", func(t *testing.T) {
		kubeconfig := saKubeconfig(t, cp, "edge-system", "coredns-gridhosts")
		dns, promAddr, addr := controlplane.FreeAddress(t), controlplane.FreeAddress(t), controlplane.FreeAddress(t)
		_, dnsPort, _ := net.SplitHostPort(dns)
		corefile := filepath.Join(t.TempDir(), "Corefile")
		body := fmt.Sprintf(".:%s {\n    bind 127.0.0.1\n    prometheus %s\n    gridhosts cluster.local {\n        kubeconfig %s\n        node node0\n        fallthrough\n    }\n}\n", dnsPort, promAddr, kubeconfig)
		if err := os.WriteFile(corefile, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := startComponent(t, "coredns", testbin.Path(t, "coredns"), "-conf", corefile,
			"-secure-metrics-bind-address="+addr, "-secure-metrics-kubeconfig="+kubeconfig)
		checkScrapes(t, c, addr, "coredns_gridhosts_requests_total")
	})
	if !t.Failed() {
		checkSeriesServed(t, families)
	}
}
