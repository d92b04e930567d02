package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// TestPlainClusterIP proves the harness without any of our programs: the real
// scheduler spreads a Deployment over the node namespaces, the kubelet player
// runs its Pods, and real kube-proxy in each node (talking straight to the
// apiserver) routes a ClusterIP to every pod, on any node. Deleting a Pod
// removes it from the answers.
func TestPlainClusterIP(t *testing.T) {
	t.Parallel() // each mode its own cluster and network
	for _, mode := range []string{harness.ProxyModeIPTables, harness.ProxyModeNFTables} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, c := startCluster(t, harness.Options{ProxyMode: mode})
			dep, err := c.Client.AppsV1().Deployments("default").Create(ctx, echoDeployment("plain", 4, nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			svc, err := c.Client.CoreV1().Services("default").Create(ctx, echoService("plain", nil, false), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80")

			var pods map[string]string
			eventually(ctx, t, 2*time.Minute, "4 plain pods ready", func(ctx context.Context) error {
				pods, err = readyPods(ctx, c, "app=plain")
				if err == nil && len(pods) != int(*dep.Spec.Replicas) {
					err = fmt.Errorf("ready: %v", pods)
				}
				return err
			})
			t.Logf("pods: %v", pods)
			for _, n := range c.Nodes {
				eventually(ctx, t, time.Minute, n.Name+" reaches every pod through "+url, func(ctx context.Context) error {
					return reachAll(ctx, n, url, pods, 200)
				})
			}

			// kube-proxy's own rules name the ClusterIP.
			rules, err := c.Nodes[0].ProxyRules(ctx, mode)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(rules, svc.Spec.ClusterIP) {
				t.Fatalf("%s rules on node0 lack ClusterIP %s:\n%s", mode, svc.Spec.ClusterIP, rules)
			}

			// A deleted Pod stops answering: the player stops it, the Pod goes away.
			victim := keys(pods)[0]
			if err := c.Client.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, time.Minute, "deleted pod "+victim+" gone and replaced", func(ctx context.Context) error {
				now, err := readyPods(ctx, c, "app=plain")
				if err != nil {
					return err
				}
				if _, still := now[victim]; still || len(now) != len(pods) {
					return fmt.Errorf("ready: %v", now)
				}
				pods = now
				return nil
			})
			eventually(ctx, t, time.Minute, "node1 reaches the new pod set", func(ctx context.Context) error {
				return reachAll(ctx, c.Node("node1"), url, pods, 200)
			})
		})
	}
}
