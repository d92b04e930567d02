package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// BenchmarkNewNodeUnitToChild: time from creating a Node with a new nodeunit
// value to the grid's Deployment for it existing on the apiserver.
func BenchmarkNewNodeUnitToChild(b *testing.B) {
	e := newEnv(b, controlplane.Options{})
	e.startController(b, nil)
	ctx := b.Context()
	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "lat", "zone", nil), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		value := fmt.Sprintf("u%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + value, Labels: map[string]string{"zone": value}}}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := e.kube.AppsV1().Deployments("default").Get(ctx, "lat-"+value, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			b.Fatalf("no child for %s: %v", value, err)
		}
	}
}
