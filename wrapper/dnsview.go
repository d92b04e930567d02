package wrapper

import (
	"context"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// DNSPathPrefix is where the DNS view is served, on the same port, under the
// same certificate and checks as kube-proxy's: a client-go client whose
// kubeconfig's server ends in it (https://127.0.0.1:51006/dns) reads
// Services, EndpointSlices and Namespaces as the apiserver would answer them
// (unfiltered: the node's CoreDNS answers cluster names as the `kubernetes`
// plugin alone would), with the wrapper's list/watch semantics. The node's
// CoreDNS then costs the edge link nothing of its own for them.
const DNSPathPrefix = "/dns"

// DNSKubeconfigFile is the kubeconfig --cert-dir writes for the DNS view.
const DNSKubeconfigFile = "dns.kubeconfig"

// dnsSlicesName names the DNS view's EndpointSlices (unfiltered) apart from
// kube-proxy's (filtered) in the snapshot and metrics.
const dnsSlicesName = "dns-endpointslices"

var (
	// dnsSlicesResource: the DNS view's EndpointSlices, in a store of their
	// own.
	dnsSlicesResource = watchcache.EndpointSlices.As(dnsSlicesName)
	// dnsSnapshotResources are kept in the snapshot after
	// kubeProxyResources; a snapshot without them (an older wrapper's)
	// serves kube-proxy only.
	dnsSnapshotResources = []*watchcache.Resource{dnsSlicesResource, watchcache.Namespaces}
)

// snapshotResources are the sections a snapshot may hold.
func snapshotResources() []*watchcache.Resource {
	return slices.Concat(kubeProxyResources, dnsSnapshotResources)
}

// dnsView is what the DNS view serves. Services are kube-proxy's store
// (served unmodified; a client without kube-proxy's selector has the
// headless and other proxies' ones fetched on demand). EndpointSlices are
// every slice the wrapper's caches hold, as upstream has them: no topology
// filter and no default/kubernetes rewrite. Namespaces are fetched from
// upstream only while a DNS client asks.
type dnsView struct {
	view *watchcache.View
	// own are the view's resources that are not kube-proxy's, in
	// dnsSnapshotResources order.
	own        []*watchcache.Served
	slices     *watchcache.Store
	namespaces *watchcache.Store
	nsDemand   *demand
	// seeded: the snapshot being served held the view's sections.
	seeded bool
}

// dnsSliceTee feeds the DNS view's EndpointSlices from the merged slice
// cache beside next (the syncer's handler).
func (s *Server) dnsSliceTee(next cache.ResourceEventHandler) cache.ResourceEventHandler {
	st := s.dns.slices
	set := func(obj any) {
		if o, ok := obj.(watchcache.Object); ok {
			st.Set(o.GetNamespace()+"/"+o.GetName(), o)
		}
	}
	return teeHandler{next: next, set: set, del: func(obj any) {
		if o, ok := unwrap(obj).(watchcache.Object); ok {
			st.Delete(o.GetNamespace() + "/" + o.GetName())
		}
	}}
}

// teeHandler tells set/del of every change before next.
type teeHandler struct {
	next     cache.ResourceEventHandler
	set, del func(obj any)
}

func (t teeHandler) OnAdd(obj any, initial bool) { t.set(obj); t.next.OnAdd(obj, initial) }
func (t teeHandler) OnUpdate(old, obj any)       { t.set(obj); t.next.OnUpdate(old, obj) }
func (t teeHandler) OnDelete(obj any)            { t.del(obj); t.next.OnDelete(obj) }

// openDNSStores makes the DNS view's stores on the served stores' clock,
// before a snapshot seeds them.
func (s *Server) openDNSStores(clock *watchcache.Clock) {
	limits := watchcache.LogLimits{Bytes: s.opts.EventLogBytes, MaxLagBytes: s.opts.WatchMaxLagBytes}
	v := &dnsView{}
	for _, r := range dnsSnapshotResources {
		v.own = append(v.own, &watchcache.Served{Resource: r, Store: r.NewStore(clock, limits)})
	}
	v.slices, v.namespaces = v.own[0].Store, v.own[1].Store
	s.dns = v
}

// newDNSView serves kube-proxy's Services store beside the view's own
// stores; nothing is forwarded upstream from it.
func (s *Server) newDNSView() *watchcache.View {
	served := []*watchcache.Served{s.served[slices.Index(kubeProxyResources, watchcache.Services)]}
	return watchcache.NewView(watchcache.ViewConfig{
		Served:            append(served, s.dns.own...),
		Ready:             s.ready,
		Admit:             s.admitDNS,
		Unrouted:          http.HandlerFunc(refuseInDNSView),
		LabelPrefix:       "dns-",
		Labelled:          true,
		WatchWriteTimeout: s.opts.WatchWriteTimeout,
	})
}

// dnsWaitIfFetching waits, before a snapshot is confirmed, until fetched
// Namespaces have synced (seeded ones are confirmed, not dropped first).
func (s *Server) dnsWaitIfFetching(ctx context.Context) {
	if s.dns != nil && s.dns.nsDemand != nil {
		s.dns.nsDemand.waitIfFetching(ctx)
	}
}

// startDNSView adds the Namespaces on demand and the view's BOOKMARKs to
// what Run starts.
func (s *Server) startDNSView(client kubernetes.Interface) {
	v := s.dns
	ns := v.namespaces
	nsCache := newMergedCache(cache.Indexers{}, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ns.Set(obj.(watchcache.Object).GetName(), obj.(watchcache.Object)) },
		UpdateFunc: func(_, obj any) { ns.Set(obj.(watchcache.Object).GetName(), obj.(watchcache.Object)) },
		DeleteFunc: func(obj any) {
			if o, ok := unwrap(obj).(watchcache.Object); ok {
				ns.Delete(o.GetName())
			}
		},
	})
	v.nsDemand = &demand{what: "Namespaces", idle: DefaultOnDemandIdleTimeout}
	if s.opts.OnDemandIdleTimeout > 0 {
		v.nsDemand.idle = s.opts.OnDemandIdleTimeout
	}
	v.nsDemand.fetch = func(ctx context.Context, synced func()) {
		runMirrored(ctx, []mirrored{
			{coreinformers.NewNamespaceInformer(client, 0, cache.Indexers{}), nsCache, sourceOnDemand},
		}, s.watchUpstreamErrors, synced)
	}
	start := s.start
	s.start = func(ctx context.Context) {
		start(ctx)
		go v.nsDemand.run(ctx)
		// Its own stores: Run bookmarks and counts kube-proxy's.
		go watchcache.RunBookmarks(ctx, s.opts.BookmarkInterval, []*watchcache.Store{v.slices, v.namespaces}, true, nil)
	}
}

type dnsRequestKey struct{}

// withDNSPrefix strips DNSPathPrefix and marks the request as one for the
// DNS view before the shared limits and checks see it.
func withDNSPrefix(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Path
		if p != DNSPathPrefix && !strings.HasPrefix(p, DNSPathPrefix+"/") {
			next.ServeHTTP(w, req)
			return
		}
		r2 := req.Clone(context.WithValue(req.Context(), dnsRequestKey{}, true))
		r2.URL.Path = strings.TrimPrefix(p, DNSPathPrefix)
		if r2.URL.RawPath != "" {
			r2.URL.RawPath = strings.TrimPrefix(r2.URL.RawPath, DNSPathPrefix)
		}
		next.ServeHTTP(w, r2)
	})
}

// serveAPIOrDNS serves the DNS view for requests withDNSPrefix marked, the
// API kube-proxy reads otherwise.
func (s *Server) serveAPIOrDNS(w http.ResponseWriter, req *http.Request) {
	if dns, _ := req.Context().Value(dnsRequestKey{}).(bool); dns {
		s.dns.view.ServeHTTP(w, req)
		return
	}
	s.kubeProxy.ServeHTTP(w, req)
}

// admitDNS: while an unconfirmed snapshot without the view's sections (an
// older wrapper's) is served, the view is not ready: a DNS client then
// stays unsynced, as when it cannot reach the apiserver. What a request
// may see is fetched from upstream: Services as for kube-proxy, every
// EndpointSlice (headless ones too), Namespaces.
func (s *Server) admitDNS(w http.ResponseWriter, req *http.Request, verb string, r *watchcache.Served, sel labels.Selector) bool {
	if s.ready.State() == watchcache.Snapshot && !s.dns.seeded {
		w.Header().Set("Retry-After", "1")
		r.WriteError(w, req, apierrors.NewTooManyRequests("the wrapper serves a snapshot without the DNS view; upstream not synced yet", 1))
		return false
	}
	switch r.Resource {
	case watchcache.Services:
		return s.admitKubeProxy(w, req, verb, r, sel)
	case watchcache.Namespaces:
		return s.holdDemand(w, req, r, s.dns.nsDemand)
	default:
		return s.holdDemand(w, req, r, s.unproxied)
	}
}

// refuseInDNSView answers what the DNS view does not serve.
func refuseInDNSView(w http.ResponseWriter, req *http.Request) {
	info, _ := request.RequestInfoFrom(req.Context())
	watchcache.LabelRequest(w, "denied", "denied")
	klog.FromContext(req.Context()).V(2).Info("Refused in the DNS view", "method", req.Method, "uri", req.RequestURI, "remote", req.RemoteAddr)
	watchcache.WriteError(w, req, apierrors.NewForbidden(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Name,
		errDNSViewServesOnly))
}

type dnsViewError string

func (e dnsViewError) Error() string { return string(e) }

const errDNSViewServesOnly = dnsViewError("the DNS view serves only get, list and watch of Services, EndpointSlices and Namespaces")
