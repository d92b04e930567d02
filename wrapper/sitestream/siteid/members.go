package siteid

import (
	"sort"
	"sync"
	"time"
)

const (
	// MemberTTL forgets a wrapper not heard of for this long; MaxMembers
	// bounds what an authenticated peer can make a wrapper remember.
	MemberTTL  = 30 * time.Minute
	MaxMembers = 1024
)

// Members are the identities of the site's wrappers this one has heard
// of: its leaders, its followers, its leaders' members.
type Members struct {
	// InSite, when set, keeps out identities whose node is not one of the
	// site's: a peer's answer cannot make this wrapper ask, or follow, a
	// wrapper of another site.
	InSite func(node string) bool
	mu     sync.Mutex
	seen   map[string]time.Time
}

// NewMembers returns an empty set.
func NewMembers() *Members { return &Members{seen: map[string]time.Time{}} }

// Add remembers ids that are wrapper identities (Parse) of the site's
// nodes, as heard of now; a new one only while fewer than MaxMembers are
// remembered.
func (m *Members) Add(ids ...string) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		node, _, _, ok := Parse(id)
		if !ok || (m.InSite != nil && !m.InSite(node)) {
			continue
		}
		if _, known := m.seen[id]; !known && len(m.seen) >= MaxMembers {
			m.pruneLocked(now)
			if len(m.seen) >= MaxMembers {
				continue
			}
		}
		m.seen[id] = now
	}
}

func (m *Members) pruneLocked(now time.Time) {
	for id, at := range m.seen {
		if now.Sub(at) > MemberTTL {
			delete(m.seen, id)
		}
	}
}

// List returns the members heard of within MemberTTL, sorted.
func (m *Members) List() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(time.Now())
	out := make([]string, 0, len(m.seen))
	for id := range m.seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
