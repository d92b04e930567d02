package chartgen_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/servicegroup/servicegroup/internal/releasetools"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// chartTools are the real helm (hack/release-tools.sh), the repository
// root and the chart's path.
func chartTools(t *testing.T) (helm, root, chart string) {
	t.Helper()
	helm = releasetools.Require(t, "helm")
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return helm, root, filepath.Join(root, "build", "chart")
}

// kubectlBinary is the real kubectl (hack/k8s-bins.sh), whose kustomize is
// the one operators run.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	kubectl, err := controlplane.Binary("kubectl")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return kubectl
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// objects parses a multi-document YAML stream into objects keyed
// kind/namespace/name.
func objects(t *testing.T, stream []byte) map[string]map[string]any {
	return parse(t, stream, false)
}

// withoutKeep is objects without Helm's keep annotation, the one thing the
// chart adds to kustomize's render (Helm deletes what it installed; the
// kustomize uninstall deletes only default, never edge-system).
func withoutKeep(t *testing.T, stream []byte) map[string]map[string]any {
	return parse(t, stream, true)
}

func parse(t *testing.T, stream []byte, dropKeep bool) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var o map[string]any
		if err := d.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("parsing the render: %v", err)
		}
		if o == nil {
			continue
		}
		u := unstructured.Unstructured{Object: o}
		if a := u.GetAnnotations(); a != nil && dropKeep {
			delete(a, "helm.sh/resource-policy")
			if len(a) == 0 {
				unstructured.RemoveNestedField(o, "metadata", "annotations")
			} else {
				u.SetAnnotations(a)
			}
		}
		id := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		if _, dup := out[id]; dup {
			t.Fatalf("%s rendered twice", id)
		}
		out[id] = o
	}
	return out
}

// kustomize renders a kustomization of resources and components (paths
// under build/manifests) with the real kubectl.
func kustomize(t *testing.T, kubectl, root string, resources, components []string) []byte {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes only relative paths to other kustomizations.
	rel := func(name string) string {
		p, err := filepath.Rel(dir, filepath.Join(root, "build", "manifests", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var b strings.Builder
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range resources {
		fmt.Fprintf(&b, "- %s\n", rel(r))
	}
	if len(components) > 0 {
		b.WriteString("components:\n")
		for _, c := range components {
			fmt.Fprintf(&b, "- %s\n", rel(c))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return run(t, kubectl, "kustomize", dir)
}

// TestDefaultRenderIsKustomize: the chart's default render is the install
// path of build/README.md (prerequisites' namespace, then default), object
// for object, and each optional part renders what its kustomization or
// component does.
func TestDefaultRenderIsKustomize(t *testing.T) {
	helm, root, chart := chartTools(t)
	kubectl := kubectlBinary(t)
	cases := []struct {
		name       string
		set        []string
		resources  []string
		components []string
	}{
		{name: "default", resources: []string{"namespace", "default"}},
		{
			name:       "every option",
			set:        []string{"monitoring.enabled=true", "siteStream.enabled=true", "corednsShared.enabled=true", "staticPods.nodeIdentity=true"},
			resources:  []string{"namespace", "default", "coredns-shared", "node-identity"},
			components: []string{"monitoring", "site-stream"},
		},
		{name: "monitoring", set: []string{"monitoring.enabled=true"}, resources: []string{"namespace", "default"}, components: []string{"monitoring"}},
		{name: "site stream", set: []string{"siteStream.enabled=true"}, resources: []string{"namespace", "default"}, components: []string{"site-stream"}},
		{name: "without namespace, kube-proxy and node CoreDNS", set: []string{"edgeNamespace.create=false", "kubeProxy.enabled=false", "corednsNode.enabled=false"}, resources: []string{"upstream", "controller", "wrapper"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"template", "servicegroup", chart, "--namespace", "kube-system"}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			got := withoutKeep(t, run(t, helm, args...))
			want := objects(t, kustomize(t, kubectl, root, c.resources, c.components))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("helm template %v differs from kustomize %v %v (-kustomize +helm):\n%s", c.set, c.resources, c.components, diff)
			}
		})
	}
}

// TestChartValues: each value reaches every place the guides say it
// sets, and the chart keeps edge-system on uninstall.
func TestChartValues(t *testing.T) {
	helm, _, chart := chartTools(t)
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	out := objects(t, run(t, helm, "template", "servicegroup", chart,
		"--set", "image.repository=registry.example/edge",
		"--set", "image.tag=v9.9.9",
		"--set", "image.digests.application-grid-wrapper="+digest,
		"--set", "image.pullPolicy=Always",
		"--set", "upstream.host=10.1.2.3", "--set", "upstream.port=8443",
		"--set", "nodeLocalDNS.address=169.254.20.53",
		"--set", "gridKeys.requireNodeRestricted=true",
		"--set", "logging.format=json",
		"--set", "controller.replicas=3", "--set", "controller.manageCRDs=false",
		"--set", "controller.nodeunitDeletionGracePeriod=10m", "--set", "controller.superedgeLock=-",
		"--set", "controller.zoneFromGridKey=zone1",
		"--set", "controller.extraArgs={--v=4}",
		"--set", "wrapper.snapshotMaxAge=24h",
		"--set", "kubeProxy.image=registry.example/kube-proxy:v1.36.4",
		"--set", "monitoring.enabled=true",
		"--set", "siteStream.enabled=true", "--set", "siteStream.siteLabel=example.com/site",
	))
	get := func(id string, path ...string) any {
		t.Helper()
		o, ok := out[id]
		if !ok {
			t.Fatalf("%s not rendered", id)
		}
		v, found, err := unstructured.NestedFieldNoCopy(o, path...)
		if !found || err != nil {
			t.Fatalf("%s: %v not found (%v)", id, path, err)
		}
		return v
	}
	container := func(id string, init bool, i int) map[string]any {
		t.Helper()
		key := "containers"
		if init {
			key = "initContainers"
		}
		return get(id, "spec", "template", "spec", key).([]any)[i].(map[string]any)
	}
	args := func(c map[string]any) []string {
		var a []string
		for _, x := range c["args"].([]any) {
			a = append(a, x.(string))
		}
		return a
	}
	const (
		ctrl    = "Deployment/servicegroup-system/application-grid-controller"
		wrapper = "DaemonSet/edge-system/application-grid-wrapper"
		coredns = "DaemonSet/edge-system/coredns-gridhosts"
	)
	checks := []struct {
		what      string
		got, want any
	}{
		{"controller image", container(ctrl, false, 0)["image"], "registry.example/edge/application-grid-controller:v9.9.9"},
		{"wrapper image (digest)", container(wrapper, false, 0)["image"], "registry.example/edge/application-grid-wrapper@" + digest},
		{"node-local address init image", container(coredns, true, 0)["image"], "registry.example/edge/application-grid-wrapper@" + digest},
		{"coredns image", container(coredns, false, 0)["image"], "registry.example/edge/coredns-gridhosts:v9.9.9"},
		{"pull policy", container(ctrl, false, 0)["imagePullPolicy"], "Always"},
		{"kube-proxy image", container("DaemonSet/kube-system/kube-proxy-edge", false, 0)["image"], "registry.example/kube-proxy:v1.36.4"},
		{"upstream host", get("ConfigMap/edge-system/servicegroup-upstream", "data", "KUBERNETES_SERVICE_HOST"), "10.1.2.3"},
		{"upstream port", get("ConfigMap/edge-system/servicegroup-upstream", "data", "KUBERNETES_SERVICE_PORT"), "8443"},
		{"controller replicas", get(ctrl, "spec", "replicas"), float64(3)},
		{"node-local address on lo", args(container(coredns, true, 0)), []string{"--add-loopback-address=169.254.20.53/32"}},
		{"metrics reader subjects", get("ClusterRoleBinding//servicegroup:metrics-reader", "subjects"), []any{
			map[string]any{"kind": "ServiceAccount", "name": "servicegroup-metrics-reader", "namespace": "edge-system"},
			map[string]any{"kind": "ServiceAccount", "name": "servicegroup-metrics-reader", "namespace": "servicegroup-system"},
		}},
		{"edge-system kept", get("Namespace//edge-system", "metadata", "annotations"), map[string]any{"helm.sh/resource-policy": "keep"}},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.what, diff)
		}
	}
	for _, c := range []struct {
		what string
		args []string
		want []string
	}{
		{"controller", args(container(ctrl, false, 0)), []string{"--manage-crds=false", "--nodeunit-deletion-grace-period=10m", "--superedge-lock=", "--require-node-restricted-grid-keys", "--logging-format=json", "--zone-from-grid-key=zone1", "--v=4"}},
		{"wrapper", args(container(wrapper, false, 0)), []string{"--snapshot-max-age=24h", "--require-node-restricted-topology-keys", "--logging-format=json", "--site-label=example.com/site", "--secure-metrics-bind-address=:51008"}},
		{"coredns", args(container(coredns, false, 0)), []string{"-log-format", "json", "-secure-metrics-bind-address=:9443"}},
	} {
		for _, w := range c.want {
			if !slices.Contains(c.args, w) {
				t.Errorf("%s args %q lack %q", c.what, c.args, w)
			}
		}
	}
	var corefile string
	for id, o := range out {
		if strings.HasPrefix(id, "ConfigMap/edge-system/coredns-gridhosts-") && !strings.Contains(id, "shared") {
			corefile, _, _ = unstructured.NestedString(o, "data", "Corefile")
		}
	}
	for _, want := range []string{"bind 169.254.20.53\n", "    gridhosts cluster.local {\n        require_node_restricted_keys\n"} {
		if !strings.Contains(corefile, want) {
			t.Errorf("node Corefile lacks %q:\n%s", want, corefile)
		}
	}
	if strings.Contains(corefile, "169.254.20.10") {
		t.Errorf("node Corefile still names 169.254.20.10:\n%s", corefile)
	}
}

// TestChartLintAndSchema: helm lint passes on the defaults and on every
// option, and values.schema.json refuses what the guides rule out, each
// with the field named.
func TestChartLintAndSchema(t *testing.T) {
	helm, _, chart := chartTools(t)
	run(t, helm, "lint", "--strict", chart)
	run(t, helm, "lint", "--strict", chart, "--set", "monitoring.enabled=true,siteStream.enabled=true,corednsShared.enabled=true,staticPods.nodeIdentity=true,gridKeys.requireNodeRestricted=true,logging.format=json")
	for _, c := range []struct{ set, field string }{
		{"upstream.host=apiserver.example", "upstream/host"},
		{"upstream.port=0", "upstream/port"},
		{"nodeLocalDNS.address=10.0.0.10", "nodeLocalDNS/address"},
		{"image.tag=latest", "image/tag"},
		{"image.digests.application-grid-wrapper=sha256:short", "image/digests/application-grid-wrapper"},
		{"logging.format=xml", "logging/format"},
		{"controller.nodeunitDeletionGracePeriod=ten minutes", "controller/nodeunitDeletionGracePeriod"},
		{"monitoring.enable=true", "monitoring"},
		// Gone: the scrape sends its own ServiceAccount's token.
		{"monitoring.prometheus.serviceAccount=prometheus-k8s", "monitoring"},
		{"kubeProxy.image=registry.k8s.io/kube-proxy", "kubeProxy/image"},
		{"staticPods.nodes={system:node:edge-1}", "staticPods/nodes/0"},
	} {
		cmd := exec.Command(helm, "template", "servicegroup", chart, "--set", c.set)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("helm template --set %s: accepted", c.set)
			continue
		}
		if !strings.Contains(string(out), "values don't meet the specifications of the schema") || !strings.Contains(string(out), c.field) {
			t.Errorf("helm template --set %s: want a schema error naming %s, got:\n%s", c.set, c.field, out)
		}
	}
}

// TestStaticPodNodes: staticPods.nodes binds node-identity's rights to
// those nodes' kubelets instead of group system:nodes.
func TestStaticPodNodes(t *testing.T) {
	helm, _, chart := chartTools(t)
	const binding = "ClusterRoleBinding//servicegroup:edge-node"
	user := func(n string) any {
		return map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:node:" + n}
	}
	for _, c := range []struct {
		set  []string
		want []any
	}{
		{[]string{"staticPods.nodeIdentity=true"}, []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}}},
		{[]string{"staticPods.nodeIdentity=true", "staticPods.nodes={edge-1,edge-2}"}, []any{user("edge-1"), user("edge-2")}},
	} {
		args := []string{"template", "servicegroup", chart}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		o, ok := objects(t, run(t, helm, args...))[binding]
		if !ok {
			t.Fatalf("%v: %s not rendered", c.set, binding)
		}
		got, _, _ := unstructured.NestedSlice(o, "subjects")
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%v: subjects (-want +got):\n%s", c.set, diff)
		}
	}
}

// TestCoreDNSHelpersDigest: image.digests.coredns-gridhosts-helpers pins
// the wrapper image of the node CoreDNS's init containers on its own, so
// that the guide's first `helm upgrade` (the wrappers' new digest) leaves
// the CoreDNS DaemonSet unchanged.
func TestCoreDNSHelpersDigest(t *testing.T) {
	helm, _, chart := chartTools(t)
	const old, next = "sha256:" + "1111111111111111111111111111111111111111111111111111111111111111",
		"sha256:" + "2222222222222222222222222222222222222222222222222222222222222222"
	render := func(wrapperDigest string) map[string]map[string]any {
		return objects(t, run(t, helm, "template", "servicegroup", chart, "--set", "image.repository=r.example",
			"--set", "image.digests.application-grid-wrapper="+wrapperDigest, "--set", "image.digests.coredns-gridhosts-helpers="+old))
	}
	before, after := render(old), render(next)
	const coredns, wrapper = "DaemonSet/edge-system/coredns-gridhosts", "DaemonSet/edge-system/application-grid-wrapper"
	if diff := cmp.Diff(before[coredns], after[coredns]); diff != "" {
		t.Errorf("the wrappers' new digest changed the CoreDNS DaemonSet (-before +after):\n%s", diff)
	}
	if cmp.Equal(before[wrapper], after[wrapper]) {
		t.Error("the wrappers' new digest did not change the wrapper DaemonSet")
	}
	inits, _, _ := unstructured.NestedSlice(after[coredns], "spec", "template", "spec", "initContainers")
	for _, c := range inits {
		if img := c.(map[string]any)["image"]; img != "r.example/application-grid-wrapper@"+old {
			t.Errorf("CoreDNS init container image %v, want the helpers' digest %s", img, old)
		}
	}
}
