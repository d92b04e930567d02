package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GridChain says, link by link, how far namespace default's grids got: the
// DeploymentGrids and StatefulSetGrids, the workloads the controller made,
// the ReplicaSets and Pods kube-controller-manager made from them, and the
// last Warning Events. A wait for ready pods that fails with only "0 ready"
// cannot tell a stalled controller from a stalled kube-controller-manager,
// scheduler or kubelet player; this can.
func (c *Cluster) GridChain(ctx context.Context) string {
	const ns = metav1.NamespaceDefault
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if l, err := c.Grids.SuperedgeV1().DeploymentGrids(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("DeploymentGrids: %v", err)
	} else {
		for _, g := range l.Items {
			line("DeploymentGrid %s: generation %d, status of generation %d, %d nodeunits", g.Name, g.Generation, g.Status.ObservedGeneration, g.Status.NodeUnits)
		}
	}
	if l, err := c.Grids.SuperedgeV1().StatefulSetGrids(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("StatefulSetGrids: %v", err)
	} else {
		for _, g := range l.Items {
			line("StatefulSetGrid %s: generation %d, status of generation %d, %d nodeunits", g.Name, g.Generation, g.Status.ObservedGeneration, g.Status.NodeUnits)
		}
	}
	if l, err := c.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("Deployments: %v", err)
	} else {
		for _, d := range l.Items {
			line("Deployment %s: %d/%d ready, observed generation %d of %d", d.Name, d.Status.ReadyReplicas, ptrValue(d.Spec.Replicas), d.Status.ObservedGeneration, d.Generation)
		}
	}
	if l, err := c.Client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("StatefulSets: %v", err)
	} else {
		for _, s := range l.Items {
			line("StatefulSet %s: %d/%d ready, observed generation %d of %d", s.Name, s.Status.ReadyReplicas, ptrValue(s.Spec.Replicas), s.Status.ObservedGeneration, s.Generation)
		}
	}
	if l, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("ReplicaSets: %v", err)
	} else {
		for _, r := range l.Items {
			line("ReplicaSet %s: %d/%d ready", r.Name, r.Status.ReadyReplicas, ptrValue(r.Spec.Replicas))
		}
	}
	if l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		line("Pods: %v", err)
	} else {
		for _, p := range l.Items {
			line("Pod %s: %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
	if l, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		line("Nodes: %v", err)
	} else {
		for _, n := range l.Items {
			ready := corev1.ConditionUnknown
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					ready = cond.Status
				}
			}
			line("Node %s: Ready %s, %d taints", n.Name, ready, len(n.Spec.Taints))
		}
	}
	if l, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning}); err != nil {
		line("Warning Events: %v", err)
	} else {
		events := l.Items
		slices.SortFunc(events, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
		if len(events) > 10 {
			events = events[len(events)-10:]
		}
		for _, e := range events {
			line("Warning %s %s/%s (%d times): %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, e.Message)
		}
	}
	return b.String()
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
