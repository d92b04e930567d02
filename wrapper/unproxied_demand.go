package wrapper

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// newUnproxiedOnDemand fetches the Services and EndpointSlices kube-proxy's
// selector leaves out (those carrying one of watchcache.KubeProxyExcluded:
// headless, or implemented by another proxy) into the same caches, while
// clients ask for them: one informer per resource and label.
func newUnproxiedOnDemand(client kubernetes.Interface, services, slices *mergedCache,
	refilter func(context.Context), watchErrors func(cache.SharedIndexInformer) error) *demand {
	d := &demand{what: "Services and EndpointSlices outside kube-proxy's selector", idle: DefaultOnDemandIdleTimeout}
	d.fetch = func(ctx context.Context, synced func()) {
		with := func(key string) func(*metav1.ListOptions) {
			return func(o *metav1.ListOptions) { o.LabelSelector = key } // the label exists
		}
		var ms []mirrored
		for i, label := range watchcache.KubeProxyExcluded {
			ms = append(ms, mirrored{coreinformers.NewFilteredServiceInformer(client, "", 0, cache.Indexers{}, with(label)), services, sourceExcluded + i})
		}
		for i, label := range watchcache.KubeProxyExcluded {
			ms = append(ms, mirrored{discoveryinformers.NewFilteredEndpointSliceInformer(client, "", 0, cache.Indexers{}, with(label)), slices, sourceExcluded + i})
		}
		runMirrored(ctx, ms, watchErrors, func() {
			refilter(ctx)
			synced()
		})
	}
	return d
}
