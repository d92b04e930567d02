package v1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels and annotations shared by the controller, the wrapper and the
// gridhosts plugin.
const (
	// LabelGridSelector names the grid that produced an object.
	LabelGridSelector = "superedge.io/grid-selector"
	// LabelGridUniqKey carries the grid's gridUniqKey on every produced object.
	LabelGridUniqKey = "superedge.io/grid-uniq-key"
	// LabelGridNodeUnit carries, on each child StatefulSet this project's
	// controller keeps, the nodeunit value (of the grid key) it serves, so a
	// node can select its own nodeunit's children. Metadata only: no pod
	// template carries it. SuperEdge's children lack it until taken over.
	LabelGridNodeUnit = "servicegroup.io/grid-nodeunit"
	// AnnotationTopologyKeys is the ordered list of node label keys (JSON) by
	// which the wrapper keeps a Service's endpoints inside the caller's nodeunit.
	AnnotationTopologyKeys = "topologyKeys"
	// AnnotationLocalEndpoint and AnnotationLocalPort on default/kubernetes
	// point in-cluster clients on an edge node at the node-local apiserver.
	AnnotationLocalEndpoint = "superedge.io/local-endpoint"
	AnnotationLocalPort     = "superedge.io/local-port"
)

// Condition types and reasons reported in the grids' status.
const (
	// ConditionReady is True when every nodeunit's child is up to date and ready.
	ConditionReady = "Ready"
	// ConditionReconciled is False when the grid cannot be fully reconciled
	// (empty gridUniqKey, nodeunit values that cannot name a child, API errors).
	ConditionReconciled = "Reconciled"
	// ConditionConflict is True while an object with a child's name exists
	// that belongs neither to the grid nor to its SuperEdge predecessor; the
	// controller never modifies it.
	ConditionConflict = "Conflict"
	// DefaultTemplateName names spec.template in Templates and DefaultTemplateName.
	DefaultTemplateName = "default"
	// ConditionProgressing is True while a rollout is changing nodeunits.
	ConditionProgressing = "Progressing"
	// ConditionPaused is True while spec.rollout.paused holds a rollout.
	ConditionPaused = "Paused"
	// ConditionHalted is True when a nodeunit failed to become healthy: no
	// further nodeunit is changed until the template changes again.
	ConditionHalted = "Halted"
	// ConditionComplete is True when every nodeunit runs its target
	// template, healthy for the bake time.
	ConditionComplete = "Complete"
)

// RolloutStrategy rolls a template change across a grid's nodeunits: first
// the canary nodeunits, then the others in waves, never more than
// MaxUnavailableUnits changing or unhealthy at once, each healthy for
// BakeSeconds before it counts as done.
//
// +kubebuilder:validation:XValidation:rule="!has(self.canary) || (has(self.canary.nodeUnits) && size(self.canary.nodeUnits) > 0) || has(self.canary.selector)",message="rollout.canary needs nodeUnits or a selector"
type RolloutStrategy struct {
	// Canary is the first wave: the nodeunits named, plus those matching
	// the selector. Without it the first wave is the first of WaveSize.
	// +optional
	Canary *RolloutCanary `json:"canary,omitempty"`
	// WaveSize is how many of the remaining nodeunits form each wave after
	// the canary: a count or a percentage of them (rounded up). Default: all.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="waveSize must be a count of at least 1 or a percentage from 1% to 100%"
	WaveSize *intstr.IntOrString `json:"waveSize,omitempty"`
	// MaxUnavailableUnits is how many nodeunits may be changing or
	// unhealthy at once. Default: 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxUnavailableUnits *int32 `json:"maxUnavailableUnits,omitempty"`
	// BakeSeconds is how long a changed nodeunit must stay healthy before
	// it counts as done. Default: 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	BakeSeconds int32 `json:"bakeSeconds,omitempty"`
	// ProgressDeadlineSeconds is how long a changed nodeunit may take to
	// become healthy before it halts the rollout. Default: 600.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
	// Paused stops the rollout: no further nodeunit is changed, new
	// nodeunits get the last good template.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// FailurePolicy is what a halt does to the nodeunits that failed:
	// Halt leaves them as they are, Rollback applies the last good template to them.
	// +optional
	// +kubebuilder:validation:Enum=Halt;Rollback
	FailurePolicy RolloutFailurePolicy `json:"failurePolicy,omitempty"`
}

// RolloutCanary selects the first wave's nodeunits.
type RolloutCanary struct {
	// NodeUnits are nodeunit values (values of the grid key).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	NodeUnits []string `json:"nodeUnits,omitempty"`
	// Selector matches nodeunit values as the labels {gridUniqKey: value}:
	// e.g. matchExpressions [{key: zone, operator: In, values: [a, b]}].
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// RolloutFailurePolicy: Halt or Rollback.
type RolloutFailurePolicy string

const (
	// FailurePolicyHalt leaves failed nodeunits as they are.
	FailurePolicyHalt RolloutFailurePolicy = "Halt"
	// FailurePolicyRollback applies the last good template to failed nodeunits.
	FailurePolicyRollback RolloutFailurePolicy = "Rollback"
)

// RolloutPhase is a nodeunit's place in a rollout, or the grid's.
type RolloutPhase string

const (
	// PhaseWaiting: the nodeunit still runs an older template; its wave has not come.
	PhaseWaiting RolloutPhase = "Waiting"
	// PhaseUpdating: its child got the target template and is not healthy yet.
	PhaseUpdating RolloutPhase = "Updating"
	// PhaseBaking: healthy on the target template, not yet for the bake time.
	PhaseBaking RolloutPhase = "Baking"
	// PhaseDone: healthy on the target template for the bake time.
	PhaseDone RolloutPhase = "Done"
	// PhaseFailed: not healthy within the progress deadline.
	PhaseFailed RolloutPhase = "Failed"
	// PhaseRolledBack: failed, then given the last good template.
	PhaseRolledBack RolloutPhase = "RolledBack"
	// PhaseProgressing, PhasePaused, PhaseHalted, PhaseComplete: the grid's phase.
	PhaseProgressing RolloutPhase = "Progressing"
	PhasePaused      RolloutPhase = "Paused"
	PhaseHalted      RolloutPhase = "Halted"
	PhaseComplete    RolloutPhase = "Complete"
)

// RolloutStatus records a rollout so that a restarted controller resumes it.
type RolloutStatus struct {
	// Phase is Progressing, Paused, Halted or Complete.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Wave is "current/total", e.g. "2/5".
	// +optional
	Wave string `json:"wave,omitempty"`
	// Templates are the target and last good revision of each template in use.
	// +optional
	// +listType=map
	// +listMapKey=name
	Templates []TemplateRevisions `json:"templates,omitempty"`
	// Halted names the nodeunit that halted the rollout and why.
	// +optional
	Halted *RolloutHalt `json:"halted,omitempty"`
}

// TemplateRevisions are one template's target and last good revisions.
type TemplateRevisions struct {
	// Name is the template's name ("default": spec.template).
	Name string `json:"name"`
	// Target is the revision of the template in the spec.
	// +optional
	Target string `json:"target,omitempty"`
	// LastGood is the revision every nodeunit using the template last ran
	// healthy.
	// +optional
	LastGood string `json:"lastGood,omitempty"`
	// LastGoodTemplate is the template of revision LastGood, which a
	// rollback applies.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	LastGoodTemplate *runtime.RawExtension `json:"lastGoodTemplate,omitempty"`
}

// RolloutHalt is why a rollout stopped.
type RolloutHalt struct {
	// NodeUnit is the nodeunit that failed.
	NodeUnit string `json:"nodeUnit"`
	// Template is the name of the template the nodeunit failed on.
	// +optional
	Template string `json:"template,omitempty"`
	// Revision is the revision of that template it failed on.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Reason is a CamelCase reason.
	Reason string `json:"reason"`
	// Message says what was seen.
	// +optional
	Message string `json:"message,omitempty"`
	// Time is when the rollout halted.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// NodeUnitStatus is one nodeunit's line in a workload grid's status.
type NodeUnitStatus struct {
	// Name is the nodeunit: a value of the gridUniqKey node label.
	Name string `json:"name"`
	// Child is the name of the nodeunit's workload.
	// +optional
	Child string `json:"child,omitempty"`
	// Template is the name of the template the child is built from ("default": spec.template).
	// +optional
	Template string `json:"template,omitempty"`
	// Ready is true when the child is up to date and all its replicas are ready.
	Ready bool `json:"ready"`
	// Pending describes an action the controller is waiting to take, such as
	// deleting the child of a nodeunit that has no nodes left.
	// +optional
	Pending string `json:"pending,omitempty"`
	// Revision is the template revision the child runs (a digest of its
	// template), "" when it is neither the rollout's target nor its last good one.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Phase is the nodeunit's rollout phase (grids with spec.rollout only).
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Wave is the rollout wave the nodeunit belongs to (0: the canary wave
	// when there is one).
	// +optional
	Wave *int32 `json:"wave,omitempty"`
	// Since is when the nodeunit entered its phase.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// WorkloadGridSpecCommon is the part of the spec DeploymentGrids and
// StatefulSetGrids share: which template each nodeunit's child is built
// from and how a template change rolls out. Embedded inline: its fields sit
// in the spec itself, after the kind's own.
type WorkloadGridSpecCommon struct {
	// Templates maps a nodeunit value to the name of its template in
	// TemplatePool; nodeunits not listed use DefaultTemplateName.
	// +optional
	Templates map[string]string `json:"templates,omitempty"`
	// DefaultTemplateName is the template of nodeunits not listed in
	// Templates: "default" (or empty) means Template, any other name an
	// entry of TemplatePool.
	// +optional
	DefaultTemplateName string `json:"defaultTemplateName,omitempty"`
	// AutoDeleteUnusedTemplate is accepted for SuperEdge compatibility.
	// SuperEdge deleted unused TemplatePool entries from the spec; this
	// controller never writes the spec: unused entries are left in place
	// and ignored.
	// +optional
	AutoDeleteUnusedTemplate bool `json:"autoDeleteUnusedTemplate,omitempty"`
	// Rollout, when set, rolls a template change across the nodeunits in
	// waves, halting at the first nodeunit that does not become healthy.
	// Without it every nodeunit's child is updated at once.
	// +optional
	Rollout *RolloutStrategy `json:"rollout,omitempty"`
}

// WorkloadGridStatusCommon is the part of the status DeploymentGrids and
// StatefulSetGrids share (embedded inline, after the kind's own fields).
type WorkloadGridStatusCommon struct {
	// ReadyNodeUnits is how many of them have all their replicas ready.
	// +optional
	ReadyNodeUnits int32 `json:"readyNodeUnits,omitempty"`
	// Units lists every nodeunit with a child or a pending action: its
	// template, readiness and what the controller is waiting to do.
	// +optional
	// +listType=map
	// +listMapKey=name
	Units []NodeUnitStatus `json:"units,omitempty"`
	// Rollout is the progress of the current rollout (grids with spec.rollout only).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// Conditions summarise the grid's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeploymentGrid runs one Deployment per nodeunit, named {grid}-{value}.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dg,categories=superedge
// +kubebuilder:printcolumn:name="Grid-Key",type=string,JSONPath=`.spec.gridUniqKey`
// +kubebuilder:printcolumn:name="NodeUnits",type=integer,JSONPath=`.status.nodeUnits`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodeUnits`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Reconciled")].reason`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.phase`
// +kubebuilder:printcolumn:name="Wave",type=string,JSONPath=`.status.rollout.wave`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DeploymentGrid struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DeploymentGridSpec   `json:"spec"`
	Status DeploymentGridStatus `json:"status,omitempty"`
}

// DeploymentGridSpec is the wanted state of a DeploymentGrid.
type DeploymentGridSpec struct {
	// GridUniqKey is the node label key whose distinct values are the nodeunits.
	// +required
	GridUniqKey string `json:"gridUniqKey"`
	// Template is the spec of every per-nodeunit Deployment whose nodeunit uses
	// the template named "default" (see DefaultTemplateName).
	// +required
	Template appsv1.DeploymentSpec `json:"template"`
	// TemplatePool holds further named Deployment specs (SuperEdge's
	// per-nodeunit canary templates).
	// +optional
	TemplatePool map[string]appsv1.DeploymentSpec `json:"templatePool,omitempty"`

	WorkloadGridSpecCommon `json:",inline"`
}

// DeploymentGridStatus is the observed state of a DeploymentGrid.
type DeploymentGridStatus struct {
	// ObservedGeneration is the grid generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// States maps each nodeunit value to its Deployment's status.
	// +optional
	States map[string]DeploymentState `json:"states,omitempty"`
	// NodeUnits is how many nodeunits have a Deployment.
	// +optional
	NodeUnits int32 `json:"nodeUnits,omitempty"`

	WorkloadGridStatusCommon `json:",inline"`
}

// DeploymentState mirrors one nodeunit's Deployment status. Its JSON fields
// are those of apps/v1 DeploymentStatus, so the original SuperEdge status reads the same.
type DeploymentState struct {
	// ObservedGeneration is the Deployment generation its status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is how many pods the Deployment has.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// UpdatedReplicas is how many of them have the Deployment's current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// ReadyReplicas is how many of them are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// AvailableReplicas is how many of them have been ready for minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// UnavailableReplicas is how many more available pods the Deployment wants.
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas,omitempty"`
	// Conditions are the Deployment's own conditions (Available, Progressing).
	// +optional
	// +listType=atomic
	Conditions []appsv1.DeploymentCondition `json:"conditions,omitempty"`
}

// DeploymentGridList is a list of DeploymentGrids.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type DeploymentGridList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []DeploymentGrid `json:"items"`
}

// StatefulSetGrid runs one StatefulSet per nodeunit, named {grid}-{value}.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ssg,categories=superedge
// +kubebuilder:printcolumn:name="Grid-Key",type=string,JSONPath=`.spec.gridUniqKey`
// +kubebuilder:printcolumn:name="NodeUnits",type=integer,JSONPath=`.status.nodeUnits`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodeUnits`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Reconciled")].reason`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout.phase`
// +kubebuilder:printcolumn:name="Wave",type=string,JSONPath=`.status.rollout.wave`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StatefulSetGrid struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StatefulSetGridSpec   `json:"spec"`
	Status StatefulSetGridStatus `json:"status,omitempty"`
}

// StatefulSetGridSpec is the wanted state of a StatefulSetGrid.
type StatefulSetGridSpec struct {
	// GridUniqKey is the node label key whose distinct values are the nodeunits.
	// +required
	GridUniqKey string `json:"gridUniqKey"`
	// Template is the spec of every per-nodeunit StatefulSet whose nodeunit uses
	// the template named "default" (see DefaultTemplateName).
	// +required
	Template appsv1.StatefulSetSpec `json:"template"`
	// TemplatePool holds further named StatefulSet specs (SuperEdge's
	// per-nodeunit canary templates).
	// +optional
	TemplatePool map[string]appsv1.StatefulSetSpec `json:"templatePool,omitempty"`

	WorkloadGridSpecCommon `json:",inline"`
}

// StatefulSetGridStatus is the observed state of a StatefulSetGrid.
type StatefulSetGridStatus struct {
	// ObservedGeneration is the grid generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// States maps each nodeunit value to its StatefulSet's status.
	// +optional
	States map[string]StatefulSetState `json:"states,omitempty"`
	// NodeUnits is how many nodeunits have a StatefulSet.
	// +optional
	NodeUnits int32 `json:"nodeUnits,omitempty"`

	WorkloadGridStatusCommon `json:",inline"`
}

// StatefulSetState mirrors one nodeunit's StatefulSet status. Its JSON fields
// are those of apps/v1 StatefulSetStatus.
type StatefulSetState struct {
	// ObservedGeneration is the StatefulSet generation its status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is how many pods the StatefulSet has.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is how many of them are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// CurrentReplicas is how many of them run CurrentRevision.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`
	// UpdatedReplicas is how many of them run UpdateRevision.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// AvailableReplicas is how many of them have been ready for minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// CurrentRevision is the revision the pods counted in CurrentReplicas were made from.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// UpdateRevision is the revision of the StatefulSet's current template.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
	// Conditions are the StatefulSet's own conditions.
	// +optional
	// +listType=atomic
	Conditions []appsv1.StatefulSetCondition `json:"conditions,omitempty"`
}

// StatefulSetGridList is a list of StatefulSetGrids.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type StatefulSetGridList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []StatefulSetGrid `json:"items"`
}

// ServiceGrid produces one Service, named {grid}-svc, annotated with
// topologyKeys so that traffic stays inside the caller's nodeunit.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sg,categories=superedge
// +kubebuilder:printcolumn:name="Grid-Key",type=string,JSONPath=`.spec.gridUniqKey`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.status.serviceName`
// +kubebuilder:printcolumn:name="Cluster-IP",type=string,JSONPath=`.status.clusterIP`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Reconciled")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceGrid struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServiceGridSpec   `json:"spec"`
	Status ServiceGridStatus `json:"status,omitempty"`
}

// ServiceGridSpec is the wanted state of a ServiceGrid.
type ServiceGridSpec struct {
	// GridUniqKey is the node label key whose values are the nodeunits.
	// +required
	GridUniqKey string `json:"gridUniqKey"`
	// Template is the spec of the produced Service.
	// +required
	Template corev1.ServiceSpec `json:"template"`
}

// ServiceGridStatus is the observed state of a ServiceGrid.
type ServiceGridStatus struct {
	// ObservedGeneration is the grid generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ServiceName is the name of the produced Service.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
	// ClusterIP is the produced Service's allocated cluster IP.
	// +optional
	ClusterIP string `json:"clusterIP,omitempty"`
	// Conditions summarise the grid's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServiceGridList is a list of ServiceGrids.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ServiceGridList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ServiceGrid `json:"items"`
}

// NodeLabelSummary holds, for a bucket of up to MaxNodesPerLabelSummary
// nodes, each node's values of the label keys topology uses (grid keys and
// topologyKeys). The controller rewrites a bucket only when its membership
// or those values change, so edge wrappers learn every node's labels
// without receiving every node's status reports.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=superedge
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeLabelSummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Keys are the label keys summarised, sorted.
	// +optional
	Keys []string `json:"keys,omitempty"`
	// Nodes are the bucket's nodes, sorted by name.
	// +optional
	// +listType=atomic
	Nodes []NodeLabels `json:"nodes,omitempty"`
}

// NodeLabels is one node's values of the summarised label keys.
type NodeLabels struct {
	// Name is the Node's name.
	Name string `json:"name"`
	// Labels are the node's labels whose keys are summarised.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// NodeLabelSummaryList is a list of NodeLabelSummaries.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NodeLabelSummaryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeLabelSummary `json:"items"`
}

// MaxNodesPerLabelSummary bounds a NodeLabelSummary: a change rewrites one
// bucket of at most this many nodes.
const MaxNodesPerLabelSummary = 100
