package wrapper

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"

	discoveryv1 "k8s.io/api/discovery/v1"
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

// sliceGroup is the unit a slice is re-filtered with: its Service, or the
// slice alone when it has no service label.
func sliceGroup(s *discoveryv1.EndpointSlice) syncKey {
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		return syncKey{namespace: s.Namespace, name: name}
	}
	return syncKey{namespace: s.Namespace, name: s.Name, orphanSlice: true}
}

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
	// localRanges and localPorts bound where default/kubernetes may be
	// redirected; isLocalAddr tells this node's own addresses.
	localRanges []netip.Prefix
	localPorts  []int32
	isLocalAddr func(netip.Addr) bool
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
		localPorts:       DefaultLocalEndpointPorts,
		isLocalAddr:      onThisNode,
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
