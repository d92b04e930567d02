package wrapper

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
)

// Options configure a wrapper Server.
type Options struct {
	// NodeName is the node this wrapper serves (required).
	NodeName string
	// Upstream is the (lite-)apiserver the wrapper reads from and proxies to.
	Upstream *rest.Config
	// BookmarkInterval between BOOKMARKs to watchers that allow them (default 30s).
	BookmarkInterval time.Duration
	// EventLogBytes is the encoded size of the newest events per resource a
	// watch can resume from (default 4 MiB).
	EventLogBytes int64
	// WatchMaxLagBytes is how far (encoded bytes of events) a live watcher
	// may fall behind before it gets 410 Expired and relists (default 64
	// MiB). Only a burst larger than this outruns a watcher that reads at
	// full speed.
	WatchMaxLagBytes int64
	// WatchWriteTimeout is how long a watch may wait for its client to take
	// a batch of events before it is cut off (default 30s).
	WatchWriteTimeout time.Duration
	// Debug serves pprof under /debug/pprof/.
	Debug bool
	// StartVersion is the first resourceVersion (default: now in nanoseconds,
	// so versions increase across restarts).
	StartVersion uint64
	// StateDir keeps the snapshot of what is served, so a restart while
	// upstream is away serves it at once; "" keeps nothing on disk.
	StateDir string
	// RequireNodeRestrictedTopologyKeys treats topology keys a node's
	// kubelet can set on its own Node (any key not under
	// node-restriction.kubernetes.io/) as never matching.
	RequireNodeRestrictedTopologyKeys bool
	// OnDemandIdleTimeout is how long v1 Endpoints, and the Services and
	// EndpointSlices kube-proxy's selector leaves out, are still fetched
	// from upstream after the last client that asked for them went away
	// (default 5m).
	OnDemandIdleTimeout time.Duration
	// NodeLabelRecheckInterval is how often a wrapper that watches every
	// Node because the controller writes no NodeLabelSummaries looks again
	// (default 5m).
	NodeLabelRecheckInterval time.Duration
	// SnapshotInterval is the most often a snapshot is written after a
	// change (default 10s); one more is written on a clean shutdown.
	SnapshotInterval time.Duration
	// SnapshotMaxAge ignores snapshots written longer ago (0:
	// DefaultSnapshotMaxAge; negative: no limit).
	SnapshotMaxAge time.Duration
	// RequestWriteTimeout bounds the write of every answer but a watch
	// (default DefaultRequestWriteTimeout).
	RequestWriteTimeout time.Duration
	// MaxRequestsInFlight caps requests other than watches served at once,
	// MaxWatches watches; beyond, 429 with Retry-After (defaults
	// DefaultMaxRequestsInFlight, DefaultMaxWatches).
	MaxRequestsInFlight, MaxWatches int
	// LocalEndpointRanges bound where the local-endpoint annotations may
	// redirect default/kubernetes (nil: DefaultLocalEndpointRanges).
	LocalEndpointRanges []netip.Prefix
	// AllowedHosts are the Host names (besides localhost and loopback
	// addresses, always accepted) requests may carry; "*" accepts any.
	AllowedHosts []string
}

// Defaults of the event log's bounds (per resource).
const (
	DefaultEventLogBytes    = 4 << 20
	DefaultWatchMaxLagBytes = 64 << 20
)

// Server is the application-grid-wrapper: informer caches, filter, served
// stores and the HTTP handler.
type Server struct {
	opts      Options
	codecs    serializer.CodecFactory
	client    kubernetes.Interface
	resources map[schema.GroupVersionResource]*servedResource
	stores    Stores
	syncer    *Syncer
	proxy     http.Handler
	reqInfo   *request.RequestInfoFactory
	ready     atomic.Bool
	waiting   atomic.Value // string: what /readyz reports until ready
	synced    []cache.InformerSynced
	// nodeLabels is where other nodes' labels come from (nodelabels.go).
	nodeLabels *nodeLabels
	// endpoints fetches v1 Endpoints while clients ask (endpoints_demand.go).
	endpoints *endpointsOnDemand
	// unproxied fetches what kube-proxy's selector leaves out while
	// clients ask (unproxied_demand.go).
	unproxied *demand
	start     func(ctx context.Context)

	// Snapshot hooks (snapshot_serve.go).
	persist    *persister               // nil without a StateDir
	seededFrom atomic.Pointer[snapshot] // the snapshot served until upstream confirms it
	// snapshotRefused: upstream answered in a way that rules the snapshot
	// out (snapshot_trust.go).
	snapshotRefused atomic.Bool
	// upstreamRefusal is the last 401/403/certificate error from upstream.
	upstreamRefusal atomic.Value
	// portTaken says why the API is not served ("" when it is or may be):
	// another process holds its port (listener.go).
	portTaken atomic.Value
}

// New builds a Server; Run starts it.
func New(opts Options) (*Server, error) {
	if opts.NodeName == "" {
		return nil, errors.New("node name is required")
	}
	if opts.Upstream == nil {
		return nil, errors.New("upstream config is required")
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = 30 * time.Second
	}
	if opts.EventLogBytes <= 0 {
		opts.EventLogBytes = DefaultEventLogBytes
	}
	if opts.WatchMaxLagBytes <= 0 {
		opts.WatchMaxLagBytes = DefaultWatchMaxLagBytes
	}
	if opts.WatchWriteTimeout <= 0 {
		opts.WatchWriteTimeout = 30 * time.Second
	}
	if opts.SnapshotMaxAge == 0 {
		opts.SnapshotMaxAge = DefaultSnapshotMaxAge
	}
	if opts.RequestWriteTimeout <= 0 {
		opts.RequestWriteTimeout = DefaultRequestWriteTimeout
	}
	if opts.MaxRequestsInFlight <= 0 {
		opts.MaxRequestsInFlight = DefaultMaxRequestsInFlight
	}
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = DefaultMaxWatches
	}
	if opts.StartVersion == 0 {
		opts.StartVersion = uint64(time.Now().UnixNano())
	}
	if opts.NodeLabelRecheckInterval <= 0 {
		opts.NodeLabelRecheckInterval = DefaultNodeLabelRecheckInterval
	}
	if opts.SnapshotInterval <= 0 {
		opts.SnapshotInterval = 10 * time.Second
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
		opts:      opts,
		codecs:    serializer.NewCodecFactory(scheme.Scheme),
		client:    client,
		resources: map[schema.GroupVersionResource]*servedResource{},
		proxy:     proxy,
		reqInfo: &request.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		},
	}
	snap := s.loadSnapshot()
	start := opts.StartVersion
	if snap != nil {
		start = max(start, snap.maxVersion()+1)
	}
	var reservation *rvReservation
	if opts.StateDir != "" {
		// Unreadable (only a damaged disk: it is written atomically): serve
		// on, with the clock and the snapshot as the only floor.
		reserved, err := loadRVReservation(opts.StateDir)
		if err != nil {
			klog.Background().Error(err, "Ignoring the resourceVersion reservation: versions may repeat if the clock was stepped back")
		}
		start = max(start, reserved+1)
		// The start version itself is served (lists of an unchanged store):
		// reserve it before anything is.
		reservation = &rvReservation{dir: opts.StateDir}
		reservation.cover(start)
	}
	clock := NewClock(start)
	clock.reserve = reservation
	stores := map[string]*Store{}
	for _, r := range servedResources {
		st := NewStore(r.name, clock, r.newEmpty, r.fields, LogLimits{Bytes: opts.EventLogBytes, MaxLagBytes: opts.WatchMaxLagBytes})
		stores[r.name] = st
		s.resources[r.gv.WithResource(r.name)] = &servedResource{resource: r, store: st}
	}
	if err := s.seed(snap, clock); err != nil {
		return nil, err
	}
	s.stores = Stores{Services: stores[ResourceServices], Endpoints: stores[ResourceEndpoints], EndpointSlices: stores[ResourceEndpointSlices], Nodes: stores[ResourceNodes]}

	// Services and EndpointSlices as kube-proxy selects them; the rest only
	// while a client asks (unproxied_demand.go).
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(dropManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kubeProxySelector }))
	metaClient, err := metadata.NewForConfig(opts.Upstream)
	if err != nil {
		return nil, err
	}
	gridClient, err := versioned.NewForConfig(opts.Upstream)
	if err != nil {
		return nil, err
	}
	// Every node's labels decide topology, but only this node is served:
	// the others' labels come from the controller's summaries (or their
	// metadata, nodelabels.go), this one in full.
	selfFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(dropManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", opts.NodeName).String()
		}))
	svcInf := factory.Core().V1().Services().Informer()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	selfInf := selfFactory.Core().V1().Nodes().Informer()
	s.syncer = newSyncer(opts.NodeName, Caches{Self: selfInf.GetIndexer()}, s.stores)
	s.syncer.restrictedKeys = opts.RequireNodeRestrictedTopologyKeys
	services := newMergedCache(cache.Indexers{}, s.syncer.serviceHandler())
	slices := newMergedCache(sliceIndexers, s.syncer.sliceHandler())
	s.syncer.caches.Services, s.syncer.caches.EndpointSlices = services, slices
	s.nodeLabels = newNodeLabels(metaClient, gridClient, s.syncer.nodeHandler())
	s.nodeLabels.watchErrors = s.watchUpstreamErrors
	s.nodeLabels.recheck = opts.NodeLabelRecheckInterval
	s.syncer.caches.Nodes = s.nodeLabels.store
	s.endpoints = newEndpointsOnDemand(client, s.syncer.serviceHandler(), s.syncer.refilterAll, s.watchUpstreamErrors)
	s.unproxied = newUnproxiedOnDemand(client, services, slices, s.syncer.refilterAll, s.watchUpstreamErrors)
	if opts.OnDemandIdleTimeout > 0 {
		s.endpoints.idle, s.unproxied.idle = opts.OnDemandIdleTimeout, opts.OnDemandIdleTimeout
	}
	s.syncer.caches.Endpoints = s.endpoints.cache
	if opts.LocalEndpointRanges != nil {
		s.syncer.localRanges = opts.LocalEndpointRanges
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{svcInf, services.sourceHandler(sourceMain)},
		{sliceInf, slices.sourceHandler(sourceMain)},
		{selfInf, s.syncer.selfNodeHandler()},
	} {
		reg, err := h.inf.AddEventHandler(h.h)
		if err != nil {
			return nil, err
		}
		// Synced once the handler has seen the initial list: only then may
		// seeded objects that were not confirmed be dropped.
		s.synced = append(s.synced, reg.HasSynced)
	}
	s.synced = append(s.synced, s.nodeLabels.HasSynced)
	for _, inf := range []cache.SharedIndexInformer{svcInf, sliceInf, selfInf} {
		if err := s.watchUpstreamErrors(inf); err != nil {
			return nil, err
		}
	}
	if _, err := selfInf.AddEventHandler(s.selfNodeIdentityHandler(klog.Background())); err != nil {
		return nil, err
	}
	s.start = func(ctx context.Context) {
		factory.Start(ctx.Done())
		go s.nodeLabels.run(ctx)
		go s.endpoints.run(ctx)
		go s.unproxied.run(ctx)
		selfFactory.Start(ctx.Done())
	}
	return s, nil
}

// Run starts the informers, waits for them to sync, serves, and returns when
// ctx ends.
func (s *Server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	runningServer.Store(s)
	s.checkUpstreamAtStart(ctx, logger)
	s.serveSnapshot(logger)
	defer s.ready.Store(false)
	defer s.stopServingSnapshot()
	s.start(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, s.synced...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	// Without its own Node's labels the wrapper would serve every topology
	// Service with no endpoints: wait for it.
	s.waiting.Store("waiting for Node " + s.opts.NodeName)
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		_, labelled, _ := s.syncer.caches.Self.GetByKey(s.opts.NodeName)
		_, served := s.stores.Nodes.Get(s.opts.NodeName)
		return labelled && served, nil
	}); err != nil {
		return fmt.Errorf("node %s did not appear: %w", s.opts.NodeName, ctx.Err())
	}
	s.endpoints.waitIfFetching(ctx)
	s.unproxied.waitIfFetching(ctx)
	s.syncer.startServing(ctx)
	s.confirmSnapshot(logger)
	go s.syncer.Run(ctx)
	s.ready.Store(true)
	logger.Info("Caches synced, serving", "node", s.opts.NodeName,
		"services", s.stores.Services.Len(), "endpointSlices", s.stores.EndpointSlices.Len())

	ticker := time.NewTicker(s.opts.BookmarkInterval)
	defer ticker.Stop()
	var snapshots <-chan time.Time
	if s.persist != nil {
		t := time.NewTicker(s.opts.SnapshotInterval)
		defer t.Stop()
		snapshots = t.C
		s.persist.maybeWrite(logger)
	}
	for {
		select {
		case <-ctx.Done():
			s.ready.Store(false)
			if s.persist != nil {
				s.persist.maybeWrite(logger)
			}
			return nil
		case <-snapshots:
			s.persist.maybeWrite(logger)
		case <-ticker.C:
			for _, r := range s.resources {
				r.store.Bookmark()
				servedObjects.WithLabelValues(r.name).Set(float64(r.store.Len()))
				eventLogBytes.WithLabelValues(r.name).Set(float64(r.store.LogBytes()))
			}
		}
	}
}

// Ready reports whether the caches have synced.
func (s *Server) Ready() bool { return s.ready.Load() }

// Handler returns the wrapper's HTTP handler: the API plus OpsHandler's paths.
func (s *Server) Handler() http.Handler {
	mux := s.opsMux()
	mux.Handle("/", s.withLimits(http.HandlerFunc(s.serveAPI)))
	return withRequestLog(withHostCheck(mux, s.opts.AllowedHosts))
}

// OpsHandler serves only /healthz, /livez, /readyz, /metrics and (with Debug)
// /debug/pprof/, for a separate plain-HTTP address.
func (s *Server) OpsHandler() http.Handler { return withRequestLog(s.opsMux()) }

func (s *Server) opsMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if taken, _ := s.portTaken.Load().(string); taken != "" {
			http.Error(w, taken, http.StatusServiceUnavailable)
			return
		}
		if !s.ready.Load() {
			why, _ := s.waiting.Load().(string)
			if why == "" {
				why = "caches not synced"
			}
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok" + s.snapshotDetail()))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(Registry, promhttp.HandlerOpts{}))
	if s.opts.Debug {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// serveAPI serves the wrapper's resources, forwards the few other requests
// kube-proxy makes and refuses the rest.
func (s *Server) serveAPI(w http.ResponseWriter, req *http.Request) {
	info, _ := request.RequestInfoFrom(req.Context()) // set by withLimits
	if r := s.route(req, info); r != nil {
		setLabels(w, info.Verb, r.name)
		s.serveResource(w, req, info, r)
		return
	}
	if err := forwardDenied(req, info); err != nil {
		setLabels(w, "denied", "denied")
		klog.FromContext(req.Context()).V(2).Info("Refused", "method", req.Method, "uri", req.RequestURI, "remote", req.RemoteAddr)
		s.writeError(w, req, nil, err)
		return
	}
	setLabels(w, "proxy", "proxy")
	s.proxy.ServeHTTP(w, req)
}

// statusRecorder remembers the status code for the request log and metrics;
// Unwrap keeps http.ResponseController (flush, deadlines) working.
type statusRecorder struct {
	http.ResponseWriter
	code           int
	verb, resource string
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func setLabels(w http.ResponseWriter, verb, resource string) {
	if r, ok := w.(*statusRecorder); ok {
		r.verb, r.resource = verb, resource
	}
}

// withRequestLog logs one line per request (verbosity 3) and counts it.
func withRequestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, verb: "other", resource: "other"}
		next.ServeHTTP(rec, req)
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		requestsTotal.WithLabelValues(rec.verb, rec.resource, strconv.Itoa(rec.code)).Inc()
		klog.FromContext(req.Context()).V(3).Info("HTTP", "verb", req.Method, "uri", req.RequestURI,
			"status", rec.code, "latency", time.Since(start), "remote", req.RemoteAddr, "userAgent", req.UserAgent())
	})
}
