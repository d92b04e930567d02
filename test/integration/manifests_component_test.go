package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testwait"
)

// applyPrerequisites installs the grid CRDs (build/manifests/prerequisites)
// and waits until the apiserver serves them.
func applyPrerequisites(k *kubectlRunner) {
	k.t.Helper()
	k.must("apply", "--server-side", "-k", manifestDir("prerequisites"))
	waitEstablished(k, "crd/deploymentgrids.superedge.io", "crd/statefulsetgrids.superedge.io", "crd/servicegrids.superedge.io")
}

// waitEstablished waits until the apiserver serves the CRDs. kubectl wait
// with a jsonpath over conditions fails at once ("<nil> is not array or
// slice") when a CRD has no status yet, so it is asked again until it
// succeeds, for two minutes at most.
func waitEstablished(k *kubectlRunner, crds ...string) {
	k.t.Helper()
	args := append([]string{"wait", `--for=jsonpath={.status.conditions[?(@.type=="Established")].status}=True`, "--timeout=120s"}, crds...)
	testwait.Eventually(k.t.Context(), k.t, 0, "CRDs Established", func(context.Context) error {
		if out, err := k.run("", args...); err != nil {
			return fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
		}
		return nil
	})
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
