package integration

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestManifestsUninstallKeepsShared installs as build/README.md says
// (prerequisites, then default), adds what a cluster shared with SuperEdge
// holds (a grid, objects of SuperEdge's in edge-system: a ConfigMap and its
// wrapper's ServiceAccount), then runs the guide's uninstall, `kubectl delete
// -k default`: every object of ours is gone, while namespace edge-system, its
// foreign objects, the CRDs and the grid remain.
func TestManifestsUninstallKeepsShared(t *testing.T) {
	t.Parallel() // its own control plane
	// The namespace controller finishes deleting servicegroup-system.
	cp := controlplane.StartForTest(t, controlplane.Options{ControllerManager: true})
	k := newKubectl(t, cp)
	ctx := t.Context()
	client := kubernetes.NewForConfigOrDie(cp.Config)

	k.must("apply", "--server-side", "-k", manifestDir("prerequisites"))
	k.must("apply", "--server-side", "-k", manifestDir("default"))
	waitServed(t, cp, "superedge.io/v1", "deploymentgrids", "statefulsetgrids", "servicegrids")
	k.cacheDir = t.TempDir()
	k.must("apply", "-f", filepath.Join("..", "..", "examples", "deploymentgrid.yaml"))
	k.must("-n", "edge-system", "create", "configmap", "edge-coredns", "--from-literal=hosts=")
	k.must("-n", "edge-system", "create", "serviceaccount", "application-grid-wrapper")

	// What default installs, by kind/namespace/name, to check it is all gone.
	installed := renderedObjects(t, k, "default")
	k.must("delete", "-k", manifestDir("default"), "--ignore-not-found", "--wait=true", "--timeout=2m")

	for _, obj := range installed {
		kind, _ := obj["kind"].(string)
		meta := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		args := []string{"get", kind, name, "--ignore-not-found", "-o", "name"}
		if ns != "" {
			args = append(args, "-n", ns)
		}
		if out := strings.TrimSpace(k.must(args...)); out != "" {
			t.Errorf("%s %s/%s left after the uninstall: %s", kind, ns, name, out)
		}
	}
	for _, crd := range []string{"deploymentgrids.superedge.io", "statefulsetgrids.superedge.io", "servicegrids.superedge.io"} {
		k.must("get", "customresourcedefinition", crd)
	}
	k.must("get", "deploymentgrid", "deploymentgrid-demo")
	k.must("-n", "edge-system", "get", "configmap", "edge-coredns")
	k.must("-n", "edge-system", "get", "serviceaccount", "application-grid-wrapper")
	ns, err := client.CoreV1().Namespaces().Get(ctx, "edge-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.DeletionTimestamp != nil {
		t.Errorf("namespace edge-system is being deleted")
	}
	// The controller's own namespace goes with it (nothing else lives there).
	testwait.Eventually(ctx, t, 0, "namespace servicegroup-system gone after the uninstall", func(ctx context.Context) error {
		_, err := client.CoreV1().Namespaces().Get(ctx, "servicegroup-system", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil:
			return errors.New("it still exists")
		default:
			return err
		}
	})
}
