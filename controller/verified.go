package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// verifiedChildren remembers, per child, the last version of it found to
// match the configuration of a given applied-hash. Comparing a child with
// its desired configuration extracts our fields from its managedFields, the
// costliest step of a sync; a child whose resourceVersion has not moved and
// whose desired configuration has the same hash gives the same answer, so a
// resync or a grid re-queued by a node event only compares what changed.
type verifiedChildren struct {
	mu   sync.Mutex
	byID map[types.UID]verifiedChild
}

type verifiedChild struct {
	resourceVersion string
	hash            string
}

// upToDate reports whether child uid at resourceVersion was found to match
// the configuration of hash.
func (v *verifiedChildren) upToDate(uid types.UID, resourceVersion, hash string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.byID[uid]
	return ok && hash != "" && e.resourceVersion == resourceVersion && e.hash == hash
}

// remember records that child uid at resourceVersion matches hash.
func (v *verifiedChildren) remember(uid types.UID, resourceVersion, hash string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byID == nil {
		v.byID = map[types.UID]verifiedChild{}
	}
	v.byID[uid] = verifiedChild{resourceVersion: resourceVersion, hash: hash}
}

// forget drops a deleted child.
func (v *verifiedChildren) forget(uid types.UID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.byID, uid)
}
