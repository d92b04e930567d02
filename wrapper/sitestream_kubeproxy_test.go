package wrapper_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSiteStreamKubeProxy runs the real kube-proxy (iptables mode, in a
// throwaway network namespace) behind a follower of a two-wrapper site,
// kills the leader, changes the endpoints, and checks kube-proxy's rules
// against the apiserver's truth: the follower resumed from the apiserver
// (no full list from the cloud unless it answered 410), kube-proxy neither
// exited nor missed the change.
func TestSiteStreamKubeProxy(t *testing.T) {
	proxyBin := kubeProxyHost(t, "network namespaces")
	cp, admin := startTestCluster(t, "")
	for _, n := range []string{"node0", "node1"} {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"shop"}}}`, siteLabel)
		if _, err := admin.CoreV1().Nodes().Patch(t.Context(), n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().ServiceAccounts(peerNS).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: peerAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, admin, "kp")
	createService(t, admin, "kp", "svc", `["zone1"]`)
	createSlice(t, admin, "kp", "svc", "svc-a", endpoint("10.9.0.1", "node0"), endpoint("10.9.0.2", "node1"))

	// node1's wrapper leads; node0's follows and serves kube-proxy.
	leader := startSiteWrapper(t, cp, "node1", 41, siteOptions{})
	eventually(t, "node1 leads", 2*time.Minute, func(ctx context.Context) (bool, error) {
		h, err := holder(ctx, admin, "shop")
		return h == "node1", err
	})
	follower := startSiteWrapper(t, cp, "node0", 40, siteOptions{})
	eventually(t, "node0 reads from node1", 2*time.Minute, func(context.Context) (bool, error) {
		return follower.cloud.openUnitStreams() == 0 && leader.cloud.openUnitStreams() > 0, nil
	})

	ns := newNetns(t, "sgsite")
	ln, err := listenInNetns(ns, "127.0.0.1:51006")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: follower.srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	kp := startKubeProxyInNetns(t, proxyBin, ns, wrapperKubeconfig(t, "127.0.0.1:51006"), "-v=2")
	alive := func() { kp.alive(t) }
	// rules waits until kube-proxy's DNAT targets for the Service are
	// exactly want: node0's nodeunit's endpoints in the apiserver.
	rules := func(want ...string) time.Time {
		t.Helper()
		eventually(t, fmt.Sprintf("iptables rules with exactly %v", want), 2*time.Minute, func(ctx context.Context) (bool, error) {
			alive()
			out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "iptables-save", "-t", "nat").CombinedOutput()
			if err != nil {
				return false, err
			}
			var got []string
			for _, line := range strings.Split(string(out), "\n") {
				if i := strings.Index(line, "--to-destination 10.9."); i >= 0 {
					got = append(got, strings.Fields(line[i+len("--to-destination "):])[0])
				}
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return false, fmt.Errorf("DNAT to %v, want %v", got, want)
			}
			return true, nil
		})
		return time.Now()
	}
	rules("10.9.0.1:8080")

	before, expiredBefore := follower.cloud.unitLists.Load(), follower.cloud.expired.Load()
	leader.kill()
	changed := time.Now()
	patch := `{"endpoints":[{"addresses":["10.9.0.3"],"nodeName":"node0"},{"addresses":["10.9.0.2"],"nodeName":"node1"}]}`
	if _, err := admin.DiscoveryV1().EndpointSlices("kp").Patch(t.Context(), "svc-a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := rules("10.9.0.3:8080")
	t.Logf("leader killed: kube-proxy's rules had the change %s after it was written", seen.Sub(changed).Round(10*time.Millisecond))
	if lists, expired := follower.cloud.unitLists.Load()-before, follower.cloud.expired.Load()-expiredBefore; lists > expired {
		t.Errorf("the follower pulled %d full lists from the cloud after the leader died, after %d 410s", lists, expired)
	}
	// node0's wrapper takes the Lease and streams from the cloud itself.
	eventually(t, "node0 leads", 2*time.Minute, func(ctx context.Context) (bool, error) {
		h, err := holder(ctx, admin, "shop")
		return h == "node0" && follower.cloud.openUnitStreams() > 0, err
	})
	if _, err := admin.DiscoveryV1().EndpointSlices("kp").Patch(t.Context(), "svc-a", types.MergePatchType,
		[]byte(`{"endpoints":[{"addresses":["10.9.0.4"],"nodeName":"node0"}]}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rules("10.9.0.4:8080")
	alive()
}
