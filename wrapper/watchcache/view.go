package watchcache

import (
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Served is a resource with the store it is served from.
type Served struct {
	*Resource
	Store *Store
}

// Admit is a view's own word on a request the view serves, once its options
// are known good: sel is the request's label selector (nil for a get). It
// answers the request itself and returns false to refuse it, or returns
// true and the view serves it. It may hold what the request needs for the
// request's life (context.AfterFunc on req's context).
type Admit func(w http.ResponseWriter, req *http.Request, verb string, r *Served, sel labels.Selector) bool

// ViewConfig describes a view.
type ViewConfig struct {
	// Served are the resources the view serves, each from its store.
	Served []*Served
	// Node is the node whose object alone is served of a resource that is
	// OwnNodeOnly.
	Node string
	// Ready gates the view: until it serves, requests are answered 429.
	// Nil: always served (the view has a gate of its own before it).
	Ready *Ready
	// Admit is the view's hook (nil: every request is served).
	Admit Admit
	// Unrouted answers what the view does not serve (see route).
	Unrouted http.Handler
	// LabelPrefix is put before a resource's name in the request metrics'
	// resource label; the view's requests are not labelled unless
	// Labelled.
	LabelPrefix string
	Labelled    bool
	// WatchWriteTimeout cuts off a watch whose client takes no batch of
	// events for this long.
	WatchWriteTimeout time.Duration
}

// View serves get, list and watch of its resources from their stores with
// the semantics of kube-apiserver's watch cache, through one handler: the
// wrapper's views (kube-proxy's, the DNS view, the site's peers') are each
// a View with its own resources, readiness and Admit hook.
type View struct {
	cfg       ViewConfig
	resources map[schema.GroupVersionResource]*Served
	labels    map[*Served]string // the request metrics' resource label
}

// NewView makes a view; its requests must carry a RequestInfo
// (WithRequestInfo).
func NewView(cfg ViewConfig) *View {
	v := &View{cfg: cfg, resources: map[schema.GroupVersionResource]*Served{}, labels: map[*Served]string{}}
	for _, r := range cfg.Served {
		v.resources[r.GroupVersionResource()] = r
		v.labels[r] = cfg.LabelPrefix + r.PathName()
	}
	return v
}

// Stores are the view's stores, each once, in the order of ViewConfig.Served.
func (v *View) Stores() []*Store {
	var out []*Store
	for _, r := range v.cfg.Served {
		if !slices.Contains(out, r.Store) {
			out = append(out, r.Store)
		}
	}
	return out
}

// admitted asks the view's hook.
func (v *View) admitted(w http.ResponseWriter, req *http.Request, verb string, r *Served, sel labels.Selector) bool {
	return v.cfg.Admit == nil || v.cfg.Admit(w, req, verb, r, sel)
}
