package gridhosts

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/topology"
)

type nsName struct{ ns, name string }

// unitKey finds the StatefulSet {grid}-{value} of one nodeunit.
type unitKey struct{ ns, grid, value string }

// Index holds what the informers delivered, keyed so that every lookup a
// query needs is a map access. Each informer event updates only the entries
// of its own object; nothing is recomputed as a whole.
type Index struct {
	mu sync.RWMutex

	grids      map[nsName]*gridObj
	sets       map[nsName]*setObj
	setsByUnit map[unitKey]*setObj
	pods       map[string]*podObj // by cache key, "ns/name": the pod's own key string
	services   map[nsName]*svcObj
	nodes      map[string]*nodeObj
	slices     map[nsName]*sliceObj
	svcSlices  map[nsName]map[string]*sliceObj
	// members counts the pods that are their StatefulSet's member
	// {set}-{ordinal}; such a pod is found in pods by its name.
	members int

	// gridsFromChildren (node mode): no StatefulSetGrid is watched (the
	// controller rewrites a grid's status with every child's state, which
	// no answer depends on); a grid's name, UID and key are read from its
	// children's controller reference and grid key instead. childGrids
	// holds them by namespace and grid name.
	gridsFromChildren bool
	childGrids        map[nsName][]gridname.Child

	// clients mode only: source IP -> node. noClientAddrs (node mode, where
	// no query reads them) leaves the pods' addresses out.
	clientPods    clientAddrs
	noClientAddrs bool
	nodeIPs       map[netip.Addr]string

	// observe, when set, is told how long each event took from the
	// transform's receipt to being answerable.
	observe func(time.Duration)
	// observeWrite, when set, is told how long a watched change took from
	// the apiserver's write to being answerable.
	observeWrite func(time.Duration)
}

// NewIndex returns an empty index.
func NewIndex() *Index { return newIndexSized(0, 0, 0, 0, 0, 0) }

// newIndexSized returns an empty index with room for the given numbers of
// objects (a snapshot knows them: no map grows while it is read).
func newIndexSized(grids, sets, pods, services, nodes, slices int) *Index {
	return &Index{
		grids:      make(map[nsName]*gridObj, grids),
		sets:       make(map[nsName]*setObj, sets),
		setsByUnit: make(map[unitKey]*setObj, sets),
		pods:       make(map[string]*podObj, pods),
		services:   make(map[nsName]*svcObj, services),
		nodes:      make(map[string]*nodeObj, nodes),
		slices:     make(map[nsName]*sliceObj, slices),
		svcSlices:  make(map[nsName]map[string]*sliceObj, services),
		childGrids: make(map[nsName][]gridname.Child, sets),
		clientPods: newClientAddrs(pods),
		nodeIPs:    make(map[netip.Addr]string, nodes),
	}
}

// Upsert adds or replaces one object (an API object or its small form).
func (x *Index) Upsert(obj any) { x.apply(obj, x.upsert) }

// Delete removes one object (an API object or its small form).
func (x *Index) Delete(obj any) { x.apply(obj, x.remove) }

// apply converts obj to its small form and, under the write lock, makes
// change with it; a change that knew the kind is observed.
func (x *Index) apply(obj any, change func(t any) bool) {
	t, err := toTiny(obj)
	if err != nil {
		return
	}
	x.mu.Lock()
	known := change(t)
	x.mu.Unlock()
	if known {
		x.observed(t)
	}
}

// upsert is Upsert's change. Callers hold x.mu.
func (x *Index) upsert(t any) bool {
	switch o := t.(type) {
	case *gridObj:
		x.grids[nsName{o.Namespace, o.Name}] = o
	case *setObj:
		x.deleteSet(nsName{o.Namespace, o.Name})
		x.addSet(o)
	case *podObj:
		x.replacePod(o)
	case *svcObj:
		x.services[nsName{o.Namespace, o.Name}] = o
	case *nodeObj:
		x.deleteNode(o.Name)
		x.addNode(o)
	case *sliceObj:
		x.deleteSlice(nsName{o.Namespace, o.Name})
		x.addSlice(o)
	default:
		return false
	}
	return true
}

// remove is Delete's change. Callers hold x.mu.
func (x *Index) remove(t any) bool {
	switch o := t.(type) {
	case *gridObj:
		delete(x.grids, nsName{o.Namespace, o.Name})
	case *setObj:
		x.deleteSet(nsName{o.Namespace, o.Name})
	case *podObj:
		x.deletePod(o)
	case *svcObj:
		// Headless and other Services come from two informers: a Service
		// that moved between them (to ExternalName) is deleted from one
		// only if the other has not added it already.
		if cur, ok := x.services[nsName{o.Namespace, o.Name}]; ok && cur.Headless != o.Headless {
			return true
		}
		delete(x.services, nsName{o.Namespace, o.Name})
	case *nodeObj:
		x.deleteNode(o.Name)
	case *sliceObj:
		x.deleteSlice(nsName{o.Namespace, o.Name})
	default:
		return false
	}
	return true
}

// observedWrite records the write-to-answerable latency of a change that
// came from a watch (not an initial list, whose writes are old).
func (x *Index) observedWrite(obj any) {
	if x.observeWrite == nil {
		return
	}
	if w, ok := obj.(interface{ writtenAt() time.Time }); ok && !w.writtenAt().IsZero() {
		x.observeWrite(time.Since(w.writtenAt()))
	}
}

func (x *Index) observed(t any) {
	if x.observe == nil {
		return
	}
	if r, ok := t.(interface{ receivedAt() time.Time }); ok {
		x.observe(time.Since(r.receivedAt()))
	}
}

func (x *Index) addSet(s *setObj) {
	x.sets[nsName{s.Namespace, s.Name}] = s
	if c, ok := gridname.ChildOf(&s.StatefulSet); ok {
		x.setsByUnit[unitKey{s.Namespace, s.Owner.Name, c.Unit}] = s
		gk := nsName{s.Namespace, s.Owner.Name}
		x.childGrids[gk] = append(x.childGrids[gk], c)
	}
}

func (x *Index) deleteSet(k nsName) {
	s, ok := x.sets[k]
	if !ok {
		return
	}
	delete(x.sets, k)
	if c, ok := gridname.ChildOf(&s.StatefulSet); ok {
		delete(x.setsByUnit, unitKey{s.Namespace, s.Owner.Name, c.Unit})
		gk := nsName{s.Namespace, s.Owner.Name}
		x.childGrids[gk] = slices.DeleteFunc(x.childGrids[gk], func(c gridname.Child) bool { return c.Set == &s.StatefulSet })
		if len(x.childGrids[gk]) == 0 {
			delete(x.childGrids, gk)
		}
	}
}

// gridOf is grid ns/name as the rule sees it for a node with labels, asked
// through Service svc ("" for any): the StatefulSetGrid, or with
// gridsFromChildren the grid its children name (gridname.GridOfChildren).
// Nil when there is none. Callers hold x.mu.
func (x *Index) gridOf(ns, name, svc string, labels map[string]string) *gridname.Grid {
	if !x.gridsFromChildren {
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

// ordinalOf returns the ordinal of a StatefulSet pod: its name is exactly
// {set}-{ordinal}.
func ordinalOf(p *podObj) (string, bool) {
	if !p.HasOwner || p.Owner.Kind != gridname.KindStatefulSet {
		return "", false
	}
	ord, ok := strings.CutPrefix(p.Name(), p.Owner.Name)
	if !ok || len(ord) < 2 || ord[0] != '-' || !gridname.IsOrdinal(ord[1:]) {
		return "", false
	}
	return ord[1:], true
}

func (x *Index) addPod(p *podObj) {
	x.pods[p.key] = p
	if _, ok := ordinalOf(p); ok {
		x.members++
	}
	if p.NodeName != "" && !p.Finished && !x.noClientAddrs {
		k := nsName{p.Namespace(), p.Name()}
		for _, ip := range p.IPs {
			x.clientPods.add(ip, clientRef{pod: k, node: p.NodeName, created: p.createdAt(), terminating: p.Terminating})
		}
	}
}

// dropMember uncounts p as its StatefulSet's member.
func (x *Index) dropMember(p *podObj) {
	if _, ok := ordinalOf(p); ok {
		x.members--
	}
}

// replacePod indexes p in place of its former version. Addresses both
// versions claim keep their claim (an update is not a new claim to a
// reused address); the others are released.
func (x *Index) replacePod(p *podObj) {
	k := nsName{p.Namespace(), p.Name()}
	if old, ok := x.pods[p.key]; ok {
		x.dropMember(old)
		claims := p.NodeName != "" && !p.Finished
		for _, ip := range old.IPs {
			if !claims || !slices.Contains(p.IPs, ip) {
				x.clientPods.remove(ip, k)
			}
		}
	}
	x.addPod(p)
}

// pod is the pod with cache key key.
func (x *Index) pod(key string) (*podObj, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p, ok := x.pods[key]
	return p, ok
}

// eachPod calls f with every pod, under the read lock.
func (x *Index) eachPod(f func(*podObj)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, p := range x.pods {
		f(p)
	}
}

// deletePodIfSame removes p unless the index has another version of it by
// now.
func (x *Index) deletePodIfSame(p *podObj) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.pods[p.key] == p {
		x.deletePod(p)
	}
}

// deletePod removes the pod o is a version of.
func (x *Index) deletePod(o *podObj) {
	p, ok := x.pods[o.key]
	if !ok {
		return
	}
	delete(x.pods, o.key)
	x.dropMember(p)
	k := nsName{p.Namespace(), p.Name()}
	for _, ip := range p.IPs {
		x.clientPods.remove(ip, k)
	}
}

func (x *Index) addNode(n *nodeObj) {
	x.nodes[n.Name] = n
	for _, ip := range n.InternalIPs {
		x.nodeIPs[ip] = n.Name
	}
}

func (x *Index) deleteNode(name string) {
	n, ok := x.nodes[name]
	if !ok {
		return
	}
	delete(x.nodes, name)
	for _, ip := range n.InternalIPs {
		if x.nodeIPs[ip] == name {
			delete(x.nodeIPs, ip)
		}
	}
}

func (x *Index) addSlice(s *sliceObj) {
	x.slices[nsName{s.Namespace, s.Name}] = s
	if s.Service == "" {
		return
	}
	sk := nsName{s.Namespace, s.Service}
	m := x.svcSlices[sk]
	if m == nil {
		m = map[string]*sliceObj{}
		x.svcSlices[sk] = m
	}
	m[s.Name] = s
}

func (x *Index) deleteSlice(k nsName) {
	s, ok := x.slices[k]
	if !ok {
		return
	}
	delete(x.slices, k)
	sk := nsName{s.Namespace, s.Service}
	if m := x.svcSlices[sk]; m != nil {
		delete(m, s.Name)
		if len(m) == 0 {
			delete(x.svcSlices, sk)
		}
	}
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

// member returns the pod a unified name {grid}-{ordinal}.{svc}.{ns} stands
// for on node, decided by package gridname; nil when the rule rules it out.
// Callers hold x.mu.
func (x *Index) member(ns, grid, ordinal, svc string, node *nodeObj) *gridname.Pod {
	return x.memberOf(x.gridOf(ns, grid, svc, nodeLabelsOf(node)), ns, ordinal, svc, node)
}

// memberOf is member for grid gr, the grid's name as gridOf found it
// (nil: none). The query path finds the grid once, before the rule runs:
// found inside it, one call deeper, the lookup grew every query's new
// goroutine stack (issue 49's profile). Callers hold x.mu.
func (x *Index) memberOf(gr *gridname.Grid, ns, ordinal, svc string, node *nodeObj) *gridname.Pod {
	if gr == nil {
		return nil // the rule's first check: no grid
	}
	r := gridname.Resolve(gridname.Query{Grid: gr.Name, Ordinal: ordinal, Service: svc}, nodeLabelsOf(node), node != nil,
		indexFinder{x: x, grid: gr, ns: ns, ordinal: ordinal, svc: svc})
	if r.Reason != gridname.Resolved {
		return nil
	}
	return r.Pod
}

// nodeLabelsOf is node's labels; nil for no node.
func nodeLabelsOf(node *nodeObj) map[string]string {
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
// 10k), and a map lookup of string(bytes) does not allocate.
func (f indexFinder) Pod(set *gridname.StatefulSet) *gridname.Pod {
	var buf [160]byte
	key := append(append(append(append(append(buf[:0], f.ns...), '/'), set.Name...), '-'), f.ordinal...)
	p, ok := f.x.pods[string(key)]
	// Its name is {set}-{ordinal}, the ordinal checked when the name was
	// parsed: it is the set's member when the set controls it (ordinalOf,
	// without parsing the ordinal again on every query).
	if !ok || !p.HasOwner || p.Owner.Kind != gridname.KindStatefulSet || p.Owner.Name != set.Name {
		return nil
	}
	return &p.Pod
}

// gridService returns the headless grid Service ns/name and its topology
// keys (parsed when the Service changed), or nil when the name is not one.
// Callers hold x.mu.
func (x *Index) gridService(ns, name string) (*svcObj, []string) {
	sv, ok := x.services[nsName{ns, name}]
	if !ok || !sv.Headless || len(sv.Keys) == 0 {
		return nil, nil
	}
	return sv, sv.Keys
}

// localEndpoint is one ready endpoint with the ports of its own slice.
type localEndpoint struct {
	*sliceEndpoint
	ports []slicePort
}

// localEndpoints returns the ready endpoints of Service ns/name in node's
// nodeunit, decided by package topology: the first key matched by at least
// one ready endpoint's node wins. Each endpoint keeps its own slice's ports;
// the ports of every slice are returned too, so a port name that exists
// without a local endpoint is NODATA rather than NXDOMAIN. Callers hold x.mu.
func (x *Index) localEndpoints(ns, name string, keys []string, node *nodeObj) ([]localEndpoint, []slicePort) {
	slices := x.svcSlices[nsName{ns, name}]
	var ports []slicePort
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
	var out []localEndpoint
	for _, s := range slices {
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			if e.Ready && len(e.IPs) > 0 && view.Matches(key, e.NodeName) {
				out = append(out, localEndpoint{e, s.Ports})
			}
		}
	}
	return out, ports
}

func containsPort(ps []slicePort, p slicePort) bool {
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

// synced-independent counts, for tests and metrics.
func (x *Index) counts() (grids, sets, pods, services, nodes, slices int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.grids), len(x.sets), x.members, len(x.services), len(x.nodes), len(x.slices)
}
