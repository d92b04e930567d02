package wrapper

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// sharedListTTL is how long one resource's unselected list stays to answer
// the relists of its other informers: their watches end in 410 one after
// another as each retries after the apiserver's return, within its reflector's
// backoff (at most 30 s, jitter 1.0).
const sharedListTTL = 90 * time.Second

// sharedRelist lets the wrapper's informers of one resource, each with its
// own label selector (kube-proxy's, and one per label that selector leaves
// out, while a client asks for those), relist with one upstream list
// between them. After an apiserver restart or an etcd compaction each of
// their watches ends in 410 and each would list its selection again: one
// 410 would cost a list per informer. Instead the first relist lists the
// resource unselected (a label selector has no OR), and the other informers
// relisting are answered from that list, filtered by their own selectors,
// while it is not older than what they have seen. An informer's first list
// (when the wrapper starts, or an on-demand fetch) is its own selection, as
// is every list while it is the only one running: those are watch-lists
// (sendInitialEvents), as client-go's reflector opens them for kube-proxy,
// which kube-apiserver v1.37 gzips for the life of the stream; a plain
// LIST and watch would cost about 1.5x kube-proxy's bytes on the wire. A
// relist the group answers is refused as a watch-list, and the reflector
// falls back to List, which the group answers (relistMember).
type sharedRelist struct {
	// list lists the resource unselected.
	list func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)

	mu       sync.Mutex
	members  map[*relistMember]struct{}
	last     *sharedList
	inflight chan struct{} // closed when the unselected list in flight returns
}

// sharedList is one unselected list.
type sharedList struct {
	list  runtime.Object
	items []runtime.Object
	rv    uint64
	at    time.Time
}

func newSharedRelist(lw cache.ListerWatcherWithContext) *sharedRelist {
	return &sharedRelist{list: lw.ListWithContext, members: map[*relistMember]struct{}{}}
}

// join adds an informer's ListerWatcher of selector's selection (listed and
// watched through lw) to the group until leave.
func (g *sharedRelist) join(lw cache.ListerWatcherWithContext, selector string) (*relistMember, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	m := &relistMember{group: g, lw: lw, selector: sel}
	g.mu.Lock()
	g.members[m] = struct{}{}
	g.mu.Unlock()
	return m, nil
}

// leave: the member's informer has stopped.
func (g *sharedRelist) leave(m *relistMember) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.members, m)
	g.dropIfServedLocked()
}

// relist answers m's relist from an unselected list, the last one if m has
// not seen past it, else a new one; ok is false when m is to list its own
// selection (it runs alone, or versions cannot be compared).
func (g *sharedRelist) relist(ctx context.Context, m *relistMember) (obj runtime.Object, ok bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.inflight != nil {
		ch := g.inflight
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.mu.Lock()
			return nil, true, ctx.Err()
		}
		g.mu.Lock()
	}
	if obj := g.serveLocked(m); obj != nil {
		return obj, true, nil
	}
	if len(g.members) < 2 {
		return nil, false, nil
	}
	ch := make(chan struct{})
	g.inflight = ch
	g.mu.Unlock()
	// The most recent state: what the watch cache has at least (as
	// client-go relists after a 410), in one answer.
	list, err := g.list(ctx, metav1.ListOptions{})
	g.mu.Lock()
	g.inflight = nil
	close(ch)
	if err != nil {
		return nil, true, err
	}
	s, ok := newSharedList(list)
	if !ok {
		return nil, false, nil
	}
	g.last = s
	time.AfterFunc(sharedListTTL, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.last == s {
			g.last = nil
		}
	})
	if obj := g.serveLocked(m); obj != nil {
		return obj, true, nil
	}
	return nil, false, nil
}

// answers tells whether the group, not m's own request, is to answer m's
// next full list: a relist while other members run (one unselected list
// between them), or a first list the last unselected one can serve.
func (g *sharedRelist) answers(m *relistMember) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.listed.Load() {
		return len(g.members) >= 2
	}
	s := g.last
	return s != nil && time.Since(s.at) < sharedListTTL && s.rv >= m.seen.Load()
}

// fresh answers m's first list from the last unselected list, if there is
// one m may take.
func (g *sharedRelist) fresh(m *relistMember) runtime.Object {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.serveLocked(m)
}

// serveLocked is the last unselected list filtered by m's selector, if it is
// recent and not older than what m has seen (its informer would go back in
// time); nil otherwise. It lets the list go once every member has it.
func (g *sharedRelist) serveLocked(m *relistMember) runtime.Object {
	s := g.last
	if s == nil || time.Since(s.at) >= sharedListTTL || s.rv < m.seen.Load() {
		return nil
	}
	out := reflect.New(reflect.TypeOf(s.list).Elem()).Interface().(runtime.Object)
	lm, err := meta.ListAccessor(out)
	if err != nil {
		return nil
	}
	lm.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	var keep []runtime.Object
	for _, o := range s.items {
		if a, err := meta.Accessor(o); err == nil && m.selector.Matches(labels.Set(a.GetLabels())) {
			keep = append(keep, o)
		}
	}
	if err := meta.SetList(out, keep); err != nil { // copies each kept item's struct
		return nil
	}
	m.note(s.rv)
	m.listed.Store(true)
	g.dropIfServedLocked()
	return out
}

// dropIfServedLocked lets the last list go once no member can want it.
func (g *sharedRelist) dropIfServedLocked() {
	if g.last == nil {
		return
	}
	for m := range g.members {
		if m.seen.Load() < g.last.rv {
			return
		}
	}
	g.last = nil
}

func newSharedList(list runtime.Object) (*sharedList, bool) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, false
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, false
	}
	rv, err := strconv.ParseUint(lm.GetResourceVersion(), 10, 64)
	if err != nil {
		return nil, false
	}
	return &sharedList{list: list, items: items, rv: rv, at: time.Now()}, true
}

// relistMember is one informer's ListerWatcher in a sharedRelist. It
// keeps the newest resourceVersion its informer has seen.
type relistMember struct {
	group    *sharedRelist
	lw       cache.ListerWatcherWithContext
	selector labels.Selector
	seen     atomic.Uint64 // math.MaxUint64: not comparable
	listed   atomic.Bool
}

// note records that the informer has seen version rv.
func (m *relistMember) note(rv uint64) {
	for {
		cur := m.seen.Load()
		if rv <= cur || m.seen.CompareAndSwap(cur, rv) {
			return
		}
	}
}

func (m *relistMember) noteString(rv string) {
	if rv == "" {
		return
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		v = math.MaxUint64
	}
	m.note(v)
}

func (m *relistMember) List(opts metav1.ListOptions) (runtime.Object, error) {
	return m.ListWithContext(context.Background(), opts)
}

func (m *relistMember) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return m.WatchWithContext(context.Background(), opts)
}

func (m *relistMember) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue == "" { // not a further page of its own list
		if m.listed.Load() {
			if obj, ok, err := m.group.relist(ctx, m); ok {
				return obj, err
			}
		} else if obj := m.group.fresh(m); obj != nil {
			return obj, nil
		}
	}
	obj, err := m.lw.ListWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	if lm, err := meta.ListAccessor(obj); err == nil {
		m.noteString(lm.GetResourceVersion())
	}
	m.listed.Store(true)
	return obj, nil
}

// errListShared is what a member answers a watch-list the group is to
// answer instead: the reflector falls back to List on any error that is
// not a retriable one, and the member's List asks the group.
var errListShared = errors.New("this list is answered by the resource's shared relist")

// WatchWithContext opens a watch, or a watch-list (sendInitialEvents: the
// reflector's initial sync and relists, which kube-apiserver since v1.37
// compresses for the life of the stream, as it does for kube-proxy's) of
// m's own selection, unless the group answers that list (errListShared).
func (m *relistMember) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if initial && m.group.answers(m) {
		return nil, errListShared
	}
	w, err := m.lw.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type != watch.Error {
			if a, err := meta.Accessor(e.Object); err == nil {
				m.noteString(a.GetResourceVersion())
				if initial && e.Type == watch.Bookmark && a.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					m.listed.Store(true) // its selection is listed: a later full list is a relist
				}
			}
		}
		return e, true
	}), nil
}
