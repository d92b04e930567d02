package integration

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestManifestsNoSuperEdgeNames checks that no object of ours has the kind,
// namespace and name of one of SuperEdge's (test/realnode's stand-in for its
// manifests), and that no binding of ours names one of SuperEdge's
// ServiceAccounts: otherwise SuperEdge's RBAC (its wrapper's binding gives
// every verb on Secrets) would reach our components during a migration, and
// our uninstall would delete SuperEdge's objects. The edge-system Namespace
// is shared on purpose and kept by the uninstall (prerequisites).
func TestManifestsNoSuperEdgeNames(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "realnode", "testdata", "superedge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	superEdge := map[string]bool{}
	superEdgeAccounts := map[string]bool{}
	for _, o := range decodeObjects(t, string(raw)) {
		superEdge[objectKey(o)] = true
		if o.GetKind() == "ServiceAccount" {
			superEdgeAccounts[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	if !superEdgeAccounts["edge-system/application-grid-wrapper"] {
		t.Fatalf("SuperEdge's wrapper ServiceAccount not in the fixture: %v", superEdgeAccounts)
	}

	bin := controlplane.BinaryForTest(t, controlplane.Kubectl)
	k := &kubectlRunner{t: t, bin: bin, kubeconfig: filepath.Join(t.TempDir(), "none"), cacheDir: t.TempDir()}
	for _, dir := range []string{"default", "coredns-shared", "node-identity", "monitoring", "site-stream"} {
		for _, o := range decodeObjects(t, k.must("kustomize", manifestDir(dir))) {
			if o.GetKind() == "Namespace" {
				continue
			}
			if superEdge[objectKey(o)] {
				t.Errorf("%s: %s has SuperEdge's name", dir, objectKey(o))
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				s, _ := s.(map[string]any)
				if s["kind"] == "ServiceAccount" && superEdgeAccounts[fmt.Sprint(s["namespace"], "/", s["name"])] {
					t.Errorf("%s: %s binds SuperEdge's ServiceAccount %s/%s", dir, objectKey(o), s["namespace"], s["name"])
				}
			}
			if sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName"); superEdgeAccounts[o.GetNamespace()+"/"+sa] {
				t.Errorf("%s: %s runs as SuperEdge's ServiceAccount %s", dir, objectKey(o), sa)
			}
		}
	}
}

func objectKey(o unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func decodeObjects(t *testing.T, manifests string) []unstructured.Unstructured {
	t.Helper()
	var objs []unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if o != nil {
			objs = append(objs, unstructured.Unstructured{Object: o})
		}
	}
	if len(objs) == 0 {
		t.Fatal("no objects decoded")
	}
	return objs
}
