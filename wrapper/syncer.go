package wrapper

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/servicegroup/servicegroup/topology"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

const (
	indexByService = "service"
	kubernetesKey  = "default/kubernetes"
)

// syncKey names a unit of re-filtering: a Service with its Endpoints and all
// its EndpointSlices, or (orphan) one EndpointSlice without a service label.
type syncKey struct {
	namespace, name string
	orphanSlice     bool
}

func (k syncKey) String() string { return k.namespace + "/" + k.name }

// Caches are the upstream informer caches the syncer reads. Nodes holds
// every node's labels as *metav1.PartialObjectMetadata (from the
// controller's summaries, only the keys topology uses; or from every Node's
// metadata); Self, when set, this node in full, whose labels are used for
// this node.
type Caches struct {
	Services, Endpoints, EndpointSlices, Nodes, Self cache.Indexer
}

// Stores are the served stores the syncer writes.
type Stores struct {
	Services, Endpoints, EndpointSlices, Nodes *watchcache.Store
}

// Syncer keeps the served stores equal to filter(upstream caches) for one
// node, re-filtering only the Services a change affects.
type Syncer struct {
	self   string
	caches Caches
	stores Stores
	queue  workqueue.TypedRateLimitingInterface[syncKey]

	// startMu orders on-demand refilterAll calls after startServing, which
	// sets started.
	startMu sync.Mutex
	started bool
	// serving is startServing's context once it has re-filtered everything:
	// from then on a handler may re-filter on its own goroutine (refilter).
	serving atomic.Pointer[context.Context]

	mu               sync.Mutex // serializes re-filtering and guards the maps below
	topologyServices sets.Set[string]
	topologyNodes    topology.EndpointNodes // topology Service key -> nodes of its endpoints
	servedSlices     map[string][]string    // service key -> sorted slice keys served for it
	sliceOwner       map[string]string      // slice key -> service key
	badAnnotation    logOnce                // service key -> invalid topologyKeys logged
	badLocalEndpoint logOnce                // default/kubernetes -> invalid local endpoint logged
	forgeableKeys    logOnce                // service key -> forgeable topology keys logged
	// restrictedKeys: topology keys a node can set on itself never match.
	restrictedKeys bool
	// localRanges bound where default/kubernetes may be redirected.
	localRanges []netip.Prefix
}

func newSyncer(self string, caches Caches, stores Stores) *Syncer {
	return &Syncer{
		self:   self,
		caches: caches,
		stores: stores,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[syncKey](),
			workqueue.TypedRateLimitingQueueConfig[syncKey]{Name: "application-grid-wrapper"}),
		topologyServices: sets.New[string](),
		topologyNodes:    topology.EndpointNodes{},
		servedSlices:     map[string][]string{},
		sliceOwner:       map[string]string{},
		badAnnotation:    logOnce{},
		badLocalEndpoint: logOnce{},
		forgeableKeys:    logOnce{},
		localRanges:      DefaultLocalEndpointRanges,
	}
}

// nodes is the current view of node labels. This node's labels are read
// once: the view compares every endpoint's node with the same labels of
// this node, even while a relabel of it lands in the middle of a sync.
func (s *Syncer) nodes() topology.Nodes {
	labelsIn := func(from cache.Indexer, name string) (map[string]string, bool) {
		o, ok, err := from.GetByKey(name)
		if err != nil || !ok {
			return nil, false
		}
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, false
		}
		return m.GetLabels(), true
	}
	selfFrom := s.caches.Nodes
	if s.caches.Self != nil {
		selfFrom = s.caches.Self
	}
	self, known := labelsIn(selfFrom, s.self)
	labels := func(name string) (map[string]string, bool) {
		if name == s.self {
			return self, known
		}
		return labelsIn(s.caches.Nodes, name)
	}
	if !known {
		self = nil
	}
	return topology.Nodes{Self: self, Labels: labels}
}

// Run processes the queue until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for s.processNext(ctx) {
	}
}

// refilter re-filters keys for an informer's handler. When the syncer is
// idle (no key queued, no re-filtering running) it does so at once on the
// handler's goroutine: a change then reaches the stores without one more
// hand-off to the queue's worker, whose wait for a CPU would count in the
// change's latency. Otherwise the keys are queued, and the queue merges
// repeated changes of a key while the worker is busy. Either way sync reads
// the caches under mu, so each key is served in the order its changes were
// cached, and a queued key synced here too is merely compared again.
func (s *Syncer) refilter(keys ...syncKey) {
	if ctx := s.serving.Load(); ctx != nil && s.queue.Len() == 0 && s.mu.TryLock() {
		defer s.mu.Unlock()
		for _, k := range keys {
			s.syncLocked(*ctx, k)
		}
		return
	}
	for _, k := range keys {
		s.queue.Add(k)
	}
}

func (s *Syncer) processNext(ctx context.Context) bool {
	k, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(k)
	s.sync(ctx, k)
	s.queue.Forget(k)
	return true
}
