package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// appliedChildren remembers, per child, the applied-hash of the controller's
// last apply and the resourceVersion the child had before it. Until the
// informer's cache shows the new version, a sync reads the old child: it must
// neither apply the same configuration again (a second write) nor count the
// nodeunit as still waiting for its wave (it would let another nodeunit start
// beyond maxUnavailableUnits).
type appliedChildren struct {
	mu   sync.Mutex
	byID map[types.UID]appliedChild
}

type appliedChild struct {
	before string // resourceVersion of the child the apply replaced
	hash   string
}

// remember records an apply that turned before into after.
func (a *appliedChildren) remember(before, after interface {
	GetUID() types.UID
	GetResourceVersion() string
	GetAnnotations() map[string]string
}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byID == nil {
		a.byID = map[types.UID]appliedChild{}
	}
	a.byID[after.GetUID()] = appliedChild{before: before.GetResourceVersion(), hash: after.GetAnnotations()[AnnotationAppliedHash]}
}

// hashOf is the applied-hash the child carries: the cached object's, or the
// one just applied while the cache still holds the version before it.
func (a *appliedChildren) hashOf(cached interface {
	GetUID() types.UID
	GetResourceVersion() string
	GetAnnotations() map[string]string
}) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.byID[cached.GetUID()]; ok {
		if cached.GetResourceVersion() == e.before {
			return e.hash
		}
		delete(a.byID, cached.GetUID()) // the cache caught up
	}
	return cached.GetAnnotations()[AnnotationAppliedHash]
}
