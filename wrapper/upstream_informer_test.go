package wrapper

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// noWatchList is a client that says it cannot serve watch-list.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// TestUpstreamInformerTapsErrors (unit): a refused list reaches onError, as
// a shared informer's watch error handler would have, and the informer is
// not synced; once upstream answers, the handler gets the object without
// managed fields and the informer is synced. The ListerWatcher's "no
// watch-list" is kept: were it lost, the reflector would open a watch-list
// on the fake and never list.
func TestUpstreamInformerTapsErrors(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			if refuse.Load() {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", errors.New("not this user"))
			}
			return &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: "svc", ResourceVersion: "1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
			}}}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}, noWatchList{})
	errs := make(chan error, 1)
	added := make(chan *corev1.Service, 1)
	inf := newUpstreamInformer(lw, &corev1.Service{}, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { added <- obj.(*corev1.Service) },
	}, func(_ context.Context, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()

	select {
	case err := <-errs:
		if !apierrors.IsForbidden(err) {
			t.Fatalf("onError got %v, want the list's 403", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the refused list never reached onError")
	}
	if inf.HasSynced() {
		t.Fatal("synced although every list was refused")
	}
	refuse.Store(false)
	select {
	case svc := <-added:
		if svc.Name != "svc" || svc.ManagedFields != nil {
			t.Fatalf("handler got %s with managed fields %v, want svc without", svc.Name, svc.ManagedFields)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the handler never got the listed Service")
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !inf.HasSynced() {
		if time.Now().After(deadline) {
			t.Fatal("not synced after the handler got the list")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestErrorTapLeavesSharedRelistUnreported (unit): the shared list group's
// refusal of a relist as a watch-list (errListShared, on which the
// reflector lists instead and the group answers) is handed back to the
// reflector unchanged but is not reported as an upstream error; a real
// refusal from upstream, of a watch or a list, still is.
func TestErrorTapLeavesSharedRelistUnreported(t *testing.T) {
	ctx := t.Context()
	var reported []error
	tapOf := func(lw cache.ListerWatcherWithContext) errorTap {
		return errorTap{lw: lw, client: lw, onError: func(_ context.Context, err error) { reported = append(reported, err) }}
	}
	watchList := metav1.ListOptions{SendInitialEvents: ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}

	rv := &atomic.Int64{}
	rv.Store(10)
	up := &watchListServices{countingServices: &countingServices{rv: rv, all: plainAndHeadless()}}
	g := newSharedRelist(up.lw(""))
	var members []*relistMember
	for _, sel := range []string{watchcache.KubeProxySelector, corev1.IsHeadlessService} {
		m, err := g.join(up.lw(sel), sel)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	tap := tapOf(members[0])
	// The first syncs: watch-lists of each member's own selection, read
	// to their end (the member counts as listed from there).
	for _, lw := range []cache.ListerWatcherWithContext{tap, members[1]} {
		w, err := lw.WatchWithContext(ctx, watchList)
		if err != nil {
			t.Fatalf("a first sync as a watch-list: %v", err)
		}
		for e := range w.ResultChan() {
			if e.Type == watch.Bookmark {
				break
			}
		}
		w.Stop()
	}
	// A relist beside the other member: the group answers it.
	if w, err := tap.WatchWithContext(ctx, watchList); !errors.Is(err, errListShared) || w != nil {
		t.Fatalf("a relist beside another informer through the tap: %v, %v; want errListShared", w, err)
	}
	if _, err := tap.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the group's answer to the relist: %v", err)
	}
	if len(reported) != 0 {
		t.Fatalf("reported as upstream errors: %v; want none for the group's refusal", reported)
	}

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", errors.New("not this user"))
	refusing := tapOf(&cache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, forbidden },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, forbidden },
	})
	if _, err := refusing.WatchWithContext(ctx, watchList); err != forbidden {
		t.Fatalf("upstream's refused watch-list: %v, want its 403", err)
	}
	if _, err := refusing.ListWithContext(ctx, metav1.ListOptions{}); err != forbidden {
		t.Fatalf("upstream's refused list: %v, want its 403", err)
	}
	if len(reported) != 2 || reported[0] != forbidden || reported[1] != forbidden {
		t.Fatalf("reported %v; want upstream's two refusals", reported)
	}
}
