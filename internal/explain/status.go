package explain

import (
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/servicegroup/servicegroup/gridunit"
	"github.com/servicegroup/servicegroup/topology"
)

// StatusReport is every nodeunit of one grid with its child.
type StatusReport struct {
	Kind        string       `json:"kind"`
	Grid        string       `json:"grid"` // namespace/name
	GridUniqKey string       `json:"gridUniqKey"`
	Generation  int64        `json:"generation"`
	Observed    int64        `json:"observedGeneration"`
	NodeUnits   []UnitReport `json:"nodeUnits"`
	Conditions  []string     `json:"conditions,omitempty"` // "Type=Status (Reason): Message"
	// Pending are actions that concern the grid as a whole.
	Pending []string `json:"pending,omitempty"`
	// Rollout is "phase, wave current/total" for grids with spec.rollout.
	Rollout string `json:"rollout,omitempty"`
	// Autonomy is how long a nodeunit of this grid cut off from the cloud
	// keeps its pods (servicegroup.io/autonomy-duration), or why the
	// annotation is ignored.
	Autonomy string `json:"autonomy,omitempty"`
}

// UnitReport is one nodeunit (or one child left without a nodeunit).
type UnitReport struct {
	NodeUnit string `json:"nodeUnit"`
	Nodes    int    `json:"nodes"`
	Child    string `json:"child,omitempty"`
	Template string `json:"template,omitempty"`
	// TemplateReason says which part of the spec chose the template.
	TemplateReason string `json:"templateReason,omitempty"`
	// Wave, Phase and Revision are the nodeunit's rollout state as the
	// controller last recorded it (grids with spec.rollout).
	Wave     string   `json:"wave,omitempty"`
	Phase    string   `json:"phase,omitempty"`
	Revision string   `json:"revision,omitempty"`
	Ready    string   `json:"ready"` // "ready/desired"
	Pending  []string `json:"pending,omitempty"`
	// Connection is set when nodes of the nodeunit are unreachable: cut off
	// from the cloud (since when, autonomous until when), or failed nodes.
	Connection string `json:"connection,omitempty"`
}

// Child is the part of a Deployment or StatefulSet the report needs.
type Child struct {
	Name               string
	UID                types.UID
	Controller         types.UID // UID of its controller ("" when none)
	NodeUnit           string    // value of the grid key in its nodeSelector
	Desired            int32
	Ready, Updated     int32
	Generation         int64
	ObservedGeneration int64
}

// DeploymentChild and StatefulSetChild reduce a workload to a Child for key.
func DeploymentChild(d *appsv1.Deployment, key string) Child {
	return workloadChild(&d.ObjectMeta, &d.Spec.Template, d.Spec.Replicas, d.Status.ReadyReplicas, d.Status.UpdatedReplicas, d.Status.ObservedGeneration, key)
}

func StatefulSetChild(s *appsv1.StatefulSet, key string) Child {
	return workloadChild(&s.ObjectMeta, &s.Spec.Template, s.Spec.Replicas, s.Status.ReadyReplicas, s.Status.UpdatedReplicas, s.Status.ObservedGeneration, key)
}

// workloadChild takes the fields Deployments and StatefulSets share by
// name but not by type.
func workloadChild(meta *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec, desired *int32, ready, updated int32, observed int64, key string) Child {
	return Child{
		Name: meta.Name, UID: meta.UID, Controller: controllerUID(meta.OwnerReferences),
		NodeUnit: tmpl.Spec.NodeSelector[key], Desired: replicas(desired),
		Ready: ready, Updated: updated,
		Generation: meta.Generation, ObservedGeneration: observed,
	}
}

// WorkloadStatus reports a DeploymentGrid or StatefulSetGrid. The grid is
// read unstructured so fields newer than this binary (templatePool,
// templates, defaultTemplateName, new status fields) are used when present
// and never break it.
func WorkloadStatus(grid *unstructured.Unstructured, nodes []corev1.Node, children []Child) StatusReport {
	r := gridHeader(grid)
	byUnit := map[string]Child{}
	for _, c := range children {
		if c.Controller == grid.GetUID() {
			byUnit[c.NodeUnit] = c
		}
	}
	units := nodeUnits(r.GridUniqKey, nodes)
	recorded := map[string]RecordedUnit{}
	for _, ru := range RolloutUnits(grid) {
		recorded[ru.NodeUnit] = ru
	}
	for _, v := range sortedKeys(units) {
		choice := templateOf(grid, v)
		u := UnitReport{NodeUnit: v, Nodes: units[v], Template: choice.Name, TemplateReason: choice.Reason, Ready: "0/0"}
		if ru, ok := recorded[v]; ok {
			u.Wave, u.Phase, u.Revision = ru.Wave, ru.Phase, ru.Revision
		}
		want := gridunit.ChildName(grid.GetName(), v)
		c, ok := byUnit[v]
		switch {
		case !ok:
			u.Pending = append(u.Pending, "create "+want)
		default:
			u.Child = c.Name
			u.Ready = fmt.Sprintf("%d/%d", c.Ready, c.Desired)
			u.Pending = append(u.Pending, rollout(c)...)
		}
		r.NodeUnits = append(r.NodeUnits, u)
	}
	for _, v := range sortedKeys(byUnit) {
		if _, ok := units[v]; ok {
			continue
		}
		c := byUnit[v]
		r.NodeUnits = append(r.NodeUnits, UnitReport{
			NodeUnit: v, Child: c.Name, Ready: fmt.Sprintf("%d/%d", c.Ready, c.Desired),
			Pending: []string{"delete " + c.Name + " (no node has " + r.GridUniqKey + "=" + v + ")"},
		})
	}
	for _, c := range children {
		if c.Controller != grid.GetUID() {
			r.Pending = append(r.Pending, "adopt or release "+c.Name+" (grid labels, other controller)")
		}
	}
	return r
}

// ServiceGridStatus reports a ServiceGrid: its one Service, and per nodeunit
// how many of the Service's endpoints are ready there.
func ServiceGridStatus(grid *unstructured.Unstructured, nodes []corev1.Node, svc *corev1.Service, slices []*discoveryv1.EndpointSlice) StatusReport {
	r := gridHeader(grid)
	want := grid.GetName() + "-svc"
	if svc == nil {
		r.Pending = append(r.Pending, "create Service "+want)
	} else {
		wantKeys := fmt.Sprintf("[%q]", r.GridUniqKey)
		if keys, err := topology.ParseKeys(svc.Annotations[TopologyKeysAnnotation]); err != nil || len(keys) != 1 || keys[0] != r.GridUniqKey {
			r.Pending = append(r.Pending, fmt.Sprintf("update %s: annotation %s=%q, want %s", want, TopologyKeysAnnotation, svc.Annotations[TopologyKeysAnnotation], wantKeys))
		}
	}
	units := nodeUnits(r.GridUniqKey, nodes)
	unitOf := map[string]string{}
	for _, n := range nodes {
		if v, ok := n.Labels[r.GridUniqKey]; ok && v != "" {
			unitOf[n.Name] = v
		}
	}
	ready, total := map[string]int{}, map[string]int{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			v := unitOf[deref(ep.NodeName)]
			total[v]++
			if boolOr(ep.Conditions.Ready, true) {
				ready[v]++
			}
		}
	}
	for _, v := range sortedKeys(units) {
		u := UnitReport{NodeUnit: v, Nodes: units[v], Ready: fmt.Sprintf("%d/%d", ready[v], total[v])}
		if svc != nil {
			u.Child = svc.Name
		}
		if total[v] == 0 {
			u.Pending = append(u.Pending, "no endpoints in this nodeunit: its nodes reach none")
		}
		r.NodeUnits = append(r.NodeUnits, u)
	}
	return r
}

func gridHeader(grid *unstructured.Unstructured) StatusReport {
	key, _, _ := unstructured.NestedString(grid.Object, "spec", "gridUniqKey")
	observed, _, _ := unstructured.NestedInt64(grid.Object, "status", "observedGeneration")
	r := StatusReport{
		Kind: grid.GetKind(), Grid: grid.GetNamespace() + "/" + grid.GetName(), GridUniqKey: key,
		Generation: grid.GetGeneration(), Observed: observed, NodeUnits: []UnitReport{},
	}
	if observed < grid.GetGeneration() {
		r.Pending = append(r.Pending, fmt.Sprintf("controller has not observed generation %d yet (observed %d)", grid.GetGeneration(), observed))
	}
	if phase, ok, _ := unstructured.NestedString(grid.Object, "status", "rollout", "phase"); ok {
		wave, _, _ := unstructured.NestedString(grid.Object, "status", "rollout", "wave")
		r.Rollout = phase + ", wave " + wave
		if unit, ok, _ := unstructured.NestedString(grid.Object, "status", "rollout", "halted", "nodeUnit"); ok {
			msg, _, _ := unstructured.NestedString(grid.Object, "status", "rollout", "halted", "message")
			r.Rollout += fmt.Sprintf(", halted at nodeunit %s: %s", unit, msg)
		}
	}
	conds, _, _ := unstructured.NestedSlice(grid.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		r.Conditions = append(r.Conditions, fmt.Sprintf("%v=%v (%v): %v", m["type"], m["status"], m["reason"], m["message"]))
	}
	return r
}

// templateOf is the template a nodeunit gets, by the controller's own rule.
func templateOf(grid *unstructured.Unstructured, value string) gridunit.TemplateChoice {
	templates, _, _ := unstructured.NestedStringMap(grid.Object, "spec", "templates")
	def, _, _ := unstructured.NestedString(grid.Object, "spec", "defaultTemplateName")
	return gridunit.Template(templates, def, value)
}

// RecordedUnit is one nodeunit's place in the rollout as the controller
// recorded it in status.units; "" where it recorded nothing.
type RecordedUnit struct{ NodeUnit, Wave, Phase, Revision string }

// RolloutUnits reads status.units' rollout fields, in their order. Waves
// are shown from 1, as the grid's status.rollout.wave counts them.
func RolloutUnits(grid *unstructured.Unstructured) []RecordedUnit {
	var out []RecordedUnit
	list, _, _ := unstructured.NestedSlice(grid.Object, "status", "units")
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var ru RecordedUnit
		ru.NodeUnit, _, _ = unstructured.NestedString(m, "name")
		ru.Phase, _, _ = unstructured.NestedString(m, "phase")
		ru.Revision, _, _ = unstructured.NestedString(m, "revision")
		if w, ok, _ := unstructured.NestedInt64(m, "wave"); ok {
			ru.Wave = fmt.Sprint(w + 1)
		}
		out = append(out, ru)
	}
	return out
}

func rollout(c Child) []string {
	var out []string
	if c.ObservedGeneration < c.Generation {
		out = append(out, fmt.Sprintf("%s: generation %d not yet observed by its controller", c.Name, c.Generation))
	}
	if c.Updated < c.Desired {
		out = append(out, fmt.Sprintf("rollout %d/%d updated", c.Updated, c.Desired))
	}
	if c.Ready < c.Desired {
		out = append(out, fmt.Sprintf("wait for %d more ready", c.Desired-c.Ready))
	}
	return out
}

// nodeUnits counts the nodes of each distinct non-empty value of key.
func nodeUnits(key string, nodes []corev1.Node) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		if v, ok := n.Labels[key]; ok && v != "" {
			out[v]++
		}
	}
	return out
}

func controllerUID(refs []metav1.OwnerReference) types.UID {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r.UID
		}
	}
	return ""
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// GridKeyOf returns a grid's spec.gridUniqKey.
func GridKeyOf(grid *unstructured.Unstructured) string {
	key, _, _ := unstructured.NestedString(grid.Object, "spec", "gridUniqKey")
	return key
}
