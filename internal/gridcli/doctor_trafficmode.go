package gridcli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/trafficmode"
)

// zoneFromGridKeyFlag is the controller's flag naming the zone source.
const zoneFromGridKeyFlag = "--zone-from-grid-key"

// checkTrafficModes reports ServiceGrids whose traffic mode the controller
// refuses (unknown, or native on a key the zones do not come from) and,
// when the controller writes zones, nodes whose zone label disagrees with
// their nodeunit.
func (d *doctor) checkTrafficModes(ctx context.Context) error {
	l, err := d.controllerLease(ctx)
	if err != nil {
		return err
	}
	zoneFrom := ""
	if l.deploy != nil {
		for _, c := range l.deploy.Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				if k, v, ok := strings.Cut(a, "="); ok && k == zoneFromGridKeyFlag {
					zoneFrom = v
				}
			}
		}
	}
	grids, err := d.c.grids.SuperedgeV1().ServiceGrids(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing servicegrids: %w", err)
	}
	for _, g := range grids.Items {
		subject := "servicegrid " + g.Namespace + "/" + g.Name
		mode, err := trafficmode.Of(g.Annotations)
		if err != nil {
			d.report.add(subject, fmt.Sprintf("set %s to %s or %s, or remove it", trafficmode.Annotation, trafficmode.Wrapper, trafficmode.Native),
				"%v: the controller leaves its Service as it is", err)
			continue
		}
		if mode != trafficmode.Native {
			continue
		}
		if err := trafficmode.NativeKeyError(g.Spec.GridUniqKey, zoneFrom); err != nil {
			fix := fmt.Sprintf("key the grid on %s, or remove %s (wrapper mode)", trafficmode.ZoneSource(zoneFrom), trafficmode.Annotation)
			if zoneFrom == "" {
				fix = fmt.Sprintf("add %s=%s to the controller's args (build/README.md, Traffic modes), or remove %s (wrapper mode)", zoneFromGridKeyFlag, g.Spec.GridUniqKey, trafficmode.Annotation)
			}
			d.report.add(subject, fix, "native-mode grid on key %q, which is not the zone source (%s): the controller refuses it", g.Spec.GridUniqKey, trafficmode.ZoneSource(zoneFrom))
		}
	}
	if zoneFrom == "" {
		return nil
	}
	nodes, err := d.c.nodes(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		unit := n.Labels[zoneFrom]
		if unit == "" {
			continue
		}
		zone, has := n.Labels[trafficmode.ZoneLabel]
		if has && zone == unit {
			continue
		}
		subject := "node " + n.Name
		if action, _ := trafficmode.DecideZone(n.Labels, n.Annotations, zoneFrom); action == trafficmode.ZoneConflict {
			d.report.add(subject, fmt.Sprintf("remove it (kubectl label node %s %s-) and stop what sets it (a cloud provider, the kubelet's --node-labels); the controller then writes %q", n.Name, trafficmode.ZoneLabel, unit),
				"%s is %q, set by someone else, and its nodeunit (%s) is %q: native-mode grids route this node's traffic by the wrong zone", trafficmode.ZoneLabel, zone, zoneFrom, unit)
			continue
		}
		d.report.add(subject, "wait for the leading controller, or read its logs (a refused write)",
			"%s is %s and its nodeunit (%s) is %q: the controller has not written it yet", trafficmode.ZoneLabel, labelText(zone, has), zoneFrom, unit)
	}
	return nil
}

// labelText quotes a label value, or says it is missing.
func labelText(v string, has bool) string {
	if !has {
		return "missing"
	}
	return fmt.Sprintf("%q", v)
}
