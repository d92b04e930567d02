package explain

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/servicegroup/servicegroup/topology"
)

// NodeView is the topology view of node self over a list of nodes, as the
// wrapper builds it from its node cache: Self is nil when self is unknown.
func NodeView(self string, nodes []corev1.Node) topology.Nodes {
	labels := make(map[string]map[string]string, len(nodes))
	for i := range nodes {
		l := nodes[i].Labels
		if l == nil {
			l = map[string]string{}
		}
		labels[nodes[i].Name] = l
	}
	return topology.Nodes{
		Self: labels[self],
		Labels: func(name string) (map[string]string, bool) {
			l, ok := labels[name]
			return l, ok
		},
	}
}
