package wrapper

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// newUnproxiedOnDemand fetches the Services and EndpointSlices kube-proxy's
// selector leaves out (those carrying one of watchcache.KubeProxyExcluded:
// headless, or implemented by another proxy) into the same caches, while
// clients ask for them: one informer per resource and label, relisting
// with the resource's other informers (svcRelist, sliceRelist).
func newUnproxiedOnDemand(client kubernetes.Interface, services, slices *mergedCache, svcRelist, sliceRelist *sharedRelist,
	refilter func(context.Context), watchErrors func(cache.SharedIndexInformer) error) *demand {
	d := &demand{what: "Services and EndpointSlices outside kube-proxy's selector", idle: DefaultOnDemandIdleTimeout}
	d.fetch = func(ctx context.Context, synced func()) {
		var ms []mirrored
		var joined []func()
		add := func(c rest.Interface, resource string, example runtime.Object, relist *sharedRelist, into *mergedCache) {
			for i, label := range watchcache.KubeProxyExcluded { // the label exists
				m, err := relist.join(selectedListWatch(c, resource, label), label)
				if err != nil {
					klog.FromContext(ctx).Error(err, "On-demand informer", "resource", resource, "selector", label)
					continue
				}
				joined = append(joined, func() { relist.leave(m) })
				ms = append(ms, mirrored{cache.NewSharedIndexInformer(m, example, 0, cache.Indexers{}), into, sourceExcluded + i})
			}
		}
		add(client.CoreV1().RESTClient(), watchcache.Services.Name, &corev1.Service{}, svcRelist, services)
		add(client.DiscoveryV1().RESTClient(), watchcache.EndpointSlices.Name, &discoveryv1.EndpointSlice{}, sliceRelist, slices)
		defer func() {
			for _, leave := range joined {
				leave()
			}
		}()
		runMirrored(ctx, ms, watchErrors, func() {
			refilter(ctx)
			synced()
		})
	}
	return d
}
