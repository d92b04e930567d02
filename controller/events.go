package controller

// Reasons of the Events and conditions the controller reports on grids.
const (
	// ReasonReconciled: every nodeunit has its child.
	ReasonReconciled = "Reconciled"
	// ReasonEmptyGridUniqKey: spec.gridUniqKey is empty; nothing is created or deleted.
	ReasonEmptyGridUniqKey = "EmptyGridUniqKey"
	// ReasonInvalidGridUniqKey: spec.gridUniqKey cannot be a label key and value.
	ReasonInvalidGridUniqKey = "InvalidGridUniqKey"
	// ReasonInvalidGridName: the grid's name cannot be a label value.
	ReasonInvalidGridName = "InvalidGridName"
	// ReasonInvalidChildName: a nodeunit value cannot form a valid child name; that nodeunit is skipped.
	ReasonInvalidChildName = "InvalidChildName"
	// ReasonNameConflict: an object with the child's name exists and is not ours to take.
	ReasonNameConflict = "NameConflict"
	// ReasonApplyFailed: the apiserver refused a child.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonAdopted: an orphan with the grid's labels became a child.
	ReasonAdopted = "Adopted"
	// ReasonReleased: a child whose labels no longer select it was let go.
	ReasonReleased = "Released"
	// ReasonDeleted: the child of a vanished nodeunit was deleted.
	ReasonDeleted = "Deleted"

	// ReasonReady / ReasonNotReady / ReasonNoNodeUnits summarise readiness.
	ReasonReady       = "Ready"
	ReasonNotReady    = "NotReady"
	ReasonNoNodeUnits = "NoNodeUnits"
)
