package crds

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// kubectlApplyAnnotationLimit is what a client-side `kubectl apply` can
// keep of an object in its last-applied annotation (the apiserver's
// 256 KiB bound on all annotations).
const kubectlApplyAnnotationLimit = 256 << 10

// The grid CRDs embed apps/v1 workload specs; hack/tools/crd-template-docs
// leaves their schemas whole and drops their descriptions, which made each
// CRD about 650 KB of JSON (1.4 MB of YAML).
func TestGridCRDsCarryNoTemplateDocs(t *testing.T) {
	ms, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if len(m.JSON) > kubectlApplyAnnotationLimit {
			t.Errorf("%s: %d bytes of JSON, more than a client-side kubectl apply can annotate (%d)", m.Name, len(m.JSON), kubectlApplyAnnotationLimit)
		}
		kind := m.CRD.Spec.Names.Kind
		if kind != "DeploymentGrid" && kind != "StatefulSetGrid" {
			continue
		}
		spec := m.CRD.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		for _, field := range []string{"template", "templatePool", "gridUniqKey"} {
			s, ok := spec.Properties[field]
			if !ok {
				t.Fatalf("%s: no spec.%s", m.Name, field)
			}
			if s.Description == "" {
				t.Errorf("%s: spec.%s lost its own description", m.Name, field)
			}
		}
		var described, schemas int
		for _, field := range []string{"template", "templatePool"} {
			walkBelow(spec.Properties[field], func(s apiextensionsv1.JSONSchemaProps) {
				schemas++
				if s.Description != "" {
					described++
				}
			})
		}
		if described > 0 {
			t.Errorf("%s: %d of the %d schemas below spec.template and spec.templatePool have a description", m.Name, described, schemas)
		}
		// The schemas are whole: the pod template's containers are still
		// validated (a trimmed schema would have lost them).
		containers := spec.Properties["template"].Properties["template"].Properties["spec"].Properties["containers"]
		if containers.Items == nil || containers.Items.Schema == nil || containers.Items.Schema.Properties["image"].Type != "string" {
			t.Errorf("%s: spec.template.template.spec.containers[].image has no schema", m.Name)
		}
	}
}

// walkBelow calls f for every schema nested in s.
func walkBelow(s apiextensionsv1.JSONSchemaProps, f func(apiextensionsv1.JSONSchemaProps)) {
	var subs []apiextensionsv1.JSONSchemaProps
	for _, p := range s.Properties {
		subs = append(subs, p)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		subs = append(subs, *s.AdditionalProperties.Schema)
	}
	if s.Items != nil {
		if s.Items.Schema != nil {
			subs = append(subs, *s.Items.Schema)
		}
		subs = append(subs, s.Items.JSONSchemas...)
	}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	for _, sub := range subs {
		f(sub)
		walkBelow(sub, f)
	}
}
