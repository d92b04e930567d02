package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// GridChain says how far namespace default's grids got, link by link: the
// DeploymentGrids and StatefulSetGrids, the workloads the controller made,
// the ReplicaSets and Pods kube-controller-manager made from them, the
// Nodes and the last Warning Events. A wait for ready pods that fails with
// only "0 ready" cannot tell a stalled controller from a stalled
// kube-controller-manager, scheduler or kubelet player; this can. summary
// is one line (a failure's first line is what CI's summary keeps), detail
// one line per object.
func (c *Cluster) GridChain(ctx context.Context) (summary, detail string) {
	const ns = metav1.NamespaceDefault
	var sum []string
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	failed := func(what string, err error) { sum = append(sum, fmt.Sprintf("%s: %v", what, err)) }

	if l, err := c.Grids.SuperedgeV1().DeploymentGrids(ns).List(ctx, metav1.ListOptions{}); err != nil {
		failed("DeploymentGrids", err)
	} else {
		sum = append(sum, fmt.Sprintf("%d DeploymentGrids", len(l.Items)))
		for _, g := range l.Items {
			line("DeploymentGrid %s: generation %d, status of generation %d, %d nodeunits", g.Name, g.Generation, g.Status.ObservedGeneration, g.Status.NodeUnits)
		}
	}
	if l, err := c.Grids.SuperedgeV1().StatefulSetGrids(ns).List(ctx, metav1.ListOptions{}); err != nil {
		failed("StatefulSetGrids", err)
	} else {
		sum = append(sum, fmt.Sprintf("%d StatefulSetGrids", len(l.Items)))
		for _, g := range l.Items {
			line("StatefulSetGrid %s: generation %d, status of generation %d, %d nodeunits", g.Name, g.Generation, g.Status.ObservedGeneration, g.Status.NodeUnits)
		}
	}
	if l, err := c.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err != nil {
		failed("Deployments", err)
	} else {
		ready := 0
		for _, d := range l.Items {
			if d.Status.ReadyReplicas == ptr.Deref(d.Spec.Replicas, 0) {
				ready++
			}
			line("Deployment %s: %d/%d ready, observed generation %d of %d", d.Name, d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 0), d.Status.ObservedGeneration, d.Generation)
		}
		sum = append(sum, fmt.Sprintf("%d Deployments (%d all ready)", len(l.Items), ready))
	}
	if l, err := c.Client.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		failed("StatefulSets", err)
	} else {
		sum = append(sum, fmt.Sprintf("%d StatefulSets", len(l.Items)))
		for _, s := range l.Items {
			line("StatefulSet %s: %d/%d ready, observed generation %d of %d", s.Name, s.Status.ReadyReplicas, ptr.Deref(s.Spec.Replicas, 0), s.Status.ObservedGeneration, s.Generation)
		}
	}
	if l, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		failed("ReplicaSets", err)
	} else {
		sum = append(sum, fmt.Sprintf("%d ReplicaSets", len(l.Items)))
		for _, r := range l.Items {
			line("ReplicaSet %s: %d/%d ready", r.Name, r.Status.ReadyReplicas, ptr.Deref(r.Spec.Replicas, 0))
		}
	}
	if l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		failed("Pods", err)
	} else {
		bound := 0
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
			line("Pod %s: %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
		sum = append(sum, fmt.Sprintf("%d Pods (%d bound)", len(l.Items), bound))
	}
	if l, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		failed("Nodes", err)
	} else {
		ready := 0
		for _, n := range l.Items {
			status := corev1.ConditionUnknown
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					status = cond.Status
				}
			}
			if status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
				ready++
			}
			line("Node %s: Ready %s, %d taints", n.Name, status, len(n.Spec.Taints))
		}
		sum = append(sum, fmt.Sprintf("%d Nodes (%d Ready, untainted)", len(l.Items), ready))
	}
	if c.CP != nil {
		sum = append(sum, c.CP.Statuses())
	}
	if l, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning}); err != nil {
		failed("Warning Events", err)
	} else {
		events := l.Items
		slices.SortFunc(events, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
		if len(events) > 10 {
			events = events[len(events)-10:]
		}
		for _, e := range events {
			line("Warning %s %s/%s (%d times): %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, e.Message)
		}
		if n := len(events); n > 0 {
			e := events[n-1]
			sum = append(sum, fmt.Sprintf("last Warning: %s %s/%s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name))
		} else {
			sum = append(sum, "no Warning Events")
		}
	}
	return strings.Join(sum, ", "), b.String()
}
