package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// kubectlRunner runs the cached kubectl against a control plane, with a
// discovery cache of its own: kubectl's default cache is keyed by host:port,
// which a later control plane on the same port would inherit.
type kubectlRunner struct {
	t          *testing.T
	bin        string
	kubeconfig string
	cacheDir   string
}

func newKubectl(t *testing.T, cp *controlplane.ControlPlane) *kubectlRunner {
	t.Helper()
	bin := controlplane.BinaryForTest(t, controlplane.Kubectl)
	return &kubectlRunner{t: t, bin: bin, kubeconfig: cp.Kubeconfig, cacheDir: t.TempDir()}
}

// run runs kubectl and returns its combined output and error.
func (k *kubectlRunner) run(stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(k.t.Context(), k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs kubectl and fails the test on error.
func (k *kubectlRunner) must(args ...string) string {
	k.t.Helper()
	out, err := k.run("", args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// canI runs kubectl auth can-i with args and returns its answer: the last
// line of its output (a cluster-scoped resource gets a warning first).
func (k *kubectlRunner) canI(args ...string) string {
	out, _ := k.run("", append([]string{"auth", "can-i"}, args...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// applyNamespaces creates the shipped namespaces, with their labels:
// edge-system (namespace/) and the controller's own (controller/).
func applyNamespaces(k *kubectlRunner) {
	k.t.Helper()
	k.must("apply", "--server-side", "-k", manifestDir("namespace"))
	k.must("apply", "--server-side", "-f", manifestDir("controller", "namespace.yaml"))
}

func manifestDir(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "build", "manifests"}, parts...)...)
}

// TestManifestsServerDryRun validates every kustomization under build/manifests
// with a server-side dry-run against the real apiserver (schema, defaulting,
// admission), then the kube-proxy patch against a kubeadm-style DaemonSet.
func TestManifestsServerDryRun(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	k := newKubectl(t, cp)

	// The namespaces must exist for a dry run of the objects inside them.
	applyNamespaces(k)

	for _, dir := range []string{"prerequisites", "default", "coredns-shared"} {
		out := k.must("apply", "--server-side", "--dry-run=server", "-k", manifestDir(dir))
		lines := strings.Split(strings.TrimSpace(out), "\n")
		rendered := k.must("kustomize", manifestDir(dir))
		if want := strings.Count(rendered, "\nkind: ") + boolInt(strings.HasPrefix(rendered, "kind: ")); len(lines) != want {
			t.Errorf("%s: %d objects dry-run applied, %d rendered:\n%s", dir, len(lines), want, out)
		}
		for _, l := range lines {
			if !strings.HasSuffix(l, "(server dry run)") {
				t.Errorf("%s: unexpected line %q", dir, l)
			}
		}
	}

	// kube-proxy as kubeadm installs it, then the patch that keeps it off edge nodes.
	if out, err := k.run(kubeadmKubeProxy, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatalf("kube-proxy DaemonSet: %v\n%s", err, out)
	}
	out := k.must("-n", "kube-system", "patch", "daemonset", "kube-proxy", "--dry-run=server", "-o", "yaml",
		"--patch-file", manifestDir("kube-proxy", "kube-proxy-patch.yaml"))
	for _, want := range []string{"key: servicegroup.io/kube-proxy", "operator: DoesNotExist", "image: registry.k8s.io/kube-proxy"} {
		if !strings.Contains(out, want) {
			t.Errorf("patched kube-proxy lacks %q:\n%s", want, out)
		}
	}
}

// TestManifestsRBAC installs the manifests for real and checks, by
// impersonating each ServiceAccount, that it may do what its component needs
// and nothing it does not.
func TestManifestsRBAC(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	k := newKubectl(t, cp)
	applyNamespaces(k)
	k.must("apply", "--server-side", "-k", manifestDir("prerequisites"))
	k.must("apply", "--server-side", "-k", manifestDir("default"))
	k.must("apply", "--server-side", "-k", manifestDir("coredns-shared"))
	k.must("apply", "--server-side", "-k", manifestDir("node-identity"))
	// can-i maps each resource through discovery: wait until the grid CRDs
	// just applied are served, then start kubectl with an empty cache.
	waitServed(t, cp, "superedge.io/v1", "deploymentgrids", "statefulsetgrids", "servicegrids", "nodelabelsummaries")
	k.cacheDir = t.TempDir()

	const (
		controller = "system:serviceaccount:servicegroup-system:application-grid-controller"
		wrapper    = "system:serviceaccount:edge-system:servicegroup-wrapper"
		coredns    = "system:serviceaccount:edge-system:coredns-gridhosts"
		shared     = "system:serviceaccount:edge-system:coredns-gridhosts-shared"
		node       = "system:node:node0"
	)
	cases := []struct {
		as   string
		args []string
		want bool
	}{
		{controller, []string{"list", "deploymentgrids.superedge.io"}, true},
		{controller, []string{"patch", "statefulsetgrids.superedge.io", "--subresource=status"}, true},
		{controller, []string{"patch", "deployments.apps", "-n", "default"}, true},
		{controller, []string{"delete", "statefulsets.apps", "-n", "default"}, true},
		{controller, []string{"patch", "services", "-n", "default"}, true},
		{controller, []string{"watch", "nodes"}, true},
		{controller, []string{"create", "events", "-n", "default"}, true},
		{controller, []string{"update", "leases.coordination.k8s.io/application-grid-controller", "-n", "servicegroup-system"}, true},
		{controller, []string{"update", "leases.coordination.k8s.io/application-grid-controller", "-n", "edge-system"}, false},
		{controller, []string{"patch", "customresourcedefinitions.apiextensions.k8s.io/deploymentgrids.superedge.io"}, true},
		{controller, []string{"get", "secrets", "-n", "default"}, false},
		{controller, []string{"list", "secrets", "-A"}, false},
		// The zone-label writer (--zone-from-grid-key), by server-side apply.
		{controller, []string{"patch", "nodes"}, true},
		{controller, []string{"update", "nodes"}, false},
		{controller, []string{"delete", "nodes"}, false},
		{controller, []string{"patch", "nodes", "--subresource=status"}, false},
		{controller, []string{"patch", "customresourcedefinitions.apiextensions.k8s.io/other.example.com"}, false},
		{controller, []string{"delete", "customresourcedefinitions.apiextensions.k8s.io/deploymentgrids.superedge.io"}, false},
		{controller, []string{"update", "leases.coordination.k8s.io/kube-scheduler", "-n", "kube-system"}, false},
		{controller, []string{"create", "pods", "-n", "default"}, false},
		{controller, []string{"update", "nodelabelsummaries.superedge.io"}, true},
		{controller, []string{"delete", "nodelabelsummaries.superedge.io"}, false},
		{controller, []string{"list", "pods", "-A"}, false},
		{controller, []string{"list", "configmaps", "-A"}, false},

		{wrapper, []string{"watch", "endpointslices.discovery.k8s.io"}, true},
		{wrapper, []string{"list", "services"}, true},
		{wrapper, []string{"list", "endpoints"}, true},
		{wrapper, []string{"get", "nodes/node0"}, true},
		{wrapper, []string{"watch", "servicecidrs.networking.k8s.io"}, true},
		{wrapper, []string{"create", "events.events.k8s.io", "-n", "default"}, true},
		{wrapper, []string{"update", "services", "-n", "default"}, false},
		{wrapper, []string{"get", "secrets", "-n", "default"}, false},
		{wrapper, []string{"list", "pods"}, false},
		{wrapper, []string{"watch", "nodelabelsummaries.superedge.io"}, true},
		{wrapper, []string{"update", "nodelabelsummaries.superedge.io"}, false},
		{wrapper, []string{"list", "secrets", "-A"}, false},
		{wrapper, []string{"patch", "nodes/node0"}, false},
		{wrapper, []string{"update", "nodes/node0", "--subresource=status"}, false},
		// Leases only with the site-stream component.
		{wrapper, []string{"update", "leases.coordination.k8s.io", "-n", "edge-system"}, false},
		{wrapper, []string{"create", "tokenreviews.authentication.k8s.io"}, false},

		// Node mode reads grids from their children: no StatefulSetGrid.
		{coredns, []string{"watch", "statefulsetgrids.superedge.io"}, false},
		{coredns, []string{"watch", "nodelabelsummaries.superedge.io"}, true},
		{coredns, []string{"update", "nodelabelsummaries.superedge.io"}, false},
		{coredns, []string{"list", "statefulsets.apps"}, true},
		{coredns, []string{"list", "pods", "-A"}, true},
		{coredns, []string{"watch", "pods", "-A"}, true},
		{coredns, []string{"get", "nodes/node0"}, true},
		{coredns, []string{"watch", "nodes"}, true},
		// Services, EndpointSlices and Namespaces come through the node's
		// wrapper (the Corefile's kubeconfig and services_kubeconfig).
		{coredns, []string{"list", "services", "-A"}, false},
		{coredns, []string{"watch", "endpointslices.discovery.k8s.io", "-A"}, false},
		{coredns, []string{"list", "namespaces"}, false},
		{coredns, []string{"list", "secrets", "-A"}, false},
		{coredns, []string{"create", "pods", "-n", "default"}, false},
		{coredns, []string{"update", "leases.coordination.k8s.io", "-n", "edge-system"}, false},
		{coredns, []string{"get", "secrets", "-n", "default"}, false},
		{coredns, []string{"list", "endpoints"}, false},
		{coredns, []string{"list", "configmaps", "-A"}, false},
		{coredns, []string{"get", "pods/log", "-n", "default"}, false},
		{coredns, []string{"patch", "statefulsets.apps", "-n", "default"}, false},

		{shared, []string{"watch", "statefulsetgrids.superedge.io"}, true},
		{shared, []string{"list", "statefulsets.apps"}, true},
		{shared, []string{"list", "pods"}, true},
		{shared, []string{"watch", "nodes"}, true},
		{shared, []string{"list", "endpointslices.discovery.k8s.io"}, true},
		{shared, []string{"watch", "namespaces"}, true},
		{shared, []string{"watch", "nodelabelsummaries.superedge.io"}, false},
		{shared, []string{"get", "secrets", "-n", "default"}, false},
		{shared, []string{"list", "endpoints"}, false},
		{shared, []string{"patch", "statefulsets.apps", "-n", "default"}, false},
		{shared, []string{"update", "statefulsetgrids.superedge.io"}, false},
		{shared, []string{"list", "secrets", "-A"}, false},
		{shared, []string{"update", "leases.coordination.k8s.io", "-n", "edge-system"}, false},

		// The static-pod option: a kubelet's identity (group system:nodes)
		// reads what its wrapper and CoreDNS need, and no more (this
		// apiserver runs RBAC alone: only node-identity's grants count).
		{node, []string{"list", "endpointslices.discovery.k8s.io"}, true},
		// Node mode reads grids from their children: no StatefulSetGrid.
		{node, []string{"watch", "statefulsetgrids.superedge.io"}, false},
		// Every pod, gridhosts' pod selection (label selectors RBAC cannot
		// express): build/README.md's threat model, and the binding narrowed
		// to the static-pod nodes below.
		{node, []string{"list", "pods", "-A"}, true},
		{node, []string{"list", "nodes"}, true},
		{node, []string{"watch", "servicecidrs.networking.k8s.io"}, true},
		{node, []string{"watch", "nodelabelsummaries.superedge.io"}, true},
		{node, []string{"get", "nodes/node1"}, true},
		{node, []string{"get", "servicecidrs.networking.k8s.io/kubernetes"}, true},
		{node, []string{"watch", "namespaces"}, true},
		// Namespaces and EndpointSlices reach the wrapper by its informers
		// only; it answers every get of them from its own store.
		{node, []string{"get", "namespaces/default"}, false},
		{node, []string{"get", "endpointslices.discovery.k8s.io", "-n", "default"}, false},
		{node, []string{"update", "nodelabelsummaries.superedge.io"}, false},
		{node, []string{"get", "secrets", "-n", "default"}, false},
		{node, []string{"list", "configmaps", "-n", "default"}, false},
		{node, []string{"update", "endpointslices.discovery.k8s.io", "-n", "default"}, false},
		{node, []string{"patch", "statefulsets.apps", "-n", "default"}, false},
		{node, []string{"list", "secrets", "-A"}, false},
		{node, []string{"update", "leases.coordination.k8s.io", "-n", "edge-system"}, false},
	}
	for _, tc := range cases {
		args := append([]string{"auth", "can-i", "--as", tc.as}, tc.args...)
		if tc.as == node {
			args = append([]string{"auth", "can-i", "--as", tc.as, "--as-group", "system:nodes"}, tc.args...)
		}
		out, err := k.run("", args...)
		// kubectl warns on stderr about cluster-scoped resources; the answer is the last word.
		words := strings.Fields(out)
		got := len(words) > 0 && words[len(words)-1] == "yes"
		if err != nil && got {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		if got != tc.want {
			t.Errorf("%s may %v: got %q, want %v", tc.as, tc.args, strings.TrimSpace(out), tc.want)
		}
	}

	// The operator's choice build/README.md gives for the static-pod
	// option: node-identity's binding names the static-pod nodes instead of
	// every node, so the others keep the Node authorizer's limit (their own
	// pods only).
	overlay := t.TempDir()
	// kustomize takes only relative paths to other kustomizations.
	base, err := filepath.Abs(manifestDir("node-identity"))
	if err == nil {
		base, err = filepath.Rel(overlay, base)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(`resources:
- `+base+`
patches:
- target: {kind: ClusterRoleBinding, name: servicegroup:edge-node}
  patch: |
    - op: replace
      path: /subjects
      value:
      - {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:node:node0}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	k.must("apply", "--server-side", "-k", overlay)
	for _, tc := range []struct{ as, want string }{{node, "yes"}, {"system:node:node1", "no"}} {
		if got := k.canI("list", "pods", "-A", "--as", tc.as, "--as-group", "system:nodes"); got != tc.want {
			t.Errorf("with node-identity bound to node0 only, %s may list pods: %q, want %q", tc.as, got, tc.want)
		}
	}
}

// TestManifestCorefilesMatch keeps the Corefiles in the manifests in step with
// the ready Corefiles in corefile/ (kustomize cannot read outside its root).
func TestManifestCorefilesMatch(t *testing.T) {
	read := func(parts ...string) []string {
		data, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	dropNode := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if strings.TrimSpace(l) != "node {$NODE_NAME}" {
				out = append(out, l)
			}
		}
		return out
	}
	// The static pod's gridhosts reads the apiserver with the kubelet's
	// identity (no in-cluster config); all else is the node's Corefile.
	dropKubeletConf := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if strings.TrimSpace(l) != "kubeconfig /etc/kubernetes/kubelet.conf" {
				out = append(out, l)
			}
		}
		return out
	}
	cases := []struct {
		manifest, ready []string
	}{
		{read("build", "manifests", "coredns-node", "Corefile"), read("corefile", "Corefile.node")},
		{read("build", "manifests", "coredns-shared", "Corefile"), dropNode(read("corefile", "Corefile.clients"))},
		{dropKubeletConf(read("build", "static-pods", "Corefile")), read("corefile", "Corefile.node")},
	}
	for i, tc := range cases {
		if strings.Join(tc.manifest, "\n") != strings.Join(tc.ready, "\n") {
			t.Errorf("case %d: manifest Corefile differs from corefile/:\n%s\n---\n%s", i,
				strings.Join(tc.manifest, "\n"), strings.Join(tc.ready, "\n"))
		}
	}
}

// kubeadmKubeProxy is the shape of the kube-proxy DaemonSet kubeadm installs,
// running the pinned release.
var kubeadmKubeProxy = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-proxy
  namespace: kube-system
  labels:
    k8s-app: kube-proxy
spec:
  selector:
    matchLabels:
      k8s-app: kube-proxy
  template:
    metadata:
      labels:
        k8s-app: kube-proxy
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      containers:
      - name: kube-proxy
        image: registry.k8s.io/kube-proxy:` + controlplane.KubernetesVersion + `
        command: [/usr/local/bin/kube-proxy, --config=/var/lib/kube-proxy/config.conf, --hostname-override=$(NODE_NAME)]
        env:
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        securityContext:
          privileged: true
`

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitServed waits until discovery of groupVersion lists every resource.
func waitServed(t *testing.T, cp *controlplane.ControlPlane, groupVersion string, resources ...string) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(groupVersion)
		if err != nil {
			missing = resources
			return false, nil
		}
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		missing = nil
		for _, r := range resources {
			if !served[r] {
				missing = append(missing, r)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("discovery of %s does not serve %v: %v", groupVersion, missing, err)
	}
}
