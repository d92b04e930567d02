package wrapper

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
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
	// site shares the unit-wide streams with the site's other wrappers
	// (sitestream.go); nil when off.
	site *siteStream
	// dns is the DNS view for the node's CoreDNS (dnsview.go).
	dns   *dnsView
	start func(ctx context.Context)

	// Snapshot hooks (snapshot_serve.go).
	persist    *persister                        // nil without a StateDir
	seededFrom atomic.Pointer[snapshot.Snapshot] // the snapshot served until upstream confirms it
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
	if err := s.openStores(); err != nil {
		return nil, err
	}
	if err := s.watchUpstream(client); err != nil {
		return nil, err
	}
	s.startDNSView(client)
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
	s.dnsWaitIfFetching(ctx)
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
		s.persist.MaybeWrite(logger, false)
	}
	for {
		select {
		case <-ctx.Done():
			s.ready.Store(false)
			if s.persist != nil {
				s.persist.MaybeWrite(logger, true)
			}
			return nil
		case <-snapshots:
			s.persist.MaybeWrite(logger, false)
		case <-ticker.C:
			for _, r := range s.resources {
				r.store.Bookmark()
				servedObjects.WithLabelValues(r.Name).Set(float64(r.store.Len()))
				eventLogBytes.WithLabelValues(r.Name).Set(float64(r.store.LogBytes()))
			}
		}
	}
}

// Ready reports whether the caches have synced.
func (s *Server) Ready() bool { return s.ready.Load() }

// Handler returns the wrapper's HTTP handler: the API plus OpsHandler's paths.
func (s *Server) Handler() http.Handler {
	mux := s.opsMux()
	mux.Handle("/", withDNSPrefix(s.withLimits(http.HandlerFunc(s.serveAPIOrDNS))))
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

// serveAPI serves the wrapper's resources, forwards the few other requests
// kube-proxy makes and refuses the rest.
func (s *Server) serveAPI(w http.ResponseWriter, req *http.Request) {
	info, _ := request.RequestInfoFrom(req.Context()) // set by withLimits
	if r := s.route(req, info); r != nil {
		setLabels(w, info.Verb, r.Name)
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
