package gridhosts

import (
	"strings"

	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// nameKind says which shape a query name has inside a zone.
type nameKind int

const (
	nameNone    nameKind = iota
	nameMember           // {grid}-{ordinal}.{svc}.{ns}.svc
	nameService          // {svc}.{ns}.svc
	nameSRV              // _{port}._{proto}.{svc}.{ns}.svc
)

// queryName is a parsed query name; all strings are slices of the name.
// Its Grid and Ordinal are set for nameMember only; the index is asked with
// its MemberQuery in place (no copy in the query's frame).
type queryName struct {
	kind nameKind
	index.MemberQuery
	port  string // nameSRV, without "_"
	proto string // nameSRV, without "_"
}

// parseName splits name (lower case, fully qualified) relative to zone
// (lower case, fully qualified, a suffix of name); the first label of a
// unified name splits as gridname.SplitHost says.
func parseName(name, zone string) queryName {
	if len(name) <= len(zone) || !strings.HasSuffix(name, zone) {
		return queryName{}
	}
	rel := name[:len(name)-len(zone)]
	if zone != "." {
		if rel[len(rel)-1] != '.' {
			return queryName{} // zone matched in the middle of a label
		}
	}
	rel = strings.TrimSuffix(rel, ".")
	var l [6]string
	n := 0
	for rel != "" {
		if n == len(l) {
			return queryName{}
		}
		i := strings.LastIndexByte(rel, '.')
		l[n] = rel[i+1:]
		if l[n] == "" {
			return queryName{}
		}
		n++
		if i < 0 {
			break
		}
		if i == 0 {
			return queryName{} // empty leading label
		}
		rel = rel[:i]
	}
	// l holds labels from the right: l[0] = "svc", l[1] = ns, l[2] = svc, ...
	if n < 3 || l[0] != "svc" {
		return queryName{}
	}
	q := queryName{MemberQuery: index.MemberQuery{Namespace: l[1], Service: l[2]}}
	switch n {
	case 3:
		q.kind = nameService
	case 4:
		grid, ordinal, ok := gridname.SplitHost(l[3])
		if !ok {
			return queryName{}
		}
		q.kind, q.Grid, q.Ordinal = nameMember, grid, ordinal
	case 5:
		if len(l[4]) < 2 || len(l[3]) < 2 || l[4][0] != '_' || l[3][0] != '_' {
			return queryName{}
		}
		q.kind, q.port, q.proto = nameSRV, l[4][1:], l[3][1:]
	default:
		return queryName{}
	}
	return q
}

// zoneOf is the most specific of zones (lower case, fully qualified) that
// name (lower case, fully qualified, presentation format) is in, "" for
// none: plugin.Zones.Matches without its two label-index slices per zone
// (dns.Split), which were most of an answer's allocations, and frames.
func zoneOf(zones []string, name string) string {
	best := ""
	for _, z := range zones {
		if len(z) > len(best) && inZone(name, z) {
			best = z
		}
	}
	return best
}

// inZone reports whether name is zone or below it: zone ends name at a
// label boundary (a dot that is not an escaped "\." inside a label).
func inZone(name, zone string) bool {
	if zone == "." {
		return true
	}
	if !strings.HasSuffix(name, zone) {
		return false
	}
	i := len(name) - len(zone)
	if i == 0 {
		return true
	}
	if name[i-1] != '.' {
		return false
	}
	backslashes := 0
	for j := i - 2; j >= 0 && name[j] == '\\'; j-- {
		backslashes++
	}
	return backslashes%2 == 0
}
