package wrapper_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// stormConsumer is one client's unmodified client-go informers, behind a
// wrapper or straight to the apiserver, counted by its tap.
type stormConsumer struct {
	tap *resourceTap
	// services holds every Service the consumer sees.
	services cache.SharedIndexInformer
	// watches is how many watches of each resource it holds once synced.
	watches map[string]int
}

// watching reports whether the consumer has every watch open.
func (c *stormConsumer) watching() bool {
	open := c.tap.counts().open
	for r, n := range c.watches {
		if open[r] < n {
			return false
		}
	}
	return true
}

// startFactories starts the factories and waits for synced.
func startFactories(b *testing.B, what string, fs []informers.SharedInformerFactory, synced ...cache.InformerSynced) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() {
		cancel()
		for _, f := range fs {
			f.Shutdown()
		}
	})
	for _, f := range fs {
		f.Start(ctx.Done())
	}
	sctx, scancel := context.WithTimeout(ctx, 5*time.Minute)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		b.Fatalf("%s did not sync", what)
	}
}

// startKubeProxyConsumer: informers as kube-proxy runs them, Services and
// EndpointSlices by its label selector, its own Node, and ServiceCIDRs.
func startKubeProxyConsumer(b *testing.B, cfg *rest.Config, node string) *stormConsumer {
	b.Helper()
	k := &stormConsumer{tap: newResourceTap(), watches: map[string]int{"services": 1, "endpointslices": 1, "nodes": 1, "servicecidrs": 1}}
	c := kubernetes.NewForConfigOrDie(k.tap.wrap(cfg))
	sel := "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	nf := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + node
	}))
	cf := informers.NewSharedInformerFactory(c, 0)
	k.services = f.Core().V1().Services().Informer()
	startFactories(b, "kube-proxy-shaped informers of "+node+" at "+cfg.Host, []informers.SharedInformerFactory{f, nf, cf},
		k.services.HasSynced, f.Discovery().V1().EndpointSlices().Informer().HasSynced,
		nf.Core().V1().Nodes().Informer().HasSynced, cf.Networking().V1().ServiceCIDRs().Informer().HasSynced)
	return k
}

// startCoreDNSConsumer: the informers of the node's CoreDNS as
// corefile/Corefile.node configures it, all on cfg (the wrapper's DNS view,
// or the apiserver): the kubernetes plugin's ("pods insecure": every
// Service, EndpointSlice and Namespace, CoreDNS's plugin/kubernetes
// controller.go) and gridhosts' for Services and EndpointSlices
// (plugin/gridhosts/informers/watcher.go: grid-keyed non-headless
// Services, headless Services, headless Services' EndpointSlices); over
// protobuf, as both ask.
func startCoreDNSConsumer(b *testing.B, cfg *rest.Config, node string) *stormConsumer {
	b.Helper()
	k := &stormConsumer{tap: newResourceTap(), watches: map[string]int{"services": 3, "endpointslices": 2, "namespaces": 1}}
	c := kubernetes.NewForConfigOrDie(k.tap.wrap(cfg))
	plugin := informers.NewSharedInformerFactory(c, 0)
	gridServices := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector, o.LabelSelector = "spec.clusterIP!=None", superedgev1.LabelGridUniqKey
	}))
	headlessServices := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.clusterIP=None"
	}))
	headlessSlices := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = "kubernetes.io/service-name,service.kubernetes.io/headless"
	}))
	k.services = plugin.Core().V1().Services().Informer()
	startFactories(b, "CoreDNS-shaped informers of "+node+" at "+cfg.Host,
		[]informers.SharedInformerFactory{plugin, gridServices, headlessServices, headlessSlices},
		k.services.HasSynced, plugin.Discovery().V1().EndpointSlices().Informer().HasSynced,
		plugin.Core().V1().Namespaces().Informer().HasSynced,
		gridServices.Core().V1().Services().Informer().HasSynced, headlessServices.Core().V1().Services().Informer().HasSynced,
		headlessSlices.Discovery().V1().EndpointSlices().Informer().HasSynced)
	return k
}
