package wrapper

import (
	"context"
	"errors"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// endpointsOnDemand fetches v1 Endpoints from upstream only while a client
// asks for them: kube-proxy since v1.22 reads EndpointSlices only, and every
// endpoint change would otherwise cross the link twice.
type endpointsOnDemand struct {
	demand
	cache *mergedCache // the syncer's Endpoints cache
}

// newEndpointsOnDemand: refilter re-filters every Service once the informer
// has synced; watchErrors classifies its list/watch errors.
func newEndpointsOnDemand(client kubernetes.Interface, handler cache.ResourceEventHandler,
	refilter func(context.Context), watchErrors func(cache.SharedIndexInformer) error) *endpointsOnDemand {
	e := &endpointsOnDemand{cache: newMergedCache(cache.Indexers{}, handler)} // Endpoints are read by key alone
	e.what, e.idle = "Endpoints", DefaultOnDemandIdleTimeout
	e.fetch = func(ctx context.Context, synced func()) {
		inf := coreinformers.NewEndpointsInformer(client, "", 0, cache.Indexers{})
		runMirrored(ctx, []mirrored{{inf, e.cache, sourceOnDemand}}, watchErrors, func() {
			refilter(ctx)
			synced()
		})
	}
	return e
}

// mirrored is an informer feeding a mergedCache as source src.
type mirrored struct {
	inf   cache.SharedIndexInformer
	cache *mergedCache
	src   int
}

// runMirrored runs the informers, calls synced once all have synced, and
// when ctx ends waits for them to stop and withdraws their sources.
func runMirrored(ctx context.Context, ms []mirrored, watchErrors func(cache.SharedIndexInformer) error, synced func()) {
	logger := klog.FromContext(ctx)
	var regs []cache.InformerSynced
	for _, m := range ms {
		inf := m.inf
		if err := inf.SetTransform(dropManagedFields); err != nil {
			logger.Error(err, "On-demand informer")
		}
		if watchErrors != nil {
			if err := watchErrors(inf); err != nil {
				logger.Error(err, "On-demand informer")
			}
		}
		reg, err := inf.AddEventHandler(m.cache.sourceHandler(m.src))
		if err != nil {
			logger.Error(err, "On-demand informer")
			return
		}
		regs = append(regs, reg.HasSynced)
	}
	stopped := make(chan struct{}, len(ms))
	for _, m := range ms {
		go func() {
			m.inf.RunWithContext(ctx)
			stopped <- struct{}{}
		}()
	}
	if cache.WaitForCacheSync(ctx.Done(), regs...) {
		synced()
	}
	<-ctx.Done()
	for range ms {
		<-stopped
	}
	if !errors.Is(context.Cause(ctx), errDemandIdle) {
		return // the wrapper stops: what is served stays for its final snapshot
	}
	for _, m := range ms {
		m.cache.withdraw(m.src)
	}
}
