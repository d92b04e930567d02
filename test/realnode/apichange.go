package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// The next build's API change, as a release adding an optional field
// would make it: DeploymentGrid's spec gains apiChangeField, a string
// defaulting to apiChangeDefault. The upgrade then crosses a CRD that
// differs, and the guide's wait for Established is what lets the new
// controller start on it.
const (
	apiChangeCRD     = "deploymentgrids.superedge.io"
	apiChangeField   = "upgradeProbe"
	apiChangeDefault = "next"
)

// addNextBuildField writes the changed DeploymentGrid CRD into the scratch
// checkout dir: its source (build/crds, which the controller embeds and
// re-applies with --manage-crds, and kustomize applies) and the chart's
// copy (build/chart/crds, which the Helm upgrade applies).
func addNextBuildField(dir string) error {
	for _, p := range []string{"build/crds/superedge.io_deploymentgrids.yaml", "build/chart/crds/superedge.io_deploymentgrids.yaml"} {
		path := filepath.Join(dir, p)
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if len(crd.Spec.Versions) == 0 {
			return fmt.Errorf("%s: no versions", p)
		}
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return fmt.Errorf("%s: version %s has no schema", p, v.Name)
			}
			spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
			if !ok {
				return fmt.Errorf("%s: version %s has no spec", p, v.Name)
			}
			spec.Properties[apiChangeField] = apiextensionsv1.JSONSchemaProps{
				Type:        "string",
				Description: "Added by the real-node test's next build: an optional field with a default.",
				Default:     &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", apiChangeDefault))},
			}
			v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
		out, err := yaml.Marshal(map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1",
			"kind":       "CustomResourceDefinition",
			"metadata":   map[string]any{"name": crd.Name, "annotations": crd.Annotations},
			"spec":       crd.Spec,
		})
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, append([]byte("---\n"), out...), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkAPIChanged: the changed CRD is Established on the apiserver and a
// grid stored before the upgrade reads back with the new field's default
// (the apiserver defaults what it reads from etcd by the served schema).
func checkAPIChanged(ctx context.Context, cfg *rest.Config, namespace, grid string) error {
	crd, err := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, apiChangeCRD, metav1.GetOptions{})
	if err != nil {
		return err
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		return fmt.Errorf("crd %s not Established after the upgrade", apiChangeCRD)
	}
	gvr := schema.GroupVersionResource{Group: "superedge.io", Version: "v1", Resource: "deploymentgrids"}
	obj, err := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace(namespace).Get(ctx, grid, metav1.GetOptions{})
	if err != nil {
		return err
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	if got := spec[apiChangeField]; got != apiChangeDefault {
		return fmt.Errorf("deploymentgrid %s/%s: spec.%s is %v after the upgrade, want the next build's default %q", namespace, grid, apiChangeField, got, apiChangeDefault)
	}
	return nil
}
