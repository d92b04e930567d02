package wrapper

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream"
	"github.com/servicegroup/servicegroup/wrapper/snapshot"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// Server is the application-grid-wrapper: informer caches, filter, served
// stores and the HTTP handler.
type Server struct {
	opts   Options
	client kubernetes.Interface
	stores Stores
	syncer *Syncer
	proxy  http.Handler
	// kubeProxy is what kube-proxy reads (kubeproxyview.go); dns the DNS
	// view (dnsview.go). Both serve from stores on one clock, and are
	// ready together.
	kubeProxy *kubeProxyView
	ready     *watchcache.Ready
	synced    []cache.InformerSynced
	// nodeLabels is where other nodes' labels come from (nodelabels.go).
	nodeLabels *nodeLabels
	// endpoints fetches v1 Endpoints while clients ask (endpoints_demand.go).
	endpoints *endpointsOnDemand
	// unproxied fetches what kube-proxy's selector leaves out while
	// clients ask (unproxied_demand.go).
	unproxied *demand
	// site shares the unit-wide streams with the site's other wrappers
	// (package sitestream); nil when off.
	site *sitestream.Stream
	// dns is the DNS view for the node's CoreDNS (dnsview.go).
	dns *dnsView
	// cidrs are kube-proxy's ServiceCIDRs (servicecidrs.go).
	cidrs *serviceCIDRs
	start func(ctx context.Context)
	// served are kube-proxy's view's resources, in kubeProxyResources
	// order.
	served []*watchcache.Served

	// Snapshot hooks (snapshot_serve.go).
	persist    *persister                        // nil without a StateDir
	seededFrom atomic.Pointer[snapshot.Snapshot] // the snapshot served until upstream confirms it
	// upstreamRefusal is the last 401/403/certificate error from upstream.
	upstreamRefusal atomic.Value
}

// New builds a Server; Run starts it.
func New(opts Options) (*Server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if resumeUnansweredWatches {
		opts.Upstream = resumeWatchesAcrossOutages(opts.Upstream)
	}
	client, err := kubernetes.NewForConfig(protobufConfig(opts.Upstream))
	if err != nil {
		return nil, err
	}
	proxy, err := newProxy(opts.Upstream)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:   opts,
		client: client,
		proxy:  proxy,
		ready:  watchcache.NewReady(setReadyGauge),
	}
	if err := s.openStores(); err != nil {
		return nil, err
	}
	if err := s.watchUpstream(client); err != nil {
		return nil, err
	}
	idle := DefaultOnDemandIdleTimeout
	if opts.OnDemandIdleTimeout > 0 {
		idle = opts.OnDemandIdleTimeout
	}
	s.cidrs.fetchFrom(client, idle, s.noteUpstreamError)
	s.kubeProxy = &kubeProxyView{ready: s.ready, endpoints: &s.endpoints.demand, unproxied: s.unproxied, cidrs: s.cidrs, proxy: proxy}
	s.kubeProxy.serve(append(slices.Clone(s.served), s.cidrs.served), opts.NodeName, opts.WatchWriteTimeout)
	s.dns.fetchNamespaces(client, idle, s.watchUpstreamErrors)
	s.dns.serve(s.served[slices.Index(kubeProxyResources, watchcache.Services)], s.kubeProxy, opts.WatchWriteTimeout)
	start := s.start
	s.start = func(ctx context.Context) {
		start(ctx)
		s.dns.run(ctx, opts.BookmarkInterval)
		go s.cidrs.demand.run(ctx)
	}
	return s, nil
}

// Run starts the informers, waits for them to sync, serves, and returns when
// ctx ends.
func (s *Server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	s.checkUpstreamAtStart(ctx, logger)
	s.serveSnapshot(logger)
	defer s.ready.Stop()
	defer s.stopServingSnapshot()
	s.start(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, s.synced...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	// Without its own Node's labels the wrapper would serve every topology
	// Service with no endpoints: wait for it.
	s.ready.Waiting("waiting for Node " + s.opts.NodeName)
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		_, labelled, _ := s.syncer.caches.Self.GetByKey(s.opts.NodeName)
		_, served := s.stores.Nodes.Get(s.opts.NodeName)
		return labelled && served, nil
	}); err != nil {
		return fmt.Errorf("node %s did not appear: %w", s.opts.NodeName, ctx.Err())
	}
	s.endpoints.waitIfFetching(ctx)
	s.unproxied.waitIfFetching(ctx)
	s.dns.waitIfFetching(ctx)
	s.cidrs.demand.waitIfFetching(ctx)
	s.syncer.startServing(ctx)
	s.confirmSnapshot(logger)
	go s.syncer.Run(ctx)
	s.ready.Live()
	logger.Info("Caches synced, serving", "node", s.opts.NodeName,
		"services", s.stores.Services.Len(), "endpointSlices", s.stores.EndpointSlices.Len())

	go watchcache.RunBookmarks(ctx, s.opts.BookmarkInterval, s.kubeProxy.api.Stores(), true, nil)
	var snapshots <-chan time.Time
	if s.persist != nil {
		t := time.NewTicker(s.opts.SnapshotInterval)
		defer t.Stop()
		snapshots = t.C
		s.persist.MaybeWrite(logger, false)
	}
	for {
		select {
		case <-ctx.Done():
			s.ready.Stop()
			if s.persist != nil {
				s.persist.MaybeWrite(logger, true)
			}
			return nil
		case <-snapshots:
			s.persist.MaybeWrite(logger, false)
		}
	}
}

// Ready reports whether the API is served: from synced caches, or from a
// snapshot until upstream answers.
func (s *Server) Ready() bool { return s.ready.Serving() }

// Handler returns the wrapper's HTTP handler: the API plus OpsHandler's paths.
func (s *Server) Handler() http.Handler {
	mux := s.opsMux()
	api := withLimits(http.HandlerFunc(s.serveAPIOrDNS), s.opts)
	mux.Handle("/", withDNSPrefix(api))
	return watchcache.WithRequestLog(withHostCheck(mux, s.opts.AllowedHosts))
}

// serveAPIOrDNS serves the DNS view for requests withDNSPrefix marked, the
// API kube-proxy reads otherwise.
func (s *Server) serveAPIOrDNS(w http.ResponseWriter, req *http.Request) {
	if dns, _ := req.Context().Value(dnsRequestKey{}).(bool); dns {
		s.dns.api.ServeHTTP(w, req)
		return
	}
	s.kubeProxy.api.ServeHTTP(w, req)
}

// OpsHandler serves only /healthz, /livez, /readyz, /metrics and (with Debug)
// /debug/pprof/, for a separate plain-HTTP address.
func (s *Server) OpsHandler() http.Handler {
	// The API port's Host rule: a web page on the node cannot read the
	// metrics or the readiness detail through DNS rebinding either.
	return watchcache.WithRequestLog(withHostCheck(s.opsMux(), s.opts.AllowedHosts))
}

func (s *Server) opsMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.ready.Check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok" + s.snapshotDetail()))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(Gatherer, promhttp.HandlerOpts{}))
	if s.opts.Debug {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// PeerHandler serves the site's other wrappers on the peer port (under
// PeerTLSConfig); nil without a site stream.
func (s *Server) PeerHandler() http.Handler {
	if s.site == nil {
		return nil
	}
	return s.site.PeerHandler()
}

// PeerTLSConfig is the peer port's TLS configuration; nil without a site
// stream.
func (s *Server) PeerTLSConfig() *tls.Config {
	if s.site == nil {
		return nil
	}
	return s.site.PeerTLSConfig()
}
