package wrapper

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// An invalid annotation, and a bad local endpoint of default/kubernetes, are
// logged when they appear or change, not on every re-filter.
func TestProblemsLoggedOnce(t *testing.T) {
	errors := map[string]int{}
	logger := funcr.New(func(_, args string) {}, funcr.Options{})
	logger = logr.New(&countingSink{LogSink: logger.GetSink(), errors: errors})
	ctx := klog.NewContext(context.Background(), logger)

	c := Caches{
		Services:       cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		Endpoints:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, endpointsIndexers),
		EndpointSlices: cache.NewIndexer(cache.MetaNamespaceKeyFunc, sliceIndexers),
		Nodes:          cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
	s := newSyncer("node0", c, benchStores())
	setAnnotation := func(v string) {
		_ = c.Services.Update(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc",
			Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: v}}})
	}
	setLocal := func(port string) {
		_ = c.Endpoints.Update(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes",
			Annotations: map[string]string{superedgev1.AnnotationLocalEndpoint: "127.0.0.1", superedgev1.AnnotationLocalPort: port}}})
	}
	svc, kube := syncKey{namespace: "ns", name: "svc"}, syncKey{namespace: "default", name: "kubernetes"}
	for _, step := range []struct {
		annotation, port string
		want             int // errors logged so far
	}{
		{"not json", "x", 2},
		{"not json", "x", 2},  // unchanged: silent
		{`["a","a"]`, "0", 4}, // changed: logged again
		{`["zone1"]`, "443", 4},
		{"not json", "x", 6}, // came back: logged again
		{"not json", "x", 6},
	} {
		setAnnotation(step.annotation)
		setLocal(step.port)
		s.sync(ctx, svc)
		s.sync(ctx, kube)
		if n := errors["Serving Service unfiltered"] + errors["Serving default/kubernetes unchanged"]; n != step.want {
			t.Fatalf("after %q / port %q: %d errors logged, want %d (%v)", step.annotation, step.port, n, step.want, errors)
		}
	}
}

type countingSink struct {
	logr.LogSink
	errors map[string]int
}

func (c *countingSink) Error(err error, msg string, kv ...any) { c.errors[msg]++ }
