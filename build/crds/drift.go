package crds

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Drifted reports which embedded CRDs are missing or differ from the
// cluster's copy (spec, and the manifest's labels and annotations): the
// controller re-applies them, `kubectl grid doctor` reports them.
func Drifted(ctx context.Context, client apiextensionsclient.Interface) ([]string, error) {
	ms, err := Manifests()
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
		if differs(m.CRD, live) {
			drifted = append(drifted, m.Name)
		}
	}
	return drifted, nil
}

func differs(want, live *apiextensionsv1.CustomResourceDefinition) bool {
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
