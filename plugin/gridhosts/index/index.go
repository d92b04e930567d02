// Package index holds what gridhosts' informers deliver, as small objects
// keyed so that every lookup a query needs is a map access, and answers the
// handler's questions (lookup.go) from it. The informers (package informers)
// and a snapshot read at start-up (package snapshot) fill it through Upsert
// and Delete.
package index

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/servicegroup/servicegroup/gridname"
)

type nsName struct{ ns, name string }

// unitKey finds the StatefulSet {grid}-{value} of one nodeunit.
type unitKey struct{ ns, grid, value string }

// Index holds what the informers delivered. Each informer event updates only
// the entries of its own object; nothing is recomputed as a whole.
//
// Locking: mu guards every field below it. Each exported method takes mu
// once, for its whole work (a query is one read lock); unexported methods run
// under it and never take it. Nothing outside this package holds mu, and
// under it only this package's code and pure functions (gridname, topology)
// run: no callback, except EachPod's f, which must not call the Index. So mu
// is the innermost lock: callers may hold their own locks while they call
// the Index (the pod selection does), never the other way round. Small
// objects are never changed once indexed (an update replaces them), so what
// a method returns may be read after it has released mu.
type Index struct {
	mu sync.RWMutex

	grids      map[nsName]*GridObj
	sets       map[nsName]*SetObj
	setsByUnit map[unitKey]*SetObj
	pods       map[string]*PodObj // by cache key, "ns/name": the pod's own key string
	services   map[nsName]*ServiceObj
	nodes      map[string]*NodeObj
	slices     map[nsName]*SliceObj
	svcSlices  map[nsName]map[string]*SliceObj
	// members counts the pods that are their StatefulSet's member
	// {set}-{ordinal}; such a pod is found in pods by its name.
	members int

	// childGrids (node mode) holds each grid's name, UID and key as its
	// children name them, by namespace and grid name.
	childGrids map[nsName][]gridname.Child
	// resolved (node mode) is what the rule decides for each grid on one
	// node up to the pod; nil when a change made it stale (resolved.go).
	resolved *resolvedGrids
	// units (clients mode) is the same by nodeunit: what the rule decides
	// up to the pod for any node whose value of the grid's key is the
	// unit's; nil when a change made it stale (resolved.go).
	units map[unitKey]resolvedChild

	// clients mode only: source IP -> node.
	clientPods clientAddrs
	nodeIPs    map[netip.Addr]string

	// Set at New, read-only afterwards.
	opts Options
}

// Options are an Index's mode and hooks, fixed when it is made.
type Options struct {
	// NodeMode is one node's view (`node NAME` without `clients`): no
	// StatefulSetGrid is watched (the controller rewrites a grid's status
	// with every child's state, which no answer depends on), so a grid's
	// name, UID and key are read from its children's controller reference
	// and grid key; and no client is placed, so pods' addresses are not
	// indexed by address.
	NodeMode bool
	// Room reserves space for that many objects (a snapshot knows its
	// counts: no map grows while it is read).
	Room Counts
	// ObserveEvent, when set, is told how long each event took from the
	// transform's receipt to being answerable.
	ObserveEvent func(time.Duration)
	// ObserveWrite, when set, is told how long a watched change took from
	// the apiserver's write to being answerable.
	ObserveWrite func(time.Duration)
}

// Counts are numbers of objects by kind.
type Counts struct {
	Grids, StatefulSets, Pods, Services, Nodes, EndpointSlices int
}

// New returns an empty index.
func New(opts Options) *Index {
	r := opts.Room
	return &Index{
		grids:      make(map[nsName]*GridObj, r.Grids),
		sets:       make(map[nsName]*SetObj, r.StatefulSets),
		setsByUnit: make(map[unitKey]*SetObj, r.StatefulSets),
		pods:       make(map[string]*PodObj, r.Pods),
		services:   make(map[nsName]*ServiceObj, r.Services),
		nodes:      make(map[string]*NodeObj, r.Nodes),
		slices:     make(map[nsName]*SliceObj, r.EndpointSlices),
		svcSlices:  make(map[nsName]map[string]*SliceObj, r.Services),
		childGrids: make(map[nsName][]gridname.Child, r.StatefulSets),
		clientPods: newClientAddrs(r.Pods),
		nodeIPs:    make(map[netip.Addr]string, r.Nodes),
		opts:       opts,
	}
}

// NodeMode reports whether x is one node's view (Options.NodeMode).
func (x *Index) NodeMode() bool { return x.opts.NodeMode }

// Upsert adds or replaces one object (an API object or its small form).
func (x *Index) Upsert(obj any) { x.apply(obj, x.upsert) }

// Delete removes one object (an API object or its small form).
func (x *Index) Delete(obj any) { x.apply(obj, x.remove) }

// apply converts obj to its small form and, under the write lock, makes
// change with it; a change that knew the kind is observed.
func (x *Index) apply(obj any, change func(t any) bool) {
	t, err := Transform(obj)
	if err != nil {
		return
	}
	x.mu.Lock()
	known := change(t)
	// The resolved grids and units are made from these kinds only.
	switch t.(type) {
	case *GridObj, *SetObj, *ServiceObj:
		x.resolved, x.units = nil, nil
	case *NodeObj:
		x.resolved = nil // units are by the node's value, not the node
	}
	x.mu.Unlock()
	if known {
		x.observed(t)
	}
}

// upsert is Upsert's change. Callers hold x.mu.
func (x *Index) upsert(t any) bool {
	switch o := t.(type) {
	case *GridObj:
		x.grids[nsName{o.Namespace, o.Name}] = o
	case *SetObj:
		x.deleteSet(nsName{o.Namespace, o.Name})
		x.addSet(o)
	case *PodObj:
		x.replacePod(o)
	case *ServiceObj:
		x.services[nsName{o.Namespace, o.Name}] = o
	case *NodeObj:
		x.deleteNode(o.Name)
		x.addNode(o)
	case *SliceObj:
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
	case *GridObj:
		delete(x.grids, nsName{o.Namespace, o.Name})
	case *SetObj:
		x.deleteSet(nsName{o.Namespace, o.Name})
	case *PodObj:
		x.deletePod(o)
	case *ServiceObj:
		// Headless and other Services come from two informers: a Service
		// that moved between them (to ExternalName) is deleted from one
		// only if the other has not added it already.
		if cur, ok := x.services[nsName{o.Namespace, o.Name}]; ok && cur.Headless != o.Headless {
			return true
		}
		delete(x.services, nsName{o.Namespace, o.Name})
	case *NodeObj:
		x.deleteNode(o.Name)
	case *SliceObj:
		x.deleteSlice(nsName{o.Namespace, o.Name})
	default:
		return false
	}
	return true
}

func (x *Index) addSet(s *SetObj) {
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

// ordinalOf returns the ordinal of a StatefulSet pod: its name is exactly
// {set}-{ordinal}.
func ordinalOf(p *PodObj) (string, bool) {
	if !p.HasOwner || p.Owner.Kind != gridname.KindStatefulSet {
		return "", false
	}
	ord, ok := strings.CutPrefix(p.Name(), p.Owner.Name)
	if !ok || len(ord) < 2 || ord[0] != '-' || !gridname.IsOrdinal(ord[1:]) {
		return "", false
	}
	return ord[1:], true
}

func (x *Index) addPod(p *PodObj) {
	x.pods[p.key] = p
	if _, ok := ordinalOf(p); ok {
		x.members++
	}
	if p.NodeName != "" && !p.Finished && !x.opts.NodeMode {
		k := nsName{p.Namespace(), p.Name()}
		for _, ip := range p.IPs {
			x.clientPods.add(ip, clientRef{pod: k, node: p.NodeName, created: p.Created(), terminating: p.Terminating})
		}
	}
}

// dropMember uncounts p as its StatefulSet's member.
func (x *Index) dropMember(p *PodObj) {
	if _, ok := ordinalOf(p); ok {
		x.members--
	}
}

// replacePod indexes p in place of its former version. Addresses both
// versions claim keep their claim (an update is not a new claim to a
// reused address); the others are released.
func (x *Index) replacePod(p *PodObj) {
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

// Pod is the pod with cache key key.
func (x *Index) Pod(key string) (*PodObj, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p, ok := x.pods[key]
	return p, ok
}

// EachPod calls f with every pod, under the read lock: f must not call x.
func (x *Index) EachPod(f func(*PodObj)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, p := range x.pods {
		f(p)
	}
}

// DeletePodIfSame removes p unless the index has another version of it by
// now.
func (x *Index) DeletePodIfSame(p *PodObj) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.pods[p.key] == p {
		x.deletePod(p)
	}
}

// deletePod removes the pod o is a version of.
func (x *Index) deletePod(o *PodObj) {
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

func (x *Index) addNode(n *NodeObj) {
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

func (x *Index) addSlice(s *SliceObj) {
	x.slices[nsName{s.Namespace, s.Name}] = s
	if s.Service == "" {
		return
	}
	sk := nsName{s.Namespace, s.Service}
	m := x.svcSlices[sk]
	if m == nil {
		m = map[string]*SliceObj{}
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

// Counts are the objects x holds; Pods counts the StatefulSet members.
func (x *Index) Counts() Counts {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return Counts{Grids: len(x.grids), StatefulSets: len(x.sets), Pods: x.members, Services: len(x.services),
		Nodes: len(x.nodes), EndpointSlices: len(x.slices)}
}

// Contents is every object an Index holds, in no order.
type Contents struct {
	Grids          []*GridObj
	StatefulSets   []*SetObj
	Pods           []*PodObj
	Services       []*ServiceObj
	Nodes          []*NodeObj
	EndpointSlices []*SliceObj
}

// Contents collects x's objects under the read lock: pointers only (the
// objects are never changed in place), so a snapshot's encoding holds no
// lock.
func (x *Index) Contents() Contents {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return Contents{Grids: values(x.grids), StatefulSets: values(x.sets), Pods: values(x.pods),
		Services: values(x.services), Nodes: values(x.nodes), EndpointSlices: values(x.slices)}
}

func values[K comparable, T any](m map[K]*T) []*T {
	out := make([]*T, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	return out
}
