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

// workload is what DeploymentGrid and StatefulSetGrid differ in: the parts
// of spec and status both kinds have, where they sit in each kind's types,
// and the child each nodeunit gets and how it is judged.
// deploymentGrids (deploymentgrid.go) and statefulSetGrids
// (statefulsetgrid.go) implement it; workloadGrid does the rest.
type workload[G, C object, A any] interface {
	// spec is the grid's gridUniqKey and the part of its spec both kinds have.
	spec(G) (key string, common *superedgev1.WorkloadGridSpecCommon)
	// templateJSON is the JSON of the template named name.
	templateJSON(grid G, name string) ([]byte, error)
	// status is the part of the grid's status both kinds have.
	status(G) *superedgev1.WorkloadGridStatusCommon
	// statusWith is a copy of the grid with its kind's status (the kept
	// children's states and count, around common), and true; or the grid
	// itself and false when it has that status already.
	statusWith(grid G, kept []child[C], nodeUnits int32, common superedgev1.WorkloadGridStatusCommon) (G, bool)

	// validName says why name cannot name the kind's child.
	validName(name string) error
	// desired is the child the grid wants in one nodeunit.
	desired(G, unit) (A, error)
	// ready: the child has seen its spec and every wanted replica is
	// updated and ready.
	ready(C) bool
	// healthy and failure are the rollout's view of the child (rolloutKind).
	healthy(C) bool
	failure(C) string
}

// workloadGrid is a workload kind as the generic controller sees it: a
// gridKind whose units are the nodeunits of its gridUniqKey, and a
// rolloutKind.
type workloadGrid[G, C object, A any] struct {
	workload[G, C, A]
	nodes nodeUnits
}

func (w workloadGrid[G, C, A]) gridKey(g G) string {
	key, _ := w.spec(g)
	return key
}

// units: one per nodeunit, built from the template SuperEdge's rule picks.
// refused: a workload grid's spec has nothing beyond its key to refuse.
func (w workloadGrid[G, C, A]) refused(G) (string, error) { return "", nil }

func (w workloadGrid[G, C, A]) units(g G) []unit {
	key, s := w.spec(g)
	return workloadUnits(g.GetName(), w.nodes.values(key), s.Templates, s.DefaultTemplateName)
}

func (w workloadGrid[G, C, A]) conditions(g G) []metav1.Condition { return w.status(g).Conditions }

func (w workloadGrid[G, C, A]) withStatus(g G, kept []child[C], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) (G, bool) {
	common := superedgev1.WorkloadGridStatusCommon{Conditions: conds, Rollout: rollout}
	var nodeUnits int32
	nodeUnits, common.ReadyNodeUnits, common.Units = unitCounts(kept, w.ready)
	return w.statusWith(g, kept, nodeUnits, common)
}

func (w workloadGrid[G, C, A]) foldable(old, next G) bool {
	return foldableWorkloadStatus(w.status(old), w.status(next))
}

func (w workloadGrid[G, C, A]) strategy(g G) *superedgev1.RolloutStrategy {
	_, s := w.spec(g)
	return s.Rollout
}

func (w workloadGrid[G, C, A]) rolloutStatus(g G) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus) {
	st := w.status(g)
	return st.Rollout, st.Units
}

// newWorkloadGridController keeps one child per nodeunit for every grid of
// the kind w describes, read and written through store.
func newWorkloadGridController[G, C object, A childConfig[A]](deps Deps, childKind string, w workload[G, C, A], store kindStore[G, C, A], grids, children cache.SharedIndexInformer) (*gridController[G, C, A], error) {
	nodes := deps.KubeInformers.Core().V1().Nodes().Informer()
	kind := childKind + "Grid"
	k := workloadGrid[G, C, A]{workload: w, nodes: nodeUnits{indexer: nodes.GetIndexer()}}
	if err := wireIndexes(grids, children, nodes, kind, k.gridKey); err != nil {
		return nil, err
	}
	c := newGridController[G, C, A](deps, kind, childKind, k, store)
	c.rollouts, c.recreatable = k, true
	if err := register(c, grids, children, nodes); err != nil {
		return nil, err
	}
	return c, nil
}

// copyWithStatus is g with status st, and true, or g itself and false when
// it already has it. It never modifies g: that is the informer's copy.
func copyWithStatus[G object, S any](g G, st S, status func(G) *S) (G, bool) {
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
