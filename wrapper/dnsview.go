package wrapper

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

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
	return slices.Concat(kubeProxyResources, dnsSnapshotResources, serviceCIDRSnapshotResources)
}

// dnsView is what the DNS view serves. Services are kube-proxy's store
// (served unmodified; a client without kube-proxy's selector has the
// headless and other proxies' ones fetched on demand). EndpointSlices are
// every slice the wrapper's caches hold, as upstream has them: no topology
// filter and no default/kubernetes rewrite. Namespaces are fetched from
// upstream only while a DNS client asks.
type dnsView struct {
	api *watchcache.View
	// own are the view's resources that are not kube-proxy's, in
	// dnsSnapshotResources order.
	own        []*watchcache.Served
	slices     *watchcache.Store
	namespaces *watchcache.Store
	nsDemand   *demand
	// seeded: the snapshot being served held the view's sections.
	seeded bool
}

// newDNSView makes the DNS view's own stores on the served stores' clock,
// before a snapshot seeds them.
func newDNSView(clock *watchcache.Clock, limits watchcache.LogLimits) *dnsView {
	v := &dnsView{}
	for _, r := range dnsSnapshotResources {
		v.own = append(v.own, &watchcache.Served{Resource: r, Store: r.NewStore(clock, limits)})
	}
	v.slices, v.namespaces = v.own[0].Store, v.own[1].Store
	return v
}

// sliceTee feeds the view's EndpointSlices from the merged slice cache
// beside next (the syncer's handler).
func (v *dnsView) sliceTee(next cache.ResourceEventHandler) cache.ResourceEventHandler {
	st := v.slices
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

// fetchNamespaces fetches Namespaces from upstream into the view's store
// while a DNS client asks for them (idle: see demand).
func (v *dnsView) fetchNamespaces(client kubernetes.Interface, idle time.Duration, watchErrors func(cache.SharedIndexInformer) error) {
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
	v.nsDemand = &demand{what: "Namespaces", idle: idle}
	v.nsDemand.fetch = func(ctx context.Context, synced func()) {
		runMirrored(ctx, []mirrored{
			{coreinformers.NewNamespaceInformer(client, 0, cache.Indexers{}), nsCache, sourceOnDemand},
		}, watchErrors, synced)
	}
}

// run runs the Namespaces' fetch and the BOOKMARKs of the view's own
// stores (kube-proxy's view bookmarks and counts the Services) until ctx
// ends.
func (v *dnsView) run(ctx context.Context, bookmarkInterval time.Duration) {
	go v.nsDemand.run(ctx)
	go watchcache.RunBookmarks(ctx, bookmarkInterval, []*watchcache.Store{v.slices, v.namespaces}, true, nil)
}

// waitIfFetching waits, before a snapshot is confirmed, until fetched
// Namespaces have synced (seeded ones are confirmed, not dropped first).
func (v *dnsView) waitIfFetching(ctx context.Context) { v.nsDemand.waitIfFetching(ctx) }

// serve serves kube-proxy's Services store beside the view's own stores;
// nothing is forwarded upstream from it. While an unconfirmed snapshot
// without the view's sections (an older wrapper's) is served, the view is
// not ready: a DNS client then stays unsynced, as when it cannot reach the
// apiserver. What a request may see is fetched from upstream: Services as
// for kube-proxy, every EndpointSlice (headless ones too), Namespaces.
func (v *dnsView) serve(services *watchcache.Served, kubeProxy *kubeProxyView, writeTimeout time.Duration) {
	ready := kubeProxy.ready
	admit := func(w http.ResponseWriter, req *http.Request, verb string, r *watchcache.Served, sel labels.Selector) bool {
		if ready.State() == watchcache.Snapshot && !v.seeded {
			w.Header().Set("Retry-After", "1")
			r.WriteError(w, req, apierrors.NewTooManyRequests("the wrapper serves a snapshot without the DNS view; upstream not synced yet", 1))
			return false
		}
		switch r.Resource {
		case watchcache.Services:
			return kubeProxy.admit(w, req, verb, r, sel)
		case watchcache.Namespaces:
			return holdDemand(ready, w, req, r, v.nsDemand)
		default:
			return holdDemand(ready, w, req, r, kubeProxy.unproxied)
		}
	}
	v.api = watchcache.NewView(watchcache.ViewConfig{
		Served:            append([]*watchcache.Served{services}, v.own...),
		Ready:             ready,
		Admit:             admit,
		Unrouted:          http.HandlerFunc(refuseInDNSView),
		LabelPrefix:       "dns-",
		Labelled:          true,
		WatchWriteTimeout: writeTimeout,
	})
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
