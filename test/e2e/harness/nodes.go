package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// NodeSpec is one node of the test cluster.
type NodeSpec struct {
	Name   string
	Labels map[string]string
	// KubeProxy is the kube-proxy binary this node runs; empty means the
	// control plane's own (the version matrix runs older releases).
	KubeProxy string
}

// GridKey is the node label SuperEdge's grids use (gridUniqKey: zone1).
const GridKey = "zone1"

// ZoneKey is the well-known label most real clusters carry: a prefixed key,
// which cannot be a label value itself. Runs with it prove that the
// controller, the wrapper and gridhosts agree on prefixed grid keys.
const ZoneKey = corev1.LabelTopologyZone

// DemoNodes are SuperEdge's demo nodes: node0 in nodeunit1, node1 and node2
// in nodeunit2, by both GridKey and ZoneKey.
func DemoNodes() []NodeSpec {
	unit := func(v string) map[string]string { return map[string]string{GridKey: v, ZoneKey: v} }
	return []NodeSpec{
		{Name: "node0", Labels: unit("nodeunit1")},
		{Name: "node1", Labels: unit("nodeunit2")},
		{Name: "node2", Labels: unit("nodeunit2")},
	}
}

// createNode registers a Ready Node for a fabric node, with room for plenty
// of pods. Node objects must exist before Pods reference them (the
// EndpointSlice controller skips pods on unknown nodes).
func createNode(ctx context.Context, client kubernetes.Interface, spec NodeSpec, fn *FabricNode) error {
	labels := map[string]string{
		corev1.LabelHostname: spec.Name,
		corev1.LabelOSStable: "linux",
	}
	maps.Copy(labels, spec.Labels)
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels},
		Spec: corev1.NodeSpec{
			PodCIDR:  fn.PodCIDR.String(),
			PodCIDRs: []string{fn.PodCIDR.String()},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "e2e kubelet player", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fn.IP.String()},
				{Type: corev1.NodeHostName, Address: spec.Name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: controlplane.KubernetesVersion, OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "e2e://player",
			},
		},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	// Status is kept on create for Nodes, but write it through the status
	// subresource too so that nothing depends on that detail. A merge patch:
	// kube-controller-manager may have touched the Node already.
	patch, err := json.Marshal(map[string]any{"status": node.Status})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, spec.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("node %s status: %w", spec.Name, err)
	}
	// The TaintNodesByCondition admission plugin taints a new Node not-ready;
	// the node lifecycle controller (disabled: no kubelets) would lift it
	// once the Node is Ready. Lift it as that controller would.
	if _, err := client.CoreV1().Nodes().Patch(ctx, spec.Name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("node %s taints: %w", spec.Name, err)
	}
	return nil
}
