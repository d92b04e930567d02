package wrapper

import (
	"context"
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
