package main

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The test binary doubles as the command when asked to.
func TestMain(m *testing.M) { testbin.SelfMain(m, "RUN_APPLICATION_GRID_CONTROLLER", main) }

// TestBinary runs the command against a real apiserver with its default
// leader election and CRD management: it installs the CRDs, becomes ready,
// reconciles a grid, and exits cleanly on SIGTERM. It logs in JSON
// (--logging-format json): every line it writes is one JSON object.
func TestBinary(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	addr := controlplane.FreeAddress(t)
	cmd := testbin.StartSelf(t, "RUN_APPLICATION_GRID_CONTROLLER", "--kubeconfig", cp.Kubeconfig, "--leader-elect-namespace", "default",
		"--metrics-bind-address", addr, "--health-bind-address", addr, "-v", "2", "--logging-format", "json")

	poll := func(what string, check func(ctx context.Context) error) {
		t.Helper()
		testwait.Eventually(t.Context(), t, testwait.Floor, what, check)
	}
	poll("/readyz", testwait.HTTPOK("http://"+addr+"/readyz"))

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	grids := versioned.NewForConfigOrDie(cp.Config)
	ctx := t.Context()
	if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone1": "u1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("grid created once the CRDs exist", func(ctx context.Context) error {
		_, err := grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, &superedgev1.DeploymentGrid{
			ObjectMeta: metav1.ObjectMeta{Name: "demo"},
			Spec: superedgev1.DeploymentGridSpec{GridUniqKey: "zone1", Template: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "demo"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
				},
			}},
		}, metav1.CreateOptions{})
		return err
	})
	poll("demo-u1 created", func(ctx context.Context) error {
		_, err := kube.AppsV1().Deployments("default").Get(ctx, "demo-u1", metav1.GetOptions{})
		return err
	})

	cmd.Stop(t)
	log := cmd.Log(t)
	if !slices.Contains(testbin.JSONLogMessages(t, log), "Starting application-grid-controller") {
		t.Errorf("no JSON line with msg \"Starting application-grid-controller\" in:\n%s", log)
	}
}
