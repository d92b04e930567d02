package sitestream

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// unitCache holds what this wrapper's upstream list/watch of one unit-wide
// resource returned, unfiltered and under upstream's own resourceVersions,
// in a mirror store that peers list and watch (serve.go). Every
// wrapper of a site stream keeps one, leader or not: its source is either
// the apiserver or the leader, and both speak the same versions, so a
// follower that becomes leader can resume its peers' watches at once, and a
// follower that read further from the apiserver (while it had no leader)
// resumes here from its version.
type unitCache struct {
	resource *watchcache.Resource
	store    *watchcache.Store
	synced   atomic.Bool // a list (or watch-list) has filled the store
}

func newUnitCache(r *watchcache.Resource, limits watchcache.LogLimits) *unitCache {
	return &unitCache{resource: r, store: r.NewMirrorStore(limits)}
}

// tap returns lw with every list and watch event also applied to the cache.
func (u *unitCache) tap(lw cache.ListerWatcherWithContext) cache.ListerWatcher {
	return &tappedListWatch{parent: lw, cache: u}
}

type tappedListWatch struct {
	parent cache.ListerWatcherWithContext
	cache  *unitCache
}

// List and Watch are ListWithContext and WatchWithContext for callers
// without a context (cache.ListerWatcher); the reflector uses the latter.
func (t *tappedListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return t.ListWithContext(context.Background(), opts)
}

func (t *tappedListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return t.WatchWithContext(context.Background(), opts)
}

func (t *tappedListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	list, err := t.parent.ListWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	objs := make(map[string]watchcache.Object, len(items))
	for _, o := range items {
		if obj, ok := unitObject(o); ok {
			objs[objectKey(obj)] = obj
		}
	}
	t.cache.reset(klog.FromContext(ctx), objs, lm.GetResourceVersion())
	return list, nil
}

func (t *tappedListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := t.parent.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	tw := &tappedWatch{source: w, cache: t.cache, out: make(chan watch.Event), done: make(chan struct{}), logger: klog.FromContext(ctx)}
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		tw.initial = map[string]watchcache.Object{}
	}
	go tw.run()
	return tw, nil
}

// tappedWatch applies each event to the cache before the reflector sees it,
// so whatever the reflector records as seen the cache holds.
type tappedWatch struct {
	source   watch.Interface
	cache    *unitCache
	out      chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
	logger   klog.Logger
	// initial collects a watch-list's initial state until its closing
	// bookmark (nil for a plain watch).
	initial map[string]watchcache.Object
}

func (w *tappedWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		w.source.Stop()
	})
}

func (w *tappedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *tappedWatch) run() {
	defer close(w.out)
	for ev := range w.source.ResultChan() {
		w.apply(ev)
		select {
		case w.out <- ev:
		case <-w.done:
			return
		}
	}
}

func (w *tappedWatch) apply(ev watch.Event) {
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return // an ERROR's Status: the reflector handles it
	}
	if w.initial != nil {
		switch ev.Type {
		case watch.Added:
			if obj, ok := unitObject(ev.Object); ok {
				w.initial[objectKey(obj)] = obj
			}
		case watch.Bookmark:
			if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				w.cache.reset(w.logger, w.initial, m.GetResourceVersion())
				w.initial = nil
			}
		}
		return
	}
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	if err != nil || !w.cache.synced.Load() {
		return
	}
	st := w.cache.store
	if ev.Type == watch.Bookmark {
		st.ProgressTo(rv)
		st.Bookmark() // pass upstream's progress on to peers
		return
	}
	obj, ok := unitObject(ev.Object)
	if !ok {
		return
	}
	st.ApplyAt(ev.Type, objectKey(obj), obj, rv)
}

// reset replaces the cache's state with a list's at rv.
func (u *unitCache) reset(logger klog.Logger, objs map[string]watchcache.Object, rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		logger.Info("Upstream list without a usable resourceVersion: not shared with peers", "resourceVersion", rv)
		u.synced.Store(false)
		return
	}
	u.store.ReplaceAt(objs, v)
	u.synced.Store(true)
}

// unitObject is a copy of an object from upstream that the store may own
// (the store writes its resourceVersion; the informer transforms its own).
func unitObject(o runtime.Object) (watchcache.Object, bool) {
	obj, ok := watchcache.ShallowCopy(o).(watchcache.Object)
	if !ok {
		return nil, false
	}
	obj.SetManagedFields(nil)
	return obj, true
}

func objectKey(o watchcache.Object) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}
