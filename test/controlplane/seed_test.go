package controlplane

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/build/crds"
)

func kv(key, value string) seedKV {
	return seedKV{Key: base64.StdEncoding.EncodeToString([]byte(key)), Value: base64.StdEncoding.EncodeToString([]byte(value))}
}

// wholeSeed is a seed of the bootstrapped objects, and of the embedded CRDs
// if withCRDs, with made-up values.
func wholeSeed(t *testing.T, withCRDs bool) []seedKV {
	t.Helper()
	var kvs []seedKV
	for _, k := range bootstrapped {
		kvs = append(kvs, kv(k, "k8s\x00"))
	}
	if withCRDs {
		ms, err := crds.Manifests()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			kvs = append(kvs, kv(crdPrefix+m.Name, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition"}`))
		}
	}
	return kvs
}

// TestCheckSeed: a seed holds the whole bootstrap, each embedded CRD once
// (stored as kube-apiserver stores objects) when it is one with CRDs and
// none otherwise, and nothing a seed leaves out.
func TestCheckSeed(t *testing.T) {
	ms, err := crds.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	withCRDs, without := wholeSeed(t, true), wholeSeed(t, false)
	if err := checkSeed(withCRDs, true); err != nil {
		t.Fatalf("a whole seed with CRDs: %v", err)
	}
	if err := checkSeed(without, false); err != nil {
		t.Fatalf("a whole seed without CRDs: %v", err)
	}
	with := func(kvs ...seedKV) []seedKV { return append(slices.Clone(withCRDs), kvs...) }
	firstCRD := len(bootstrapped)
	for name, c := range map[string]struct {
		kvs      []seedKV
		withCRDs bool
		want     string
	}{
		"a CRD missing":        {slices.Delete(slices.Clone(withCRDs), firstCRD, firstCRD+1), true, "has no apiextensions.k8s.io/customresourcedefinitions/" + ms[0].Name},
		"CRDs not asked for":   {withCRDs, false, "not one of the embedded CRDs"},
		"no CRDs":              {without, true, "has no apiextensions.k8s.io/customresourcedefinitions/"},
		"empty":                {nil, false, "has no clusterrolebindings/cluster-admin, clusterroles/cluster-admin, namespaces/default"},
		"no default namespace": {slices.Delete(slices.Clone(without), 0, 1), false, "has no namespaces/default"},
		"another CRD":          {with(kv(crdPrefix+"other.example.com", "k8s\x00")), true, "holds " + crdPrefix + "other.example.com"},
		"another kind":         {replaced(withCRDs, firstCRD, kv(crdPrefix+ms[0].Name, `{"apiVersion":"v1","kind":"ConfigMap"}`)), true, "not a CustomResourceDefinition"},
		"a CRD not JSON":       {replaced(withCRDs, firstCRD, kv(crdPrefix+ms[0].Name, "\x00garbage")), true, "not a CustomResourceDefinition"},
		"a key twice":          {with(withCRDs[0]), true, "twice"},
		"an Event":             {with(kv("/registry/events/default/x", "k8s\x00")), true, "holds /registry/events/default/x, which a seed leaves out"},
		"the identity Lease":   {with(kv("/registry/leases/kube-system/apiserver-x", "k8s\x00")), true, "which a seed leaves out"},
		"the client CA":        {with(kv("/registry/configmaps/kube-system/extension-apiserver-authentication", "k8s\x00")), true, "which a seed leaves out"},
		"outside the registry": {with(kv("/other/key", "x")), true, "holds /other/key"},
		"not base64":           {append([]seedKV{{Key: "%%%", Value: ""}}, withCRDs...), true, "key:"},
	} {
		err := checkSeed(c.kvs, c.withCRDs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: checkSeed = %v, want an error with %q", name, err, c.want)
		}
	}
}

// replaced is kvs with its i-th pair replaced by r.
func replaced(kvs []seedKV, i int, r seedKV) []seedKV {
	out := slices.Clone(kvs)
	out[i] = r
	return out
}

// TestSeedPath: seeds differ by what decides their bytes (the binary, the
// Service CIDR, the flags, the CRDs), and not by an audit flag's value,
// which names a file of the test's own.
func TestSeedPath(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kube-apiserver")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := Options{ServiceCIDR: "10.96.0.0/16"}
	path := func(bin string, o Options) string {
		t.Helper()
		p, err := seedPath(bin, o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := filepath.Join(t.TempDir(), "kube-apiserver")
	if err := os.WriteFile(other, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	first := path(bin, base)
	for name, o := range map[string]Options{
		"with CRDs":       {ServiceCIDR: base.ServiceCIDR, CRDs: true},
		"another CIDR":    {ServiceCIDR: "10.97.0.0/16"},
		"another flag":    {ServiceCIDR: base.ServiceCIDR, APIServerArgs: []string{"--authorization-mode=Node,RBAC"}},
		"an audit policy": {ServiceCIDR: base.ServiceCIDR, APIServerArgs: []string{"--audit-policy-file=/a"}},
	} {
		if path(bin, o) == first {
			t.Errorf("%s: the same seed as without", name)
		}
	}
	if path(other, base) == first {
		t.Error("another kube-apiserver binary: the same seed")
	}
	audit := func(dir string) Options {
		return Options{ServiceCIDR: base.ServiceCIDR, APIServerArgs: []string{"--audit-policy-file=" + dir + "/policy", "--audit-log-path=" + dir + "/log"}}
	}
	if path(bin, audit("/tmp/a")) != path(bin, audit("/tmp/b")) {
		t.Error("audit files in two tests' directories: two seeds")
	}
}

// TestSeededStartIsBootstrapped: a control plane started from the seed the
// first one left has its bootstrap from the seed (the system namespaces
// predate its start) and is the one it serves: the `kubernetes` Service in
// its own Service CIDR, its own clients' CA in the authentication
// ConfigMap (not the seed's), RBAC's bootstrap roles in force.
func TestSeededStartIsBootstrapped(t *testing.T) {
	requireBinaries(t)
	first, started, cp := startAgainFromSeed(t, Options{ServiceCIDR: "10.101.0.0/16"})
	if bytes.Equal(cp.CACertificate(), first.CACertificate()) {
		t.Fatal("two control planes with one CA: the test proves nothing")
	}
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	ctx := t.Context()
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns, err := admin.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ns.CreationTimestamp.Time.Before(started.Truncate(time.Second)) {
			t.Fatalf("namespace %s was made at %s, after the start at %s: not from the seed", name, ns.CreationTimestamp, started)
		}
	}
	svc, err := admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.101.0.1" {
		t.Fatalf("the kubernetes Service's ClusterIP is %s, want 10.101.0.1", svc.Spec.ClusterIP)
	}
	// kube-apiserver writes its clients' CA at every start; a seed that
	// kept the first one's would leave it there for a while.
	eventuallyCA(t, admin, cp.CACertificate())
	// RBAC's bootstrap policy holds: a user of no group may not list
	// Pods, and may ask who it is (system:basic-user).
	certPEM, keyPEM, err := cp.IssueClientCertificate("someone")
	if err != nil {
		t.Fatal(err)
	}
	someone := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.URL, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertificate(), CertData: certPEM, KeyData: keyPEM}})
	if _, err := someone.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a user of no role lists Pods: %v, want Forbidden", err)
	}
	review, err := someone.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a user asks who it is: %v", err)
	}
	if review.Status.UserInfo.Username != "someone" {
		t.Fatalf("SelfSubjectReview says %q, want someone", review.Status.UserInfo.Username)
	}
}

// startAgainFromSeed starts a control plane with opts, checks that it kept
// a seed and stops it, then starts another with opts: the first, when the
// second started, and the second.
func startAgainFromSeed(t *testing.T, opts Options) (first *ControlPlane, started time.Time, cp *ControlPlane) {
	t.Helper()
	first = StartForTest(t, opts)
	path, err := seedPath(first.apiServerBinary(), first.opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no seed after a start: %v", err)
	}
	first.Stop()
	started = time.Now()
	return first, started, StartForTest(t, opts)
}

// eventuallyCA waits until kube-system/extension-apiserver-authentication
// holds ca as its client-ca-file.
func eventuallyCA(t *testing.T, admin kubernetes.Interface, ca []byte) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cm, err := admin.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			continue
		}
		if strings.TrimSpace(cm.Data["client-ca-file"]) == strings.TrimSpace(string(ca)) {
			return
		}
		last = "client-ca-file is another CA"
	}
	t.Fatalf("extension-apiserver-authentication: %s", last)
}

// TestSeededCRDsAreServed: a control plane started from the seed the first
// start left serves the CRDs as one that applied them: Established, as the
// manifests say (no drift), validating custom objects by their schema.
func TestSeededCRDsAreServed(t *testing.T) {
	requireBinaries(t)
	_, started, cp := startAgainFromSeed(t, Options{CRDs: true})
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
