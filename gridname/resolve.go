package gridname

// Reason is the outcome of the rule: Resolved, or the first check that
// ruled the name out.
type Reason uint8

// The checks, in the order Resolve makes them.
const (
	Resolved Reason = iota
	GridNotFound
	GridNoKey
	NodeNotFound
	NodeNoValue
	// NodeKeyNotTrusted is decided outside Resolve, by gridhosts'
	// require_node_restricted_keys (and kubectl grid explain dns after it).
	NodeKeyNotTrusted
	SetNotFound
	SetTerminating
	SetNotControlled
	SetGridSelector
	SetGridKey
	SetServiceName
	SetNodeSelector
	ServiceNotFound
	ServiceGridKey
	PodNotFound
	PodNotControlled
	PodTerminating
	PodFinished
	PodNoAddress
)

// Steps of the chain grid -> nodeunit -> StatefulSet -> Service -> pod ->
// addresses; each Reason belongs to one.
const (
	StepGrid        = "statefulsetgrid"
	StepNodeValue   = "nodeunit"
	StepStatefulSet = "statefulset"
	StepService     = "service"
	StepPod         = "pod"
	StepAddresses   = "addresses"
)

// Steps lists the steps in order.
var Steps = []string{StepGrid, StepNodeValue, StepStatefulSet, StepService, StepPod, StepAddresses}

// Step is the step r failed at ("" for Resolved).
func (r Reason) Step() string {
	switch {
	case r == Resolved:
		return ""
	case r <= GridNoKey:
		return StepGrid
	case r <= NodeKeyNotTrusted:
		return StepNodeValue
	case r <= SetNodeSelector:
		return StepStatefulSet
	case r <= ServiceGridKey:
		return StepService
	case r <= PodFinished:
		return StepPod
	}
	return StepAddresses
}

// String says what r means, for people.
func (r Reason) String() string {
	switch r {
	case Resolved:
		return "resolved"
	case GridNotFound:
		return "StatefulSetGrid not found: the name is not a grid name"
	case GridNoKey:
		return "the StatefulSetGrid has an empty gridUniqKey"
	case NodeNotFound:
		return "node not found"
	case NodeNoValue:
		return "the node has no value of the grid key: it is in no nodeunit of this grid"
	case NodeKeyNotTrusted:
		return "the grid key is one a node can set on its own Node: with require_node_restricted_keys it matches no node (only keys under node-restriction.kubernetes.io/ are trusted)"
	case SetNotFound:
		return "StatefulSet not found (the controller has not created it, or the nodeunit name cannot form a child name)"
	case SetTerminating:
		return "the StatefulSet is being deleted"
	case SetNotControlled:
		return "the StatefulSet is not controlled by the StatefulSetGrid (owner kind, name or UID differ)"
	case SetGridSelector:
		return "the StatefulSet's grid-selector label does not name the grid"
	case SetGridKey:
		return "the StatefulSet's grid key differs from the grid's"
	case SetServiceName:
		return "the StatefulSet's serviceName is not the Service the name asks for"
	case SetNodeSelector:
		return "the StatefulSet's nodeSelector does not select this nodeunit"
	case ServiceNotFound:
		return "Service not found"
	case ServiceGridKey:
		return "the Service's grid key differs from the grid's (is it the ServiceGrid's Service?)"
	case PodNotFound:
		return "pod not found (ordinal beyond replicas, or not created yet)"
	case PodNotControlled:
		return "the pod is not controlled by the StatefulSet"
	case PodTerminating:
		return "the pod is being deleted"
	case PodFinished:
		return "the pod has finished (Succeeded or Failed): its address may be reused"
	case PodNoAddress:
		return "the pod has no IP yet"
	}
	return "unknown"
}

// Query is a unified name {Grid}-{Ordinal}.{Service}.{namespace}; the
// Finder is bound to the namespace.
type Query struct {
	Grid, Ordinal, Service string
}

// Finder looks up the objects of one query's namespace; each method
// returns nil when the object does not exist.
type Finder interface {
	// Grid is the StatefulSetGrid named by the query.
	Grid() *Grid
	// StatefulSet is the grid's child for nodeunit value: {grid}-{value}.
	StatefulSet(value string) *StatefulSet
	// Service is the Service named by the query.
	Service() *Service
	// Pod is set's pod of the query's ordinal: {set}-{ordinal}.
	Pod(set *StatefulSet) *Pod
}

// Result is the decision for one name on one node and what it read.
type Result struct {
	Reason Reason
	// Value is the node's value of the grid key, once known.
	Value string
	Grid  *Grid
	Set   *StatefulSet
	Pod   *Pod // the pod the name stands for; nil unless Resolved
}

// Resolve decides which pod q stands for on a node with labels nodeLabels
// (nodeKnown false when the node does not exist): the StatefulSetGrid and
// its grid key, the node's value of it, the StatefulSet {grid}-{value}
// controlled by the grid (kind, name and UID), not being deleted, with both
// grid labels, serving through the query's Service and selecting nodes of
// this nodeunit, that Service existing with the same grid key, and the pod
// {set}-{ordinal} controlled by that StatefulSet, neither being deleted nor
// finished, with an address. It is generic so that gridhosts' finder, a
// plain struct, is called directly on the query path; q by pointer keeps
// that path's frames small (a query's goroutine starts with a small stack).
func Resolve[F Finder](q *Query, nodeLabels map[string]string, nodeKnown bool, f F) Result {
	var r Result
	g := f.Grid()
	r.Grid = g
	switch {
	case g == nil:
		r.Reason = GridNotFound
		return r
	case g.Key == "":
		r.Reason = GridNoKey
		return r
	case !nodeKnown:
		r.Reason = NodeNotFound
		return r
	}
	value, ok := nodeLabels[g.Key]
	if !ok || value == "" {
		r.Reason = NodeNoValue
		return r
	}
	r.Value = value
	s := f.StatefulSet(value)
	r.Set = s
	if r.Reason = checkSet(s, g, q, value); r.Reason != Resolved {
		return r
	}
	switch sv := f.Service(); {
	case sv == nil:
		r.Reason = ServiceNotFound
		return r
	case !sv.GridKey.IsOf(g):
		r.Reason = ServiceGridKey
		return r
	}
	p := f.Pod(s)
	if r.Reason = CheckPod(p, s); r.Reason == Resolved {
		r.Pod = p
	}
	return r
}

func checkSet(s *StatefulSet, g *Grid, q *Query, value string) Reason {
	switch {
	case s == nil:
		return SetNotFound
	case s.Terminating:
		return SetTerminating
	case !s.HasOwner || s.Owner.Kind != KindStatefulSetGrid || s.Owner.Name != g.Name || s.Owner.UID != g.UID:
		return SetNotControlled
	case !s.HasGridSelector || s.GridSelector != g.Name:
		return SetGridSelector
	case !s.GridKey.IsOf(g):
		return SetGridKey
	case s.ServiceName != q.Service:
		return SetServiceName
	case s.NodeSelector[g.Key] != value:
		return SetNodeSelector
	}
	return Resolved
}

// CheckPod is the rule's last step: whether p, set s's pod of the query's
// ordinal (nil when there is none), answers, else why not. For callers that
// already hold the outcome of every earlier step (gridhosts' node mode).
func CheckPod(p *Pod, s *StatefulSet) Reason {
	switch {
	case p == nil:
		return PodNotFound
	case !p.HasOwner || p.Owner.Kind != KindStatefulSet || p.Owner.Name != s.Name || p.Owner.UID != s.UID:
		return PodNotControlled
	case p.Terminating:
		return PodTerminating
	case p.Finished:
		return PodFinished
	case len(p.IPs) == 0:
		return PodNoAddress
	}
	return Resolved
}
