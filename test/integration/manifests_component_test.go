package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// applyPrerequisites installs the grid CRDs (build/manifests/prerequisites)
// and waits until the apiserver serves them.
func applyPrerequisites(k *kubectlRunner) {
	k.t.Helper()
	k.must("apply", "--server-side", "-k", manifestDir("prerequisites"))
	k.must("wait", `--for=jsonpath={.status.conditions[?(@.type=="Established")].status}=True`, "--timeout=120s",
		"crd/deploymentgrids.superedge.io", "crd/statefulsetgrids.superedge.io", "crd/servicegrids.superedge.io")
}

// defaultWithComponent writes an overlay of build/manifests/default with the
// named component (build/manifests/<component>) and returns its directory.
func defaultWithComponent(t *testing.T, component string) string {
	t.Helper()
	overlay := t.TempDir()
	// kustomize takes only relative paths to other kustomizations.
	rel := func(dir string) string {
		p, err := filepath.Abs(manifestDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		if p, err = filepath.Rel(overlay, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n", rel("default"), rel(component))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}
