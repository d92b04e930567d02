package explain

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/servicegroup/servicegroup/autonomy"
)

// DefaultDecisionWindow is the controller's default --autonomy-decision-window:
// what kubectl grid assumes when it tells a node failure from a nodeunit
// being cut off in the first seconds.
const DefaultDecisionWindow = 20 * time.Second

// AutonomyGrids are the grids among grids (DeploymentGrids and
// StatefulSetGrids, unstructured) whose autonomy annotation is valid; bad
// says, per invalid one, what is wrong.
func AutonomyGrids(grids []*unstructured.Unstructured) (opted []autonomy.Grid, bad map[string]error) {
	for _, g := range grids {
		v, ok := g.GetAnnotations()[autonomy.DurationAnnotation]
		if !ok {
			continue
		}
		d, err := autonomy.ParseDuration(v)
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[g.GetKind()+" "+g.GetNamespace()+"/"+g.GetName()] = err
			continue
		}
		key := GridKeyOf(g)
		if key == "" {
			continue
		}
		opted = append(opted, autonomy.Grid{Kind: g.GetKind(), Namespace: g.GetNamespace(), Name: g.GetName(), Key: key, Duration: d})
	}
	return opted, bad
}

// AutonomyNodes are nodes as the autonomy rule reads them.
func AutonomyNodes(nodes []corev1.Node) autonomy.Nodes {
	out := make(autonomy.Nodes, 0, len(nodes))
	for i := range nodes {
		out = append(out, autonomy.NodeOf(&nodes[i]))
	}
	return out
}

// Connection says, for a nodeunit with unreachable nodes, where it stands:
// cut off (since when, autonomous until when), past its autonomy, a failed
// node, or deciding.
func Connection(u autonomy.UnitStatus, now time.Time) string {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch u.State {
	case autonomy.CutOff:
		return fmt.Sprintf("cut off since %s, autonomous until %s (%s left)", at(u.Since), at(u.Until), u.Until.Sub(now).Round(time.Second))
	case autonomy.Expired:
		return fmt.Sprintf("cut off since %s, autonomy ended %s: pods marked not Ready and evicted", at(u.Since), at(u.Until))
	case autonomy.Deciding:
		return fmt.Sprintf("%d/%d nodes unreachable since %s, deciding until %s", u.Unreachable, u.Nodes, at(u.Since), at(u.Until))
	case autonomy.NodeFailure:
		return fmt.Sprintf("%d/%d nodes unreachable since %s: failed nodes, evicted as by default", u.Unreachable, u.Nodes, at(u.Since))
	}
	return ""
}
