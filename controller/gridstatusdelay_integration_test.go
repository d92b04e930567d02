package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestGridStatusFoldsABurstOfNewNodeUnits: Nodes relabelled into 20 new
// nodeunits, 5 at a time, each step once the previous one's children exist.
// A grid without spec.rollout makes all 20 children before its status is
// written, and writes it once, with all of them; a grid with spec.rollout on
// the same key records each new nodeunit's rollout phase at once (the
// rollout decides from it), while the first grid's write is still held.
// Neither creates a child twice: a sync that starts before the informer
// shows the last one's creates counts them as made (created.go).
func TestGridStatusFoldsABurstOfNewNodeUnits(t *testing.T) {
	t.Parallel() // its own control plane
	// Far longer than the burst takes, even on a loaded machine: the plain
	// grid's one write comes after it.
	const delay = 15 * time.Second
	const key, steps, perStep = "site", 4, 5
	const plainNS, rolledNS, name = "plain", "rolled", "web"
	e := newEnv(t, controlplane.Options{})
	ctx := t.Context()
	e.namespace(t, plainNS)
	e.namespace(t, rolledNS)
	e.node(t, "n00", map[string]string{key: "u00"})
	for i := 1; i <= steps*perStep; i++ {
		e.node(t, fmt.Sprintf("b%02d", i), map[string]string{key: "u00"})
	}
	if _, err := e.grids.SuperedgeV1().DeploymentGrids(plainNS).Create(ctx, simpleDeploymentGrid(plainNS, name, key, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rolled := simpleDeploymentGrid(rolledNS, name, key, nil)
	rolled.Spec.Rollout = &superedgev1.RolloutStrategy{MaxUnavailableUnits: ptr.To[int32](1)}
	if _, err := e.grids.SuperedgeV1().DeploymentGrids(rolledNS).Create(ctx, rolled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, wc, _ := e.startController(t, func(o *Options) {
		if o.GridStatusDelay != DefaultGridStatusDelay {
			t.Errorf("default GridStatusDelay %s, want %s", o.GridStatusDelay, DefaultGridStatusDelay)
		}
		o.GridStatusDelay = delay
	})
	units := []string{"u00"}
	children := func() []string {
		var out []string
		for _, u := range units {
			out = append(out, name+"-"+u)
		}
		return out
	}
	e.waitDeployments(t, plainNS, name, children()...)
	e.waitDeployments(t, rolledNS, name, children()...)
	// A new grid's first status is written at once (its conditions are new).
	testwait.Eventually(ctx, t, 20*time.Second, "both grids' first status", func(ctx context.Context) error {
		for _, ns := range []string{plainNS, rolledNS} {
			if err := e.gridStatusLists(ctx, ns, name, units, false); err != nil {
				return err
			}
		}
		return nil
	})
	wc.reset()

	began := time.Now()
	for s := range steps {
		step := map[string]string{}
		for i := s*perStep + 1; i <= (s+1)*perStep; i++ {
			value := fmt.Sprintf("u%02d", i)
			units = append(units, value)
			step[fmt.Sprintf("b%02d", i)] = value
		}
		e.relabelAtOnce(t, key, step, perStep)
		e.waitDeployments(t, plainNS, name, children()...)
		e.waitDeployments(t, rolledNS, name, children()...)
	}
	slices.Sort(units)

	// The rollout's memory of every new nodeunit is written by the sync
	// that decided it, while the plain grid's counts still wait.
	testwait.Eventually(ctx, t, 20*time.Second, "the rollout grid records every new nodeunit's phase", func(ctx context.Context) error {
		return e.gridStatusLists(ctx, rolledNS, name, units, true)
	})
	held := time.Since(began)
	g, err := e.grids.SuperedgeV1().DeploymentGrids(plainNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if held < delay && g.Status.NodeUnits != 1 {
		t.Errorf("%s after the burst began (delay %s), the plain grid's status lists %d nodeunits: its write was not held", held.Round(time.Millisecond), delay, g.Status.NodeUnits)
	}
	t.Logf("burst of %d new nodeunits and their children: %s", steps*perStep, held.Round(time.Millisecond))

	// The held status is written after the delay, with the truth.
	testwait.Eventually(ctx, t, delay+20*time.Second, "the plain grid's status lists every nodeunit", func(ctx context.Context) error {
		return e.gridStatusLists(ctx, plainNS, name, units, false)
	})
	// Nothing more comes: one write for the burst.
	time.Sleep(delay / 3)
	plainStatus := "/namespaces/" + plainNS + "/deploymentgrids/" + name + "/status"
	plainCreate := "POST /apis/apps/v1/namespaces/" + plainNS + "/deployments"
	writes := wc.list(notEvent)
	firstStatus, creates, statusWrites, lastCreate := -1, 0, 0, -1
	for i, w := range writes {
		switch {
		case strings.HasSuffix(w, plainStatus):
			statusWrites++
			if firstStatus < 0 {
				firstStatus = i
			}
		case w == plainCreate:
			creates++
			lastCreate = i
		case strings.Contains(w, "/namespaces/"+plainNS+"/deployments"):
			t.Errorf("a new child written again: %s", w)
		}
	}
	t.Logf("plain grid: %d child creates, %d status writes; writes in order: %v", creates, statusWrites, writes)
	if creates != steps*perStep {
		t.Errorf("%d child creates for %d new nodeunits, want one each", creates, steps*perStep)
	}
	if statusWrites != 1 {
		t.Errorf("%d status writes of the plain grid for the burst, want 1 (held %s, every change meanwhile joining it)", statusWrites, delay)
	}
	// A sync that starts before the informer shows the last sync's creates
	// must not create them again (a 409 reported as a NameConflict).
	for _, ns := range []string{plainNS, rolledNS} {
		if evs, err := e.warningEvents(ctx, ns, name, ReasonNameConflict); err != nil || len(evs) > 0 {
			t.Errorf("%s/%s: NameConflict Warning Events %v (%v)", ns, name, evs, err)
		}
	}
	if firstStatus >= 0 && firstStatus < lastCreate {
		t.Errorf("the plain grid's status was written (write %d) before its last new child was created (write %d): its children waited behind status writes", firstStatus, lastCreate)
	}
}

// gridStatusLists checks that the DeploymentGrid's status lists exactly
// units, each with a child, counts to match, Reconciled True and Ready
// saying none of them is ready (no kube-controller-manager); rollout: each
// unit also carries its rollout phase and since.
func (e *env) gridStatusLists(ctx context.Context, ns, name string, units []string, rollout bool) error {
	g, err := e.grids.SuperedgeV1().DeploymentGrids(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	st := g.Status
	var got []string
	for _, u := range st.Units {
		got = append(got, u.Name)
		if u.Child != name+"-"+u.Name {
			return fmt.Errorf("%s/%s: unit %s has child %q", ns, name, u.Name, u.Child)
		}
		if rollout && (u.Phase == "" || u.Since == nil) {
			return fmt.Errorf("%s/%s: unit %s has no rollout phase: %+v", ns, name, u.Name, u)
		}
	}
	if !slices.Equal(got, units) {
		return fmt.Errorf("%s/%s: status lists %v, want %v", ns, name, got, units)
	}
	if int(st.NodeUnits) != len(units) || len(st.States) != len(units) {
		return fmt.Errorf("%s/%s: nodeUnits %d, %d states, want %d", ns, name, st.NodeUnits, len(st.States), len(units))
	}
	if c := meta.FindStatusCondition(st.Conditions, superedgev1.ConditionReconciled); c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("%s/%s: Reconciled %+v", ns, name, c)
	}
	want := fmt.Sprintf("0/%d ready", len(units))
	if c := meta.FindStatusCondition(st.Conditions, superedgev1.ConditionReady); c == nil || c.Message != want {
		return fmt.Errorf("%s/%s: Ready %+v, want %q", ns, name, c, want)
	}
	return nil
}
