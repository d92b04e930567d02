package harness

import (
	"context"
	"encoding/json"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodInfo is what the tests and the demo need to know of a Pod.
type PodInfo struct {
	Name, Node, IP string
	Ready          bool
}

// Pods lists the Pods of namespace default matching selector, sorted by
// name, leaving out terminating ones.
func (c *Cluster) Pods(ctx context.Context, selector string) ([]PodInfo, error) {
	list, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []PodInfo
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		info := PodInfo{Name: p.Name, Node: p.Spec.NodeName, IP: p.Status.PodIP}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				info.Ready = p.Status.Phase == corev1.PodRunning
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Nodeunits maps each node to its current value of the grid key.
func (c *Cluster) Nodeunits(ctx context.Context, key string) (map[string]string, error) {
	list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range list.Items {
		out[n.Name] = n.Labels[key]
	}
	return out, nil
}

// SetNodeLabel sets (or, with an empty value, removes) one label of a Node.
func (c *Cluster) SetNodeLabel(ctx context.Context, node, key, value string) error {
	var v any = value
	if value == "" {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
	if err != nil {
		return err
	}
	_, err = c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
