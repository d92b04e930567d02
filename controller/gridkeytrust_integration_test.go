package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestNodeRestrictedGridKeys runs the apiserver with the Node authorizer and
// NodeRestriction, as kubeadm does. A node's kubelet may label its own Node
// zone1=a (so on a plain key a compromised node joins nodeunit a), but not
// node-restriction.kubernetes.io/zone. With --require-node-restricted-grid-keys
// a grid on zone1 gets an UntrustedGridUniqKey Warning and condition and no
// child, a grid on the restricted key gets exactly the administrator's
// nodeunits.
func TestNodeRestrictedGridKeys(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{APIServerArgs: []string{
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
	}})
	const restricted = NodeRestrictionDomain + "/zone"
	e.node(t, "node0", map[string]string{"zone1": "a", restricted: "a"})
	e.node(t, "node1", map[string]string{"zone1": "b", restricted: "b"})
	e.node(t, "node2", nil)

	// node2's kubelet, compromised.
	certPEM, keyPEM, err := e.cp.IssueClientCertificate("system:node:node2", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	kubelet := kubernetes.NewForConfigOrDie(&rest.Config{Host: e.cp.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.cp.CACertificate(), CertData: certPEM, KeyData: keyPEM}})
	patch := func(key, value string) error {
		_, err := kubelet.CoreV1().Nodes().Patch(t.Context(), "node2", "application/merge-patch+json",
			fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, key, value), metav1.PatchOptions{})
		return err
	}
	if err := patch("zone1", "a"); err != nil {
		t.Fatalf("the kubelet could not set an unprefixed label on its own Node (the threat this option answers): %v", err)
	}
	if err := patch(restricted, "a"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), NodeRestrictionDomain) {
		t.Fatalf("the kubelet set %s on its own Node: got %v, want NodeRestriction's Forbidden", restricted, err)
	}
	if err := patch("sub."+restricted, "a"); !apierrors.IsForbidden(err) {
		t.Fatalf("the kubelet set a label under a subdomain of %s: got %v, want Forbidden", NodeRestrictionDomain, err)
	}

	e.startController(t, func(o *Options) { o.RequireNodeRestrictedGridKeys = true })
	const ns = "trust"
	e.namespace(t, ns)
	for name, key := range map[string]string{"open": "zone1", "trusted": restricted} {
		if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(t.Context(), simpleDeploymentGrid(ns, name, key, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitDeployments(t, ns, "trusted", "trusted-a", "trusted-b")
	testwait.Eventually(t.Context(), t, 20*time.Second, "open: UntrustedGridUniqKey Warning and condition", func(ctx context.Context) error {
		evs, err := e.warningEvents(ctx, ns, "open", ReasonUntrustedGridUniqKey)
		if err != nil {
			return err
		}
		if len(evs) == 0 || evs[0].Type != "Warning" || !strings.Contains(evs[0].Message, NodeRestrictionDomain) {
			return fmt.Errorf("events %+v", evs)
		}
		g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, "open", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionReconciled)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonUntrustedGridUniqKey {
			return fmt.Errorf("Reconciled condition %+v", c)
		}
		return nil
	})
	if names, err := e.deploymentNames(t.Context(), ns, "open"); err != nil || len(names) != 0 {
		t.Fatalf("a grid on a key nodes set themselves got children %v (%v)", names, err)
	}
}
