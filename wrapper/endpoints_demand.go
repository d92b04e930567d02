package wrapper

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// DefaultEndpointsIdleTimeout is how long v1 Endpoints keep being fetched
// after the last Endpoints client went away.
const DefaultEndpointsIdleTimeout = 5 * time.Minute

// endpointsOnDemand fetches v1 Endpoints from upstream only while a client
// asks for them: kube-proxy since v1.22 reads EndpointSlices only, and every
// endpoint change would otherwise cross the link twice. The first Endpoints
// request starts the upstream informer (and is answered 429 until it has
// synced and every Service has been re-filtered); once no Endpoints request
// or watch has been open for idle, the informer stops and store is emptied,
// which the syncer turns into no served Endpoints.
type endpointsOnDemand struct {
	store   cache.Indexer // the syncer's Endpoints cache, with endpointsIndexers
	handler cache.ResourceEventHandler
	client  kubernetes.Interface
	idle    time.Duration
	// refilter re-filters every Service once the informer has synced.
	refilter func(context.Context)
	// watchErrors classifies the informer's list/watch errors (snapshot trust).
	watchErrors func(cache.SharedIndexInformer) error

	mu      sync.Mutex
	ctx     context.Context // Run's, set by run
	running context.CancelFunc
	done    chan struct{} // closed when the running informer has stopped and store is empty
	users   int
	lastUse time.Time
	ready   atomic.Bool
}

func newEndpointsOnDemand(client kubernetes.Interface, handler cache.ResourceEventHandler) *endpointsOnDemand {
	return &endpointsOnDemand{
		store:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, endpointsIndexers),
		handler: handler,
		client:  client,
		idle:    DefaultEndpointsIdleTimeout,
	}
}

// Fetching reports whether an upstream Endpoints informer runs or is
// still stopping.
func (e *endpointsOnDemand) Fetching() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running != nil {
		return true
	}
	if e.done == nil {
		return false
	}
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// use records an Endpoints request until release is called, starting the
// informer if needed. ready is false until the served Endpoints reflect
// upstream's.
func (e *endpointsOnDemand) use() (ready bool, release func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.users++
	e.lastUse = time.Now()
	if e.running == nil && e.ctx != nil {
		e.start()
	}
	return e.ready.Load(), func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.users--
		e.lastUse = time.Now()
	}
}

// run stops the informer when Endpoints have been idle, until ctx ends.
func (e *endpointsOnDemand) run(ctx context.Context) {
	e.mu.Lock()
	e.ctx = ctx
	if e.users > 0 && e.running == nil {
		e.start()
	}
	e.mu.Unlock()
	t := time.NewTicker(max(e.idle/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.mu.Lock()
			if e.running != nil && e.users == 0 && time.Since(e.lastUse) >= e.idle {
				klog.FromContext(ctx).Info("No Endpoints client for a while: no longer fetching Endpoints from upstream", "idle", e.idle)
				e.running()
				e.running = nil
				e.ready.Store(false)
			}
			e.mu.Unlock()
		}
	}
}

// waitIfFetching waits until a running informer has synced (a snapshot's
// Endpoints are then confirmed by upstream's, not dropped first).
func (e *endpointsOnDemand) waitIfFetching(ctx context.Context) {
	for {
		e.mu.Lock()
		running := e.running != nil
		e.mu.Unlock()
		if !running || e.ready.Load() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// start runs a new informer; e.mu is held. The previous one, if any, has
// been cancelled: the new one waits until it has emptied store.
func (e *endpointsOnDemand) start() {
	ctx, cancel := context.WithCancel(e.ctx)
	e.running = cancel
	prev := e.done
	done := make(chan struct{})
	e.done = done
	logger := klog.FromContext(ctx)
	logger.Info("An Endpoints client asked: fetching Endpoints from upstream")
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		inf := coreinformers.NewEndpointsInformer(e.client, "", 0, cache.Indexers{})
		if err := inf.SetTransform(dropManagedFields); err != nil {
			logger.Error(err, "Endpoints informer")
		}
		if e.watchErrors != nil {
			if err := e.watchErrors(inf); err != nil {
				logger.Error(err, "Endpoints informer")
			}
		}
		var mu sync.Mutex // the handler and the clean-up below
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				mu.Lock()
				defer mu.Unlock()
				e.set(obj)
			},
			UpdateFunc: func(_, obj any) {
				mu.Lock()
				defer mu.Unlock()
				e.set(obj)
			},
			DeleteFunc: func(obj any) {
				mu.Lock()
				defer mu.Unlock()
				e.remove(unwrap(obj))
			},
		})
		if err != nil {
			logger.Error(err, "Endpoints informer")
			return
		}
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			inf.RunWithContext(ctx)
		}()
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			e.refilter(ctx)
			e.ready.Store(true)
		}
		<-ctx.Done()
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		for _, o := range e.store.List() {
			e.remove(o)
		}
	}()
}

func (e *endpointsOnDemand) set(obj any) {
	ep, ok := obj.(*corev1.Endpoints)
	if !ok {
		return
	}
	old, exists, _ := e.store.Get(ep)
	_ = e.store.Add(ep)
	if exists {
		e.handler.OnUpdate(old, ep)
	} else {
		e.handler.OnAdd(ep, false)
	}
}

func (e *endpointsOnDemand) remove(obj any) {
	if _, ok := obj.(*corev1.Endpoints); !ok {
		return
	}
	if _, exists, _ := e.store.Get(obj); !exists {
		return
	}
	_ = e.store.Delete(obj)
	e.handler.OnDelete(obj)
}

// FetchingEndpoints tells whether v1 Endpoints are being fetched from
// upstream (only while a client asks for them).
func (s *Server) FetchingEndpoints() bool { return s.endpoints.Fetching() }
