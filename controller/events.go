package controller

// Reasons of the Events and conditions the controller reports on grids.
const (
	// ReasonReconciled: every nodeunit has its child.
	ReasonReconciled = "Reconciled"
	// ReasonEmptyGridUniqKey: spec.gridUniqKey is empty; nothing is created or deleted.
	ReasonEmptyGridUniqKey = "EmptyGridUniqKey"
	// ReasonInvalidGridUniqKey: spec.gridUniqKey cannot be a label key and value.
	ReasonInvalidGridUniqKey = "InvalidGridUniqKey"
	// ReasonUntrustedGridUniqKey: spec.gridUniqKey is a label a node can set
	// on itself while only node-restricted keys are accepted; nothing is
	// created or deleted.
	ReasonUntrustedGridUniqKey = "UntrustedGridUniqKey"
	// ReasonInvalidTrafficMode: a ServiceGrid's servicegroup.io/traffic-mode
	// is neither wrapper nor native; its Service is left as it is.
	ReasonInvalidTrafficMode = "InvalidTrafficMode"
	// ReasonNativeModeKeyNotZoneSource: a native-mode ServiceGrid's key is
	// not the grid key the zone labels come from; its Service is left as it is.
	ReasonNativeModeKeyNotZoneSource = "NativeModeKeyNotZoneSource"
	// ReasonZoneLabelNotOurs: a Node's topology.kubernetes.io/zone was set
	// by someone else and differs from its nodeunit; it is left as it is.
	ReasonZoneLabelNotOurs = "ZoneLabelNotOurs"
	// ReasonInvalidGridName: the grid's name cannot be a label value.
	ReasonInvalidGridName = "InvalidGridName"
	// ReasonInvalidChildName: a nodeunit value cannot form a valid child name; that nodeunit is skipped.
	ReasonInvalidChildName = "InvalidChildName"
	// ReasonNameConflict: an object with the child's name exists and belongs
	// neither to the grid nor to its SuperEdge predecessor; it is never modified.
	ReasonNameConflict = "NameConflict"
	// ReasonNoConflict: no child name is taken by someone else's object.
	ReasonNoConflict = "NoConflict"
	// ReasonUnknownTemplate: a nodeunit's template is not in spec.templatePool;
	// that nodeunit keeps its current child.
	ReasonUnknownTemplate = "UnknownTemplate"
	// ReasonImmutableField: the wanted child changes fields that cannot
	// change in place and cannot be re-created safely; the message names the way out.
	ReasonImmutableField = "ImmutableField"
	// ReasonRecreating: a child was deleted (pods kept) to be created anew
	// with fields that cannot change in place.
	ReasonRecreating = "Recreating"
	// ReasonDeletionPending: a nodeunit has no nodes left; its child is
	// deleted when the grace period ends unless nodes come back.
	ReasonDeletionPending = "DeletionPending"
	// ReasonDeletionCancelled: the nodeunit came back within the grace period.
	ReasonDeletionCancelled = "DeletionCancelled"
	// ReasonPredecessorActive: SuperEdge's application-grid-controller still
	// holds its leader lock; this controller waits.
	ReasonPredecessorActive = "PredecessorActive"
	// ReasonApplyFailed: the apiserver refused a child.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonAdopted: an orphan with the grid's labels became a child.
	ReasonAdopted = "Adopted"
	// ReasonReleased: a child whose labels no longer select it was let go.
	ReasonReleased = "Released"
	// ReasonDeleted: the child of a vanished nodeunit was deleted.
	ReasonDeleted = "Deleted"
	// ReasonRolloutHalted: a nodeunit did not become healthy; no further
	// nodeunit is changed until the template changes.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolledBack: a failed nodeunit got its last good template back.
	ReasonRolledBack = "RolledBack"

	// ReasonReady / ReasonNotReady / ReasonNoNodeUnits summarise readiness.
	ReasonReady       = "Ready"
	ReasonNotReady    = "NotReady"
	ReasonNoNodeUnits = "NoNodeUnits"
)
