package controller

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/build/crds"
)

// crdEstablishTimeout bounds the wait for freshly applied CRDs.
const crdEstablishTimeout = time.Minute

// EnsureCRDs applies the embedded CRDs and waits until they are Established.
func EnsureCRDs(ctx context.Context, client apiextensionsclient.Interface) error {
	if err := crds.Apply(ctx, client); err != nil {
		return err
	}
	crdApplies.Inc()
	return crds.WaitEstablished(ctx, client, crdEstablishTimeout)
}

// CRDsDrifted reports which embedded CRDs are missing or differ from the
// cluster's copy (spec, and the manifest's labels and annotations).
func CRDsDrifted(ctx context.Context, client apiextensionsclient.Interface) ([]string, error) {
	ms, err := crds.Manifests()
	if err != nil {
		return nil, err
	}
	var drifted []string
	for _, m := range ms {
		live, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, m.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			drifted = append(drifted, m.Name)
			continue
		}
		if err != nil {
			return nil, err
		}
		if crdDiffers(m.CRD, live) {
			drifted = append(drifted, m.Name)
		}
	}
	return drifted, nil
}

func crdDiffers(want, live *apiextensionsv1.CustomResourceDefinition) bool {
	w, l := want.Spec.DeepCopy(), live.Spec.DeepCopy()
	if w.Conversion == nil {
		l.Conversion = nil // defaulted by the apiserver to strategy None
	}
	if !apiequality.Semantic.DeepEqual(w, l) {
		return true
	}
	for k, v := range want.Labels {
		if live.Labels[k] != v {
			return true
		}
	}
	for k, v := range want.Annotations {
		if live.Annotations[k] != v {
			return true
		}
	}
	return false
}

// keepCRDs re-checks the CRDs every interval and re-applies them only when
// they drifted (edited, deleted, or an older version installed).
func keepCRDs(ctx context.Context, client apiextensionsclient.Interface, interval time.Duration) {
	logger := klog.FromContext(ctx)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		drifted, err := CRDsDrifted(ctx, client)
		if err != nil {
			logger.Error(err, "Checking CRDs")
			return
		}
		if len(drifted) == 0 {
			return
		}
		logger.Info("CRDs drifted from the embedded manifests; re-applying", "crds", drifted)
		if err := EnsureCRDs(ctx, client); err != nil {
			logger.Error(fmt.Errorf("re-apply CRDs: %w", err), "Keeping CRDs")
		}
	}, interval)
}
