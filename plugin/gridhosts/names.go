package gridhosts

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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
type queryName struct {
	kind      nameKind
	grid      string // nameMember
	ordinal   string // nameMember
	service   string
	namespace string
	port      string // nameSRV, without "_"
	proto     string // nameSRV, without "_"
}

// parseName splits name (lower case, fully qualified) relative to zone
// (lower case, fully qualified, a suffix of name). The ordinal is the run of
// digits after the last '-' of the first label, so grid and nodeunit names
// containing '-' or digits parse the same way StatefulSet pod names are built.
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
	q := queryName{namespace: l[1], service: l[2]}
	switch n {
	case 3:
		q.kind = nameService
	case 4:
		host := l[3]
		i := strings.LastIndexByte(host, '-')
		if i <= 0 || !isOrdinal(host[i+1:]) {
			return queryName{}
		}
		q.kind, q.grid, q.ordinal = nameMember, host[:i], host[i+1:]
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

// isOrdinal accepts the ordinals a StatefulSet gives its pods: decimal, no
// leading zeros, below 10^9.
func isOrdinal(s string) bool {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxTopologyKeys is the limit upstream Service topology had.
const maxTopologyKeys = 16

// parseTopologyKeys reads a topologyKeys annotation: a JSON list of label
// keys, "*" allowed only last, no duplicates, at most 16.
func parseTopologyKeys(raw string) ([]string, error) {
	var keys []string
	if err := json.Unmarshal([]byte(raw), &keys); err != nil {
		return nil, fmt.Errorf("topologyKeys %q: not a JSON list of strings: %w", raw, err)
	}
	if len(keys) == 0 || len(keys) > maxTopologyKeys {
		return nil, fmt.Errorf("topologyKeys %q: want 1 to %d keys", raw, maxTopologyKeys)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		if seen[k] {
			return nil, fmt.Errorf("topologyKeys %q: duplicate key %q", raw, k)
		}
		seen[k] = true
		if k == "*" {
			if i != len(keys)-1 {
				return nil, fmt.Errorf("topologyKeys %q: \"*\" must be last", raw)
			}
			continue
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("topologyKeys %q: key %q: %s", raw, k, strings.Join(errs, "; "))
		}
	}
	return keys, nil
}
