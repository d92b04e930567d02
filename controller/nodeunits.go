package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/trafficmode"
)

// nodeLabelKeyIndex indexes Nodes by each of their label keys, so the
// nodeunits of one grid key are found without walking every node.
const nodeLabelKeyIndex = "labelKey"

func indexNodeLabelKeys(obj any) ([]string, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(node.Labels))
	for k := range node.Labels {
		keys = append(keys, k)
	}
	return keys, nil
}

// nodeUnits answers which nodeunits exist for a grid key.
type nodeUnits struct {
	indexer cache.Indexer
}

// values are the distinct non-empty values of label key across Nodes, sorted.
func (n nodeUnits) values(key string) []string {
	objs, err := n.indexer.ByIndex(nodeLabelKeyIndex, key)
	if err != nil {
		return nil
	}
	seen := map[string]struct{}{}
	for _, obj := range objs {
		node, ok := obj.(*corev1.Node)
		if !ok {
			continue
		}
		if v := node.Labels[key]; v != "" {
			seen[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// changedLabelKeys are the keys added, removed or changed between two label sets.
func changedLabelKeys(old, cur map[string]string) []string {
	var keys []string
	for k, v := range old {
		if nv, ok := cur[k]; !ok || nv != v {
			keys = append(keys, k)
		}
	}
	for k := range cur {
		if _, ok := old[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// stripNode keeps only what nodeunits need, name and labels, and the
// zone-label writer's record of the zone it wrote (zonelabels.go).
func stripNode(node *corev1.Node) *corev1.Node {
	out := &corev1.Node{
		TypeMeta: node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion, Labels: node.Labels,
		},
	}
	if v, ok := node.Annotations[trafficmode.ZoneWrittenAnnotation]; ok {
		out.Annotations = map[string]string{trafficmode.ZoneWrittenAnnotation: v}
	}
	return out
}
