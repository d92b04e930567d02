package wrapper

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// serviceCIDRSnapshotResources are kept in the snapshot after
// dnsSnapshotResources; a snapshot without them (an older wrapper's) has
// ServiceCIDRs forwarded upstream until upstream confirms it.
var serviceCIDRSnapshotResources = []*watchcache.Resource{watchcache.ServiceCIDRs}

// serviceCIDRs serves kube-proxy's ServiceCIDRs (1.33+ watches them) from a
// store of their own, with the other resources' list/watch semantics and
// snapshot, so that kube-proxy's informer neither fails nor relists while
// upstream is away. They are fetched from upstream while a client asks (a
// kube-proxy that does not ask costs nothing). An apiserver that serves no
// networking.k8s.io/v1 ServiceCIDRs (404 to the fetch) answers the requests
// itself: they are forwarded as before.
type serviceCIDRs struct {
	served *watchcache.Served
	demand *demand
	// unserved: upstream's last answer to the fetch was 404 and it has not
	// synced since.
	unserved atomic.Bool
	// seeded: the snapshot being served held the section.
	seeded bool
}

func newServiceCIDRs(clock *watchcache.Clock, limits watchcache.LogLimits) *serviceCIDRs {
	r := watchcache.ServiceCIDRs
	return &serviceCIDRs{served: &watchcache.Served{Resource: r, Store: r.NewStore(clock, limits)}}
}

// fetchFrom sets up the fetch from upstream into the store while a client
// asks (idle: see demand); noteError sees every list and watch error.
func (c *serviceCIDRs) fetchFrom(client kubernetes.Interface, idle time.Duration, noteError func(context.Context, error)) {
	st := c.served.Store
	set := func(obj any) {
		if o, ok := obj.(watchcache.Object); ok {
			st.Set(o.GetName(), o)
		}
	}
	merged := newMergedCache(cache.Indexers{}, cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if o, ok := unwrap(obj).(watchcache.Object); ok {
				st.Delete(o.GetName())
			}
		},
	})
	watchErrors := func(inf cache.SharedIndexInformer) error {
		return inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			noteError(ctx, err)
			if apierrors.IsNotFound(err) {
				c.unserved.Store(true)
			}
		})
	}
	c.demand = &demand{what: "ServiceCIDRs", idle: idle}
	c.demand.fetch = func(ctx context.Context, synced func()) {
		runMirrored(ctx, []mirrored{
			{networkinginformers.NewServiceCIDRInformer(client, 0, cache.Indexers{}), merged, sourceOnDemand},
		}, watchErrors, func() {
			c.unserved.Store(false)
			synced()
		})
	}
}

// admit serves a request from the store once what it may see is fetched
// (onDemandWait at most, then 429), or from a snapshot with the section
// while upstream is away. What the store cannot answer as upstream would
// (upstream serves no v1 ServiceCIDRs; the snapshot being served has no
// section) is passed to forward.
func (c *serviceCIDRs) admit(ready *watchcache.Ready, forward http.HandlerFunc, w http.ResponseWriter, req *http.Request, r *watchcache.Served) bool {
	fetched, release := c.demand.use()
	context.AfterFunc(req.Context(), release)
	fromSnapshot := ready.State() == watchcache.Snapshot
	if fromSnapshot && !c.seeded {
		forward(w, req)
		return false
	}
	if !fetched && !fromSnapshot {
		_ = wait.PollUntilContextTimeout(req.Context(), 20*time.Millisecond, onDemandWait, true, func(context.Context) (bool, error) {
			return c.demand.ready.Load() || c.unserved.Load(), nil
		})
	}
	switch {
	case c.unserved.Load():
		forward(w, req)
		return false
	case c.demand.ready.Load() || fromSnapshot:
		return true
	}
	w.Header().Set("Retry-After", "1")
	r.WriteError(w, req, apierrors.NewTooManyRequests("fetching "+c.demand.what+" from upstream", 1))
	return false
}
