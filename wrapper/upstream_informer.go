package wrapper

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// newUpstreamInformer lists and watches one resource with client-go's
// reflector and calls handler on the informer's own processing goroutine
// (cache.NewInformerWithOptions). A shared informer hands every event on
// through its processor, two more goroutines per handler: on a busy node
// each hand-off is a wait for a CPU between upstream and kube-proxy. The
// Syncer's handler is the only reader of Services and EndpointSlices, so
// nothing is lost by not sharing. Every List and Watch error also goes to
// onError, which a shared informer's watch error handler would get.
func newUpstreamInformer(lw cache.ListerWatcher, example runtime.Object, handler cache.ResourceEventHandler,
	onError func(context.Context, error)) cache.Controller {
	_, controller := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: errorTap{lw: cache.ToListerWatcherWithContext(lw), client: lw, onError: onError},
		ObjectType:    example,
		Handler:       handler,
		Transform:     dropManagedFields,
	})
	return controller
}

// errorTap passes a ListerWatcher's errors to onError as they are returned.
type errorTap struct {
	lw      cache.ListerWatcherWithContext
	client  any // what lw was made from: it tells whether watch-list works
	onError func(context.Context, error)
}

func (t errorTap) List(opts metav1.ListOptions) (runtime.Object, error) {
	return t.ListWithContext(context.Background(), opts)
}

func (t errorTap) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return t.WatchWithContext(context.Background(), opts)
}

func (t errorTap) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	obj, err := t.lw.ListWithContext(ctx, opts)
	if err != nil {
		t.onError(ctx, err)
	}
	return obj, err
}

func (t errorTap) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := t.lw.WatchWithContext(ctx, opts)
	if err != nil && !errors.Is(err, errListShared) { // not a failure: the reflector lists instead
		t.onError(ctx, err)
	}
	return w, err
}

// IsWatchListSemanticsUnSupported keeps what the wrapped ListerWatcher says
// for the reflector.
func (t errorTap) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(t.client)
}
