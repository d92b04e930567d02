// Command crd-template-docs drops the descriptions inside the workload
// templates of controller-gen's CRD manifests (spec.template and
// spec.templatePool of DeploymentGrid and StatefulSetGrid). Those are
// apps/v1 DeploymentSpec and StatefulSetSpec: their descriptions, which
// `kubectl explain deployment.spec` shows, were four fifths of each CRD
// (about 1.4 MB of YAML), paid on every apply, read and drift check, and
// beyond the 256 KiB a client-side `kubectl apply` can annotate. The
// schemas themselves stay whole (validation and pruning are unchanged),
// and so do the descriptions of the grids' own fields.
//
// Usage: crd-template-docs FILE...  (rewrites the files in place)
package main

import (
	"bytes"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// templateFields are the properties of a grid's spec that embed a
// Kubernetes workload spec.
var templateFields = []string{"template", "templatePool"}

func main() {
	for _, f := range os.Args[1:] {
		if err := trim(f); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			os.Exit(1)
		}
	}
}

func trim(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return err
	}
	if !embedsWorkload(crd) {
		return nil
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	for _, v := range versions {
		spec, _ := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties").(map[string]any)
		for _, f := range templateFields {
			if s, ok := spec[f].(map[string]any); ok {
				dropBelow(s)
			}
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	// controller-gen starts each manifest with a document marker.
	out = append([]byte("---\n"), out...)
	if bytes.Equal(out, data) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// embedsWorkload: the CRD is a DeploymentGrid's or a StatefulSetGrid's.
func embedsWorkload(crd map[string]any) bool {
	kind, _ := dig(crd, "spec", "names", "kind").(string)
	return kind == "DeploymentGrid" || kind == "StatefulSetGrid"
}

// dropBelow removes the description of every schema below s (s keeps its
// own), walking only schema positions: a property named "description" is
// a field, not a description, and stays.
func dropBelow(s map[string]any) {
	for _, sub := range subSchemas(s) {
		delete(sub, "description")
		dropBelow(sub)
	}
}

// subSchemas are the schemas nested directly in s.
func subSchemas(s map[string]any) []map[string]any {
	var out []map[string]any
	add := func(v any) {
		if m, ok := v.(map[string]any); ok {
			out = append(out, m)
		}
	}
	for _, key := range []string{"properties", "patternProperties", "definitions"} {
		if m, ok := s[key].(map[string]any); ok {
			for _, v := range m {
				add(v)
			}
		}
	}
	for _, key := range []string{"additionalProperties", "additionalItems", "not", "items"} {
		add(s[key])
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf", "items"} {
		if l, ok := s[key].([]any); ok {
			for _, v := range l {
				add(v)
			}
		}
	}
	return out
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}
