package wrapper

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// LabelServiceProxyName marks Services (and their EndpointSlices) that
// another proxy than kube-proxy implements.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// kubeProxySelector is the label selector kube-proxy lists and watches
// Services and EndpointSlices with. The wrapper's upstream informers always
// run with it; what it leaves out is fetched only while a client asks for it.
const kubeProxySelector = "!" + LabelServiceProxyName + ",!" + corev1.IsHeadlessService

// withinKubeProxySelection reports whether a request selecting by sel sees
// only objects kube-proxy's selector admits: sel requires both labels to be
// absent.
func withinKubeProxySelection(sel labels.Selector) bool {
	if sel == nil {
		return false
	}
	reqs, _ := sel.Requirements()
	absent := map[string]bool{}
	for _, r := range reqs {
		if r.Operator() == selection.DoesNotExist {
			absent[r.Key()] = true
		}
	}
	return absent[LabelServiceProxyName] && absent[corev1.IsHeadlessService]
}

// newUnproxiedOnDemand fetches the Services and EndpointSlices kube-proxy's
// selector leaves out (headless, or implemented by another proxy) into the
// same caches, while clients ask for them.
func newUnproxiedOnDemand(client kubernetes.Interface, services, slices *mergedCache,
	refilter func(context.Context), watchErrors func(cache.SharedIndexInformer) error) *demand {
	d := &demand{what: "Services and EndpointSlices outside kube-proxy's selector", idle: DefaultOnDemandIdleTimeout}
	d.fetch = func(ctx context.Context, synced func()) {
		with := func(key string) func(*metav1.ListOptions) {
			return func(o *metav1.ListOptions) { o.LabelSelector = key } // the label exists
		}
		runMirrored(ctx, []mirrored{
			{coreinformers.NewFilteredServiceInformer(client, "", 0, cache.Indexers{}, with(LabelServiceProxyName)), services, sourceProxyNamed},
			{coreinformers.NewFilteredServiceInformer(client, "", 0, cache.Indexers{}, with(corev1.IsHeadlessService)), services, sourceHeadless},
			{discoveryinformers.NewFilteredEndpointSliceInformer(client, "", 0, cache.Indexers{}, with(LabelServiceProxyName)), slices, sourceProxyNamed},
			{discoveryinformers.NewFilteredEndpointSliceInformer(client, "", 0, cache.Indexers{}, with(corev1.IsHeadlessService)), slices, sourceHeadless},
		}, watchErrors, func() {
			refilter(ctx)
			synced()
		})
	}
	return d
}

// FetchingUnproxied tells whether the Services and EndpointSlices outside
// kube-proxy's selector are being fetched from upstream.
func (s *Server) FetchingUnproxied() bool { return s.unproxied.Fetching() }
