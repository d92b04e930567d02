package gridcli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestDoctorAutonomy: doctor's autonomy findings, each made on a real
// apiserver and found: an annotation that cannot be read, grids opting in
// with no webhook registered, a registration whose Service has no ready
// endpoint, a controller pod inside a nodeunit it protects, and a nodeunit
// whose every node the node lifecycle controller marked unreachable
// (written by the test: no kubelets; the whole path runs on real nodes in
// test/realnode). kubectl grid status shows that nodeunit too.
func TestDoctorAutonomy(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	grids := versioned.NewForConfigOrDie(cp.Config)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNamespace}}, metav1.CreateOptions{}))
	for name, unit := range map[string]string{"edge-a": "u1", "edge-b": "u2", "cloud-c": ""} {
		labels := map[string]string{}
		if unit != "" {
			labels["zone1"] = unit
		}
		must(kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}))
	}
	template := appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
	}
	grid := func(name, duration string) {
		t.Helper()
		must(grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, &superedgev1.DeploymentGrid{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{autonomy.DurationAnnotation: duration}},
			Spec:       superedgev1.DeploymentGridSpec{GridUniqKey: "zone1", Template: template},
		}, metav1.CreateOptions{}))
	}
	c, err := newTestClients(cp)
	if err != nil {
		t.Fatal(err)
	}
	problems := func() []string {
		t.Helper()
		d := &doctor{kube: kube, c: c, report: &doctorReport{}}
		if err := d.checkAutonomy(ctx); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range d.report.Problems {
			if p.Fix == "" {
				t.Errorf("%s: %s: no fix", p.Subject, p.Problem)
			}
			out = append(out, p.Subject+": "+p.Problem)
		}
		return out
	}
	expect := func(what string, want ...string) {
		t.Helper()
		got := problems()
		if len(got) != len(want) {
			t.Fatalf("%s: problems %q, want %d: %q", what, got, len(want), want)
		}
		for _, w := range want {
			if !slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, w) }) {
				t.Errorf("%s: no problem %q among %q", what, w, got)
			}
		}
	}

	expect("no grid opts in")
	grid("forever", "forever")
	expect("an unreadable annotation", `DeploymentGrid default/forever: servicegroup.io/autonomy-duration "forever" is not a duration`)
	grid("dg", "2h")
	missing := "ValidatingWebhookConfiguration " + autonomy.WebhookConfigurationName + ": missing while grids carry"
	expect("a grid opts in, no webhook", `DeploymentGrid default/forever:`, missing)

	// Registered as the controller registers it, its Service without a
	// ready endpoint.
	must(kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: autonomy.WebhookConfigurationName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			webhookFor(autonomy.PodsWebhookName, "pods/status"), webhookFor(autonomy.NodesWebhookName, "nodes"),
		},
	}, metav1.CreateOptions{}))
	noEndpoint := "service " + controllerNamespace + "/" + controllerName + ": no ready endpoint"
	expect("no endpoint", `DeploymentGrid default/forever:`, noEndpoint)

	// A controller pod on an edge node of an autonomous nodeunit.
	must(kube.CoreV1().Pods(controllerNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "controller-y", Labels: map[string]string{nameLabel: controllerName}},
		Spec:       corev1.PodSpec{NodeName: "edge-a", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}, metav1.CreateOptions{}))
	expect("the controller in a nodeunit", `DeploymentGrid default/forever:`, noEndpoint,
		"pod "+controllerNamespace+"/controller-y: runs on edge-a, in nodeunit zone1=u1")

	// edge-b, alone in u2, marked unreachable by the node lifecycle
	// controller a minute ago.
	since := time.Now().Add(-time.Minute).Truncate(time.Second)
	node, err := kube.CoreV1().Nodes().Get(ctx, "edge-b", metav1.GetOptions{})
	must(node, err)
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
		LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)}}
	must(kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}))
	cutOff := fmt.Sprintf("nodeunit zone1=u2: cut off since %s, autonomous until %s", since.UTC().Format(time.RFC3339), since.Add(2*time.Hour).UTC().Format(time.RFC3339))
	expect("a nodeunit cut off", `DeploymentGrid default/forever:`, noEndpoint, "pod "+controllerNamespace+"/controller-y:", cutOff)

	cl := &cluster{t: t, kubeconfig: cp.Kubeconfig, kube: kube}
	var out string
	testwait.Eventually(ctx, t, 0, "kubectl grid status shows the cut-off nodeunit", func(context.Context) error {
		out, _ = cl.run("status", "dg/dg")
		if !strings.Contains(out, "autonomy: 2h") || !strings.Contains(out, "nodeunit u2: cut off since "+since.UTC().Format(time.RFC3339)) {
			return fmt.Errorf("status says:\n%s", out)
		}
		return nil
	})
	t.Logf("kubectl grid status dg/dg:\n%s", out)
}

func webhookFor(name, resource string) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: controllerNamespace, Name: controllerName, Port: ptr.To[int32](443)},
			CABundle: []byte("-----BEGIN CERTIFICATE-----\n"),
		},
		Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}}}},
		FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func newTestClients(cp *controlplane.ControlPlane) (*clients, error) {
	c := &clients{namespace: "default", kube: kubernetes.NewForConfigOrDie(cp.Config), grids: versioned.NewForConfigOrDie(cp.Config)}
	var err error
	c.dynamic, err = dynamic.NewForConfig(cp.Config)
	return c, err
}
