package integration

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// podSecurityLabel is the Pod Security admission label prefix.
const podSecurityLabel = "pod-security.kubernetes.io/"

// podSecurityExpectation is the Pod Security standard a workload's pods are
// meant to meet, and for one below restricted, exactly which checks of the
// next stricter standard they fail: each is a host feature the component
// cannot do without, and anything more fails the test.
type podSecurityExpectation struct {
	meets    string   // privileged, baseline or restricted
	stricter []string // the checks failed at the next stricter standard
}

// podSecurityExpected is every workload build/manifests ships. Written out by
// hand, from what each component needs, not derived from the manifests.
var podSecurityExpected = map[string]podSecurityExpectation{
	"Deployment/servicegroup-system/application-grid-controller": {meets: "restricted"},
	"Deployment/edge-system/coredns-gridhosts-shared":            {meets: "restricted"},
	// Host network (kube-proxy reaches it on the node's loopback), so its
	// probes name 127.0.0.1 (it listens nowhere else), and its snapshot on a
	// hostPath.
	"DaemonSet/edge-system/application-grid-wrapper": {meets: "privileged", stricter: []string{"host namespaces", "hostPath volumes", "probe or lifecycle host"}},
	// Host network on the node-local address (pods reach it with no Service
	// rule; it reads the node's wrapper on loopback), so its probes name
	// 127.0.0.1; an init container with NET_ADMIN puts that address on lo;
	// its snapshot and the wrapper's DNS kubeconfig on hostPaths.
	"DaemonSet/edge-system/coredns-gridhosts": {meets: "privileged", stricter: []string{"host namespaces", "hostPath volumes", "non-default capabilities", "probe or lifecycle host"}},
	// As kubeadm's kube-proxy: host network, privileged (netfilter, conntrack
	// sysctls, kernel modules), the xtables lock and /lib/modules.
	"DaemonSet/kube-system/kube-proxy-edge": {meets: "privileged", stricter: []string{"host namespaces", "hostPath volumes", "privileged"}},
}

var stricterStandard = map[string]string{"privileged": "baseline", "baseline": "restricted"}

// TestManifestsPodSecurity runs every shipped workload past the real
// apiserver's Pod Security admission: the shipped namespaces (with their
// labels) take every workload without a warning, every pod template is
// admitted as a Pod in its own namespace and under the standard it is meant
// to meet, and fails the next stricter standard only for what it needs.
func TestManifestsPodSecurity(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	k := newKubectl(t, cp)
	ctx := t.Context()

	applyNamespaces(k)
	// Every namespace we ship says, pinned to a release, what it admits; the
	// controller's admits nothing beyond restricted.
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	var namespaces []string
	for _, obj := range append(renderedObjects(t, k, "prerequisites"), renderedObjects(t, k, "default")...) {
		if obj["kind"] != "Namespace" {
			continue
		}
		name := obj["metadata"].(map[string]any)["name"].(string)
		namespaces = append(namespaces, name)
		ns, err := admin.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"enforce", "audit", "warn"} {
			level := ns.Labels[podSecurityLabel+mode]
			if _, known := map[string]bool{"privileged": true, "baseline": true, "restricted": true}[level]; !known {
				t.Errorf("namespace %s: %s%s=%q, want a standard", name, podSecurityLabel, mode, level)
			}
			if name == "servicegroup-system" && level != "restricted" {
				t.Errorf("namespace %s: %s%s=%q, want restricted", name, podSecurityLabel, mode, level)
			}
			if v := ns.Labels[podSecurityLabel+mode+"-version"]; !strings.HasPrefix(v, "v1.") {
				t.Errorf("namespace %s: %s%s-version=%q, want a pinned release", name, podSecurityLabel, mode, v)
			}
		}
	}
	if !slices.Contains(namespaces, "edge-system") || !slices.Contains(namespaces, "servicegroup-system") {
		t.Errorf("prerequisites and default render namespaces %q, want edge-system and servicegroup-system", namespaces)
	}

	// The workloads themselves: admission warns about their pod templates.
	for _, dir := range []string{"default", "coredns-shared"} {
		out := k.must("apply", "--server-side", "--dry-run=server", "-k", manifestDir(dir))
		if strings.Contains(out, "Warning") || strings.Contains(out, "PodSecurity") {
			t.Errorf("%s: apply warned:\n%s", dir, out)
		}
	}

	// Each pod template as the Pod its controller would create.
	for _, level := range []string{"privileged", "baseline", "restricted"} {
		k.must("create", "namespace", "pss-"+level)
		k.must("label", "namespace", "pss-"+level,
			podSecurityLabel+"enforce="+level, podSecurityLabel+"enforce-version=v1.37",
			podSecurityLabel+"warn="+level, podSecurityLabel+"warn-version=v1.37")
	}
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = warnings
	client := kubernetes.NewForConfigOrDie(cfg)

	pods := renderedPods(t, k, "default", "coredns-shared")
	for key := range podSecurityExpected {
		if _, ok := pods[key]; !ok {
			t.Errorf("%s: expected, but build/manifests no longer renders it", key)
		}
	}
	for key, pod := range pods {
		want, ok := podSecurityExpected[key]
		if !ok {
			t.Errorf("%s: a workload with no Pod Security expectation: add it to podSecurityExpected", key)
			continue
		}
		t.Run(strings.ReplaceAll(key, "/", "_"), func(t *testing.T) {
			if violations, warned := dryRunPod(ctx, t, client, warnings, pod, pod.Namespace); len(violations) > 0 || len(warned) > 0 {
				t.Errorf("its own namespace %s refuses it: %v, warnings %q", pod.Namespace, violations, warned)
			}
			if violations, warned := dryRunPod(ctx, t, client, warnings, pod, "pss-"+want.meets); len(violations) > 0 || len(warned) > 0 {
				t.Errorf("fails %s: %v, warnings %q", want.meets, violations, warned)
			}
			stricter, ok := stricterStandard[want.meets]
			if !ok {
				return
			}
			violations, _ := dryRunPod(ctx, t, client, warnings, pod, "pss-"+stricter)
			if !slices.Equal(violations, slices.Sorted(slices.Values(want.stricter))) {
				t.Errorf("under %s fails %q, want exactly %q", stricter, violations, want.stricter)
			}
		})
	}

	for key, pod := range pods {
		if key != "DaemonSet/kube-system/kube-proxy-edge" {
			checkContainerHardening(t, key, pod)
		}
	}

	// The check can fail: the controller without runAsNonRoot is refused in
	// its namespace (so a manifest that loses it fails above).
	controller := pods["Deployment/servicegroup-system/application-grid-controller"].DeepCopy()
	if controller == nil {
		t.Fatal("no controller pod rendered")
	}
	controller.Spec.SecurityContext.RunAsNonRoot = nil
	violations, _ := dryRunPod(ctx, t, client, warnings, controller, controller.Namespace)
	if !slices.Contains(violations, "runAsNonRoot != true") {
		t.Errorf("controller without runAsNonRoot: violations %q, want runAsNonRoot != true", violations)
	}
}

// renderedPods renders the kustomizations and returns, for every workload,
// the Pod its controller would create, keyed kind/namespace/name.
func renderedPods(t *testing.T, k *kubectlRunner, dirs ...string) map[string]*corev1.Pod {
	t.Helper()
	pods := map[string]*corev1.Pod{}
	for _, dir := range dirs {
		for _, obj := range renderedObjects(t, k, dir) {
			kind, _ := obj["kind"].(string)
			if kind == "Pod" || kind == "Job" || kind == "CronJob" || kind == "ReplicaSet" {
				t.Fatalf("%s: kind %s is not checked here", dir, kind)
			}
			if kind != "Deployment" && kind != "DaemonSet" && kind != "StatefulSet" {
				continue
			}
			var w struct {
				metav1.TypeMeta   `json:",inline"`
				metav1.ObjectMeta `json:"metadata"`
				Spec              struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &w); err != nil {
				t.Fatalf("%s: %s: %v", dir, kind, err)
			}
			pods[kind+"/"+w.Namespace+"/"+w.Name] = &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: w.Spec.Template.Labels},
				Spec:       w.Spec.Template.Spec,
			}
		}
	}
	return pods
}

// rootCapabilities are the only other capabilities a container (root) may
// add: the node's CoreDNS binds port 53 in the host network, and its init
// container puts the node-local address on the node's lo.
var rootCapabilities = map[string][]corev1.Capability{
	"DaemonSet/edge-system/coredns-gridhosts/coredns":            {"NET_BIND_SERVICE"},
	"DaemonSet/edge-system/coredns-gridhosts/node-local-address": {"NET_ADMIN"},
}

// checkContainerHardening asks of every container what the Pod Security
// standards leave out: a read-only root file system, no privilege
// escalation, every capability dropped, and only a root init container may
// add one back, CAP_CHOWN (to hand a hostPath to the component's user).
func checkContainerHardening(t *testing.T, key string, pod *corev1.Pod) {
	t.Helper()
	check := func(c corev1.Container, init bool) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: container %s has no securityContext", key, c.Name)
			return
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: container %s: readOnlyRootFilesystem is not true", key, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: container %s: allowPrivilegeEscalation is not false", key, c.Name)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container %s: capabilities must drop [ALL], got %+v", key, c.Name, sc.Capabilities)
			return
		}
		root := sc.RunAsUser != nil && *sc.RunAsUser == 0
		switch {
		case len(sc.Capabilities.Add) == 0:
		case init && root && slices.Equal(sc.Capabilities.Add, []corev1.Capability{"CHOWN"}):
		case root && slices.Equal(sc.Capabilities.Add, rootCapabilities[key+"/"+c.Name]):
		default:
			t.Errorf("%s: container %s adds %v (init %v, root %v): only a root init container may add CHOWN, and only the containers of rootCapabilities theirs", key, c.Name, sc.Capabilities.Add, init, root)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		check(c, true)
	}
	for _, c := range pod.Spec.Containers {
		check(c, false)
	}
}

// renderedObjects returns the objects `kubectl kustomize` renders from dir.
func renderedObjects(t *testing.T, k *kubectlRunner, dir string) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(k.must("kustomize", manifestDir(dir))), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// dryRunPod creates pod in namespace as a server-side dry run and returns the
// Pod Security checks that refused it (sorted) and any warnings.
func dryRunPod(ctx context.Context, t *testing.T, client kubernetes.Interface, warnings *warningRecorder, pod *corev1.Pod, namespace string) ([]string, []string) {
	t.Helper()
	p := pod.DeepCopy()
	p.Namespace = namespace
	warnings.reset()
	_, err := client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	warned := warnings.reset()
	if err == nil {
		return nil, warned
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("dry-run of %s in %s: %v", pod.Name, namespace, err)
	}
	return podSecurityChecks(err.Error()), warned
}

// podSecurityChecks parses `... violates PodSecurity "baseline:v1.37": host
// namespaces (hostNetwork=true), hostPath volumes (volume "state")` into the
// names of the failed checks, sorted.
func podSecurityChecks(msg string) []string {
	_, list, ok := strings.Cut(msg, `": `)
	if !ok {
		return []string{msg}
	}
	var checks []string
	depth, start := 0, 0
	for i, r := range list {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				checks = append(checks, checkName(list[start:i]))
				start = i + 1
			}
		}
	}
	checks = append(checks, checkName(list[start:]))
	slices.Sort(checks)
	return checks
}

func checkName(s string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(s), " (")
	return name
}

// warningRecorder keeps the apiserver's warnings since the last reset.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) reset() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

func TestPodSecurityChecks(t *testing.T) {
	msg := `pods "w" is forbidden: violates PodSecurity "baseline:v1.37": privileged (container "k" must not set securityContext.privileged=true), host namespaces (hostNetwork=true), hostPath volumes (volumes "a", "b")`
	if got, want := podSecurityChecks(msg), []string{"host namespaces", "hostPath volumes", "privileged"}; !slices.Equal(got, want) {
		t.Errorf("podSecurityChecks = %q, want %q", got, want)
	}
}
