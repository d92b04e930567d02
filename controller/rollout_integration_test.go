package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/explain"
	"github.com/servicegroup/servicegroup/internal/gridcli"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// gridCLI runs `kubectl grid ARGS` in-process against the test's cluster.
func (e *env) gridCLI(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := gridcli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", e.cp.Kubeconfig, "-n", "rollout"}, args...))
	err := cmd.Execute()
	return out.String() + errOut.String(), err
}

// testProgressDeadline is the rollouts' progressDeadlineSeconds where a bad
// image must halt them: the test waits it out once per halt. At 5 s a good
// image could miss it where the whole suite shares two cores: the canary
// then halts on a template that is fine.
const testProgressDeadline = 20

// badImage marks images the test's kubelet never makes ready.
const badImage = "registry.example/echo:bad"

// testKubelet says which pods fakeKubelet makes ready: none, every one, or
// only those of some nodeunits (the pod's zone node selector).
type testKubelet struct {
	on    atomic.Bool
	zones atomic.Pointer[[]string] // nil: every nodeunit
}

// Store turns the kubelet on for every nodeunit, or off.
func (k *testKubelet) Store(on bool) {
	k.zones.Store(nil)
	k.on.Store(on)
}

// only turns the kubelet on for the pods of these nodeunits only.
func (k *testKubelet) only(zones ...string) {
	k.zones.Store(&zones)
	k.on.Store(true)
}

func (k *testKubelet) serves(p *corev1.Pod) bool {
	if !k.on.Load() {
		return false
	}
	zones := k.zones.Load()
	return zones == nil || slices.Contains(*zones, p.Spec.NodeSelector["zone"])
}

// fakeKubelet plays the kubelet on pod status in ns: every pod it serves
// whose containers do not use badImage is marked Running and Ready, so the
// real ReplicaSet and StatefulSet controllers see it available. It stops
// with ctx.
func (e *env) fakeKubelet(ctx context.Context, t testing.TB, ns string, kubelet *testKubelet) {
	go func() {
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			if !kubelet.on.Load() {
				continue
			}
			pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp != nil || podReady(p) || !kubelet.serves(p) || slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Image == badImage }) {
					continue
				}
				now := metav1.Now()
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				}
				_, _ = e.kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	}()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rolloutGrid is a one-replica grid over nodeunits z00..z{n-1}.
func rolloutGrid(ns, name string, strategy *superedgev1.RolloutStrategy) *superedgev1.DeploymentGrid {
	g := simpleDeploymentGrid(ns, name, "zone", ptr.To[int32](1))
	g.Spec.Template.Template.Spec.Containers[0].Env = nil
	g.Spec.Template.Template.Spec.NodeSelector = nil
	g.Spec.Rollout = strategy
	return g
}

func zone(i int) string { return fmt.Sprintf("z%02d", i) }

// newRolloutEnv is a control plane with kube-controller-manager, namespace
// ns and n nodes node-zNN, each its own nodeunit zone=zNN, with the test's
// kubelet making ns's pods ready while it is on (it starts on, for every nodeunit).
// ctx ends with the test.
func newRolloutEnv(t *testing.T, ns string, n int) (e *env, kubelet *testKubelet, ctx context.Context) {
	e = newEnv(t, controlplane.Options{ControllerManager: true})
	e.namespace(t, ns)
	for i := range n {
		e.node(t, "node-"+zone(i), map[string]string{"zone": zone(i)})
	}
	kubelet = &testKubelet{}
	kubelet.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.fakeKubelet(ctx, t, ns, kubelet)
	return e, kubelet, ctx
}

// imagesOf maps nodeunit -> image of the grid's children.
func (e *env) imagesOf(ctx context.Context, ns, grid string) (map[string]string, []appsv1.Deployment, error) {
	list, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: superedgev1.LabelGridSelector + "=" + grid})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]string{}
	for _, d := range list.Items {
		out[d.Spec.Template.Spec.NodeSelector["zone"]] = d.Spec.Template.Spec.Containers[0].Image
	}
	return out, list.Items, nil
}

// followDeployments calls seen with grid's Deployments in ns (by name)
// after each change to them, in the order the apiserver made them, until
// the returned stop is called. An informer's events are every state the
// apiserver went through; a poll would see some of them, and on a loaded
// machine its lists slowed the apiserver the rollout goes through.
func (e *env) followDeployments(t testing.TB, ctx context.Context, ns, grid string, seen func(map[string]*appsv1.Deployment)) (stop func()) {
	t.Helper()
	f := informers.NewSharedInformerFactoryWithOptions(e.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = superedgev1.LabelGridSelector + "=" + grid }))
	inf := f.Apps().V1().Deployments().Informer()
	// One listener gets its notifications one at a time, in order: the map
	// follows them, where the informer's store may already be ahead.
	state := map[string]*appsv1.Deployment{}
	set := func(o any) {
		d := o.(*appsv1.Deployment)
		state[d.Name] = d
		seen(state)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, o any) { set(o) },
		DeleteFunc: func(o any) {
			if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			delete(state, o.(*appsv1.Deployment).Name)
			seen(state)
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		t.Fatalf("the informer of %s's Deployments did not sync", grid)
	}
	return func() {
		cancel()
		f.Shutdown() // waits for the handler's last call
	}
}

func (e *env) gridCondition(ctx context.Context, ns, name, typ string) (*superedgev1.DeploymentGrid, *metav1.Condition, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	c := meta.FindStatusCondition(g.Status.Conditions, typ)
	if c == nil || c.ObservedGeneration != g.Generation {
		return g, nil, fmt.Errorf("condition %s not yet reported for generation %d", typ, g.Generation)
	}
	return g, c, nil
}

// waitComplete waits until the grid's rollout is Complete with every child on image.
func (e *env) waitComplete(t testing.TB, ns, name, image string) *superedgev1.DeploymentGrid {
	t.Helper()
	var grid *superedgev1.DeploymentGrid
	testwait.Eventually(t.Context(), t, 0, name+" complete on "+image, func(ctx context.Context) error {
		g, c, err := e.gridCondition(ctx, ns, name, superedgev1.ConditionComplete)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Complete=%s: %s", c.Status, c.Message)
		}
		imgs, _, err := e.imagesOf(ctx, ns, name)
		if err != nil {
			return err
		}
		for v, img := range imgs {
			if img != image {
				return fmt.Errorf("nodeunit %s runs %s", v, img)
			}
		}
		grid = g
		return nil
	})
	return grid
}

func setImage(image string) func(*superedgev1.DeploymentGrid) {
	return func(g *superedgev1.DeploymentGrid) { g.Spec.Template.Template.Spec.Containers[0].Image = image }
}

// TestRolloutCanaryHaltsThenResumes: a bad image stops at the canary (the
// real Deployment controller reports it, the test's kubelet never makes it
// ready), the rollback policy restores the canary, a good image then rolls
// out in waves, and a controller restarted mid-rollout resumes at the same
// wave without touching the nodeunits already done.
func TestRolloutCanaryHaltsThenResumes(t *testing.T) {
	t.Parallel() // its own control plane
	const ns, name = "rollout", "web"
	e, kubelet, ctx := newRolloutEnv(t, ns, 6)
	_, writes, stop := e.startController(t, nil)

	strategy := &superedgev1.RolloutStrategy{
		Canary:                  &superedgev1.RolloutCanary{NodeUnits: []string{"z03"}},
		WaveSize:                ptr.To(intstr.FromInt32(2)),
		MaxUnavailableUnits:     ptr.To[int32](2),
		ProgressDeadlineSeconds: ptr.To[int32](testProgressDeadline),
	}
	if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(t.Context(), rolloutGrid(ns, name, strategy), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := e.waitComplete(t, ns, name, "registry.example/echo:1")
	if g.Status.Rollout == nil || len(g.Status.Rollout.Templates) != 1 || g.Status.Rollout.Templates[0].LastGood == "" {
		t.Fatalf("no last good revision recorded: %+v", g.Status.Rollout)
	}
	good := g.Status.Rollout.Templates[0].LastGood

	// Sample every child throughout: the bad image must never leave the canary.
	// Every state of the children: the bad image must never leave the canary.
	var leaked atomic.Value
	stopFollowing := e.followDeployments(t, ctx, ns, name, func(ds map[string]*appsv1.Deployment) {
		for _, d := range ds {
			if v := d.Spec.Template.Spec.NodeSelector["zone"]; d.Spec.Template.Spec.Containers[0].Image == badImage && v != "z03" {
				leaked.Store(v)
			}
		}
	})
	defer stopFollowing()

	e.updateDeploymentGrid(t, ns, name, setImage(badImage))
	testwait.Eventually(t.Context(), t, 0, "rollout halted on the canary z03", func(ctx context.Context) error {
		g, c, err := e.gridCondition(ctx, ns, name, superedgev1.ConditionHalted)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue || g.Status.Rollout.Halted == nil || g.Status.Rollout.Halted.NodeUnit != "z03" {
			return fmt.Errorf("Halted=%s: %s; units %s", c.Status, c.Message, mustJSON(g.Status.Units))
		}
		if !strings.Contains(c.Message, `"z03"`) {
			return fmt.Errorf("halt message does not name the nodeunit: %s", c.Message)
		}
		ev, err := e.warningEvents(ctx, ns, name, ReasonRolloutHalted)
		if err != nil || len(ev) == 0 {
			return fmt.Errorf("no %s Event yet (%v)", ReasonRolloutHalted, err)
		}
		return nil
	})
	if out, err := e.gridCLI("rollout", "status", "dg/"+name); err == nil || !strings.Contains(err.Error(), `nodeunit "z03"`) {
		t.Fatalf("rollout status on a halted rollout: %v\n%s", err, out)
	}
	// Halted is final for this template: a new nodeunit gets the last good one.
	e.node(t, "node-"+zone(6), map[string]string{"zone": zone(6)})
	testwait.Eventually(t.Context(), t, 0, "new nodeunit z06 on the last good template", func(ctx context.Context) error {
		imgs, _, err := e.imagesOf(ctx, ns, name)
		if err != nil {
			return err
		}
		if imgs["z06"] != "registry.example/echo:1" {
			return fmt.Errorf("z06 runs %q", imgs["z06"])
		}
		return nil
	})

	// The rollback policy gives the canary its last good template back.
	e.updateDeploymentGrid(t, ns, name, func(g *superedgev1.DeploymentGrid) { g.Spec.Rollout.FailurePolicy = superedgev1.FailurePolicyRollback })
	testwait.Eventually(t.Context(), t, 0, "canary rolled back", func(ctx context.Context) error {
		imgs, _, err := e.imagesOf(ctx, ns, name)
		if err != nil {
			return err
		}
		if imgs["z03"] != "registry.example/echo:1" {
			return fmt.Errorf("z03 runs %q", imgs["z03"])
		}
		g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, u := range g.Status.Units {
			if u.Name == "z03" && (u.Phase != superedgev1.PhaseRolledBack || u.Revision != good) {
				return fmt.Errorf("z03 status %+v, want RolledBack on %s", u, good)
			}
		}
		return nil
	})
	stopFollowing()
	if v := leaked.Load(); v != nil {
		t.Fatalf("the bad image reached nodeunit %v beyond the canary", v)
	}

	// Undo puts the last good template back into the spec: the halt ends.
	if out, err := e.gridCLI("rollout", "undo", "dg/"+name); err != nil {
		t.Fatalf("rollout undo: %v\n%s", err, out)
	}
	e.waitComplete(t, ns, name, "registry.example/echo:1")
	if out, err := e.gridCLI("rollout", "status", "dg/"+name); err != nil || !strings.Contains(out, "Complete") {
		t.Fatalf("rollout status after undo: %v\n%s", err, out)
	}

	// Paused, a new image moves nothing.
	if out, err := e.gridCLI("rollout", "pause", "dg/"+name); err != nil {
		t.Fatalf("rollout pause: %v\n%s", err, out)
	}
	e.updateDeploymentGrid(t, ns, name, setImage("registry.example/echo:2"))
	testwait.Eventually(t.Context(), t, 0, "paused", func(ctx context.Context) error {
		_, c, err := e.gridCondition(ctx, ns, name, superedgev1.ConditionPaused)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Paused=%s", c.Status)
		}
		return nil
	})
	imgs, _, err := e.imagesOf(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for v, img := range imgs {
		if img == "registry.example/echo:2" {
			t.Fatalf("paused rollout changed nodeunit %s", v)
		}
	}

	// Resume with the kubelet stopped: the canary and the first wave's two
	// nodeunits change, then nothing moves (they cannot become healthy,
	// the deadline is long now). Restart the controller there.
	kubelet.Store(false)
	e.updateDeploymentGrid(t, ns, name, func(g *superedgev1.DeploymentGrid) {
		g.Spec.Rollout.ProgressDeadlineSeconds = ptr.To[int32](3600)
		g.Spec.Rollout.Canary = nil
	})
	if out, err := e.gridCLI("rollout", "resume", "dg/"+name); err != nil {
		t.Fatalf("rollout resume: %v\n%s", err, out)
	}
	testwait.Eventually(t.Context(), t, 0, "first wave updating", func(ctx context.Context) error {
		imgs, _, err := e.imagesOf(ctx, ns, name)
		if err != nil {
			return err
		}
		var on []string
		for v, img := range imgs {
			if img == "registry.example/echo:2" {
				on = append(on, v)
			}
		}
		slices.Sort(on)
		if fmt.Sprint(on) != "[z00 z01]" {
			return fmt.Errorf("on the new image: %v", on)
		}
		return nil
	})
	// The first wave's pods become ready, no other's: the second wave
	// starts and cannot end, so the controller stops mid-rollout however
	// fast it would otherwise go on.
	kubelet.only("z00", "z01")
	testwait.Eventually(t.Context(), t, 0, "first wave done, second updating", func(ctx context.Context) error {
		g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if g.Status.Rollout == nil || g.Status.Rollout.Wave != "2/4" {
			return fmt.Errorf("rollout %+v", g.Status.Rollout)
		}
		return nil
	})
	stop()
	_, done, err := e.imagesOf(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	generations := map[string]int64{}
	for _, d := range done {
		generations[d.Name] = d.Generation
	}
	kubelet.Store(true)
	_, writes2, _ := e.startController(t, nil)
	e.waitComplete(t, ns, name, "registry.example/echo:2")
	_, after, err := e.imagesOf(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range after {
		if v := d.Spec.Template.Spec.NodeSelector["zone"]; (v == "z00" || v == "z01") && d.Generation != generations[d.Name] {
			t.Errorf("%s (done before the restart) was written again: generation %d -> %d", d.Name, generations[d.Name], d.Generation)
		}
	}
	// `kubectl grid status` shows the waves and phases the controller recorded.
	table, err := e.gridCLI("status", "dg/"+name)
	if err != nil {
		t.Fatalf("kubectl grid status: %v\n%s", err, table)
	}
	for _, want := range []string{"rollout: Complete, wave 4/4", "WAVE", "PHASE", "REVISION", "web-z06"} {
		if !strings.Contains(table, want) {
			t.Errorf("kubectl grid status lacks %q:\n%s", want, table)
		}
	}
	t.Logf("kubectl grid status dg/%s\n%s", name, table)

	// A templatePool entry rolls only the nodeunits that use it.
	pool := func(image string) func(*superedgev1.DeploymentGrid) {
		return func(g *superedgev1.DeploymentGrid) {
			blue := *g.Spec.Template.DeepCopy()
			blue.Template.Spec.Containers[0].Image = image
			g.Spec.TemplatePool = map[string]appsv1.DeploymentSpec{"blue": blue}
			g.Spec.Templates = map[string]string{"z05": "blue", "z06": "blue"}
		}
	}
	onImages := func(blue string) {
		testwait.Eventually(t.Context(), t, 0, "z05, z06 on "+blue, func(ctx context.Context) error {
			_, c, err := e.gridCondition(ctx, ns, name, superedgev1.ConditionComplete)
			if err != nil {
				return err
			}
			imgs, _, err := e.imagesOf(ctx, ns, name)
			if err != nil {
				return err
			}
			for v, img := range imgs {
				want := "registry.example/echo:2"
				if v == "z05" || v == "z06" {
					want = blue
				}
				if img != want {
					return fmt.Errorf("%s runs %s, want %s", v, img, want)
				}
			}
			if c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Complete=%s: %s", c.Status, c.Message)
			}
			return nil
		})
	}
	e.updateDeploymentGrid(t, ns, name, pool("registry.example/echo:blue"))
	onImages("registry.example/echo:blue")
	_, before, err := e.imagesOf(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	e.updateDeploymentGrid(t, ns, name, pool("registry.example/echo:blue2"))
	onImages("registry.example/echo:blue2")
	_, after, err = e.imagesOf(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	gens := map[string]int64{}
	for _, d := range before {
		gens[d.Name] = d.Generation
	}
	for _, d := range after {
		v := d.Spec.Template.Spec.NodeSelector["zone"]
		if changed := d.Generation != gens[d.Name]; changed != (v == "z05" || v == "z06") {
			t.Errorf("pool entry change: %s changed=%v", d.Name, changed)
		}
	}

	childWrites := 0
	for _, w := range append(writes.list(notEvent), writes2.list(notEvent)...) {
		if strings.Contains(w, "/deployments/") || strings.HasSuffix(w, "/deployments") {
			childWrites++
		}
	}
	t.Logf("writes to Deployments over the whole test (7 nodeunits: create, bad image, rollback, undo, new image, 2 pool changes): %d", childWrites)
}

// TestRolloutMaxUnavailableUnits: 50 nodeunits, at most 5 changing or
// unhealthy at any instant, sampled throughout the rollout; then a grid
// without a strategy still changes every nodeunit at once.
func TestRolloutMaxUnavailableUnits(t *testing.T) {
	t.Parallel() // its own control plane
	const ns, name = "fleet", "web"
	const units = 50
	e, kubelet, ctx := newRolloutEnv(t, ns, units)
	_, writes, _ := e.startController(t, nil)
	strategy := &superedgev1.RolloutStrategy{
		Canary:              &superedgev1.RolloutCanary{NodeUnits: []string{"z00"}},
		WaveSize:            ptr.To(intstr.FromString("25%")),
		MaxUnavailableUnits: ptr.To[int32](5),
	}
	if _, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Create(t.Context(), rolloutGrid(ns, name, strategy), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitComplete(t, ns, name, "registry.example/echo:1")

	// Two rollouts, sampled throughout; writes are counted on the second
	// (the first apply to a created child also migrates its field ownership once).
	for _, image := range []string{"registry.example/echo:2", "registry.example/echo:4"} {
		writes.reset()
		most, states := 0, 0
		stopFollowing := e.followDeployments(t, ctx, ns, name, func(ds map[string]*appsv1.Deployment) {
			// Mid-change: on the new template and not fully rolled out.
			n := 0
			for _, d := range ds {
				if d.Spec.Template.Spec.Containers[0].Image == image && !(deploymentGrids{}).healthy(d) {
					n++
				}
			}
			most, states = max(most, n), states+1
		})
		e.updateDeploymentGrid(t, ns, name, setImage(image))
		e.waitComplete(t, ns, name, image)
		stopFollowing() // the handler's calls have ended
		t.Logf("%s: %d states of the children, at most %d nodeunits mid-change", image, states, most)
		if most > 5 {
			t.Errorf("%d nodeunits were mid-change at once, maxUnavailableUnits is 5", most)
		}
		if most < 2 {
			t.Errorf("at most %d nodeunit mid-change: no parallel wave seen", most)
		}
	}
	var childWrites, statusWrites int
	for _, w := range writes.list(notEvent) {
		switch {
		case strings.Contains(w, "/deployments/"):
			childWrites++
		case strings.HasSuffix(w, "/status") && strings.Contains(w, "/deploymentgrids/"):
			statusWrites++
		}
	}
	t.Logf("rollout of %d nodeunits: %d child writes (%.2f per nodeunit), %d grid status writes (%.2f per nodeunit)",
		units, childWrites, float64(childWrites)/units, statusWrites, float64(statusWrites)/units)
	if childWrites != units {
		t.Errorf("%d child writes for %d nodeunits, want one each", childWrites, units)
	}

	// Without a strategy, every nodeunit changes at once: with the kubelet
	// stopped none becomes healthy, and still all get the new image.
	kubelet.Store(false)
	e.updateDeploymentGrid(t, ns, name, func(g *superedgev1.DeploymentGrid) {
		g.Spec.Rollout = nil
		setImage("registry.example/echo:3")(g)
	})
	testwait.Eventually(t.Context(), t, 0, "every nodeunit on echo:3 without a strategy", func(ctx context.Context) error {
		imgs, _, err := e.imagesOf(ctx, ns, name)
		if err != nil {
			return err
		}
		for v, img := range imgs {
			if img != "registry.example/echo:3" {
				return fmt.Errorf("%s runs %s", v, img)
			}
		}
		g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if g.Status.Rollout != nil || meta.FindStatusCondition(g.Status.Conditions, superedgev1.ConditionProgressing) != nil {
			return fmt.Errorf("rollout status left on a grid without a strategy: %+v", g.Status.Rollout)
		}
		return nil
	})
}

// TestRolloutStrategyValidation: the CRD schema refuses bad strategies with
// messages that say what is wrong, and accepts good ones under strict validation.
func TestRolloutStrategyValidation(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	dyn := dynamic.NewForConfigOrDie(e.cp.Config)
	r := dyn.Resource(superedgev1.SchemeGroupVersion.WithResource("deploymentgrids")).Namespace("default")
	for i, tc := range []struct {
		rollout string
		want    string // "" accepted
	}{
		{`{"canary":{"nodeUnits":["a"]},"waveSize":"25%","maxUnavailableUnits":5,"bakeSeconds":60,"progressDeadlineSeconds":600,"paused":false,"failurePolicy":"Rollback"}`, ""},
		{`{"canary":{"selector":{"matchLabels":{"zone":"a"}}},"waveSize":3}`, ""},
		{`{}`, ""},
		{`{"canary":{}}`, "rollout.canary needs nodeUnits or a selector"},
		{`{"canary":{"nodeUnits":[]}}`, "rollout.canary needs nodeUnits or a selector"},
		{`{"waveSize":0}`, "waveSize must be a count of at least 1 or a percentage from 1% to 100%"},
		{`{"waveSize":"150%"}`, "waveSize must be a count of at least 1 or a percentage from 1% to 100%"},
		{`{"waveSize":"half"}`, "waveSize must be a count of at least 1 or a percentage from 1% to 100%"},
		{`{"maxUnavailableUnits":0}`, "maxUnavailableUnits"},
		{`{"bakeSeconds":-1}`, "bakeSeconds"},
		{`{"progressDeadlineSeconds":0}`, "progressDeadlineSeconds"},
		{`{"failurePolicy":"Retry"}`, `Unsupported value: "Retry"`},
		{`{"maxSurgeUnits":1}`, `unknown field "spec.rollout.maxSurgeUnits"`},
	} {
		g := rolloutGrid("default", fmt.Sprintf("v%d", i), nil)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
		if err != nil {
			t.Fatal(err)
		}
		var rollout map[string]any
		if err := json.Unmarshal([]byte(tc.rollout), &rollout); err != nil {
			t.Fatal(err)
		}
		obj["spec"].(map[string]any)["rollout"] = rollout
		delete(obj, "status")
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(superedgev1.SchemeGroupVersion.String())
		u.SetKind("DeploymentGrid")
		_, err = r.Create(t.Context(), u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s refused: %v", tc.rollout, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.rollout, err, tc.want)
		}
	}
	// The documented example applies as written.
	data, err := os.ReadFile(filepath.Join("..", "examples", "deploymentgrid-rollout.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &example.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(t.Context(), example, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Errorf("examples/deploymentgrid-rollout.yaml: %v", err)
	}
}

// TestTemplateChoiceAgreement: `kubectl grid status` (package explain)
// names, for every nodeunit, the same child and template as the real
// controller builds, `templates: {v: ""}` included (spec.template, not
// defaultTemplateName).
func TestTemplateChoiceAgreement(t *testing.T) {
	t.Parallel() // its own control plane
	e := newEnv(t, controlplane.Options{})
	for _, z := range []string{"za", "zb", "zc", "zd"} {
		e.node(t, "node-"+z, map[string]string{"zone": z})
	}
	e.startController(t, nil)
	g := rolloutGrid("default", "agree", nil)
	g.Spec.Template.Template = podTemplate("agree", "img:default")
	pool := func(image string) appsv1.DeploymentSpec {
		s := *g.Spec.Template.DeepCopy()
		s.Template = podTemplate("agree", image)
		return s
	}
	g.Spec.TemplatePool = map[string]appsv1.DeploymentSpec{"canary": pool("img:canary"), "other": pool("img:other")}
	g.Spec.Templates = map[string]string{"za": "", "zb": "canary", "zc": "default"}
	g.Spec.DefaultTemplateName = "other"
	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(t.Context(), g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantImage := map[string]string{"default": "img:default", "canary": "img:canary", "other": "img:other"}
	testwait.Eventually(t.Context(), t, 0, "explain agrees with the controller's children", func(ctx context.Context) error {
		grid, err := e.grids.SuperedgeV1().DeploymentGrids("default").Get(ctx, "agree", metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(grid)
		if err != nil {
			return err
		}
		nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		_, ds, err := e.imagesOf(ctx, "default", "agree")
		if err != nil {
			return err
		}
		var children []explain.Child
		byName := map[string]appsv1.Deployment{}
		for _, d := range ds {
			children = append(children, explain.DeploymentChild(&d, "zone"))
			byName[d.Name] = d
		}
		report := explain.WorkloadStatus(&unstructured.Unstructured{Object: obj}, nodes.Items, children)
		if len(report.NodeUnits) != 4 {
			return fmt.Errorf("report lists %d nodeunits", len(report.NodeUnits))
		}
		for _, u := range report.NodeUnits {
			d, ok := byName[u.Child]
			if !ok {
				return fmt.Errorf("nodeunit %s: explain names child %q, the controller made none of that name", u.NodeUnit, u.Child)
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != wantImage[u.Template] {
				return fmt.Errorf("nodeunit %s: explain says template %q (%s), the controller's child runs %s", u.NodeUnit, u.Template, u.TemplateReason, got)
			}
			for _, s := range grid.Status.Units {
				if s.Name == u.NodeUnit && (s.Template != u.Template || s.Child != u.Child) {
					return fmt.Errorf("nodeunit %s: status says %s/%s, explain %s/%s", u.NodeUnit, s.Child, s.Template, u.Child, u.Template)
				}
			}
		}
		return nil
	})
}

// TestRolloutStatefulSetGrid: the real StatefulSet controller rolls each
// nodeunit's StatefulSet; a nodeunit counts as done only once its
// currentRevision caught up with its updateRevision, and the canary's bad
// image halts the rollout before any other nodeunit changes.
func TestRolloutStatefulSetGrid(t *testing.T) {
	t.Parallel() // its own control plane
	const ns, name = "stateful", "db"
	e, _, _ := newRolloutEnv(t, ns, 4)
	e.startController(t, nil)
	g := &superedgev1.StatefulSetGrid{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: superedgev1.StatefulSetGridSpec{
			GridUniqKey: "zone",
			Template: appsv1.StatefulSetSpec{
				Replicas:    ptr.To[int32](2),
				ServiceName: name,
				Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template:    podTemplate(name, "registry.example/db:1"),
			},
			WorkloadGridSpecCommon: superedgev1.WorkloadGridSpecCommon{Rollout: &superedgev1.RolloutStrategy{
				Canary:                  &superedgev1.RolloutCanary{NodeUnits: []string{"z02"}},
				MaxUnavailableUnits:     ptr.To[int32](1),
				ProgressDeadlineSeconds: ptr.To[int32](testProgressDeadline),
			}},
		},
	}
	if _, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Create(t.Context(), g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sets := func(ctx context.Context) (map[string]appsv1.StatefulSet, error) {
		list, err := e.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: superedgev1.LabelGridSelector + "=" + name})
		if err != nil {
			return nil, err
		}
		out := map[string]appsv1.StatefulSet{}
		for _, s := range list.Items {
			out[s.Spec.Template.Spec.NodeSelector["zone"]] = s
		}
		return out, nil
	}
	waitPhase := func(image string, phase superedgev1.RolloutPhase) *superedgev1.StatefulSetGrid {
		var got *superedgev1.StatefulSetGrid
		testwait.Eventually(t.Context(), t, 0, fmt.Sprintf("%s %s", image, phase), func(ctx context.Context) error {
			g, err := e.grids.SuperedgeV1().StatefulSetGrids(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if g.Status.ObservedGeneration != g.Generation || g.Status.Rollout == nil || g.Status.Rollout.Phase != phase {
				return fmt.Errorf("rollout %+v", g.Status.Rollout)
			}
			got = g
			return nil
		})
		return got
	}
	waitPhase("db:1", superedgev1.PhaseComplete)
	all, err := sets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for v, s := range all {
		if !(statefulSetGrids{}).healthy(&s) {
			t.Errorf("%s: Complete, but its StatefulSet is not fully rolled out: %+v", v, s.Status)
		}
	}

	change := func(image string) {
		grids := e.grids.SuperedgeV1().StatefulSetGrids(ns)
		updateOnConflict(t, grids.Get, grids.Update, name, func(g *superedgev1.StatefulSetGrid) {
			g.Spec.Template.Template.Spec.Containers[0].Image = image
			if image != badImage {
				g.Spec.Rollout.ProgressDeadlineSeconds = nil
			}
		})
	}
	change(badImage)
	halted := waitPhase("bad", superedgev1.PhaseHalted)
	if h := halted.Status.Rollout.Halted; h.NodeUnit != "z02" {
		t.Fatalf("halted at %+v, want the canary z02", h)
	}
	all, err = sets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for v, s := range all {
		if img := s.Spec.Template.Spec.Containers[0].Image; (img == badImage) != (v == "z02") {
			t.Errorf("halted: nodeunit %s runs %s", v, img)
		}
	}
	// The StatefulSet controller never replaces a pod that is not ready
	// (its rolling update waits for it): as on any cluster, the broken pod
	// is deleted by hand once the template is fixed.
	change("registry.example/db:2")
	testwait.Eventually(t.Context(), t, 0, "z02 given db:2", func(ctx context.Context) error {
		all, err := sets(ctx)
		if err != nil {
			return err
		}
		if img := all["z02"].Spec.Template.Spec.Containers[0].Image; img != "registry.example/db:2" {
			return fmt.Errorf("z02 runs %s", img)
		}
		return nil
	})
	pods, err := e.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image == badImage {
			if err := e.kube.CoreV1().Pods(ns).Delete(t.Context(), p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitPhase("db:2", superedgev1.PhaseComplete)
	all, err = sets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for v, s := range all {
		if img := s.Spec.Template.Spec.Containers[0].Image; img != "registry.example/db:2" || s.Status.CurrentRevision != s.Status.UpdateRevision {
			t.Errorf("complete: nodeunit %s runs %s, revisions %s/%s", v, img, s.Status.CurrentRevision, s.Status.UpdateRevision)
		}
	}
}
