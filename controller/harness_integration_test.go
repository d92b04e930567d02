package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/client/clientset/versioned/scheme"
	"github.com/servicegroup/servicegroup/internal/testnet"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// env is a real control plane with the CRDs installed and admin clients.
type env struct {
	cp    *controlplane.ControlPlane
	kube  kubernetes.Interface
	grids versioned.Interface
	ext   apiextensionsclient.Interface
}

// newEnv starts a control plane with the CRDs installed before any
// kube-controller-manager starts.
func newEnv(t testing.TB, opts controlplane.Options) *env {
	t.Helper()
	opts.CRDs = true // before kube-controller-manager: see controlplane.Options
	return newEnvClients(controlplane.StartForTest(t, opts))
}

// newEnvClients builds admin clients; no CRDs installed.
func newEnvClients(cp *controlplane.ControlPlane) *env {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	return &env{
		cp:    cp,
		kube:  kubernetes.NewForConfigOrDie(cfg),
		grids: versioned.NewForConfigOrDie(cfg),
		ext:   apiextensionsclient.NewForConfigOrDie(cfg),
	}
}

// writeCounter counts the write requests (POST, PUT, PATCH, DELETE) a client makes.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) config(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return testnet.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			switch r.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				w.mu.Lock()
				w.writes = append(w.writes, r.Method+" "+r.URL.Path)
				w.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// list returns the writes whose "METHOD path" satisfies keep (all if nil).
func (w *writeCounter) list(keep func(string) bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.writes {
		if keep == nil || keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func (w *writeCounter) reset() {
	w.mu.Lock()
	w.writes = nil
	w.mu.Unlock()
}

// notLease drops leader election traffic.
func notLease(s string) bool { return !strings.Contains(s, "/leases") }

// notEvent drops Events.
func notEvent(s string) bool { return !strings.Contains(s, "/events") }

// startController runs a Manager (no leader election, CRDs already there)
// until the test ends.
func (e *env) startController(t testing.TB, mutate func(*Options)) (*Manager, *writeCounter, context.CancelFunc) {
	t.Helper()
	wc := &writeCounter{}
	o := DefaultOptions()
	o.Config = wc.config(e.cp.Config)
	o.Workers = 2
	o.LeaderElect = false
	o.DeletionGracePeriod = 0
	o.ManageCRDs = false
	o.MetricsBindAddress, o.HealthBindAddress = "0", "0"
	if mutate != nil {
		mutate(&o)
	}
	m, err := NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("controller did not stop within 30s")
		}
	}
	t.Cleanup(stop)
	return m, wc, stop
}

func (e *env) node(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	_, err := e.kube.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) relabel(t testing.TB, node string, labels map[string]any) {
	t.Helper()
	data := fmt.Appendf(nil, `{"metadata":{"labels":%s}}`, mustJSON(labels))
	if _, err := e.kube.CoreV1().Nodes().Patch(t.Context(), node, "application/merge-patch+json", data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// relabelAtOnce sets key on each node to its value in values, atOnce
// patches in flight at a time: a burst of relabels as a controller sees them.
func (e *env) relabelAtOnce(t testing.TB, key string, values map[string]string, atOnce int) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(atOnce)
	for node, value := range values {
		g.Go(func() error {
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, key, value)
			_, err := e.kube.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) namespace(t testing.TB, name string) {
	t.Helper()
	if _, err := e.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deploymentNames lists the Deployments in ns carrying grid's selector label.
func (e *env) deploymentNames(ctx context.Context, ns, grid string) ([]string, error) {
	list, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: superedgev1.LabelGridSelector + "=" + grid})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range list.Items {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return names, nil
}

func (e *env) waitDeployments(t testing.TB, ns, grid string, want ...string) {
	t.Helper()
	slices.Sort(want)
	testwait.Eventually(t.Context(), t, 20*time.Second, fmt.Sprintf("deployments of %s/%s are %v", ns, grid, want), func(ctx context.Context) error {
		got, err := e.deploymentNames(ctx, ns, grid)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("got %v", got)
		}
		return nil
	})
}

// readExample decodes one of examples/*.yaml.
func readExample(t testing.TB, name string) any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// createExamples creates SuperEdge's three grids from examples/ in "default"
// and returns them as created.
func (e *env) createExamples(t testing.TB) (*superedgev1.DeploymentGrid, *superedgev1.StatefulSetGrid, *superedgev1.ServiceGrid) {
	t.Helper()
	ctx := t.Context()
	dg, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx,
		readExample(t, "deploymentgrid.yaml").(*superedgev1.DeploymentGrid), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ssg, err := e.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx,
		readExample(t, "statefulsetgrid.yaml").(*superedgev1.StatefulSetGrid), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sg, err := e.grids.SuperedgeV1().ServiceGrids("default").Create(ctx,
		readExample(t, "servicegrid.yaml").(*superedgev1.ServiceGrid), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return dg, ssg, sg
}

// simpleDeploymentGrid is a grid with a one-container template.
func simpleDeploymentGrid(ns, name, key string, replicas *int32) *superedgev1.DeploymentGrid {
	return &superedgev1.DeploymentGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "edge"}},
		Spec: superedgev1.DeploymentGridSpec{
			GridUniqKey: key,
			Template: appsv1.DeploymentSpec{
				Replicas: replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
						Containers: []corev1.Container{{
							Name: "echo", Image: "registry.example/echo:1",
							Env: []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						}},
					},
				},
			},
		},
	}
}

func (e *env) warningEvents(ctx context.Context, ns, name, reason string) ([]corev1.Event, error) {
	list, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

func podTemplate(app, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// updateDeploymentGrid changes a grid with retries on conflict (the
// controller writes its status concurrently).
func (e *env) updateDeploymentGrid(t testing.TB, ns, name string, change func(*superedgev1.DeploymentGrid)) {
	t.Helper()
	grids := e.grids.SuperedgeV1().DeploymentGrids(ns)
	updateOnConflict(t, grids.Get, grids.Update, name, change)
}

func (e *env) updateServiceGrid(t testing.TB, ns, name string, change func(*superedgev1.ServiceGrid)) {
	t.Helper()
	grids := e.grids.SuperedgeV1().ServiceGrids(ns)
	updateOnConflict(t, grids.Get, grids.Update, name, change)
}

// updateOnConflict gets name, changes it and updates it, again from the get
// on a conflict.
func updateOnConflict[T any](t testing.TB,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
	name string, change func(T),
) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(o)
		_, err = update(t.Context(), o, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
