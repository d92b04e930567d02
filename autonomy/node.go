package autonomy

import corev1 "k8s.io/api/core/v1"

// NodeOf is n as the rule reads it: unreachable while the node lifecycle
// controller holds its Ready condition Unknown, Ready while the kubelet
// reports it True, since that condition's last transition. The webhook
// decides on it and kubectl grid shows it, so both read a Node alike.
func NodeOf(n *corev1.Node) Node {
	out := Node{Name: n.Name, Labels: n.Labels}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Unreachable, out.Ready, out.Since = c.Status == corev1.ConditionUnknown, c.Status == corev1.ConditionTrue, c.LastTransitionTime.Time
		}
	}
	return out
}
