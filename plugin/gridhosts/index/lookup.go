package index

import (
	"net/netip"

	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/topology"
)

// The handler's questions. Each exported method is one query: it takes the
// read lock once and answers whole, so a query never sees two states of the
// index. What they return points into small objects, which are never
// changed once indexed.

// Viewer is whose nodeunit a query is answered for.
type Viewer struct {
	// Node is the fixed node (`node NAME`); "" for none.
	Node string
	// Clients places the client at address Client first (clients mode): a
	// running pod's IP gives its node, else a node InternalIP gives that
	// node. Client is the zero Addr when the source address is unknown.
	Clients bool
	Client  netip.Addr
}

// MemberQuery is a unified name {Grid}-{Ordinal}.{Service}.{Namespace}.
type MemberQuery struct {
	Namespace, Grid, Ordinal, Service string
}

// Member is what a unified name resolves to for one viewer.
type Member struct {
	// Placed is false for a client that cannot be placed (clients mode
	// without a fixed node): the name is not answered for it.
	Placed bool
	// HasGrid: the name names a grid, whose key is GridKey (for
	// require_node_restricted_keys, which may rule it out).
	HasGrid bool
	GridKey string
	// Pod is the pod the name stands for on the viewer's node (package
	// gridname's rule); nil when the rule rules it out.
	Pod *gridname.Pod
}

// Member resolves a unified name for viewer v. Both by pointer: it is
// called once per query, on a goroutine whose stack is small.
func (x *Index) Member(v *Viewer, q *MemberQuery) Member {
	if x.opts.NodeMode && !v.Clients {
		if m, ok := x.nodeMember(v.Node, q); ok {
			return m
		}
	} else if !x.opts.NodeMode {
		if m, ok := x.unitMember(v, q); ok {
			return m
		}
	}
	return x.memberByRule(v, q)
}

// memberByRule is Member by the whole rule, for the names the resolved
// grids and units do not answer (and their reasons).
func (x *Index) memberByRule(v *Viewer, q *MemberQuery) Member {
	x.mu.RLock()
	defer x.mu.RUnlock()
	node, placed := x.viewerNode(*v)
	if !placed {
		return Member{}
	}
	// The grid is found once, here, before the rule runs, and the rule is
	// called from here: every call deeper on this path grew each query's new
	// goroutine stack at its deepest point (issue 49's profile).
	labels := nodeLabelsOf(node)
	gr := x.gridOf(q.Namespace, q.Grid, q.Service, labels)
	if gr == nil {
		return Member{Placed: true} // the rule's first check: no grid
	}
	m := Member{Placed: true, HasGrid: true, GridKey: gr.Key}
	r := gridname.Resolve(&gridname.Query{Grid: gr.Name, Ordinal: q.Ordinal, Service: q.Service}, labels, node != nil,
		indexFinder{x: x, grid: gr, ns: q.Namespace, ordinal: q.Ordinal, svc: q.Service})
	if r.Reason == gridname.Resolved {
		m.Pod = r.Pod
	}
	return m
}

// Headless is what the name of a headless grid Service answers with for one
// viewer.
type Headless struct {
	// Placed as in Member.
	Placed bool
	// Found: the Service is a headless grid Service, ours to answer, with
	// or without endpoints.
	Found bool
	// Endpoints are its ready endpoints in the viewer's nodeunit (package
	// topology's rule), each with its own slice's ports; Ports are every
	// slice's, so a port that exists without a local endpoint is NODATA.
	Endpoints []LocalEndpoint
	Ports     []SlicePort
	// Forgeable are the keys restrict dropped: keys a node can set on its
	// own Node, which never match (require_node_restricted_keys).
	Forgeable []string
}

// Headless answers the headless grid Service namespace/name for viewer v;
// with restrict, keys a node can set on itself never match.
func (x *Index) Headless(v Viewer, namespace, name string, restrict bool) Headless {
	x.mu.RLock()
	defer x.mu.RUnlock()
	node, placed := x.viewerNode(v)
	if !placed {
		return Headless{}
	}
	keys := x.gridServiceKeys(namespace, name)
	if keys == nil {
		return Headless{Placed: true}
	}
	h := Headless{Placed: true, Found: true}
	if restrict {
		// A grid Service left with no trusted key is still ours and gets
		// no endpoints, as the wrapper serves it to kube-proxy.
		keys, h.Forgeable = topology.NodeRestrictedKeys(keys)
	}
	h.Endpoints, h.Ports = x.localEndpoints(namespace, name, keys, node)
	return h
}

// NotGridName reports whether the unified-name shape q is known not to be
// a grid name from what has synced so far: with servicesKnown, its Service
// is no grid Service; with gridsKnown, its grid does not exist.
func (x *Index) NotGridName(q MemberQuery, servicesKnown, gridsKnown bool) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if servicesKnown {
		sv := x.services[nsName{q.Namespace, q.Service}]
		if sv == nil {
			return true
		}
		if _, ok := sv.GridKey.Key(); !ok {
			return true
		}
	}
	return gridsKnown && x.gridOf(q.Namespace, q.Grid, "", nil) == nil
}

// viewerNode is the node v's queries are answered for: nil for a node the
// index does not have (it answers nothing); false for a client that cannot
// be placed. Callers hold x.mu.
func (x *Index) viewerNode(v Viewer) (*NodeObj, bool) {
	if v.Clients {
		if v.Client.IsValid() {
			if name, ok := x.nodeForClient(v.Client); ok {
				return x.nodes[name], true
			}
		}
		if v.Node == "" {
			return nil, false
		}
	}
	return x.nodes[v.Node], true
}

// gridOf is grid ns/name as the rule sees it for a node with labels, asked
// through Service svc ("" for any): the StatefulSetGrid, or in node mode
// the grid its children name (gridname.GridOfChildren). Nil when there is
// none. Callers hold x.mu.
func (x *Index) gridOf(ns, name, svc string, labels map[string]string) *gridname.Grid {
	if !x.opts.NodeMode {
		if g, ok := x.grids[nsName{ns, name}]; ok {
			return &g.Grid
		}
		return nil
	}
	var sv *gridname.Service
	if o := x.services[nsName{ns, svc}]; o != nil {
		sv = &o.Service
	}
	return gridname.GridOfChildren(x.childGrids[nsName{ns, name}], labels, sv)
}

// nodeForClient maps a client address to its node: a pod IP first, then a
// node InternalIP. Callers hold x.mu.
func (x *Index) nodeForClient(ip netip.Addr) (string, bool) {
	ip = ip.Unmap()
	if c, ok := x.clientPods.holder(ip); ok {
		return c.node, true
	}
	n, ok := x.nodeIPs[ip]
	return n, ok
}

// nodeLabelsOf is node's labels; nil for no node.
func nodeLabelsOf(node *NodeObj) map[string]string {
	if node == nil {
		return nil
	}
	return node.Labels
}

// indexFinder is the rule's view of the index for one query, its grid
// already found: every other lookup is one map access.
type indexFinder struct {
	x                *Index
	grid             *gridname.Grid
	ns, ordinal, svc string
}

func (f indexFinder) Grid() *gridname.Grid { return f.grid }

func (f indexFinder) StatefulSet(value string) *gridname.StatefulSet {
	if s, ok := f.x.setsByUnit[unitKey{f.ns, f.grid.Name, value}]; ok {
		return &s.StatefulSet
	}
	return nil
}

func (f indexFinder) Service() *gridname.Service {
	if s, ok := f.x.services[nsName{f.ns, f.svc}]; ok {
		return &s.Service
	}
	return nil
}

// Pod finds member {set}-{ordinal} by its pod's key, built on the stack: a
// second map keyed by set and ordinal would hold every pod again (0.9 MB at
// 10k), and a map lookup of string(bytes) does not allocate. A StatefulSet
// pod's name is at most 63 bytes (its pod-name label), so is a namespace:
// 128 bytes hold every key the StatefulSet controller makes.
func (f indexFinder) Pod(set *gridname.StatefulSet) *gridname.Pod {
	var buf [128]byte
	n := len(f.ns) + 1 + len(set.Name) + 1 + len(f.ordinal)
	if n > len(buf) {
		return f.longPod(set)
	}
	i := copy(buf[:], f.ns)
	buf[i] = '/'
	i += 1 + copy(buf[i+1:], set.Name)
	buf[i] = '-'
	copy(buf[i+1:], f.ordinal)
	return setMember(f.x.pods[string(buf[:n])], set)
}

// longPod is Pod for a key longer than its buffer, which no StatefulSet
// controller makes: built on the heap, in a frame of its own.
//
//go:noinline
func (f *indexFinder) longPod(set *gridname.StatefulSet) *gridname.Pod {
	return setMember(f.x.pods[f.ns+"/"+set.Name+"-"+f.ordinal], set)
}

// setMember is p when it is set's member: its name is {set}-{ordinal}, the
// ordinal checked when the name was parsed, so it is when the set controls
// it (ordinalOf, without parsing the ordinal again on every query).
func setMember(p *PodObj, set *gridname.StatefulSet) *gridname.Pod {
	if p == nil || !p.HasOwner || p.Owner.Kind != gridname.KindStatefulSet || p.Owner.Name != set.Name {
		return nil
	}
	return &p.Pod
}

// gridServiceKeys returns the topology keys of the headless grid Service
// ns/name (parsed when the Service changed), or nil when the name is not
// one. Callers hold x.mu.
func (x *Index) gridServiceKeys(ns, name string) []string {
	sv, ok := x.services[nsName{ns, name}]
	if !ok || !sv.Headless || len(sv.Keys) == 0 {
		return nil
	}
	return sv.Keys
}

// LocalEndpoint is one ready endpoint with the ports of its own slice.
type LocalEndpoint struct {
	*SliceEndpoint
	Ports []SlicePort
}

// localEndpoints returns the ready endpoints of Service ns/name in node's
// nodeunit, decided by package topology: the first key matched by at least
// one ready endpoint's node wins. Each endpoint keeps its own slice's ports;
// the ports of every slice are returned too, so a port name that exists
// without a local endpoint is NODATA rather than NXDOMAIN. Callers hold x.mu.
func (x *Index) localEndpoints(ns, name string, keys []string, node *NodeObj) ([]LocalEndpoint, []SlicePort) {
	slices := x.svcSlices[nsName{ns, name}]
	var ports []SlicePort
	for _, s := range slices {
		for _, p := range s.Ports {
			if !containsPort(ports, p) {
				ports = append(ports, p)
			}
		}
	}
	view := topology.Nodes{Labels: x.nodeLabels}
	if node != nil {
		view.Self = node.Labels
		if view.Self == nil {
			view.Self = map[string]string{}
		}
	}
	ready := func(yield func(string) bool) {
		for _, s := range slices {
			for i := range s.Endpoints {
				if e := &s.Endpoints[i]; e.Ready && len(e.IPs) > 0 && !yield(e.NodeName) {
					return
				}
			}
		}
	}
	key, ok := view.Choose(keys, ready)
	if !ok {
		return nil, ports
	}
	var out []LocalEndpoint
	for _, s := range slices {
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			if e.Ready && len(e.IPs) > 0 && view.Matches(key, e.NodeName) {
				out = append(out, LocalEndpoint{e, s.Ports})
			}
		}
	}
	return out, ports
}

func containsPort(ps []SlicePort, p SlicePort) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// nodeLabels is the topology view's lookup. Callers hold x.mu.
func (x *Index) nodeLabels(name string) (map[string]string, bool) {
	n, ok := x.nodes[name]
	if !ok {
		return nil, false
	}
	return n.Labels, true
}
