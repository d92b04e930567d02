package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestServiceGridKeepsAllocations: the ServiceGrid's Service carries the
// grid's labels and annotations plus topologyKeys, and a template change
// keeps the allocated clusterIP and nodePorts.
func TestServiceGridKeepsAllocations(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	e.startController(t, nil)
	sg := &superedgev1.ServiceGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api",
			Labels:      map[string]string{"team": "edge"},
			Annotations: map[string]string{"owner": "ops"}},
		Spec: superedgev1.ServiceGridSpec{GridUniqKey: "zone1", Template: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "api"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}},
	}
	if _, err := e.grids.SuperedgeV1().ServiceGrids("default").Create(ctx, sg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var first *corev1.Service
	testwait.Eventually(t.Context(), t, 20*time.Second, "api-svc created", func(ctx context.Context) error {
		s, err := e.kube.CoreV1().Services("default").Get(ctx, "api-svc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		first = s
		return nil
	})
	if first.Annotations["owner"] != "ops" || first.Annotations[superedgev1.AnnotationTopologyKeys] != `["zone1"]` {
		t.Errorf("annotations %v", first.Annotations)
	}
	if first.Labels["team"] != "edge" || first.Labels[superedgev1.LabelGridSelector] != "api" || first.Labels[superedgev1.LabelGridUniqKey] != "zone1" {
		t.Errorf("labels %v", first.Labels)
	}
	if first.Spec.ClusterIP == "" || first.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("nothing allocated: %+v", first.Spec)
	}

	e.updateServiceGrid(t, "default", "api", func(g *superedgev1.ServiceGrid) {
		g.Spec.Template.Ports = append(g.Spec.Template.Ports, corev1.ServicePort{Name: "metrics", Port: 9090})
	})
	testwait.Eventually(t.Context(), t, 20*time.Second, "second port added, allocations kept", func(ctx context.Context) error {
		s, err := e.kube.CoreV1().Services("default").Get(ctx, "api-svc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Spec.Ports) != 2 {
			return fmt.Errorf("ports %+v", s.Spec.Ports)
		}
		if s.Spec.ClusterIP != first.Spec.ClusterIP || s.Spec.Ports[0].NodePort != first.Spec.Ports[0].NodePort {
			return fmt.Errorf("allocations changed: %s/%d -> %s/%d", first.Spec.ClusterIP, first.Spec.Ports[0].NodePort, s.Spec.ClusterIP, s.Spec.Ports[0].NodePort)
		}
		if s.Spec.Ports[1].TargetPort.IntValue() != 9090 {
			return fmt.Errorf("targetPort of the new port must default to its port: %+v", s.Spec.Ports[1])
		}
		return nil
	})
}
