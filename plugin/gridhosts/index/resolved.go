package index

import "github.com/servicegroup/servicegroup/gridname"

// resolvedGrids is node mode's answer path made short: for one node, what
// the rule (gridname.Resolve) decides for each grid up to the pod, which is
// the same for every ordinal. A unified name is then answered with one
// small map lookup and the pod's, instead of the node, the Service twice,
// the children, the node's labels and the StatefulSet (each a map lookup
// with its strings hashed) on every query.
//
// It depends on StatefulSets (children), Services and Nodes only, never on
// pods (the pod step runs on every query): any change to one of those kinds
// drops it (apply), and the next unified-name query rebuilds it, under the
// write lock, from the index itself. Pod and EndpointSlice events, the
// frequent ones, keep it.
// Its size is one entry per grid and Service a child names, not per pod.
type resolvedGrids struct {
	node  string
	grids map[nsName][]resolvedChild
}

// resolvedChild is a grid's child that passes every check of the rule
// before the pod's, on the node, for names asked through Service svc.
type resolvedChild struct {
	svc  string
	grid *gridname.Grid
	set  *gridname.StatefulSet
}

// nodeMember answers q for node from the resolved grids, made current
// first if a change dropped them; ok false when the name is not answered
// through them (Member runs the whole rule, which says why).
func (x *Index) nodeMember(node string, q *MemberQuery) (Member, bool) {
	if m, ok := x.resolvedMember(node, q); ok {
		return m, true
	}
	if x.resolvedFor(node) {
		return Member{}, false
	}
	x.resolveGrids(node)
	return x.resolvedMember(node, q)
}

// resolvedMember answers q for node from the resolved grids, ok false when
// they do not hold q's grid and Service (the name is not answered there, or
// the resolved grids are not current: the caller runs the whole rule).
func (x *Index) resolvedMember(node string, q *MemberQuery) (Member, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	r := x.resolved
	if r == nil || r.node != node {
		return Member{}, false
	}
	cs := r.grids[nsName{q.Namespace, q.Grid}]
	for i := range cs {
		c := &cs[i]
		if c.svc != q.Service {
			continue
		}
		m := Member{Placed: true, HasGrid: true, GridKey: c.grid.Key}
		p := indexFinder{x: x, grid: c.grid, ns: q.Namespace, ordinal: q.Ordinal, svc: q.Service}.Pod(c.set)
		if gridname.CheckPod(p, c.set) == gridname.Resolved {
			m.Pod = p
		}
		return m, true
	}
	return Member{}, false
}

// resolveGrids makes x.resolved current for node, unless it is.
func (x *Index) resolveGrids(node string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.resolved != nil && x.resolved.node == node {
		return
	}
	r := &resolvedGrids{node: node, grids: make(map[nsName][]resolvedChild, len(x.childGrids))}
	n := x.nodes[node]
	labels := nodeLabelsOf(n)
	for gk, children := range x.childGrids {
		for i := range children {
			svc := children[i].Set.ServiceName
			if hasService(r.grids[gk], svc) {
				continue
			}
			gr := x.gridOf(gk.ns, gk.name, svc, labels)
			if gr == nil {
				continue
			}
			// The rule itself decides, through a finder that stops at the
			// pod: reaching it means every earlier check passed.
			f := &stopAtPod{indexFinder: indexFinder{x: x, grid: gr, ns: gk.ns, svc: svc}}
			gridname.Resolve(&gridname.Query{Grid: gr.Name, Service: svc}, labels, n != nil, f)
			if f.set != nil {
				r.grids[gk] = append(r.grids[gk], resolvedChild{svc: svc, grid: gr, set: f.set})
			}
		}
	}
	x.resolved = r
}

func hasService(cs []resolvedChild, svc string) bool {
	for _, c := range cs {
		if c.svc == svc {
			return true
		}
	}
	return false
}

// stopAtPod is the index's finder that records the StatefulSet the rule
// asks for a pod of, and finds none.
type stopAtPod struct {
	indexFinder
	set *gridname.StatefulSet
}

func (f *stopAtPod) Pod(set *gridname.StatefulSet) *gridname.Pod {
	f.set = set
	return nil
}

// unitMember answers q for viewer v (clients mode) from the resolved
// units, made current first if a change dropped them; ok false when they
// do not answer it (Member runs the whole rule, which says why).
func (x *Index) unitMember(v *Viewer, q *MemberQuery) (Member, bool) {
	if m, ok, current := x.resolvedUnitMember(v, q); current {
		return m, ok
	}
	x.resolveUnits()
	m, ok, _ := x.resolvedUnitMember(v, q)
	return m, ok
}

// resolvedUnitMember is unitMember's lookup; current is false when the
// units were dropped.
func (x *Index) resolvedUnitMember(v *Viewer, q *MemberQuery) (m Member, ok, current bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.units == nil {
		return Member{}, false, false
	}
	node, placed := x.viewerNode(*v)
	if !placed {
		return Member{}, true, true
	}
	if node == nil {
		return Member{}, false, true
	}
	g, found := x.grids[nsName{q.Namespace, q.Grid}]
	if !found {
		return Member{}, false, true
	}
	value := node.Labels[g.Key]
	if value == "" {
		return Member{}, false, true
	}
	c, found := x.units[unitKey{q.Namespace, g.Name, value}]
	if !found || c.svc != q.Service {
		return Member{}, false, true
	}
	m = Member{Placed: true, HasGrid: true, GridKey: c.grid.Key}
	p := indexFinder{x: x, grid: c.grid, ns: q.Namespace, ordinal: q.Ordinal, svc: q.Service}.Pod(c.set)
	if gridname.CheckPod(p, c.set) == gridname.Resolved {
		m.Pod = p
	}
	return m, true, true
}

// resolveUnits makes x.units current (clients mode), unless it is: for each
// grid's child, the rule up to the pod for a node of the child's nodeunit,
// which is all the rule reads of a node in clients mode.
func (x *Index) resolveUnits() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.units != nil {
		return
	}
	u := make(map[unitKey]resolvedChild, len(x.setsByUnit))
	for k, s := range x.setsByUnit {
		g, ok := x.grids[nsName{k.ns, k.grid}]
		if !ok || g.Key == "" {
			continue
		}
		svc := s.ServiceName
		f := &stopAtPod{indexFinder: indexFinder{x: x, grid: &g.Grid, ns: k.ns, svc: svc}}
		gridname.Resolve(&gridname.Query{Grid: g.Name, Service: svc}, map[string]string{g.Key: k.value}, true, f)
		if f.set != nil {
			u[k] = resolvedChild{svc: svc, grid: &g.Grid, set: f.set}
		}
	}
	x.units = u
}

// resolvedFor reports whether x.resolved is current for node.
func (x *Index) resolvedFor(node string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.resolved != nil && x.resolved.node == node
}
