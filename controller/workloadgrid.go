package controller

import (
	"encoding/json"

	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// What the two workload grid kinds (DeploymentGrid, StatefulSetGrid) do
// alike, for the template type T of their spec and child type C.

// templateJSON is the JSON of the template named name (status.rollout
// records templates by their JSON).
func templateJSON[T any](main T, pool map[string]T, name string) ([]byte, error) {
	t, err := pickTemplate(main, pool, name)
	if err != nil {
		return nil, err
	}
	return json.Marshal(t)
}

// unitTemplate is the template u's child is built from: the one the spec
// names for it, or the rollout's last good one (u.override).
func unitTemplate[T any](main T, pool map[string]T, u unit) (T, error) {
	tmpl, err := pickTemplate(main, pool, u.template)
	if u.override != nil {
		// A fresh value: decoding into tmpl would write through its slices
		// into the cached grid.
		var last T
		err = json.Unmarshal(u.override, &last)
		tmpl = last
	}
	return tmpl, err
}

// pinToNodeUnit adds the nodeunit's nodeSelector to a pod template and
// changes nothing else in it, exactly as SuperEdge builds it: switching
// controllers restarts no pod.
func pinToNodeUnit(t *corev1apply.PodTemplateSpecApplyConfiguration, key, value string) *corev1apply.PodTemplateSpecApplyConfiguration {
	if t == nil {
		t = &corev1apply.PodTemplateSpecApplyConfiguration{}
	}
	if t.Spec == nil {
		t.Spec = &corev1apply.PodSpecApplyConfiguration{}
	}
	t.Spec.WithNodeSelector(map[string]string{key: value})
	return t
}

// unitCounts are the status fields every workload grid has: how many
// nodeunits have a child, how many of those are ready, and one line per
// nodeunit, sorted.
func unitCounts[C object](kept []child[C], ready func(C) bool) (nodeUnits, readyNodeUnits int32, units []superedgev1.NodeUnitStatus) {
	for _, ch := range kept {
		nodeUnits++
		if ready(ch.obj) {
			readyNodeUnits++
		}
		units = append(units, unitStatus(ch, ready(ch.obj)))
	}
	sortUnits(units)
	return nodeUnits, readyNodeUnits, units
}
