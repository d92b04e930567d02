package wrapper_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/topology"
	"github.com/servicegroup/servicegroup/wrapper"
)

// TestNodeRestrictedTopologyKeys runs the apiserver with the Node authorizer
// and NodeRestriction. node2's kubelet, compromised, labels its own Node
// zone1=a (NodeRestriction allows it) to join nodeunit a. Through a wrapper
// without the option, kube-proxy's informers on node2 get nodeunit a's
// endpoint of a Service keyed on zone1; with
// RequireNodeRestrictedTopologyKeys zone1 never matches: alone it serves
// nothing, before "*" it falls to "*", and a key under
// node-restriction.kubernetes.io/ still routes by the administrator's labels.
func TestNodeRestrictedTopologyKeys(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{APIServerArgs: []string{
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
	}})
	admin := adminClient(cp)
	const restricted = topology.NodeRestrictionDomain + "/zone"
	for name, labels := range map[string]map[string]string{
		"node0": {"zone1": "a", restricted: "a"},
		"node1": {"zone1": "b", restricted: "b"},
		"node2": {restricted: "b"},
	} {
		if _, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	certPEM, keyPEM, err := cp.IssueClientCertificate("system:node:node2", "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	kubelet := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertificate(), CertData: certPEM, KeyData: keyPEM}})
	if _, err := kubelet.CoreV1().Nodes().Patch(t.Context(), "node2", types.MergePatchType, []byte(`{"metadata":{"labels":{"zone1":"a"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the kubelet could not label its own Node (the threat this option answers): %v", err)
	}

	const ns = "trust"
	createNamespace(t, admin, ns)
	for svc, keys := range map[string]string{
		"forged":   `["zone1"]`,
		"fallback": `["zone1","*"]`,
		"trusted":  fmt.Sprintf(`[%q]`, restricted),
	} {
		createService(t, admin, ns, svc, keys)
		createSlice(t, admin, ns, svc, svc, endpoint("10.0.0.1", "node0"), endpoint("10.0.0.2", "node1"))
	}

	before := metricValue(t, "application_grid_wrapper_forgeable_topology_keys_ignored_total", nil)
	open := startInformers(t, startWrapper(t, cp, "node2", "", wrapper.Options{}).URL(), "", "node2")
	safe := startInformers(t, startWrapper(t, cp, "node2", "", wrapper.Options{RequireNodeRestrictedTopologyKeys: true}).URL(), "", "node2")
	check := func(name string, inf *proxyInformers, want map[string][]string) {
		t.Helper()
		var got map[string][]string
		eventually(t, name, 2*time.Minute, func(context.Context) (bool, error) {
			got = sliceState(inf.slices.GetStore().List(), ns)
			for k, v := range want {
				if !slices.Equal(got[k], v) {
					return false, fmt.Errorf("served %v, want %v", got, want)
				}
			}
			return len(got) == len(want), nil
		})
	}
	check("without the option the forged label routes", open, map[string][]string{
		"forged":   {"10.0.0.1@node0"},
		"fallback": {"10.0.0.1@node0"},
		"trusted":  {"10.0.0.2@node1"},
	})
	check("with the option a forgeable key never matches", safe, map[string][]string{
		"forged":   {},
		"fallback": {"10.0.0.1@node0", "10.0.0.2@node1"},
		"trusted":  {"10.0.0.2@node1"},
	})
	if got := metricValue(t, "application_grid_wrapper_forgeable_topology_keys_ignored_total", nil) - before; got < 2 {
		t.Errorf("forgeable_topology_keys_ignored_total rose by %v, want at least 2 (forged, fallback)", got)
	}
}
