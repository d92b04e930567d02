package gridhosts

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// TestClientsReusedAddress: in clients mode, a pod IP handed to a new pod
// on another node while the API still holds the old pod belongs to the new
// pod, whatever order the two pods' events arrive in afterwards. Real
// apiserver, the plugin's own informers.
func TestClientsReusedAddress(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	ctx := t.Context()
	g := New([]string{"cluster.local."})
	g.Clients = true
	g.ClientConfig = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.cp.Kubeconfig}, &clientcmd.ConfigOverrides{})
	if err := g.watch(must(g.restConfig())(t), nil); err != nil {
		t.Fatal(err)
	}
	if err := g.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stop() })

	const reused = "10.44.0.1"
	answerFor := func() []string { return aRecords(g, reused, demoNames(0)) }
	want := func(what string, ips ...string) {
		t.Helper()
		poll(t, 30*time.Second, what, func() error {
			if got := answerFor(); !slices.Equal(got, ips) {
				return fmt.Errorf("got %v, want %v", got, ips)
			}
			return nil
		})
	}
	client := func(name, node string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x"}}},
		}
		setPodIPs(p, reused)
		return p
	}

	c.createPod(t, client("old", "node-1"))
	want("old pod on node-1", "10.0.1.1")
	// Its node reuses the address for a pod on node-2 before the old
	// pod's status or deletion reaches the API.
	c.createPod(t, client("new", "node-2"))
	want("new pod on node-2", "10.0.2.1")
	// A late update of the old pod does not take the address back.
	old := must(c.kube.CoreV1().Pods("default").Get(ctx, "old", metav1.GetOptions{}))(t)
	old.Labels = map[string]string{"touched": "1"}
	must(c.kube.CoreV1().Pods("default").Update(ctx, old, metav1.UpdateOptions{}))(t)
	c.setPodIPs(t, "default", "old", reused)
	rv := must(c.kube.CoreV1().Pods("default").Get(ctx, "old", metav1.GetOptions{}))(t).ResourceVersion
	poll(t, 30*time.Second, "old pod's last update indexed", func() error {
		if p, _ := g.index.Pod("default/old"); p == nil || p.GetResourceVersion() != rv {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if got := answerFor(); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Fatalf("after the old pod's late updates: %v, want node-2's 10.0.2.1", got)
	}
	// The old pod goes: still the new one's.
	if err := c.kube.CoreV1().Pods("default").Delete(ctx, "old", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	want("after the old pod is deleted", "10.0.2.1")
}
