package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// component is one of our binaries running under a test.
type component struct {
	*controlplane.Process
}

func startComponent(t *testing.T, name, bin string, args ...string) *component {
	t.Helper()
	return &component{controlplane.StartProcessForTest(t, name, exec.Command(bin, args...))}
}

// saKubeconfig is a kubeconfig that authenticates as ServiceAccount
// namespace/name (its token from the TokenRequest API).
func saKubeconfig(t *testing.T, cp *controlplane.ControlPlane, namespace, name string) string {
	t.Helper()
	path, _, err := cp.ServiceAccountKubeconfig(t.Context(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// assertNoForbidden fails if a component logged an authorization failure.
func (c *component) assertNoForbidden(t *testing.T) {
	t.Helper()
	if log := c.Log(); strings.Contains(log, "forbidden") || strings.Contains(log, "Forbidden") {
		t.Errorf("%s was refused by RBAC:\n%s", c.Name, c.LogTail(40))
	}
}

// TestComponentsRunWithTheirServiceAccounts installs build/manifests for real
// (with no CRDs: the controller must install them itself), then runs each of
// our binaries with a token of its own ServiceAccount and nothing else, and
// checks it does its whole job without a single RBAC refusal.
func TestComponentsRunWithTheirServiceAccounts(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	k := newKubectl(t, cp)
	for _, dir := range []string{"namespace", "controller", "wrapper", "coredns-node"} {
		k.must("apply", "--server-side", "-k", manifestDir(dir))
	}
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	for name, unit := range map[string]string{"node0": "nodeunit1", "node1": "nodeunit2", "node2": "nodeunit2"} {
		_, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"zone1": unit}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("controller", func(t *testing.T) {
		health, webhookAddr := controlplane.FreeAddress(t), controlplane.FreeAddress(t)
		c := startComponent(t, "application-grid-controller", testbin.Path(t, "application-grid-controller"),
			"--kubeconfig="+saKubeconfig(t, cp, "servicegroup-system", "application-grid-controller"),
			"--leader-elect=true", "--leader-elect-namespace=servicegroup-system",
			"--manage-crds=true", "--metrics-bind-address=0", "--health-bind-address="+health,
			// The autonomy webhook as the Deployment runs it, reached by URL
			// (no pod network here): its Secret and registration.
			"--autonomy-webhook-bind-address="+webhookAddr, "--autonomy-webhook-url=https://"+webhookAddr,
			"--autonomy-webhook-secret-namespace=servicegroup-system")
		// "ok" alone: leading, CRDs applied and Established, caches synced
		// (a standby answers 200 too, before it has installed anything).
		url := "http://" + health + "/readyz"
		testwait.Eventually(t.Context(), t, 0, url+` answers 200 "ok"`, func(ctx context.Context) error {
			code, body, err := testwait.Get(ctx, url)
			if err == nil && (code != http.StatusOK || body != "ok") {
				err = fmt.Errorf("%d %q", code, body)
			}
			return err
		})

		grids := versioned.NewForConfigOrDie(cp.Config)
		createExamples(t, grids, "")
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			for _, n := range []string{"deploymentgrid-demo-nodeunit1", "deploymentgrid-demo-nodeunit2"} {
				if _, err := admin.AppsV1().Deployments("default").Get(ctx, n, metav1.GetOptions{}); err != nil {
					return false, nil
				}
			}
			for _, n := range []string{"statefulsetgrid-demo-nodeunit1", "statefulsetgrid-demo-nodeunit2"} {
				if _, err := admin.AppsV1().StatefulSets("default").Get(ctx, n, metav1.GetOptions{}); err != nil {
					return false, nil
				}
			}
			if _, err := admin.CoreV1().Services("default").Get(ctx, "servicegrid-demo-svc", metav1.GetOptions{}); err != nil {
				return false, nil
			}
			dg, err := grids.SuperedgeV1().DeploymentGrids("default").Get(ctx, "deploymentgrid-demo", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return dg.Status.ObservedGeneration == dg.Generation && dg.Status.NodeUnits == 2, nil
		})
		if err != nil {
			t.Fatalf("controller did not converge with its own ServiceAccount: %v", err)
		}
		lease, err := admin.CoordinationV1().Leases("servicegroup-system").Get(ctx, "application-grid-controller", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			t.Fatalf("leader election Lease: %v %+v", err, lease)
		}
		// A grid opting into autonomy: the webhook makes its Secret and
		// registers itself, and takes the registration back when none does.
		if _, err := grids.SuperedgeV1().DeploymentGrids("default").Patch(ctx, "deploymentgrid-demo", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+autonomy.DurationAnnotation+`":"1h"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			cfg, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, autonomy.WebhookConfigurationName, metav1.GetOptions{})
			return err == nil && len(cfg.Webhooks) == 2 && len(cfg.Webhooks[0].ClientConfig.CABundle) > 0, nil
		})
		if err != nil {
			t.Fatalf("the autonomy webhook never registered: %v", err)
		}
		// Deleted, it is put back (its watch works with these rights).
		configs := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		first, err := configs.Get(ctx, autonomy.WebhookConfigurationName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := configs.Delete(ctx, autonomy.WebhookConfigurationName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cfg, err := configs.Get(ctx, autonomy.WebhookConfigurationName, metav1.GetOptions{})
			return err == nil && cfg.UID != first.UID && len(cfg.Webhooks) == 2, nil
		})
		if err != nil {
			t.Fatalf("the deleted autonomy webhook registration was not put back: %v", err)
		}
		if _, err := admin.CoreV1().Secrets("servicegroup-system").Get(ctx, "application-grid-controller-webhook", metav1.GetOptions{}); err != nil {
			t.Fatalf("the webhook's Secret: %v", err)
		}
		if _, err := grids.SuperedgeV1().DeploymentGrids("default").Patch(ctx, "deploymentgrid-demo", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+autonomy.DurationAnnotation+`":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, autonomy.WebhookConfigurationName, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("the autonomy webhook stayed registered with no grid opting in: %v", err)
		}
		c.assertNoForbidden(t)

		// What the autonomy rights reach, and what they do not.
		sa := "--as=system:serviceaccount:servicegroup-system:application-grid-controller"
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"create", "validatingwebhookconfigurations"}, "yes"},
			{[]string{"patch", "validatingwebhookconfigurations/" + autonomy.WebhookConfigurationName}, "yes"},
			// Its own by name only: the leader watches it to put it back.
			{[]string{"watch", "validatingwebhookconfigurations/" + autonomy.WebhookConfigurationName}, "yes"},
			{[]string{"list", "validatingwebhookconfigurations/" + autonomy.WebhookConfigurationName}, "yes"},
			{[]string{"list", "validatingwebhookconfigurations"}, "no"},
			{[]string{"patch", "validatingwebhookconfigurations/someone-elses"}, "no"},
			{[]string{"delete", "validatingwebhookconfigurations/someone-elses"}, "no"},
			{[]string{"get", "secrets/application-grid-controller-webhook", "-n", "servicegroup-system"}, "yes"},
			{[]string{"update", "secrets/application-grid-controller-webhook", "-n", "servicegroup-system"}, "yes"},
			{[]string{"get", "secrets/other", "-n", "servicegroup-system"}, "no"},
			{[]string{"list", "secrets", "-n", "servicegroup-system"}, "no"},
			{[]string{"create", "secrets", "-n", "kube-system"}, "no"},
			{[]string{"update", "pods/status", "-A"}, "no"},
			// The zone writer (--zone-from-grid-key) patches Node labels;
			// nothing else of a Node.
			{[]string{"patch", "nodes"}, "yes"},
			{[]string{"update", "nodes"}, "no"},
			{[]string{"delete", "nodes"}, "no"},
			{[]string{"patch", "nodes", "--subresource=status"}, "no"},
		} {
			if got := k.canI(append(tc.args, sa)...); got != tc.want {
				t.Errorf("kubectl auth can-i %s: %s, want %s", strings.Join(tc.args, " "), got, tc.want)
			}
		}
	})

	t.Run("wrapper", func(t *testing.T) {
		addr := controlplane.FreeAddress(t)
		c := startComponent(t, "application-grid-wrapper", testbin.Path(t, "application-grid-wrapper"),
			"--kubeconfig="+saKubeconfig(t, cp, "edge-system", "servicegroup-wrapper"), "--node-name=node0", "--bind-address="+addr,
			// What its identity may do upstream is the point here, not TLS.
			"--insecure-plain-http")
		testwait.Eventually(t.Context(), t, 0, "the wrapper's /readyz answers 200", testwait.HTTPOK("http://"+addr+"/readyz"))
		// kube-proxy's view through the wrapper: served resources, its Node,
		// and what the wrapper forwards upstream with its own identity.
		viaWrapper := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
		if _, err := viaWrapper.CoreV1().Services("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list services: %v", err)
		}
		if _, err := viaWrapper.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list endpointslices: %v", err)
		}
		if _, err := viaWrapper.CoreV1().Nodes().Get(ctx, "node0", metav1.GetOptions{}); err != nil {
			t.Errorf("get own node: %v", err)
		}
		if _, err := viaWrapper.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list servicecidrs (proxied): %v", err)
		}
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "kube-proxy-", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node0"},
			Reason:         "Starting", Message: "through the wrapper", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "kube-proxy", Host: "node0"},
		}
		if _, err := viaWrapper.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Errorf("post event (proxied): %v", err)
		}
		c.assertNoForbidden(t)
	})

	t.Run("coredns", func(t *testing.T) {
		// As the shipped Corefile runs it: Services, EndpointSlices and
		// Namespaces through the node's wrapper (its DNS view; the wrapper's
		// own identity upstream), the rest with CoreDNS's own token.
		wrapperAddr := controlplane.FreeAddress(t)
		startComponent(t, "application-grid-wrapper-for-dns", testbin.Path(t, "application-grid-wrapper"),
			"--kubeconfig="+saKubeconfig(t, cp, "edge-system", "servicegroup-wrapper"), "--node-name=node0", "--bind-address="+wrapperAddr,
			"--insecure-plain-http")
		testwait.Eventually(t.Context(), t, 0, "the wrapper's /readyz answers 200", testwait.HTTPOK("http://"+wrapperAddr+"/readyz"))
		dnsView := filepath.Join(t.TempDir(), "dns.kubeconfig")
		if err := wrapper.WriteClientKubeconfig(dnsView, "http://"+wrapperAddr+wrapper.DNSPathPrefix, ""); err != nil {
			t.Fatal(err)
		}
		kubeconfig := saKubeconfig(t, cp, "edge-system", "coredns-gridhosts")
		dns, ready := controlplane.FreeAddress(t), controlplane.FreeAddress(t)
		_, dnsPort, _ := net.SplitHostPort(dns)
		corefile := filepath.Join(t.TempDir(), "Corefile")
		body := fmt.Sprintf(`.:%s {
    bind 127.0.0.1
    ready %s
    gridhosts cluster.local {
        kubeconfig %s
        services_kubeconfig %s
        node node0
        fallthrough
    }
    kubernetes cluster.local {
        kubeconfig %s
    }
}
`, dnsPort, ready, kubeconfig, dnsView, dnsView)
		if err := os.WriteFile(corefile, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := startComponent(t, "coredns", testbin.Path(t, "coredns"), "-conf", corefile)
		// ready answers 200 only once gridhosts' and kubernetes' informers synced,
		// which needs list and watch on everything they read.
		testwait.Eventually(t.Context(), t, 0, "CoreDNS's /ready answers 200", testwait.HTTPOK("http://"+ready+"/ready"))
		c.assertNoForbidden(t)

		// It served without its own token reaching what it reads through the
		// wrapper (TestManifestsRBAC checks the rest of its rights).
		sa := "--as=system:serviceaccount:edge-system:coredns-gridhosts"
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"list", "services", "-A"}, "no"},
			{[]string{"list", "endpointslices.discovery.k8s.io", "-A"}, "no"},
			{[]string{"list", "namespaces"}, "no"},
			{[]string{"list", "pods", "-A"}, "yes"},
		} {
			if got := k.canI(append(tc.args, sa)...); got != tc.want {
				t.Errorf("kubectl auth can-i %s: %s, want %s", strings.Join(tc.args, " "), got, tc.want)
			}
		}
	})
}
