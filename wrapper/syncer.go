package wrapper

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/topology"
)

const (
	indexByService = "service"
	indexByNode    = "node"
	kubernetesKey  = "default/kubernetes"
)

// syncKey names a unit of re-filtering: a Service with its Endpoints and all
// its EndpointSlices, or (orphan) one EndpointSlice without a service label.
type syncKey struct {
	namespace, name string
	orphanSlice     bool
}

func (k syncKey) String() string { return k.namespace + "/" + k.name }

// Caches are the upstream informer caches the syncer reads.
type Caches struct {
	Services, Endpoints, EndpointSlices, Nodes cache.Indexer
}

// Stores are the served stores the syncer writes.
type Stores struct {
	Services, Endpoints, EndpointSlices, Nodes *Store
}

// Syncer keeps the served stores equal to filter(upstream caches) for one
// node, re-filtering only the Services a change affects.
type Syncer struct {
	self   string
	caches Caches
	stores Stores
	queue  workqueue.TypedRateLimitingInterface[syncKey]

	mu               sync.Mutex // serializes re-filtering and guards the maps below
	topologyServices sets.Set[string]
	servedSlices     map[string]sets.Set[string] // service key -> slice keys served for it
	sliceOwner       map[string]string           // slice key -> service key
	badAnnotation    logOnce                     // service key -> invalid topologyKeys logged
	badLocalEndpoint logOnce                     // default/kubernetes -> invalid local endpoint logged
}

func newSyncer(self string, caches Caches, stores Stores) *Syncer {
	return &Syncer{
		self:   self,
		caches: caches,
		stores: stores,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[syncKey](),
			workqueue.TypedRateLimitingQueueConfig[syncKey]{Name: "application-grid-wrapper"}),
		topologyServices: sets.New[string](),
		servedSlices:     map[string]sets.Set[string]{},
		sliceOwner:       map[string]string{},
		badAnnotation:    logOnce{},
		badLocalEndpoint: logOnce{},
	}
}

// Indexers the syncer needs on the upstream caches.
var (
	sliceIndexers = cache.Indexers{
		indexByService: func(obj any) ([]string, error) {
			s := obj.(*discoveryv1.EndpointSlice)
			if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
				return []string{s.Namespace + "/" + name}, nil
			}
			return nil, nil
		},
		indexByNode: func(obj any) ([]string, error) {
			s := obj.(*discoveryv1.EndpointSlice)
			nodes := sets.New[string]()
			for _, ep := range s.Endpoints {
				if ep.NodeName != nil {
					nodes.Insert(*ep.NodeName)
				}
			}
			return sets.List(nodes), nil
		},
	}
	endpointsIndexers = cache.Indexers{
		indexByNode: func(obj any) ([]string, error) {
			e := obj.(*corev1.Endpoints)
			nodes := sets.New[string]()
			for _, ss := range e.Subsets {
				for _, list := range [][]corev1.EndpointAddress{ss.Addresses, ss.NotReadyAddresses} {
					for _, a := range list {
						if a.NodeName != nil {
							nodes.Insert(*a.NodeName)
						}
					}
				}
			}
			return sets.List(nodes), nil
		},
	}
)

// dropManagedFields keeps cached objects small.
func dropManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// slimNode keeps only what topology needs from every node of the cluster.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		ObjectMeta: metaForSlim(n),
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

func metaForSlim(n *corev1.Node) (m metav1.ObjectMeta) {
	m.Name, m.UID, m.ResourceVersion, m.Labels = n.Name, n.UID, n.ResourceVersion, n.Labels
	return m
}

func sliceGroup(s *discoveryv1.EndpointSlice) syncKey {
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		return syncKey{namespace: s.Namespace, name: name}
	}
	return syncKey{namespace: s.Namespace, name: s.Name, orphanSlice: true}
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// handlers returns the event handlers for the upstream informers.
func (s *Syncer) serviceHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if o, err := meta.Accessor(unwrap(obj)); err == nil {
			s.queue.Add(syncKey{namespace: o.GetNamespace(), name: o.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (s *Syncer) sliceHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if sl, ok := unwrap(obj).(*discoveryv1.EndpointSlice); ok {
			s.queue.Add(sliceGroup(sl))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			enqueue(old)
			enqueue(obj)
		},
		DeleteFunc: enqueue,
	}
}

func (s *Syncer) nodeHandler() cache.ResourceEventHandler {
	labelsOf := func(obj any) (string, map[string]string) {
		if n, ok := unwrap(obj).(*corev1.Node); ok {
			return n.Name, n.Labels
		}
		return "", nil
	}
	changed := func(name string, old, cur map[string]string, existedBefore, existsNow bool) {
		for _, k := range s.affectedByNode(name, old, cur, existedBefore != existsNow) {
			s.queue.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			name, l := labelsOf(obj)
			changed(name, nil, l, false, true)
		},
		UpdateFunc: func(old, obj any) {
			name, ol := labelsOf(old)
			_, nl := labelsOf(obj)
			changed(name, ol, nl, true, true)
		},
		DeleteFunc: func(obj any) {
			name, l := labelsOf(obj)
			changed(name, l, nil, true, false)
		},
	}
}

// affectedByNode returns the topology Services whose served endpoints may
// change when node name changes labels (or appears, or disappears): all of
// them for this node, else those with an endpoint on that node.
func (s *Syncer) affectedByNode(name string, old, cur map[string]string, appeared bool) []syncKey {
	if !appeared && maps.Equal(old, cur) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := sets.New[string]()
	if name == s.self {
		keys = s.topologyServices.Clone()
	} else {
		if objs, err := s.caches.EndpointSlices.ByIndex(indexByNode, name); err == nil {
			for _, o := range objs {
				if k := sliceGroup(o.(*discoveryv1.EndpointSlice)); !k.orphanSlice && s.topologyServices.Has(k.String()) {
					keys.Insert(k.String())
				}
			}
		}
		if keysOnNode, err := s.caches.Endpoints.IndexKeys(indexByNode, name); err == nil {
			for _, k := range keysOnNode {
				if s.topologyServices.Has(k) {
					keys.Insert(k)
				}
			}
		}
	}
	out := make([]syncKey, 0, len(keys))
	for k := range keys {
		ns, n, _ := cache.SplitMetaNamespaceKey(k)
		out = append(out, syncKey{namespace: ns, name: n})
	}
	return out
}

// nodes is the current view of node labels.
func (s *Syncer) nodes() topology.Nodes {
	labels := func(name string) (map[string]string, bool) {
		o, ok, err := s.caches.Nodes.GetByKey(name)
		if err != nil || !ok {
			return nil, false
		}
		return o.(*corev1.Node).Labels, true
	}
	self, ok := labels(s.self)
	if !ok {
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

// syncAll re-filters everything in the caches (start-up).
func (s *Syncer) syncAll(ctx context.Context) {
	keys := sets.New[syncKey]()
	for _, o := range s.caches.Services.List() {
		keys.Insert(syncKey{namespace: o.(*corev1.Service).Namespace, name: o.(*corev1.Service).Name})
	}
	for _, o := range s.caches.Endpoints.List() {
		keys.Insert(syncKey{namespace: o.(*corev1.Endpoints).Namespace, name: o.(*corev1.Endpoints).Name})
	}
	for _, o := range s.caches.EndpointSlices.List() {
		keys.Insert(sliceGroup(o.(*discoveryv1.EndpointSlice)))
	}
	for k := range keys {
		s.sync(ctx, k)
	}
}

// sync recomputes the served form of one Service, its Endpoints and its
// EndpointSlices from the caches and updates the stores; the stores emit
// events only for objects whose served form changed.
func (s *Syncer) sync(ctx context.Context, k syncKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	defer func() { refilterSeconds.Observe(time.Since(start).Seconds()) }()
	logger := klog.FromContext(ctx)
	key := k.String()

	if k.orphanSlice {
		o, exists, _ := s.caches.EndpointSlices.GetByKey(key)
		if exists && sliceGroup(o.(*discoveryv1.EndpointSlice)).orphanSlice {
			s.stores.EndpointSlices.Set(key, o.(*discoveryv1.EndpointSlice).DeepCopy())
		} else if _, owned := s.sliceOwner[key]; !owned {
			s.stores.EndpointSlices.Delete(key)
		}
		return
	}

	var keys []string
	invalid := false
	if o, exists, _ := s.caches.Services.GetByKey(key); exists {
		svc := o.(*corev1.Service)
		s.stores.Services.Set(key, svc.DeepCopy())
		if v, ok := svc.Annotations[superedgev1.AnnotationTopologyKeys]; ok {
			parsed, err := topology.ParseKeys(v)
			if err != nil {
				invalid = true
				if s.badAnnotation.first(key, v) {
					logger.Error(err, "Serving Service unfiltered", "service", klog.KObj(svc))
				}
			} else {
				keys = parsed
			}
		}
	} else {
		s.stores.Services.Delete(key)
	}
	if !invalid {
		s.badAnnotation.clear(key)
	}
	if keys != nil {
		s.topologyServices.Insert(key)
	} else {
		s.topologyServices.Delete(key)
	}

	var epObj *corev1.Endpoints
	if o, exists, _ := s.caches.Endpoints.GetByKey(key); exists {
		epObj = o.(*corev1.Endpoints)
	}
	objs, _ := s.caches.EndpointSlices.ByIndex(indexByService, key)
	upstream := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		upstream = append(upstream, o.(*discoveryv1.EndpointSlice))
	}
	slices.SortFunc(upstream, func(a, b *discoveryv1.EndpointSlice) int { return compareStrings(a.Name, b.Name) })

	var local *LocalEndpoint
	if key == kubernetesKey {
		local = s.localEndpoint(logger, epObj, upstream)
	}

	topo := s.nodes()
	var served []*discoveryv1.EndpointSlice
	switch {
	case local != nil:
		for _, sl := range upstream {
			served = append(served, local.RewriteSlice(sl))
		}
	case keys != nil:
		served = FilterEndpointSlices(keys, topo, upstream)
	default:
		for _, sl := range upstream {
			served = append(served, sl.DeepCopy())
		}
	}
	now := sets.New[string]()
	for _, sl := range served {
		sk := sl.Namespace + "/" + sl.Name
		now.Insert(sk)
		s.sliceOwner[sk] = key
		s.stores.EndpointSlices.Set(sk, sl)
	}
	for sk := range s.servedSlices[key] {
		if !now.Has(sk) && s.sliceOwner[sk] == key {
			delete(s.sliceOwner, sk)
			if o, exists, _ := s.caches.EndpointSlices.GetByKey(sk); !exists || sliceGroup(o.(*discoveryv1.EndpointSlice)) != k {
				// It moved to another group or an orphan: that sync serves it.
				if !exists {
					s.stores.EndpointSlices.Delete(sk)
				} else {
					s.queue.Add(sliceGroup(o.(*discoveryv1.EndpointSlice)))
				}
			}
		}
	}
	if now.Len() > 0 {
		s.servedSlices[key] = now
	} else {
		delete(s.servedSlices, key)
	}

	switch {
	case epObj == nil:
		s.stores.Endpoints.Delete(key)
	case local != nil:
		s.stores.Endpoints.Set(key, local.RewriteEndpoints(epObj))
	case keys != nil:
		s.stores.Endpoints.Set(key, FilterEndpoints(keys, topo, epObj))
	default:
		s.stores.Endpoints.Set(key, epObj.DeepCopy())
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// localEndpoint reads the local-endpoint annotations of default/kubernetes
// from its Endpoints or any of its slices; a bad value is logged once.
func (s *Syncer) localEndpoint(logger klog.Logger, ep *corev1.Endpoints, sls []*discoveryv1.EndpointSlice) *LocalEndpoint {
	sources := make([]map[string]string, 0, 1+len(sls))
	if ep != nil {
		sources = append(sources, ep.Annotations)
	}
	for _, sl := range sls {
		sources = append(sources, sl.Annotations)
	}
	for _, a := range sources {
		le, found, err := ParseLocalEndpoint(a)
		if !found {
			continue
		}
		if err != nil {
			if s.badLocalEndpoint.first(kubernetesKey, err.Error()) {
				logger.Error(err, "Serving default/kubernetes unchanged")
			}
			return nil
		}
		s.badLocalEndpoint.clear(kubernetesKey)
		return &le
	}
	s.badLocalEndpoint.clear(kubernetesKey)
	return nil
}

// selfNodeHandler serves this node from its own (full) informer.
func (s *Syncer) selfNodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Set(n.Name, n.DeepCopy())
			}
		},
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Set(n.Name, n.DeepCopy())
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := unwrap(obj).(*corev1.Node); ok && n.Name == s.self {
				s.stores.Nodes.Delete(n.Name)
			}
		},
	}
}
