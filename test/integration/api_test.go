package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/client/clientset/versioned/scheme"
	gridinformers "github.com/servicegroup/servicegroup/client/informers/externalversions"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// gridAPIPlane is shared by the tests that only create namespaced grids of
// their own names (the examples' in default; the rejected ones are never
// stored), so they cannot meet.
var gridAPIPlane = controlplane.Shared{Options: controlplane.Options{CRDs: true}}

// createExamples creates SuperEdge's three grids from examples/ through the
// generated clientset, with the given field validation ("" for the default).
func createExamples(t *testing.T, client versioned.Interface, fieldValidation string) {
	t.Helper()
	ctx := t.Context()
	opts := metav1.CreateOptions{FieldValidation: fieldValidation}
	decode := scheme.Codecs.UniversalDeserializer().Decode
	for _, f := range []string{"deploymentgrid.yaml", "statefulsetgrid.yaml", "servicegrid.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decode(data, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		switch o := obj.(type) {
		case *superedgev1.DeploymentGrid:
			_, err = client.SuperedgeV1().DeploymentGrids(o.Namespace).Create(ctx, o, opts)
		case *superedgev1.StatefulSetGrid:
			_, err = client.SuperedgeV1().StatefulSetGrids(o.Namespace).Create(ctx, o, opts)
		case *superedgev1.ServiceGrid:
			_, err = client.SuperedgeV1().ServiceGrids(o.Namespace).Create(ctx, o, opts)
		default:
			t.Fatalf("%s decoded to %T", f, obj)
		}
		if err != nil {
			t.Fatalf("create %s: %v", f, err)
		}
	}
}

// TestAPIRoundTrip applies the generated CRDs to a real apiserver, creates the
// SuperEdge's three example grids through the generated clientset, reads them back
// through a generated informer, and checks the schema rejects bad objects.
func TestAPIRoundTrip(t *testing.T) {
	t.Parallel()
	cp := gridAPIPlane.Get(t)
	ctx := t.Context()
	client := versioned.NewForConfigOrDie(cp.Config)

	createExamples(t, client, "Strict")

	factory := gridinformers.NewSharedInformerFactory(client, 0)
	dgs := factory.Superedge().V1().DeploymentGrids()
	ssgs := factory.Superedge().V1().StatefulSetGrids()
	sgs := factory.Superedge().V1().ServiceGrids()
	dgs.Informer()
	ssgs.Informer()
	sgs.Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown() // after close(stop): Shutdown waits for the informers to end
	defer close(stop)
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}

	dg, err := dgs.Lister().DeploymentGrids("default").Get("deploymentgrid-demo")
	if err != nil {
		t.Fatal(err)
	}
	if dg.Spec.GridUniqKey != "zone1" || *dg.Spec.Template.Replicas != 2 {
		t.Errorf("DeploymentGrid spec = %+v", dg.Spec)
	}
	// The pod template's labels must survive structural pruning.
	if got := dg.Spec.Template.Template.Labels["appGrid"]; got != "echo" {
		t.Errorf("template labels pruned: %v", dg.Spec.Template.Template.Labels)
	}
	if got := dg.Spec.Template.Template.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath; got != "spec.nodeName" {
		t.Errorf("env fieldRef = %q", got)
	}
	ssg, err := ssgs.Lister().StatefulSetGrids("default").Get("statefulsetgrid-demo")
	if err != nil {
		t.Fatal(err)
	}
	if ssg.Spec.Template.ServiceName != "servicegrid-demo-svc" || *ssg.Spec.Template.Replicas != 3 {
		t.Errorf("StatefulSetGrid spec = %+v", ssg.Spec)
	}
	sg, err := sgs.Lister().ServiceGrids("default").Get("servicegrid-demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(sg.Spec.Template.Ports) != 1 || sg.Spec.Template.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("ServiceGrid ports = %+v", sg.Spec.Template.Ports)
	}

	// The status subresource is separate from the spec.
	dg = dg.DeepCopy()
	dg.Status.NodeUnits = 2
	dg.Status.ObservedGeneration = dg.Generation
	if _, err := client.SuperedgeV1().DeploymentGrids("default").UpdateStatus(ctx, dg, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	got, err := client.SuperedgeV1().DeploymentGrids("default").Get(ctx, dg.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NodeUnits != 2 || got.Generation != dg.Generation {
		t.Errorf("status update: nodeUnits=%d generation %d -> %d", got.Status.NodeUnits, dg.Generation, got.Generation)
	}
}

// TestAPISchemaRejectsInvalid sends malformed grids as raw JSON and expects
// the apiserver's schema validation to name the offending field.
func TestAPISchemaRejectsInvalid(t *testing.T) {
	t.Parallel()
	cp := gridAPIPlane.Get(t)
	client := versioned.NewForConfigOrDie(cp.Config)
	rc := client.SuperedgeV1().RESTClient()

	cases := []struct {
		name, resource, body, wantMsg string
	}{
		{"missing gridUniqKey", "deploymentgrids",
			`{"apiVersion":"superedge.io/v1","kind":"DeploymentGrid","metadata":{"name":"a"},"spec":{"template":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}}`,
			`spec.gridUniqKey: Required value`},
		{"gridUniqKey not a string", "statefulsetgrids",
			`{"apiVersion":"superedge.io/v1","kind":"StatefulSetGrid","metadata":{"name":"b"},"spec":{"gridUniqKey":5,"template":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}}`,
			`spec.gridUniqKey: Invalid value: "integer": spec.gridUniqKey in body must be of type string`},
		{"missing template", "servicegrids",
			`{"apiVersion":"superedge.io/v1","kind":"ServiceGrid","metadata":{"name":"c"},"spec":{"gridUniqKey":"zone"}}`,
			`spec.template: Required value`},
		{"replicas not an integer", "deploymentgrids",
			`{"apiVersion":"superedge.io/v1","kind":"DeploymentGrid","metadata":{"name":"d"},"spec":{"gridUniqKey":"zone","template":{"replicas":"two","selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}}`,
			`spec.template.replicas: Invalid value: "string"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := rc.Post().Namespace("default").Resource(tc.resource).
				SetHeader("Content-Type", "application/json").Body([]byte(tc.body)).Do(t.Context()).Error()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want 422 Invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}

// TestExamplesApplyWithKubectl applies the examples exactly as a user would,
// with kubectl's strict field validation, and reads them by short name.
func TestExamplesApplyWithKubectl(t *testing.T) {
	t.Parallel() // its own control plane
	kubectl := controlplane.BinaryForTest(t, controlplane.Kubectl)
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("apply", "--validate=strict", "-f", filepath.Join("..", "..", "examples"))
	for _, want := range []string{"deploymentgrid.superedge.io/deploymentgrid-demo created",
		"statefulsetgrid.superedge.io/statefulsetgrid-demo created", "servicegrid.superedge.io/servicegrid-demo created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
		}
	}
	for short, want := range map[string]string{
		"dg":  "deploymentgrid.superedge.io/deploymentgrid-demo\ndeploymentgrid.superedge.io/deploymentgrid-rollout\n",
		"ssg": "statefulsetgrid.superedge.io/statefulsetgrid-demo\n",
		"sg":  "servicegrid.superedge.io/servicegrid-demo\n",
	} {
		if out := run("get", short, "-o", "name"); out != want {
			t.Errorf("kubectl get %s -o name: %q, want %q", short, out, want)
		}
	}
	// Printer columns come from the generated CRD.
	if out := run("get", "dg"); !strings.Contains(out, "GRID-KEY") || !strings.Contains(out, "zone1") {
		t.Errorf("kubectl get dg columns:\n%s", out)
	}
	// Server-side apply through the generated types' schema merges, it does not replace.
	patch := []byte(`{"apiVersion":"superedge.io/v1","kind":"ServiceGrid","metadata":{"name":"servicegrid-demo","namespace":"default","labels":{"team":"edge"}}}`)
	client := versioned.NewForConfigOrDie(cp.Config)
	sg, err := client.SuperedgeV1().ServiceGrids("default").Patch(t.Context(), "servicegrid-demo", types.ApplyPatchType, patch,
		metav1.PatchOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if sg.Labels["team"] != "edge" || sg.Spec.GridUniqKey != "zone1" {
		t.Errorf("after apply: labels %v, gridUniqKey %q", sg.Labels, sg.Spec.GridUniqKey)
	}
}
