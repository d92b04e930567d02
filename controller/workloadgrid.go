package controller

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// What the two workload grid kinds (DeploymentGrid, StatefulSetGrid) do
// alike, for the template type T of their spec and child type C.

// workloadKind is what a workload grid kind states on its own: its types
// and generated accessors, how to build and judge one child, and the
// kind's own status fields. newWorkloadGridController does the rest.
// S is the kind's status type.
type workloadKind[G, C object, A any, T, S any] struct {
	childKind       string // the grid kind is childKind + "Grid"
	grids, children cache.SharedIndexInformer
	access          kindAccess[G, C, A]

	spec func(G) workloadSpec[T]
	// status points at the grid's status and shared at the part of it
	// both kinds have; newStatus is the status for the children kept.
	status    func(G) *S
	shared    func(G) *superedgev1.WorkloadGridStatusCommon
	newStatus func(g G, kept []child[C], nodeUnits int32, shared superedgev1.WorkloadGridStatusCommon) S

	validName      func(name string) error
	desired        func(G, unit) (A, error)
	ready, healthy func(C) bool
	failure        func(C) string
}

// workloadSpec points into a workload grid's spec.
type workloadSpec[T any] struct {
	key string
	*superedgev1.WorkloadGridSpecCommon
	template *T
	pool     map[string]T
}

// newWorkloadGridController keeps one child per nodeunit for every grid of
// the kind k describes.
func newWorkloadGridController[G, C object, A any, T, S any](deps Deps, k workloadKind[G, C, A, T, S]) (*gridController[G, C, A], error) {
	nodes := deps.KubeInformers.Core().V1().Nodes()
	kind := k.childKind + "Grid"
	key := func(g G) string { return k.spec(g).key }
	if err := wireIndexes(k.grids, k.children, nodes.Informer(), kind, key); err != nil {
		return nil, err
	}
	units := nodeUnits{indexer: nodes.Informer().GetIndexer()}
	ops := kindOps[G, C, A]{
		kind:       kind,
		childKind:  k.childKind,
		kindAccess: k.access,
		gridKey:    key,
		units: func(g G) []unit {
			s := k.spec(g)
			return workloadUnits(g.GetName(), units.values(s.key), s.Templates, s.DefaultTemplateName)
		},
		validName:   k.validName,
		desired:     k.desired,
		recreatable: true,
		ready:       k.ready,
		healthy:     k.healthy,
		failure:     k.failure,
		strategy:    func(g G) *superedgev1.RolloutStrategy { return k.spec(g).Rollout },
		rollout: func(g G) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus) {
			return k.shared(g).Rollout, k.shared(g).Units
		},
		templateJSON: func(g G, name string) ([]byte, error) {
			s := k.spec(g)
			return templateJSON(*s.template, s.pool, name)
		},
		conditions: func(g G) []metav1.Condition { return k.shared(g).Conditions },
		status: func(g G, kept []child[C], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) (G, bool) {
			shared := superedgev1.WorkloadGridStatusCommon{Conditions: conds, Rollout: rollout}
			var nodeUnits int32
			nodeUnits, shared.ReadyNodeUnits, shared.Units = unitCounts(kept, k.ready)
			return withStatus(g, k.newStatus(g, kept, nodeUnits, shared), k.status)
		},
	}
	c := newGridController(ops, deps)
	if err := register(c, k.grids, k.children, nodes.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// withStatus is g with status st, and true, or g itself and false when it
// already has it. It never modifies g: that is the informer's copy.
func withStatus[G object, S any](g G, st S, status func(G) *S) (G, bool) {
	if statusEqual(*status(g), st) {
		return g, false
	}
	ng := g.DeepCopyObject().(G)
	*status(ng) = st
	return ng, true
}

// childStates maps each kept child's nodeunit value to its state, or is
// nil when no child is kept.
func childStates[C object, St any](kept []child[C], state func(C) St) map[string]St {
	if len(kept) == 0 {
		return nil
	}
	out := make(map[string]St, len(kept))
	for _, ch := range kept {
		out[ch.value] = state(ch.obj)
	}
	return out
}

// childMeta is the metadata part of a child's apply configuration.
type childMeta[A any] interface {
	WithLabels(map[string]string) A
	WithAnnotations(map[string]string) A
	WithOwnerReferences(...*metav1apply.OwnerReferenceApplyConfiguration) A
}

// ownedChild labels and annotates cfg as the child of grid g (of kind
// kind, keyed by key), makes g its controller and stamps the hash of it all.
func ownedChild[A childMeta[A]](cfg A, g object, kind, key string) (A, error) {
	cfg = cfg.WithLabels(g.GetLabels()).
		WithLabels(gridLabels(g.GetName(), key)).
		WithAnnotations(gridAnnotations(key)).
		WithOwnerReferences(ownerReference(g, kind))
	return stampHash(cfg, cfg.WithAnnotations)
}

// unitSpec decodes the template u's child is built from into spec, the
// child's spec apply configuration.
func unitSpec[T any](main T, pool map[string]T, u unit, spec any) error {
	tmpl, err := unitTemplate(main, pool, u)
	if err != nil {
		return err
	}
	if err := fromTemplate(tmpl, spec); err != nil {
		return fmt.Errorf("template %q: %w", u.template, err)
	}
	return nil
}

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
