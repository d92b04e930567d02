package wrapper

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/topology"

	"github.com/servicegroup/servicegroup/wrapper/internal/latencystages"
	"github.com/servicegroup/servicegroup/wrapper/internal/localendpoint"
)

// startServing re-filters everything once every cache the syncer reads has
// synced and this node's labels are known; only from then on does
// refilterAll re-filter.
func (s *Syncer) startServing(ctx context.Context) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.syncAll(ctx)
	s.started = true
	s.serving.Store(&ctx)
}

// refilterAll re-filters everything once startServing has: an on-demand
// fetch that syncs earlier (upstream back after an outage, before this
// node's labels or the other nodes' are) would otherwise serve what those
// missing labels make of the snapshot's Services, and then the real form:
// every client sees a change that is none. What it fetched is in the caches
// before it calls this, so startServing's own pass serves it.
func (s *Syncer) refilterAll(ctx context.Context) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.started {
		s.syncAll(ctx)
	}
}

// syncAll re-filters everything in the caches.
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

// trustedKeys drops, with --require-node-restricted-topology-keys, the keys
// a compromised node could set on its own Node to join another nodeunit's
// routing: they never match, so the rule falls to the next key or "*". The
// result is non-nil, so the Service stays filtered even with no key left.
func (s *Syncer) trustedKeys(logger klog.Logger, svc *corev1.Service, keys []string) []string {
	if !s.restrictedKeys {
		return keys
	}
	kept, forgeable := topology.NodeRestrictedKeys(keys)
	key := svc.Namespace + "/" + svc.Name
	if forgeable == nil {
		s.forgeableKeys.clear(key)
		return keys
	}
	if s.forgeableKeys.first(key, fmt.Sprint(forgeable)) {
		forgeableTopologyKeys.Inc()
		logger.Info("Ignoring topology keys a node can set on itself", "service", klog.KObj(svc), "keys", forgeable, "requiredPrefix", topology.NodeRestrictionDomain+"/")
	}
	if kept == nil {
		return []string{}
	}
	return kept
}

// sync recomputes the served form of one Service, its Endpoints and its
// EndpointSlices from the caches and updates the stores; the stores emit
// events only for objects whose served form changed.
func (s *Syncer) sync(ctx context.Context, k syncKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncLocked(ctx, k)
}

// syncLocked is sync with mu held.
func (s *Syncer) syncLocked(ctx context.Context, k syncKey) {
	start := time.Now()
	defer func() { refilterSeconds.Observe(time.Since(start).Seconds()) }()
	logger := klog.FromContext(ctx)
	key := k.String()

	if k.orphanSlice {
		o, exists, _ := s.caches.EndpointSlices.GetByKey(key)
		if exists && sliceGroup(o.(*discoveryv1.EndpointSlice)).orphanSlice {
			s.stores.EndpointSlices.Set(key, o.(*discoveryv1.EndpointSlice))
		} else if _, owned := s.sliceOwner[key]; !owned {
			s.stores.EndpointSlices.Delete(key)
		}
		return
	}

	var keys []string
	invalid := false
	if o, exists, _ := s.caches.Services.GetByKey(key); exists {
		svc := o.(*corev1.Service)
		latencystages.Stamp(svc, "sync")
		s.stores.Services.Set(key, svc)
		latencystages.Stamp(svc, "stored")
		if v, ok := svc.Annotations[superedgev1.AnnotationTopologyKeys]; ok {
			parsed, err := topology.ParseKeys(v)
			if err != nil {
				invalid = true
				if s.badAnnotation.first(key, v) {
					logger.Error(err, "Serving Service unfiltered", "service", klog.KObj(svc))
				}
			} else {
				keys = s.trustedKeys(logger, svc, parsed)
			}
		}
	} else {
		s.stores.Services.Delete(key)
	}
	if !invalid {
		s.badAnnotation.clear(key)
	}
	if keys == nil {
		s.forgeableKeys.clear(key)
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
	s.topologyNodes.Record(key, keys != nil, upstream, epObj)

	var local *localendpoint.Endpoint
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
		served = topology.FilterEndpointSlices(keys, topo, upstream)
	default:
		served = upstream
	}
	// A Service has few slices: a sorted list costs far less than a set.
	now := make([]string, 0, len(served))
	for _, sl := range served {
		sk := sl.Namespace + "/" + sl.Name
		now = append(now, sk)
		if s.sliceOwner[sk] != key { // an assignment would hold the new strings
			s.sliceOwner[sk] = key
		}
		s.stores.EndpointSlices.Set(sk, sl)
	}
	slices.Sort(now)
	held := s.servedSlices[key]
	for _, sk := range held {
		if _, kept := slices.BinarySearch(now, sk); !kept && s.sliceOwner[sk] == key {
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
	switch {
	case len(now) > 0 && !slices.Equal(held, now):
		s.servedSlices[key] = now
	case len(now) > 0:
		// Unchanged: keep the list held (now is dropped at once).
	default:
		delete(s.servedSlices, key)
	}

	switch {
	case epObj == nil:
		s.stores.Endpoints.Delete(key)
	case local != nil:
		s.stores.Endpoints.Set(key, local.RewriteEndpoints(epObj))
	case keys != nil:
		s.stores.Endpoints.Set(key, topology.FilterEndpoints(keys, topo, epObj))
	default:
		s.stores.Endpoints.Set(key, epObj)
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
func (s *Syncer) localEndpoint(logger klog.Logger, ep *corev1.Endpoints, sls []*discoveryv1.EndpointSlice) *localendpoint.Endpoint {
	sources := make([]map[string]string, 0, 1+len(sls))
	if ep != nil {
		sources = append(sources, ep.Annotations)
	}
	for _, sl := range sls {
		sources = append(sources, sl.Annotations)
	}
	for _, a := range sources {
		le, found, err := localendpoint.Parse(a)
		if !found {
			continue
		}
		if err == nil {
			if why := le.Allowed(s.localRanges, s.localPorts, s.isLocalAddr); why != "" {
				err = fmt.Errorf("%s=%s, %s=%d: %s", superedgev1.AnnotationLocalEndpoint, le.IP, superedgev1.AnnotationLocalPort, le.Port, why)
			}
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
