package gridname

import (
	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridunit"
)

// Child is one grid child as a node reads its grid from it (gridhosts in
// node mode watches no StatefulSetGrid): the child, the nodeunit value its
// name encodes, and the grid its controller reference and grid key name.
type Child struct {
	Set  *StatefulSet
	Unit string
	Grid Grid
}

// ChildOf is set as a Child: false when it names no grid (its controller is
// no StatefulSetGrid, or its name is not {grid}-{value}, read by gridunit).
// The grid key's label value is encoded here, once, not per query.
func ChildOf(set *StatefulSet) (Child, bool) {
	if !set.HasOwner || set.Owner.Kind != KindStatefulSetGrid {
		return Child{}, false
	}
	unit, ok := gridunit.ValueOf(set.Owner.Name, set.Name)
	if !ok {
		return Child{}, false
	}
	key, _ := set.GridKey.Key()
	return Child{Set: set, Unit: unit, Grid: Grid{Name: set.Owner.Name, UID: set.Owner.UID, Key: key,
		KeyLabel: superedgev1.GridUniqKeyLabelValue(key)}}, true
}

// GridOfChildren is the grid that children (one grid's, by name) name, as a
// node with labels sees it when asked through Service sv (nil for none):
// the child of the node's nodeunit (the node's value of the child's key is
// the child's nodeunit), then one whose key sv names too, then one not
// being deleted, then the first by name. Children of two keys exist only
// while a grid's key changes; a child of another nodeunit answers only when
// none is the node's. Nil for no children. Each child is read in place: the
// query path copies none.
func GridOfChildren(children []Child, labels map[string]string, sv *Service) *Grid {
	if len(children) == 0 {
		return nil
	}
	best, bestRank := &children[0], children[0].rank(labels, sv)
	for i := 1; i < len(children); i++ {
		c := &children[i]
		if r := c.rank(labels, sv); r < bestRank || r == bestRank && c.Set.Name < best.Set.Name {
			best, bestRank = c, r
		}
	}
	return &best.Grid
}

// rank orders children for GridOfChildren, lowest first.
func (c *Child) rank(labels map[string]string, sv *Service) int {
	r := 0
	if v, ok := labels[c.Grid.Key]; !ok || v != c.Unit {
		r += 4
	}
	if sv != nil && !sv.GridKey.IsOf(&c.Grid) {
		r += 2
	}
	if c.Set.Terminating {
		r++
	}
	return r
}

// NodeSelectsPod reports whether a node's DNS (gridhosts in node mode)
// holds the pod of ordinal of a StatefulSet of its nodeunit with
// spec.ordinals.start start, spec.replicas replicas and status.replicas
// statusReplicas: it selects ordinals 0 to start plus the larger of the two
// replicas (pods still being scaled away), so a pod made beyond them is not
// answered there.
func NodeSelectsPod(ordinal uint64, start, replicas, statusReplicas int32) bool {
	return ordinal < uint64(max(0, int64(start)+int64(max(replicas, statusReplicas))))
}
