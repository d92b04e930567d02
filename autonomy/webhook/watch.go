package webhook

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"
)

// configWatch follows the one ValidatingWebhookConfiguration registered
// (a field selector on its name: the controller's RBAC names it), so that
// an edit or a deletion by someone else is put back within seconds rather
// than at the next leader's start.
type configWatch struct {
	lister   listersv1.ValidatingWebhookConfigurationLister
	synced   cache.InformerSynced
	name     string
	changed  chan struct{} // one pending signal at most
	informer informers.SharedInformerFactory
}

func newConfigWatch(kube kubernetes.Interface, name string) *configWatch {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}))
	inf := factory.Admissionregistration().V1().ValidatingWebhookConfigurations()
	w := &configWatch{lister: inf.Lister(), name: name, changed: make(chan struct{}, 1), informer: factory}
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	})
	w.synced = inf.Informer().HasSynced
	return w
}

// start runs the informer until ctx ends.
func (w *configWatch) start(ctx context.Context) { w.informer.Start(ctx.Done()) }

// current is the configuration as last seen (nil: none); ok is false until
// the informer has synced.
func (w *configWatch) current() (cfg *admissionregistrationv1.ValidatingWebhookConfiguration, ok bool, err error) {
	if !w.synced() {
		return nil, false, nil
	}
	cfg, err = w.lister.Get(w.name)
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	return cfg, err == nil, err
}
