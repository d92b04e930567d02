package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// superEdgeCanary is the canary DeploymentGrid of SuperEdge's service group
// documentation as it stands there, every field it uses.
const superEdgeCanary = `
apiVersion: superedge.io/v1
kind: DeploymentGrid
metadata:
  name: deploymentgrid-demo
  namespace: default
spec:
  defaultTemplateName: test1
  autoDeleteUnusedTemplate: false
  gridUniqKey: zone
  template:
    replicas: 1
    selector:
      matchLabels:
        appGrid: echo
    strategy: {}
    template:
      metadata:
        creationTimestamp: null
        labels:
          appGrid: echo
      spec:
        containers:
        - image: superedge/echoserver:2.2
          name: echo
          ports:
          - containerPort: 8080
            protocol: TCP
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
          resources: {}
  templatePool:
    test1:
      replicas: 2
      selector:
        matchLabels:
          appGrid: echo
      strategy: {}
      template:
        metadata:
          creationTimestamp: null
          labels:
            appGrid: echo
        spec:
          containers:
          - image: superedge/echoserver:2.2
            name: echo
            resources: {}
    test2:
      replicas: 3
      selector:
        matchLabels:
          appGrid: echo
      strategy: {}
      template:
        metadata:
          creationTimestamp: null
          labels:
            appGrid: echo
        spec:
          containers:
          - image: superedge/echoserver:2.3
            name: echo
            resources: {}
  templates:
    zone1: test1
    zone2: test2
`

// superEdgeStatefulSetGrid and superEdgeServiceGrid are the documented
// StatefulSetGrid and ServiceGrid examples.
const superEdgeStatefulSetGrid = `
apiVersion: superedge.io/v1
kind: StatefulSetGrid
metadata:
  name: statefulsetgrid-demo
  namespace: default
spec:
  gridUniqKey: zone
  template:
    selector:
      matchLabels:
        appGrid: echo
    serviceName: "servicegrid-demo-svc"
    replicas: 3
    template:
      metadata:
        labels:
          appGrid: echo
      spec:
        terminationGracePeriodSeconds: 10
        containers:
        - image: superedge/echoserver:2.2
          name: echo
          ports:
          - containerPort: 8080
            protocol: TCP
          resources: {}
`

const superEdgeServiceGrid = `
apiVersion: superedge.io/v1
kind: ServiceGrid
metadata:
  name: servicegrid-demo
  namespace: default
spec:
  gridUniqKey: zone
  template:
    selector:
      appGrid: echo
    ports:
    - protocol: TCP
      port: 80
      targetPort: 8080
`

// TestSuperEdgeGridAPI: SuperEdge's documented manifests pass strict field
// validation and come back unpruned; each nodeunit's child is built from its
// own template; a pool entry change rolls only its nodeunits; an unknown
// template name is a Warning and a condition and leaves that child alone;
// prefixed grid keys work.
func TestSuperEdgeGridAPI(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(e.cp.Config)

	t.Run("documented manifests, strict validation, nothing pruned", func(t *testing.T) {
		for _, m := range []struct{ resource, manifest string }{
			{"deploymentgrids", superEdgeCanary}, {"statefulsetgrids", superEdgeStatefulSetGrid}, {"servicegrids", superEdgeServiceGrid},
		} {
			in := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(m.manifest), &in.Object); err != nil {
				t.Fatal(err)
			}
			r := dyn.Resource(superedgev1.SchemeGroupVersion.WithResource(m.resource)).Namespace("default")
			out, err := r.Create(ctx, in, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			if err != nil {
				t.Fatalf("%s: %v", m.resource, err)
			}
			if want, got := mustJSON(withoutNulls(in.Object["spec"])), mustJSON(withoutNulls(out.Object["spec"])); want != got {
				t.Errorf("%s: spec changed by the apiserver:\n%v\n->\n%v", m.resource, want, got)
			}
		}
		for _, bad := range []string{"templatePools", "defaultTemplate"} {
			in := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(superEdgeCanary), &in.Object); err != nil {
				t.Fatal(err)
			}
			in.SetName("typo")
			_ = unstructured.SetNestedField(in.Object, "x", "spec", bad)
			_, err := dyn.Resource(superedgev1.SchemeGroupVersion.WithResource("deploymentgrids")).Namespace("default").
				Create(ctx, in, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			if err == nil || !strings.Contains(err.Error(), bad) {
				t.Errorf("unknown field %s: %v", bad, err)
			}
		}
	})

	e.node(t, "n1", map[string]string{"zone": "zone1", "topology.kubernetes.io/zone": "east"})
	e.node(t, "n2", map[string]string{"zone": "zone2", "topology.kubernetes.io/zone": "west"})
	e.node(t, "n3", map[string]string{"zone": "zone3"})
	e.startController(t, nil)

	image := func(ctx context.Context, name string) (string, string, error) {
		d, err := e.kube.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", "", err
		}
		return d.Spec.Template.Spec.Containers[0].Image, d.ResourceVersion, nil
	}

	t.Run("each nodeunit gets its template", func(t *testing.T) {
		want := map[string]string{ // zone3 is in no templates entry: defaultTemplateName test1
			"deploymentgrid-demo-zone1": "superedge/echoserver:2.2",
			"deploymentgrid-demo-zone2": "superedge/echoserver:2.3",
			"deploymentgrid-demo-zone3": "superedge/echoserver:2.2",
		}
		testwait.Eventually(t.Context(), t, 20*time.Second, "children from their templates", func(ctx context.Context) error {
			for name, img := range want {
				got, _, err := image(ctx, name)
				if err != nil {
					return err
				}
				if got != img {
					return fmt.Errorf("%s runs %s, want %s", name, got, img)
				}
			}
			return nil
		})
	})

	t.Run("a pool entry change rolls only its nodeunits", func(t *testing.T) {
		_, rv1, err := image(ctx, "deploymentgrid-demo-zone1")
		if err != nil {
			t.Fatal(err)
		}
		patch := `{"spec":{"templatePool":{"test2":{"template":{"spec":{"containers":[{"name":"echo","image":"superedge/echoserver:2.4"}]}}}}}}`
		if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Patch(ctx, "deploymentgrid-demo", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t.Context(), t, 20*time.Second, "zone2 on 2.4 and the grid's status observed", func(ctx context.Context) error {
			if img, _, err := image(ctx, "deploymentgrid-demo-zone2"); err != nil || img != "superedge/echoserver:2.4" {
				return fmt.Errorf("zone2 image %s (%v)", img, err)
			}
			return observed(ctx, e, "deploymentgrid-demo")
		})
		if _, rv, err := image(ctx, "deploymentgrid-demo-zone1"); err != nil || rv != rv1 {
			t.Errorf("zone1 was written to: rv %s -> %s (%v)", rv1, rv, err)
		}
	})

	t.Run("unknown template: Warning, condition, child kept", func(t *testing.T) {
		img1, rv1, err := image(ctx, "deploymentgrid-demo-zone1")
		if err != nil {
			t.Fatal(err)
		}
		e.updateDeploymentGrid(t, "default", "deploymentgrid-demo", func(g *superedgev1.DeploymentGrid) {
			g.Spec.Templates["zone1"] = "test9"
		})
		testwait.Eventually(t.Context(), t, 20*time.Second, "UnknownTemplate condition and Event naming test9", func(ctx context.Context) error {
			g, err := e.grids.SuperedgeV1().DeploymentGrids("default").Get(ctx, "deploymentgrid-demo", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionReconciled)
			if c == nil || c.Reason != ReasonUnknownTemplate || !strings.Contains(c.Message, "test9") || c.ObservedGeneration != g.Generation {
				return fmt.Errorf("condition %+v", c)
			}
			evs, err := e.warningEvents(ctx, "default", "deploymentgrid-demo", ReasonUnknownTemplate)
			if err != nil || len(evs) == 0 {
				return fmt.Errorf("events %v (%v)", evs, err)
			}
			return nil
		})
		if img, rv, err := image(ctx, "deploymentgrid-demo-zone1"); err != nil || rv != rv1 || img != img1 {
			t.Errorf("zone1 changed: %s rv %s -> %s rv %s (%v)", img1, rv1, img, rv, err)
		}
	})

	t.Run("prefixed grid key", func(t *testing.T) {
		const key = "topology.kubernetes.io/zone"
		if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "web", key, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sg := &superedgev1.ServiceGrid{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
		sg.Spec.GridUniqKey = key
		if err := yaml.Unmarshal([]byte(`{"selector":{"app":"web"},"ports":[{"port":80}]}`), &sg.Spec.Template); err != nil {
			t.Fatal(err)
		}
		if _, err := e.grids.SuperedgeV1().ServiceGrids("default").Create(ctx, sg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitDeployments(t, "default", "web", "web-east", "web-west")
		for _, v := range []string{"east", "west"} {
			d, err := e.kube.AppsV1().Deployments("default").Get(ctx, "web-"+v, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Labels[superedgev1.LabelGridUniqKey] != "topology.kubernetes.io_zone" || d.Annotations[superedgev1.AnnotationGridUniqKey] != key {
				t.Errorf("%s: labels %v annotations %v", d.Name, d.Labels, d.Annotations)
			}
			if d.Spec.Template.Spec.NodeSelector[key] != v {
				t.Errorf("%s: nodeSelector %v", d.Name, d.Spec.Template.Spec.NodeSelector)
			}
		}
		testwait.Eventually(t.Context(), t, 20*time.Second, "Service with the prefixed key", func(ctx context.Context) error {
			svc, err := e.kube.CoreV1().Services("default").Get(ctx, "web-svc", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if svc.Annotations[superedgev1.AnnotationTopologyKeys] != `["topology.kubernetes.io/zone"]` ||
				svc.Annotations[superedgev1.AnnotationGridUniqKey] != key || svc.Labels[superedgev1.LabelGridUniqKey] != "topology.kubernetes.io_zone" {
				return fmt.Errorf("annotations %v labels %v", svc.Annotations, svc.Labels)
			}
			return nil
		})
	})
}

// observed: the grid's status describes its current generation.
func observed(ctx context.Context, e *env, name string) error {
	g, err := e.grids.SuperedgeV1().DeploymentGrids("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if g.Status.ObservedGeneration != g.Generation {
		return fmt.Errorf("status of generation %d, grid at %d", g.Status.ObservedGeneration, g.Generation)
	}
	return nil
}

// withoutNulls drops null map values (the apiserver drops them too).
func withoutNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if val != nil {
				out[k] = withoutNulls(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = withoutNulls(x[i])
		}
		return out
	default:
		return v
	}
}
