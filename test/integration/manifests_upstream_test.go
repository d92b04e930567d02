package integration

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The one place the edge components take their upstream from (build/manifests/upstream).
const (
	upstreamConfigMap = "servicegroup-upstream"
	upstreamHostVar   = "KUBERNETES_SERVICE_HOST"
	upstreamPortVar   = "KUBERNETES_SERVICE_PORT"
)

// TestManifestsUpstreamOnePlace checks, in the rendered default
// kustomization, that the apiserver address is set in one place: the wrapper and the per-node CoreDNS both read the
// apiserver address from ConfigMap servicegroup-upstream (which overrides the
// kubelet's `kubernetes` ClusterIP variables), nothing else sets it, neither
// uses a kubeconfig of its own, and neither resolves through cluster DNS.
func TestManifestsUpstreamOnePlace(t *testing.T) {
	bin := controlplane.BinaryForTest(t, controlplane.Kubectl)
	k := &kubectlRunner{t: t, bin: bin, kubeconfig: filepath.Join(t.TempDir(), "none"), cacheDir: t.TempDir()}
	rendered := k.must("kustomize", manifestDir("default"))

	var cms []corev1.ConfigMap
	daemonSets := map[string]appsv1.DaemonSet{}
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		data, err := sigsyaml.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		switch raw["kind"] {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := sigsyaml.UnmarshalStrict(data, &cm); err != nil {
				t.Fatal(err)
			}
			cms = append(cms, cm)
		case "DaemonSet":
			var ds appsv1.DaemonSet
			if err := sigsyaml.UnmarshalStrict(data, &ds); err != nil {
				t.Fatal(err)
			}
			daemonSets[ds.Name] = ds
		}
	}

	idx := slices.IndexFunc(cms, func(cm corev1.ConfigMap) bool { return cm.Name == upstreamConfigMap })
	if idx < 0 {
		t.Fatalf("no ConfigMap %s in the default kustomization", upstreamConfigMap)
	}
	if cm := cms[idx]; cm.Namespace != "edge-system" || cm.Data[upstreamHostVar] == "" || cm.Data[upstreamPortVar] == "" {
		t.Errorf("ConfigMap %s/%s: want both %s and %s set in edge-system, got %v", cm.Namespace, cm.Name, upstreamHostVar, upstreamPortVar, cm.Data)
	}
	for i, cm := range cms {
		if i == idx {
			continue
		}
		for key := range cm.Data {
			if key == upstreamHostVar || key == upstreamPortVar {
				t.Errorf("ConfigMap %s also sets %s: the upstream must be configured in one place", cm.Name, key)
			}
		}
	}

	for _, name := range []string{"application-grid-wrapper", "coredns-gridhosts"} {
		ds, ok := daemonSets[name]
		if !ok {
			t.Errorf("DaemonSet %s not rendered", name)
			continue
		}
		spec := ds.Spec.Template.Spec
		if spec.DNSPolicy == corev1.DNSClusterFirst || spec.DNSPolicy == corev1.DNSClusterFirstWithHostNet {
			t.Errorf("%s: dnsPolicy %s resolves through cluster DNS, which needs Service rules", name, spec.DNSPolicy)
		}
		if len(spec.Containers) != 1 {
			t.Errorf("%s: %d containers, want 1", name, len(spec.Containers))
			continue
		}
		c := spec.Containers[0]
		if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
			return e.ConfigMapRef != nil && e.ConfigMapRef.Name == upstreamConfigMap && e.Prefix == "" &&
				(e.ConfigMapRef.Optional == nil || !*e.ConfigMapRef.Optional)
		}) {
			t.Errorf("%s: no envFrom of ConfigMap %s (required, no prefix): %+v", name, upstreamConfigMap, c.EnvFrom)
		}
		for _, e := range c.Env {
			if e.Name == upstreamHostVar || e.Name == upstreamPortVar {
				t.Errorf("%s: env sets %s itself, overriding the one place", name, e.Name)
			}
		}
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			if strings.HasPrefix(a, "--kubeconfig") || strings.HasPrefix(a, "--master") {
				t.Errorf("%s: %s bypasses the upstream ConfigMap", name, a)
			}
		}
		if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
			t.Errorf("%s: automountServiceAccountToken=false leaves in-cluster config without credentials", name)
		}
	}

	// The node CoreDNS's gridhosts takes in-cluster config only when its block
	// names no kubeconfig or endpoint of its own; its kubernetes plugin, and
	// gridhosts for Services and EndpointSlices, read the node's wrapper (the
	// DNS view's kubeconfig) and nothing else.
	corefile, err := os.ReadFile(manifestDir("coredns-node", "Corefile"))
	if err != nil {
		t.Fatal(err)
	}
	block := ""
	for _, line := range strings.Split(string(corefile), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[len(f)-1] == "{" && (f[0] == "gridhosts" || f[0] == "kubernetes"):
			block = f[0]
		case len(f) > 0 && f[0] == "services_kubeconfig":
			if block != "gridhosts" || line != "        services_kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig" {
				t.Errorf("coredns-node/Corefile: %q in %s is not the node's wrapper", strings.TrimSpace(line), block)
			}
		case len(f) > 0 && (f[0] == "kubeconfig" || f[0] == "endpoint"):
			if block != "kubernetes" || line != "        kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig" {
				t.Errorf("coredns-node/Corefile: %q in %s bypasses the upstream ConfigMap or the node's wrapper", strings.TrimSpace(line), block)
			}
		}
	}
}
