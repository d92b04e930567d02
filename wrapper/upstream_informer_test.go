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
