package wrapper

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/wrapper/sitestream"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// watchUpstream sets up what the stores are fed from: the informers on
// upstream, the Syncer that filters what they deliver into the stores, and
// the on-demand fetches. They start in Run (s.start).
func (s *Server) watchUpstream(client kubernetes.Interface) error {
	opts := s.opts
	// Services and EndpointSlices as kube-proxy selects them (from the
	// site's leader when there is one); the rest only while a client asks
	// (unproxied_demand.go).
	metaClient, err := metadata.NewForConfig(opts.Upstream)
	if err != nil {
		return err
	}
	unitClient := client
	if opts.SiteStream != nil {
		s.site, err = sitestream.New(*opts.SiteStream, opts.NodeName, client, metaClient,
			watchcache.LogLimits{Bytes: opts.EventLogBytes, MaxLagBytes: opts.WatchMaxLagBytes}, opts.WatchWriteTimeout)
		if err != nil {
			return err
		}
		routed := rest.CopyConfig(protobufConfig(opts.Upstream))
		routed.Wrap(s.site.Transport)
		if unitClient, err = kubernetes.NewForConfig(routed); err != nil {
			return err
		}
	}
	// The informers of one resource straight to upstream relist together
	// (shared_relist.go).
	svcRelist := newSharedRelist(selectedListWatch(client.CoreV1().RESTClient(), watchcache.Services.Name, ""))
	sliceRelist := newSharedRelist(selectedListWatch(client.DiscoveryV1().RESTClient(), watchcache.EndpointSlices.Name, ""))
	listWatch := func(c rest.Interface, r *watchcache.Resource, relist *sharedRelist) (cache.ListerWatcher, error) {
		lw := selectedListWatch(c, r.Name, watchcache.KubeProxySelector)
		if s.site != nil {
			return s.site.Tap(r, lw), nil
		}
		return relist.join(lw, watchcache.KubeProxySelector)
	}
	svcLW, err := listWatch(unitClient.CoreV1().RESTClient(), watchcache.Services, svcRelist)
	if err != nil {
		return err
	}
	sliceLW, err := listWatch(unitClient.DiscoveryV1().RESTClient(), watchcache.EndpointSlices, sliceRelist)
	if err != nil {
		return err
	}
	gridClient, err := versioned.NewForConfig(opts.Upstream)
	if err != nil {
		return err
	}
	// Every node's labels decide topology, but only this node is served:
	// the others' labels come from the controller's summaries (or their
	// metadata, nodelabels.go), this one in full.
	selfFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(dropManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", opts.NodeName).String()
		}))
	selfInf := selfFactory.Core().V1().Nodes().Informer()
	s.syncer = newSyncer(opts.NodeName, Caches{Self: selfInf.GetIndexer()}, s.stores)
	s.syncer.restrictedKeys = opts.RequireNodeRestrictedTopologyKeys
	services := newMergedCache(cache.Indexers{}, s.syncer.serviceHandler())
	slices := newMergedCache(sliceIndexers, s.dns.sliceTee(s.syncer.sliceHandler()))
	s.syncer.caches.Services, s.syncer.caches.EndpointSlices = services, slices
	s.nodeLabels = newNodeLabels(metaClient, gridClient, s.syncer.nodeHandler())
	s.nodeLabels.WatchErrors = s.watchUpstreamErrors
	s.nodeLabels.Recheck = opts.NodeLabelRecheckInterval
	s.nodeLabels.FullRelists = opts.summariesInFull
	s.syncer.caches.Nodes = s.nodeLabels.store
	s.endpoints = newEndpointsOnDemand(client, s.syncer.serviceHandler(), s.syncer.refilterAll, s.watchUpstreamErrors)
	s.unproxied = newUnproxiedOnDemand(client, services, slices, svcRelist, sliceRelist, s.syncer.refilterAll, s.watchUpstreamErrors)
	if opts.OnDemandIdleTimeout > 0 {
		s.endpoints.idle, s.unproxied.idle = opts.OnDemandIdleTimeout, opts.OnDemandIdleTimeout
	}
	s.syncer.caches.Endpoints = s.endpoints.cache
	if opts.LocalEndpointRanges != nil {
		s.syncer.localRanges = opts.LocalEndpointRanges
	}
	if opts.LocalEndpointPorts != nil {
		s.syncer.localPorts = opts.LocalEndpointPorts
	}
	if opts.localAddr != nil {
		s.syncer.isLocalAddr = opts.localAddr
	}
	// Synced once the handlers have seen the initial list: only then may
	// seeded objects that were not confirmed be dropped.
	svcInf := newUpstreamInformer(svcLW, &corev1.Service{}, services.sourceHandler(sourceMain), s.noteUpstreamError)
	sliceInf := newUpstreamInformer(sliceLW, &discoveryv1.EndpointSlice{}, slices.sourceHandler(sourceMain), s.noteUpstreamError)
	reg, err := selfInf.AddEventHandler(s.syncer.selfNodeHandler())
	if err != nil {
		return err
	}
	s.synced = append(s.synced, svcInf.HasSynced, sliceInf.HasSynced, reg.HasSynced, s.nodeLabels.HasSynced)
	if err := s.watchUpstreamErrors(selfInf); err != nil {
		return err
	}
	if _, err := selfInf.AddEventHandler(s.selfNodeIdentityHandler(klog.Background())); err != nil {
		return err
	}
	s.start = func(ctx context.Context) {
		go svcInf.RunWithContext(ctx)
		go sliceInf.RunWithContext(ctx)
		go s.nodeLabels.Run(ctx)
		go s.endpoints.run(ctx)
		go s.unproxied.run(ctx)
		selfFactory.Start(ctx.Done())
		if s.site != nil {
			go s.site.Run(ctx)
		}
	}
	return nil
}

// selectedListWatch lists and watches resource in every namespace, with
// selector ("": all).
func selectedListWatch(c rest.Interface, resource, selector string) *cache.ListWatch {
	return cache.NewFilteredListWatchFromClient(c, resource, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
}
