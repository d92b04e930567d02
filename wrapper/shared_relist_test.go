package wrapper

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// countingServices lists the Services of upstream matching what it is
// asked, at resourceVersion rv, and counts its lists.
type countingServices struct {
	rv    *atomic.Int64
	lists atomic.Int32
	all   []corev1.Service
}

func (c *countingServices) lw(selector string) cache.ListerWatcherWithContext {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			c.lists.Add(1)
			out := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(c.rv.Load(), 10)}}
			sel, err := labels.Parse(selector)
			if err != nil {
				return nil, err
			}
			for _, s := range c.all {
				if sel.Matches(labels.Set(s.Labels)) {
					out.Items = append(out.Items, s)
				}
			}
			return out, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewEmptyWatch(), nil
		},
	}
}

// TestSharedRelist: informers relisting after a 410 are answered from one
// unselected list, each with its own selection; a first list and a lone
// informer list their own selection; a list older than what an informer
// has seen is never served to it.
func TestSharedRelist(t *testing.T) {
	ctx := t.Context()
	rv := &atomic.Int64{}
	rv.Store(10)
	svc := func(name string, labels map[string]string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}}
	}
	up := &countingServices{rv: rv, all: []corev1.Service{
		svc("plain", nil),
		svc("headless", map[string]string{corev1.IsHeadlessService: ""}),
		svc("other", map[string]string{watchcache.LabelServiceProxyName: "x"}),
	}}
	g := newSharedRelist(up.lw(""))
	join := func(sel string) *relistMember {
		m, err := g.join(up.lw(sel), sel)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	names := func(m *relistMember) []string {
		t.Helper()
		obj, err := m.ListWithContext(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range obj.(*corev1.ServiceList).Items {
			out = append(out, s.Name)
		}
		return out
	}
	main := join(watchcache.KubeProxySelector)
	if got := names(main); !slices.Equal(got, []string{"plain"}) || up.lists.Load() != 1 {
		t.Fatalf("a lone informer's list: %q in %d lists", got, up.lists.Load())
	}
	if got := names(main); !slices.Equal(got, []string{"plain"}) || up.lists.Load() != 2 {
		t.Fatalf("a lone informer's relist: %q in %d lists, want its own selection", got, up.lists.Load())
	}
	headless, other := join(corev1.IsHeadlessService), join(watchcache.LabelServiceProxyName)
	names(headless)
	names(other)
	if up.lists.Load() != 4 {
		t.Fatalf("first lists of on-demand informers: %d upstream lists, want their own two", up.lists.Load()-2)
	}
	rv.Store(20) // the apiserver restarted: every watch ends in 410
	for m, want := range map[*relistMember][]string{main: {"plain"}, headless: {"headless"}, other: {"other"}} {
		if got := names(m); !slices.Equal(got, want) {
			t.Fatalf("relist %q, want %q", got, want)
		}
	}
	if n := up.lists.Load(); n != 5 {
		t.Fatalf("three relists made %d upstream lists, want one", n-4)
	}
	if g.last != nil {
		t.Fatal("the shared list is kept after every informer has it")
	}
	// One informer sees past the shared list: a later relist of it is not
	// answered from the older one.
	rv.Store(30)
	names(main) // a new shared list at 30, held for the others
	headless.note(35)
	rv.Store(40)
	names(headless)
	if n := up.lists.Load(); n != 7 {
		t.Fatalf("%d upstream lists, want a new one for an informer past the shared list", n-5)
	}
	g.leave(other)
	g.leave(headless)
	main.note(45)
	rv.Store(50)
	names(main)
	if n := up.lists.Load(); n != 8 {
		t.Fatalf("a lone informer again: %d upstream lists", n-7)
	}
}

// watchListServices is countingServices answering a watch-list
// (sendInitialEvents) too: its selection as ADDED events, then the
// bookmark that ends the initial events. It counts them.
type watchListServices struct {
	*countingServices
	watchLists atomic.Int32
}

func (c *watchListServices) lw(selector string) cache.ListerWatcherWithContext {
	plain := c.countingServices.lw(selector).(*cache.ListWatch)
	plain.WatchFuncWithContext = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		if opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
			return watch.NewEmptyWatch(), nil
		}
		c.watchLists.Add(1)
		c.lists.Add(-1) // the list below is the watch-list's, not a LIST
		obj, err := plain.ListWithContextFunc(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		list := obj.(*corev1.ServiceList)
		w := watch.NewFakeWithChanSize(len(list.Items)+1, false)
		for i := range list.Items {
			s := list.Items[i].DeepCopy()
			s.ResourceVersion = list.ResourceVersion
			w.Add(s)
		}
		w.Action(watch.Bookmark, &corev1.Service{ObjectMeta: metav1.ObjectMeta{ResourceVersion: list.ResourceVersion,
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		return w, nil
	}
	return plain
}

// TestSharedRelistWatchList (unit): an informer's first sync, and a relist
// while it runs alone, are a watch-list of its own selection (what
// kube-apiserver compresses); a relist while other informers of the
// resource run is refused as a watch-list (errListShared, on which the
// reflector falls back to List) and answered by the group's one list.
func TestSharedRelistWatchList(t *testing.T) {
	ctx := t.Context()
	rv := &atomic.Int64{}
	rv.Store(10)
	up := &watchListServices{countingServices: &countingServices{rv: rv, all: plainAndHeadless()}}
	g := newSharedRelist(up.lw(""))
	join := func(sel string) *relistMember {
		m, err := g.join(up.lw(sel), sel)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	watchList := func(m *relistMember) ([]string, error) {
		w, err := m.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		if err != nil {
			return nil, err
		}
		defer w.Stop()
		var names []string
		for e := range w.ResultChan() {
			if e.Type == watch.Bookmark {
				break
			}
			names = append(names, e.Object.(*corev1.Service).Name)
		}
		return names, nil
	}
	main := join(watchcache.KubeProxySelector)
	if got, err := watchList(main); err != nil || !slices.Equal(got, []string{"plain"}) || !main.listed.Load() {
		t.Fatalf("a lone informer's first sync: %q, %v, listed %v; want its selection by watch-list", got, err, main.listed.Load())
	}
	if got, err := watchList(main); err != nil || !slices.Equal(got, []string{"plain"}) {
		t.Fatalf("a lone informer's relist: %q, %v; want a watch-list of its selection", got, err)
	}
	headless := join(corev1.IsHeadlessService)
	if got, err := watchList(headless); err != nil || !slices.Equal(got, []string{"headless"}) {
		t.Fatalf("an on-demand informer's first sync: %q, %v; want a watch-list of its selection", got, err)
	}
	if up.watchLists.Load() != 3 || up.lists.Load() != 0 {
		t.Fatalf("%d watch-lists and %d lists upstream, want 3 and none", up.watchLists.Load(), up.lists.Load())
	}
	rv.Store(20) // every watch ended in 410: both relist
	for m, want := range map[*relistMember]string{main: "plain", headless: "headless"} {
		if _, err := watchList(m); !errors.Is(err, errListShared) {
			t.Fatalf("a relist beside another informer as a watch-list: %v, want errListShared", err)
		}
		obj, err := m.ListWithContext(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if items := obj.(*corev1.ServiceList).Items; len(items) != 1 || items[0].Name != want {
			t.Fatalf("shared relist gave %v, want %s", items, want)
		}
	}
	if up.watchLists.Load() != 3 || up.lists.Load() != 1 {
		t.Fatalf("two relists: %d watch-lists and %d lists upstream, want one list", up.watchLists.Load()-3, up.lists.Load())
	}
	g.leave(headless)
	rv.Store(30)
	if got, err := watchList(main); err != nil || !slices.Equal(got, []string{"plain"}) || up.watchLists.Load() != 4 {
		t.Fatalf("alone again: %q, %v; want a watch-list of its selection", got, err)
	}
}

// plainAndHeadless are a plain and a headless Service in "ns": what the
// kube-proxy selector and the headless one each select.
func plainAndHeadless() []corev1.Service {
	return []corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "headless", Labels: map[string]string{corev1.IsHeadlessService: ""}}},
	}
}
