package superedge

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

// relabel moves -fleet.relabel Nodes, one from each of as many nodeunits
// (none emptied), into new nodeunits of 10: every grid gets a child in
// each new nodeunit and nothing else changes.
func (f *fleet) relabel(pid int) {
	moved := min(*fleetRelabel, f.units)
	if moved == 0 || f.nodes < 2*f.units {
		f.b.Logf("relabel skipped: %d Nodes in %d nodeunits leave none to move without emptying a nodeunit", f.nodes, f.units)
		return
	}
	newUnits := (moved + 9) / 10
	want := newUnits * f.gridsN
	before, _ := f.audit.scan()
	cpu0 := readProc(pid).CPU
	start := time.Now()
	g, gctx := errgroup.WithContext(f.ctx)
	g.SetLimit(16)
	for i := range moved {
		g.Go(func() error {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, fleetKey, fmt.Sprintf("unit-new-%02d", i/10))
			_, err := f.kube.CoreV1().Nodes().Patch(gctx, nodeName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		f.b.Fatalf("relabel: %v", err)
	}
	patched := time.Now()
	var madeAt time.Time
	testwait.Eventually(f.ctx, f.b, 20*time.Minute, "the new nodeunits' children made", func(context.Context) error {
		c, err := f.audit.scan()
		if err != nil {
			return err
		}
		if err := f.childrenMade(c.minus(before).ChildCreates, want, f.children+want); err != nil {
			return fmt.Errorf("new nodeunits: %w", err)
		}
		madeAt = time.Now()
		return nil
	})
	f.waitQuiet(5 * time.Second)
	c, _ := f.audit.scan()
	f.children += want
	name := fmt.Sprintf("relabel %d Nodes", moved)
	f.fig(name+": new children made", madeAt.Sub(start).Seconds(), "s")
	// Where that time went, from the apiserver's own receive times of the
	// creates (madeAt adds the wait's poll and the audit log's read).
	f.fig(name+": patches sent", patched.Sub(start).Seconds(), "s")
	if ts := f.audit.createdSince(before.ChildCreates); len(ts) > 0 {
		f.fig(name+": first new child received", ts[0].Sub(start).Seconds(), "s")
		f.fig(name+": last new child received", ts[len(ts)-1].Sub(start).Seconds(), "s")
	}
	f.writes(name, c.minus(before), want)
	f.fig(name+": controller CPU", (readProc(pid).CPU - cpu0).Seconds(), "CPU-s")
}

// rollTemplate changes grid-00's image and waits until every nodeunit's
// Deployment has it (ours: in waves, the grid's rollout Complete). Without
// kube-controller-manager the benchmark reports the Deployments of grid-00
// healthy itself, as their pods would make them.
func (f *fleet) rollTemplate(pid int) {
	grid := gridName(0)
	units := f.children / f.gridsN
	stopHealth := make(chan struct{})
	var pass atomic.Pointer[healthPass]
	healthDone := make(chan error, 1)
	go func() { healthDone <- f.reportHealthy(grid, &pass, stopHealth) }()
	defer func() {
		close(stopHealth)
		if err := <-healthDone; err != nil && !errors.Is(err, context.Canceled) {
			f.b.Errorf("reporting %s's Deployments healthy: %v", grid, err)
		}
	}()
	testwait.Eventually(f.ctx, f.b, 10*time.Minute, grid+"'s Deployments healthy", func(context.Context) error {
		p := pass.Load()
		if p == nil || p.children != units || p.marked != 0 {
			return fmt.Errorf("last pass: %+v", p)
		}
		return nil
	})
	f.waitQuiet(5 * time.Second)

	before, _ := f.audit.scan()
	cpu0 := readProc(pid).CPU
	start := time.Now()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dg, err := f.grids.SuperedgeV1().DeploymentGrids(fleetNS).Get(f.ctx, grid, metav1.GetOptions{})
		if err != nil {
			return err
		}
		dg.Spec.Template.Template.Spec.Containers[0].Image = "registry.example/app:2"
		_, err = f.grids.SuperedgeV1().DeploymentGrids(fleetNS).Update(f.ctx, dg, metav1.UpdateOptions{})
		return err
	}); err != nil {
		f.b.Fatal(err)
	}
	var doneAt time.Time
	testwait.Eventually(f.ctx, f.b, 30*time.Minute, "the template change rolled through every nodeunit", func(ctx context.Context) error {
		p := pass.Load()
		if p == nil || !p.at.After(start) || p.updated != units || p.marked != 0 {
			return fmt.Errorf("last pass: %+v", p)
		}
		if f.waves() {
			dg, err := f.grids.SuperedgeV1().DeploymentGrids(fleetNS).Get(ctx, grid, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if r := dg.Status.Rollout; r == nil || r.Phase != superedgev1.PhaseComplete {
				return fmt.Errorf("rollout %+v", r)
			}
		}
		doneAt = time.Now()
		return nil
	})
	f.waitQuiet(5 * time.Second)
	c, _ := f.audit.scan()
	name := "template change"
	if f.waves() {
		name += " (waves of 10%)"
	} else {
		name += " (at once)"
	}
	f.fig(name+": every nodeunit updated", doneAt.Sub(start).Seconds(), "s")
	f.writes(name, c.minus(before), units)
	f.fig(name+": controller CPU", (readProc(pid).CPU - cpu0).Seconds(), "CPU-s")
}

// healthPass is one pass over a grid's Deployments.
type healthPass struct {
	at       time.Time // when the pass started
	children int
	updated  int // on the changed template
	marked   int // reported healthy in this pass
}

// reportHealthy plays kube-controller-manager for grid's Deployments:
// each pass (every second) writes a status that says the spec is observed
// and every replica updated, ready and available.
func (f *fleet) reportHealthy(grid string, last *atomic.Pointer[healthPass], stop <-chan struct{}) error {
	for {
		p := healthPass{at: time.Now()}
		cont := ""
		for {
			l, err := f.kube.AppsV1().Deployments(fleetNS).List(f.ctx, metav1.ListOptions{
				LabelSelector: superedgev1.LabelGridSelector + "=" + grid, Limit: 500, Continue: cont})
			if err != nil {
				return err
			}
			for i := range l.Items {
				d := &l.Items[i]
				p.children++
				if strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":2") {
					p.updated++
				}
				if healthy(d) {
					continue
				}
				r := int32(1)
				if d.Spec.Replicas != nil {
					r = *d.Spec.Replicas
				}
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r}
				if _, err := f.kube.AppsV1().Deployments(fleetNS).UpdateStatus(f.ctx, d, metav1.UpdateOptions{}); err != nil && !isConflict(err) {
					return err
				}
				p.marked++
			}
			if cont = l.Continue; cont == "" {
				break
			}
		}
		last.Store(&p)
		select {
		case <-stop:
			return nil
		case <-f.ctx.Done():
			return f.ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func healthy(d *appsv1.Deployment) bool {
	r := int32(1)
	if d.Spec.Replicas != nil {
		r = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration == d.Generation && s.Replicas == r && s.UpdatedReplicas == r && s.ReadyReplicas == r && s.AvailableReplicas == r
}

// tools times kubectl grid on the world (ours only: it reads our grids'
// status).
func (f *fleet) tools(kubeconfig string) {
	paths, err := testbin.Paths(f.ctx, "kubectl-grid")
	if err != nil {
		f.b.Fatal(err)
	}
	sg, err := f.grids.SuperedgeV1().ServiceGrids(fleetNS).Get(f.ctx, gridName(0), metav1.GetOptions{})
	if err != nil {
		f.b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		ok   bool // exits 0
	}{
		{"kubectl grid status dg", []string{"status", "dg/" + gridName(0)}, true},
		{"kubectl grid status ssg", []string{"status", "ssg/" + gridName(1)}, true},
		{"kubectl grid status sg", []string{"status", "sg/" + gridName(0)}, true},
		{"kubectl grid explain svc", []string{"explain", "svc/" + sg.Status.ServiceName, "--node", nodeName(f.nodes - 1)}, true},
		// No wrappers, CoreDNS or kube-proxy run here: doctor finds
		// problems (exit 1); its time over the fleet is the figure.
		{"kubectl grid doctor", []string{"doctor"}, false},
	} {
		ctx, cancel := context.WithTimeout(f.ctx, 5*time.Minute)
		start := time.Now()
		out, err := exec.CommandContext(ctx, paths["kubectl-grid"], append([]string{"--kubeconfig", kubeconfig, "-n", fleetNS}, c.args...)...).CombinedOutput()
		took := time.Since(start)
		timedOut := ctx.Err() != nil
		cancel()
		var exit *exec.ExitError
		if err != nil && (c.ok || !errors.As(err, &exit) || timedOut) {
			f.b.Fatalf("%s: %v\n%s", c.name, err, tail(string(out), 20))
		}
		f.fig(c.name, took.Seconds(), "s")
		f.fig(c.name+" output", float64(strings.Count(string(out), "\n")), "lines")
		f.b.Logf("%s: %v\n%s", c.name, took, tail(string(out), 8))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
