package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// object is what grids and children have in common.
type object interface {
	metav1.Object
	runtime.Object
}

// childConfig is a child's apply configuration (WithUID returns itself).
type childConfig[A any] interface {
	WithUID(types.UID) A
}

// unit is one child a grid wants: the nodeunit value, the child's name and
// the name of the template it is built from (workload grids only).
type unit struct {
	value    string
	name     string
	template string
	// override, when set, is the JSON of the template to build from instead
	// of the spec's (a rollout's last good template).
	override []byte
}

// child is a grid's child for one unit, and what the controller is
// waiting to do with it (status only).
type child[C object] struct {
	unit
	obj     C
	pending string
	// rollout is the nodeunit's place in the rollout (spec.rollout only).
	rollout *unitDecision
}

// gridKind is what the generic controller asks of one grid kind (G, its
// children C, applied as A): which children a grid wants, how each is built
// and judged, and the status they make. workloadGrid (DeploymentGrid,
// StatefulSetGrid) and serviceGrids implement it.
type gridKind[G, C object, A any] interface {
	// gridKey is the grid's spec.gridUniqKey.
	gridKey(G) string
	// units lists every child the grid wants, valid names or not.
	units(G) []unit
	// validName says why name cannot name a child.
	validName(name string) error
	// refused says why this controller cannot honour the grid's spec as it
	// is (a reason and a message), or nil: no child is then created,
	// changed or deleted.
	refused(G) (reason string, err error)
	// desired is the child the grid wants for one unit.
	desired(G, unit) (A, error)
	// ready: the child is up to date and ready.
	ready(C) bool
	// conditions are the grid's current conditions.
	conditions(G) []metav1.Condition
	// withStatus is a copy of the grid with the status its children, the
	// conditions and the rollout make, and true; or the grid itself and
	// false when it has that status already.
	withStatus(grid G, children []child[C], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) (G, bool)
	// foldable: next's status differs from old's only in what no sync
	// decides from, so its write may wait and join later ones (statusdelay.go).
	foldable(old, next G) bool
}

// rolloutKind is what a kind with spec.rollout adds (the workload grids).
type rolloutKind[G, C object] interface {
	// strategy is the grid's spec.rollout (nil: every child changes at once).
	strategy(G) *superedgev1.RolloutStrategy
	// rolloutStatus is the grid's status.rollout and status.units.
	rolloutStatus(G) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus)
	// templateJSON is the JSON of the template named name.
	templateJSON(grid G, name string) ([]byte, error)
	// healthy: the child has fully rolled out: its spec observed, every
	// replica updated, ready and available.
	healthy(C) bool
	// failure is a reason the child itself gives for not getting there
	// (ProgressDeadlineExceeded), or "".
	failure(C) string
}
