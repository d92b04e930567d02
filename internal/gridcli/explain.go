package gridcli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/explain"
)

func newExplainCommand(o *options) *cobra.Command {
	var node, zone, mode string
	cmd := &cobra.Command{
		Use:   "explain (svc/NAME | dns NAME) --node NODE",
		Short: "Explain what NODE gets for a Service (as the wrapper filters it, or its data plane in native mode) or a unified StatefulSetGrid name",
		Example: `  kubectl grid explain svc/servicegrid-demo-svc --node node1
  kubectl grid explain dns statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local --node node1 -o yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return errUsage("--node is required")
			}
			if args[0] == "dns" {
				if len(args) != 2 {
					return errUsage("usage: kubectl grid explain dns NAME --node NODE")
				}
				if mode != modeClients && mode != modeNode {
					return errUsage("--mode: want %s or %s, not %q", modeClients, modeNode, mode)
				}
				return o.explainDNS(cmd, args[1], zone, node, mode)
			}
			name, err := serviceArg(args)
			if err != nil {
				return err
			}
			return o.explainService(cmd, name, node)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "The node whose view to explain.")
	cmd.Flags().StringVar(&zone, "zone", "cluster.local", "Cluster domain of unified names (dns).")
	cmd.Flags().StringVar(&mode, "mode", modeClients, "The gridhosts mode to explain (dns): clients (one CoreDNS for every nodeunit, Corefile.clients) or node (the node's own CoreDNS, Corefile.node: grids read from their children, only the pods the node selects).")
	return cmd
}

// serviceArg accepts svc/NAME, service/NAME, services/NAME or "svc NAME".
func serviceArg(args []string) (string, error) {
	kind, name, ok := strings.Cut(args[0], "/")
	if !ok && len(args) == 2 {
		kind, name, ok = args[0], args[1], true
	}
	if !ok || name == "" || (len(args) == 2 && strings.Contains(args[0], "/")) {
		return "", errUsage("want svc/NAME or dns NAME, got %q", strings.Join(args, " "))
	}
	switch kind {
	case "svc", "service", "services":
		return name, nil
	}
	return "", errUsage("unknown kind %q: want svc/NAME or dns NAME", kind)
}

func (o *options) explainService(cmd *cobra.Command, name, node string) error {
	ctx := cmd.Context()
	c, err := o.clients()
	if err != nil {
		return err
	}
	svc, err := c.kube.CoreV1().Services(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	list, err := c.kube.DiscoveryV1().EndpointSlices(c.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + name,
	})
	if err != nil {
		return err
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	slices := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		slices[i] = &list.Items[i]
	}
	r := explain.Service(svc, slices, node, nodes)
	return o.print(r, func(w *table) { printServiceReport(w, r) })
}

// The gridhosts modes explain dns explains.
const (
	modeClients = "clients" // one CoreDNS for every nodeunit (Corefile.clients)
	modeNode    = "node"    // each node's own CoreDNS (Corefile.node)
)

func (o *options) explainDNS(cmd *cobra.Command, qname, zone, node, mode string) error {
	ctx := cmd.Context()
	n, err := explain.ParseDNSName(qname, zone)
	if err != nil {
		return err
	}
	c, err := o.clients()
	if err != nil {
		return err
	}
	var objs explain.DNSObjects
	get := metav1.GetOptions{}
	if objs.Grid, err = orNil(c.grids.SuperedgeV1().StatefulSetGrids(n.Namespace).Get(ctx, n.Grid, get)); err != nil {
		return err
	}
	if objs.Node, err = orNil(c.kube.CoreV1().Nodes().Get(ctx, node, get)); err != nil {
		return err
	}
	if objs.Service, err = orNil(c.kube.CoreV1().Services(n.Namespace).Get(ctx, n.Service, get)); err != nil {
		return err
	}
	key := ""
	if objs.Grid != nil {
		key = objs.Grid.Spec.GridUniqKey
	}
	if mode == modeNode {
		// The node's DNS reads the grid from its children.
		objs.NodeMode = true
		list, err := c.kube.AppsV1().StatefulSets(n.Namespace).List(ctx, metav1.ListOptions{LabelSelector: superedgev1.LabelGridSelector})
		if err != nil {
			return err
		}
		for i := range list.Items {
			objs.Children = append(objs.Children, &list.Items[i])
		}
		restrict, where, known := nodeRestrictKeys(ctx, c.kube, node)
		objs.RestrictKeys, objs.Corefile = restrict, where
		if !known {
			objs.Corefile = "cannot tell whether the node's gridhosts sets " + restrictKeysOption + ": " + where + "; explained as if it does not"
		}
		key = ""
		if objs.Node != nil {
			if g := explain.NodeModeGrid(n.Grid, objs.Children, objs.Node.Labels, objs.Service); g != nil {
				key = g.Key
			}
		}
	}
	if key != "" && objs.Node != nil {
		if value := objs.Node.Labels[key]; value != "" {
			set := n.Grid + "-" + value
			if objs.StatefulSet, err = orNil(c.kube.AppsV1().StatefulSets(n.Namespace).Get(ctx, set, get)); err != nil {
				return err
			}
			if objs.Pod, err = orNil(c.kube.CoreV1().Pods(n.Namespace).Get(ctx, fmt.Sprintf("%s-%d", set, n.Ordinal), get)); err != nil {
				return err
			}
		}
	}
	r := explain.DNS(qname, n, node, objs)
	return o.print(r, func(w *table) { printDNSReport(w, r) })
}
