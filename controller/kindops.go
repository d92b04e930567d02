package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// object is what grids and children have in common.
type object interface {
	metav1.Object
	runtime.Object
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

// kindOps is everything that differs between the grid kinds: how to read the
// grid and its children, what child each unit wants, how to write children and
// how to summarise them in the grid's status. The reconciler does the rest.
type kindOps[G, C object, A any] struct {
	kind      string // grid kind, e.g. "DeploymentGrid"
	childKind string // e.g. "Deployment"

	kindAccess[G, C, A]

	gridKey func(G) string
	// units lists every child the grid wants, valid names or not.
	units     func(G) []unit
	validName func(name string) error

	desired func(G, unit) (A, error)

	// recreatable: a child whose update hits immutable fields may be deleted
	// (orphaning its pods) and created anew (workloads: pods are re-adopted).
	recreatable bool

	// ready reports whether a child is up to date and ready.
	ready func(C) bool
	// healthy reports whether a child has fully rolled out: its spec
	// observed, every replica updated, ready and available (StatefulSets:
	// current revision = update revision); failure is a reason the child
	// itself gives for not getting there (ProgressDeadlineExceeded), or "".
	healthy func(C) bool
	failure func(C) string
	// strategy is the grid's spec.rollout; rollout its status.rollout and units.
	strategy func(G) *superedgev1.RolloutStrategy
	rollout  func(G) (*superedgev1.RolloutStatus, []superedgev1.NodeUnitStatus)
	// templateJSON is the JSON of the template named name.
	templateJSON func(G, string) ([]byte, error)
	// conditions reads the grid's current conditions.
	conditions func(G) []metav1.Condition
	// status is the status the grid's children and the conditions make:
	// false when the grid already has it, else true and a copy of the grid
	// with it.
	status func(grid G, children []child[C], conds []metav1.Condition, rollout *superedgev1.RolloutStatus) (G, bool)
}
