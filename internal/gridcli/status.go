package gridcli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/internal/explain"
)

// childrenOf is a workload grid's children as status reports them.
func childrenOf[T any](items []T, key string, child func(*T, string) explain.Child) []explain.Child {
	var cs []explain.Child
	for i := range items {
		cs = append(cs, child(&items[i], key))
	}
	return cs
}

// gridKinds maps what a user types to the grid resource.
var gridKinds = map[string]string{
	"dg": "deploymentgrids", "deploymentgrid": "deploymentgrids", "deploymentgrids": "deploymentgrids",
	"ssg": "statefulsetgrids", "statefulsetgrid": "statefulsetgrids", "statefulsetgrids": "statefulsetgrids",
	"sg": "servicegrids", "servicegrid": "servicegrids", "servicegrids": "servicegrids",
}

func newStatusCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:     "status (dg|ssg|sg)/NAME",
		Short:   "List every nodeunit of a grid with its child, template, readiness and pending actions",
		Example: "  kubectl grid status dg/deploymentgrid-demo\n  kubectl grid status sg/servicegrid-demo -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, _ := strings.Cut(args[0], "/")
			resource, ok := gridKinds[strings.ToLower(kind)]
			if !ok || name == "" {
				return errUsage("want dg/NAME, ssg/NAME or sg/NAME, got %q", args[0])
			}
			return o.status(cmd, resource, name)
		},
	}
}

func (o *options) status(cmd *cobra.Command, resource, name string) error {
	ctx := cmd.Context()
	c, err := o.clients()
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: superedgev1.GroupName, Version: "v1", Resource: resource}
	grid, err := c.dynamic.Resource(gvr).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	key := explain.GridKeyOf(grid)
	children := metav1.ListOptions{LabelSelector: superedgev1.LabelGridSelector + "=" + name}
	var r explain.StatusReport
	switch resource {
	case "deploymentgrids":
		l, err := c.kube.AppsV1().Deployments(c.namespace).List(ctx, children)
		if err != nil {
			return err
		}
		r = explain.WorkloadStatus(grid, nodes, childrenOf(l.Items, key, explain.DeploymentChild))
	case "statefulsetgrids":
		l, err := c.kube.AppsV1().StatefulSets(c.namespace).List(ctx, children)
		if err != nil {
			return err
		}
		r = explain.WorkloadStatus(grid, nodes, childrenOf(l.Items, key, explain.StatefulSetChild))
	default:
		svcName := name + "-svc"
		svc, err := orNil(c.kube.CoreV1().Services(c.namespace).Get(ctx, svcName, metav1.GetOptions{}))
		if err != nil {
			return err
		}
		var slices []*discoveryv1.EndpointSlice
		if svc != nil {
			l, err := c.kube.DiscoveryV1().EndpointSlices(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svcName})
			if err != nil {
				return err
			}
			for i := range l.Items {
				slices = append(slices, &l.Items[i])
			}
		}
		r = explain.ServiceGridStatus(grid, nodes, svc, slices)
	}
	if err := c.addAutonomy(ctx, grid, nodes, &r, time.Now()); err != nil {
		return err
	}
	return o.print(r, func(w *table) { printStatusReport(w, r) })
}

// addAutonomy fills in the grid's autonomy and, for each nodeunit with
// unreachable nodes, where it stands (package autonomy's rule, over every
// workload grid keyed on the same label).
func (c *clients) addAutonomy(ctx context.Context, grid *unstructured.Unstructured, nodes []corev1.Node, r *explain.StatusReport, now time.Time) error {
	var all []*unstructured.Unstructured
	for _, resource := range []string{"deploymentgrids", "statefulsetgrids"} {
		gvr := schema.GroupVersionResource{Group: superedgev1.GroupName, Version: "v1", Resource: resource}
		l, err := c.dynamic.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s: %w", resource, err)
		}
		for i := range l.Items {
			all = append(all, &l.Items[i])
		}
	}
	opted, bad := explain.AutonomyGrids(all)
	if v, ok := grid.GetAnnotations()[autonomy.DurationAnnotation]; ok {
		r.Autonomy = v
		if err, isBad := bad[grid.GetKind()+" "+grid.GetNamespace()+"/"+grid.GetName()]; isBad {
			r.Autonomy = "none: " + err.Error()
		}
	}
	var onKey []autonomy.Grid
	for _, g := range opted {
		if g.Key == r.GridUniqKey {
			onKey = append(onKey, g)
		}
	}
	anodes := explain.AutonomyNodes(nodes)
	states := map[string]autonomy.UnitStatus{}
	for _, u := range autonomy.Units(anodes, onKey, now, explain.DefaultDecisionWindow) {
		states[u.Value] = u
	}
	for i := range r.NodeUnits {
		u := &r.NodeUnits[i]
		if st, ok := states[u.NodeUnit]; ok {
			u.Connection = explain.Connection(st, now)
			continue
		}
		if len(onKey) == 0 {
			if n, total, since := unreachableIn(anodes, r.GridUniqKey, u.NodeUnit); n > 0 {
				u.Connection = fmt.Sprintf("%d/%d nodes unreachable since %s; no autonomy (no grid on %s carries %s)",
					n, total, since.UTC().Format(time.RFC3339), r.GridUniqKey, autonomy.DurationAnnotation)
			}
		}
	}
	return nil
}

// unreachableIn counts the unreachable nodes of nodeunit key=value, and
// since when the first one is.
func unreachableIn(nodes autonomy.Nodes, key, value string) (n, total int, since time.Time) {
	for _, m := range nodes.InUnit(key, value) {
		total++
		if m.Unreachable {
			n++
			if since.IsZero() || m.Since.Before(since) {
				since = m.Since
			}
		}
	}
	return n, total, since
}
