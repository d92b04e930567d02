package controlplane

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/servicegroup/servicegroup/build/crds"
)

func kv(key, value string) seedKV {
	return seedKV{Key: base64.StdEncoding.EncodeToString([]byte(key)), Value: base64.StdEncoding.EncodeToString([]byte(value))}
}

// TestCheckCRDSeed: a seed holds each embedded CRD once, stored as
// kube-apiserver stores objects, and nothing else.
func TestCheckCRDSeed(t *testing.T) {
	ms, err := crds.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	var whole []seedKV
	for _, m := range ms {
		whole = append(whole, kv(crdPrefix+m.Name, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition"}`))
	}
	if err := checkCRDSeed(whole); err != nil {
		t.Fatalf("a whole seed: %v", err)
	}
	for name, c := range map[string]struct {
		kvs  []seedKV
		want string
	}{
		"one missing":  {whole[1:], "has no " + ms[0].Name},
		"empty":        {nil, "has no"},
		"another key":  {append(append([]seedKV{}, whole...), kv(crdPrefix+"other.example.com", "k8s\x00")), "holds " + crdPrefix + "other.example.com"},
		"another kind": {append([]seedKV{kv(crdPrefix+ms[0].Name, `{"apiVersion":"v1","kind":"ConfigMap"}`)}, whole[1:]...), "not a CustomResourceDefinition"},
		"not JSON":     {append([]seedKV{kv(crdPrefix+ms[0].Name, "\x00garbage")}, whole[1:]...), "not a CustomResourceDefinition"},
		"not base64":   {append([]seedKV{{Key: "%%%", Value: ""}}, whole...), "key:"},
	} {
		err := checkCRDSeed(c.kvs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: checkCRDSeed = %v, want an error with %q", name, err, c.want)
		}
	}
}

// TestSeededCRDsAreServed: a control plane started from the seed the first
// start left serves the CRDs as one that applied them: Established, as the
// manifests say (no drift), validating custom objects by their schema.
func TestSeededCRDsAreServed(t *testing.T) {
	requireBinaries(t)
	first := StartForTest(t, Options{CRDs: true})
	path, err := crdSeedPath(first.apiServerBinary())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no seed after a start with CRDs: %v", err)
	}
	first.Stop()

	started := time.Now()
	cp := StartForTest(t, Options{CRDs: true})
	ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), "deploymentgrids.superedge.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Truncated to seconds, as creationTimestamp is.
	if !crd.CreationTimestamp.Time.Before(started.Truncate(time.Second)) {
		t.Fatalf("the CRD was made at %s, after the control plane's start at %s: not from the seed", crd.CreationTimestamp, started)
	}
	if !established(crd) {
		t.Fatalf("seeded CRD not Established: %+v", crd.Status.Conditions)
	}
	drifted, err := crds.Drifted(t.Context(), ext)
	if err != nil || len(drifted) > 0 {
		t.Fatalf("seeded CRDs drifted from the manifests: %v, %v", drifted, err)
	}

	grids := dynamic.NewForConfigOrDie(cp.Config).Resource(schema.GroupVersionResource{Group: "superedge.io", Version: "v1", Resource: "deploymentgrids"}).Namespace("default")
	grid := func(replicas any) *unstructured.Unstructured {
		labels := map[string]any{"app": "seed"}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "superedge.io/v1", "kind": "DeploymentGrid",
			"metadata": map[string]any{"name": "seed"},
			"spec": map[string]any{"gridUniqKey": "zone", "template": map[string]any{
				"replicas": replicas,
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "example.invalid/c:1"}}}},
			}},
		}}
	}
	if _, err := grids.Create(t.Context(), grid("two"), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("a DeploymentGrid with replicas \"two\": %v, want Invalid from the schema", err)
	}
	if _, err := grids.Create(t.Context(), grid(int64(2)), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a valid DeploymentGrid: %v", err)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
