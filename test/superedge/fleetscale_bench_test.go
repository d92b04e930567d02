package superedge

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The world's size: develop small, measure the issue's size late.
var (
	fleetNodes       = flag.Int("fleet.nodes", 1000, "Nodes in the fleet benchmark's world")
	fleetUnits       = flag.Int("fleet.units", 100, "nodeunits (distinct values of the grid key) the Nodes are spread over")
	fleetGrids       = flag.Int("fleet.grids", 20, "grids, alternately DeploymentGrids and StatefulSetGrids, each with its ServiceGrid")
	fleetRelabel     = flag.Int("fleet.relabel", 100, "Nodes moved into new nodeunits (10 per new nodeunit)")
	fleetSteady      = flag.Duration("fleet.steady", 40*time.Second, "the quiet window in which steady-state writes are counted (longer than both controllers' resync)")
	fleetLimit       = flag.Duration("fleet.converge-limit", 60*time.Minute, "how long a controller may take to converge; past it its figures so far are recorded and its later phases skipped")
	fleetControllers = flag.String("fleet.controllers", "ours,ours-qps1000,superedge", "the controllers measured, one world each: ours (as shipped), ours-qps1000 (with SuperEdge's default client rate), ours-at-once (as shipped, its template change without waves, as SuperEdge's), ours-baseline (-fleet.baseline-bin run as ours), superedge")
	fleetBaseline    = flag.String("fleet.baseline-bin", "", "an application-grid-controller binary of another commit, measured as ours-baseline beside ours (before and after of a fix in one run)")
	fleetStall       = flag.Duration("fleet.stall", 0, "a controller that writes no child for this long before converging is recorded as stalled and its later phases skipped (0: wait up to -fleet.converge-limit)")
	fleetProgress    = flag.Duration("fleet.progress", time.Minute, "how often the converge logs its progress (children made, writes by code, CPU, memory)")
	fleetLive        = flag.Bool("fleet.live", false, "also print each figure and progress line to stderr as it is measured (a benchmark's log shows only once it ends: a run stopped early keeps them)")
	fleetLogs        = flag.String("fleet.logs", "", "a directory each controller's log is copied into (WHO.log) when its world ends")
	fleetOursArgs    = flag.String("fleet.ours-args", "", "extra flags, space-separated, for our controller (ours, ours-qps1000, ours-baseline), after the benchmark's own: e.g. \"--v=2 --workers=10\"")
)

const (
	fleetNS       = "fleet"
	fleetKey      = "zone"
	fleetResync   = 30 * time.Second // SuperEdge's --sync-period default; ours set to the same
	oursUser      = "fleet-ours"
	superEdgeUser = "fleet-superedge"
)

// BenchmarkFleetScale: the issue-46 world (default 1,000 Nodes in 100
// nodeunits, 20 grids and their ServiceGrids; -fleet.nodes=10000
// -fleet.units=1000 for the full size) on a real kube-apiserver and etcd
// (no kube-controller-manager: nothing here needs pods), once per
// controller, each on a fresh control plane built the same way: our
// controller (the built binary, as a process) and SuperEdge's own. Each
// starts cold on the complete world; its writes come from the apiserver's
// audit log (by its client certificate's user), its CPU and memory from
// /proc. Phases: converge, steady state over -fleet.steady, a relabel of
// -fleet.relabel Nodes into new nodeunits, a template change of one
// DeploymentGrid through every nodeunit (ours in waves of 10%, SuperEdge
// and ours-at-once at once: SuperEdge has no waves), and for ours `kubectl grid status`,
// `explain` and `doctor` timed on the world. Run with -benchtime=1x, as
// root (SuperEdge's controller runs chrooted).
func BenchmarkFleetScale(b *testing.B) {
	testenv.Root(b, "SuperEdge's controller runs in a root directory of its own (chroot)")
	rec := benchrecord.Start(b, "docs/benchmarks/fleet-scale.md")
	nodes, units, grids := *fleetNodes, *fleetUnits, *fleetGrids
	if units < 1 || nodes < units || grids < 1 {
		b.Fatalf("-fleet.nodes=%d -fleet.units=%d -fleet.grids=%d: want nodes >= units >= 1 and grids >= 1", nodes, units, grids)
	}
	rec.Figure("nodes", float64(nodes), "Nodes")
	rec.Figure("nodeunits", float64(units), "nodeunits")
	rec.Figure("grids", float64(grids), "grids (+ as many ServiceGrids)")
	rec.Figure("children", float64(grids*units), "children")
	for iter := 0; iter < b.N; iter++ {
		for _, who := range strings.Split(*fleetControllers, ",") {
			switch who {
			case "ours", "ours-qps1000", "ours-at-once", "ours-baseline", "superedge":
				runFleet(b, rec, who, nodes, units, grids)
			default:
				b.Fatalf("-fleet.controllers: %q is neither ours nor superedge", who)
			}
		}
	}
}

// fleet is one controller's world.
type fleet struct {
	b                    *testing.B
	ctx                  context.Context
	rec                  *benchrecord.Record
	who                  string
	cp                   *controlplane.ControlPlane
	kube                 kubernetes.Interface
	grids                versioned.Interface
	audit                *auditCounter
	meta                 metadata.Interface
	lastCount            time.Time
	nodes, units, gridsN int
	children             int
}

func (f *fleet) fig(name string, v float64, unit string) {
	f.rec.Figure(f.who+" "+name, v, unit)
	f.logf("%s %s: %.3f %s", f.who, name, v, unit)
}

// waves: grid-00 carries a rollout in waves of 10% (ours), or none and
// its template change goes to every nodeunit at once (SuperEdge, which
// has no waves, and ours-at-once, to compare like for like).
func (f *fleet) waves() bool { return f.who != "superedge" && f.who != "ours-at-once" }

// logf logs to the benchmark's log and, with -fleet.live, to stderr at once.
func (f *fleet) logf(format string, args ...any) {
	f.b.Helper()
	f.b.Logf(format, args...)
	if *fleetLive {
		fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
	}
}

func runFleet(b *testing.B, rec *benchrecord.Record, who string, nodes, units, grids int) {
	ctx, cancel := context.WithTimeout(b.Context(), 90*time.Minute)
	defer cancel()
	var build *Build
	if who == "superedge" {
		build = RequireBuild(b)
	}
	dir, err := os.MkdirTemp("", "servicegroup-fleet-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	user := oursUser
	if who == "superedge" {
		user = superEdgeUser
	}
	auditArgs, auditLog, err := auditFlags(filepath.Join(dir, "audit"), user)
	if err != nil {
		b.Fatal(err)
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{Dir: filepath.Join(dir, "cp"), CRDs: who != "superedge", APIServerArgs: auditArgs})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	f := &fleet{b: b, ctx: ctx, rec: rec, who: who, cp: cp, kube: kubernetes.NewForConfigOrDie(cp.Config),
		grids: versioned.NewForConfigOrDie(cp.Config), audit: newAuditCounter(auditLog, user), meta: metadata.NewForConfigOrDie(cp.Config),
		nodes: nodes, units: units, gridsN: grids, children: grids * units}
	if who == "superedge" {
		f.installSuperEdgeCRDs(build)
	}
	start := time.Now()
	f.buildWorld()
	f.fig("world built", time.Since(start).Seconds(), "s")

	certPEM, keyPEM, err := cp.IssueClientCertificate(user, "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig, err := cp.WriteKubeconfig(user+".kubeconfig", cp.URL, certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	apiPeak := watchRSS(cp.APIServerPID())
	defer apiPeak.close()
	api0 := readProc(cp.APIServerPID())
	apiPeak.take()

	// Cold start on the complete world.
	start = time.Now()
	proc := f.startController(build, kubeconfig, filepath.Join(dir, who))
	defer f.keepLog(proc) // after the stop: the whole log
	defer proc.Stop(10 * time.Second)
	pid := proc.PID()
	ctl := watchRSS(pid)
	defer ctl.close()
	var convergedAt time.Time
	limited, stalled := false, false
	progress := f.newProgress(start, pid, api0)
	testwait.Eventually(ctx, b, *fleetLimit+time.Minute, who+"'s controller made every child and Service", func(context.Context) error {
		if done, err := proc.Exited(); done {
			b.Fatalf("%s's controller exited (%v):\n%s", who, err, proc.LogTail(30))
		}
		c, err := f.audit.scan()
		if err != nil {
			return err
		}
		progress.observe(c)
		if time.Since(start) > *fleetLimit {
			limited = true
			return nil
		}
		if progress.stalled() {
			stalled = true
			return nil
		}
		if c.Services < grids {
			return fmt.Errorf("%d/%d Services created", c.Services, grids)
		}
		if err := f.childrenMade(c.ChildCreates, f.children, f.children); err != nil {
			return err
		}
		convergedAt = time.Now()
		return nil
	})
	if limited || stalled {
		f.notConverged(pid, api0, apiPeak, time.Since(start), stalled, proc)
		return
	}
	f.waitQuiet(5 * time.Second)
	quietAt := time.Now().Add(-5 * time.Second)
	c, _ := f.audit.scan()
	f.checkChildren()
	ctlUse, apiUse := readProc(pid), readProc(cp.APIServerPID())
	f.fig("converge: every child made", convergedAt.Sub(start).Seconds(), "s")
	f.fig("converge: last write", quietAt.Sub(start).Seconds(), "s")
	f.writes("converge", c, f.children)
	f.fig("converge: controller CPU", ctlUse.CPU.Seconds(), "CPU-s")
	f.fig("converge: controller peak RSS", float64(ctlUse.HWM)/(1<<20), "MiB")
	f.fig("converge: apiserver CPU", (apiUse.CPU - api0.CPU).Seconds(), "CPU-s")
	f.fig("converge: apiserver peak RSS", float64(apiPeak.take())/(1<<20), "MiB")

	// Steady state: nothing changes for longer than a resync.
	before, cpu0, api1 := c, readProc(pid).CPU, readProc(cp.APIServerPID()).CPU
	sleep(ctx, *fleetSteady)
	c, _ = f.audit.scan()
	f.writes("steady", c.minus(before), 0)
	f.fig("steady: controller CPU", (readProc(pid).CPU - cpu0).Seconds(), "CPU-s")
	f.fig("steady: apiserver CPU", (readProc(cp.APIServerPID()).CPU - api1).Seconds(), "CPU-s")

	f.relabel(pid)
	f.rollTemplate(pid)
	if who != "superedge" {
		f.tools(kubeconfig)
	}
	f.fig("controller peak RSS (whole run)", float64(readProc(pid).HWM)/(1<<20), "MiB")
	if done, err := proc.Exited(); done {
		b.Fatalf("%s's controller exited (%v):\n%s", who, err, proc.LogTail(30))
	}
}

// writes records a phase's write counts; per is the children the phase
// is about (0: none).
func (f *fleet) writes(phase string, c writeCounts, per int) {
	f.fig(phase+": writes", float64(c.All), "writes")
	f.fig(phase+": child writes", float64(c.ChildWrites), "writes")
	if per > 0 {
		f.fig(phase+": child writes per child", float64(c.ChildWrites)/float64(per), "writes/child")
		f.fig(phase+": writes per child", float64(c.All)/float64(per), "writes/child")
	}
	f.fig(phase+": grid status writes", float64(c.GridStatus), "writes")
	f.fig(phase+": grid writes", float64(c.Grids), "writes")
	f.fig(phase+": Service writes", float64(c.ServiceWrite), "writes")
	f.fig(phase+": NodeLabelSummary writes", float64(c.Summaries), "writes")
	f.fig(phase+": Event writes", float64(c.Events), "writes")
	f.fig(phase+": other writes", float64(c.Other()), "writes")
	f.fig(phase+": conflicts", float64(c.Conflicts), "409s")
	f.logf("%s %s: writes by verb, resource and code: %s", f.who, phase, c.top(12))
}

// waitQuiet waits until the controller has written nothing for d.
func (f *fleet) waitQuiet(d time.Duration) {
	testwait.Eventually(f.ctx, f.b, 30*time.Minute, "the controller's writes stopped", func(context.Context) error {
		if _, err := f.audit.scan(); err != nil {
			return err
		}
		if q := f.audit.quietFor(); q < d {
			return fmt.Errorf("last write %v ago", q.Round(time.Millisecond))
		}
		return nil
	})
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func unitName(u int) string { return fmt.Sprintf("unit-%04d", u) }
func nodeName(n int) string { return fmt.Sprintf("node-%05d", n) }
func gridName(g int) string { return fmt.Sprintf("grid-%02d", g) }

// buildWorld creates the Nodes (spread evenly over the nodeunits), the
// namespace, the grids (even: DeploymentGrid, odd: StatefulSetGrid; grid-00
// carries ours a rollout in waves of 10%) and one ServiceGrid per grid.
func (f *fleet) buildWorld() {
	ctx := f.ctx
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for n := range f.nodes {
		g.Go(func() error {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(n), Labels: map[string]string{
				fleetKey: unitName(n % f.units), "kubernetes.io/hostname": nodeName(n)}}}
			_, err := f.kube.CoreV1().Nodes().Create(gctx, node, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		f.b.Fatalf("create nodes: %v", err)
	}
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNS}}, metav1.CreateOptions{}); err != nil {
		f.b.Fatal(err)
	}
	// Replicas explicit: SuperEdge's controller dereferences them (its CRD
	// schema does not default them) and panics without.
	one := int32(1)
	for i := range f.gridsN {
		name := gridName(i)
		labels := map[string]string{"app": name}
		pod := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}
		var err error
		if i%2 == 0 {
			dg := &superedgev1.DeploymentGrid{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleetNS},
				Spec: superedgev1.DeploymentGridSpec{GridUniqKey: fleetKey, Template: appsv1.DeploymentSpec{
					Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod}}}
			if i == 0 && f.waves() {
				wave := intstr.FromString("10%")
				maxUnavailable := int32(max(1, f.units/10))
				dg.Spec.Rollout = &superedgev1.RolloutStrategy{WaveSize: &wave, MaxUnavailableUnits: &maxUnavailable}
			}
			_, err = f.grids.SuperedgeV1().DeploymentGrids(fleetNS).Create(ctx, dg, metav1.CreateOptions{})
		} else {
			ssg := &superedgev1.StatefulSetGrid{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleetNS},
				Spec: superedgev1.StatefulSetGridSpec{GridUniqKey: fleetKey, Template: appsv1.StatefulSetSpec{
					Replicas: &one, ServiceName: name + "-svc", Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod}}}
			_, err = f.grids.SuperedgeV1().StatefulSetGrids(fleetNS).Create(ctx, ssg, metav1.CreateOptions{})
		}
		if err != nil {
			f.b.Fatalf("grid %s: %v", name, err)
		}
		sg := &superedgev1.ServiceGrid{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleetNS},
			Spec: superedgev1.ServiceGridSpec{GridUniqKey: fleetKey, Template: corev1.ServiceSpec{
				Selector: labels, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}}
		if _, err := f.grids.SuperedgeV1().ServiceGrids(fleetNS).Create(ctx, sg, metav1.CreateOptions{}); err != nil {
			f.b.Fatalf("servicegrid %s: %v", name, err)
		}
	}
}

// installSuperEdgeCRDs creates SuperEdge's own grid CRDs (its controller
// re-applies them at start) so the world exists before it starts.
func (f *fleet) installSuperEdgeCRDs(build *Build) {
	ext := apiextensionsclient.NewForConfigOrDie(f.cp.Config)
	crds := superEdgeCRDs(f.b, build)
	for _, crd := range crds {
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(f.ctx, crd, metav1.CreateOptions{}); err != nil {
			f.b.Fatal(err)
		}
	}
	testwait.Eventually(f.ctx, f.b, time.Minute, "SuperEdge's CRDs established", func(ctx context.Context) error {
		for name := range crds {
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return fmt.Errorf("%s not established", name)
			}
		}
		return nil
	})
}

// startController runs the controller as a process with its own identity:
// ours as built (no leader election: one replica; resync as SuperEdge's
// sync period), SuperEdge's as its manifest runs it.
func (f *fleet) startController(build *Build, kubeconfig, dir string) *controlplane.Process {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.b.Fatal(err)
	}
	if f.who == "superedge" {
		// StartController copies the control plane's admin kubeconfig in:
		// give it the benchmark's user instead.
		admin := f.cp.Kubeconfig
		f.cp.Kubeconfig = kubeconfig
		// --v=2: its failed syncs and the grids it drops after the
		// last retry (a stalled converge's reasons).
		c, err := StartController(build, f.cp, dir, "--v=2")
		f.cp.Kubeconfig = admin
		if err != nil {
			f.b.Fatal(err)
		}
		return c.Process
	}
	paths, err := testbin.Paths(f.ctx, "application-grid-controller")
	if err != nil {
		f.b.Fatal(err)
	}
	health, err := controlplane.FreePort("127.0.0.1")
	if err != nil {
		f.b.Fatal(err)
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", fmt.Sprintf("--health-bind-address=127.0.0.1:%d", health),
		"--metrics-bind-address=0", "--resync=" + fleetResync.String(), "--v=1"}
	if f.who == "ours-qps1000" {
		// SuperEdge's --kube-qps and --kube-burst defaults.
		args = append(args, "--kube-api-qps=1000", "--kube-api-burst=1000")
	}
	args = append(args, strings.Fields(*fleetOursArgs)...)
	bin := paths["application-grid-controller"]
	if f.who == "ours-baseline" {
		if *fleetBaseline == "" {
			f.b.Fatal("ours-baseline needs -fleet.baseline-bin")
		}
		bin = *fleetBaseline
	}
	p, err := controlplane.StartProcess("application-grid-controller", exec.Command(bin, args...), dir)
	if err != nil {
		f.b.Fatal(err)
	}
	return p
}

// childrenMade is nil once the controller has made want children (total
// in all): its creates answered 201, or, as a create the apiserver timed
// out on (504) may still have stored the object, the apiserver's count,
// asked at most every five seconds.
func (f *fleet) childrenMade(created, want, total int) error {
	if created >= want {
		return nil
	}
	if time.Since(f.lastCount) < 5*time.Second {
		return fmt.Errorf("%d/%d children created (201)", created, want)
	}
	f.lastCount = time.Now()
	n, err := f.presentChildren()
	if err != nil {
		return err
	}
	if n < total {
		return fmt.Errorf("%d/%d children created (201), %d/%d in the apiserver", created, want, n, total)
	}
	return nil
}

// presentChildren counts the Deployments and StatefulSets the apiserver
// holds (metadata only, in pages).
func (f *fleet) presentChildren() (int, error) {
	n := 0
	for _, res := range []string{"deployments", "statefulsets"} {
		cont := ""
		for {
			l, err := f.meta.Resource(appsv1.SchemeGroupVersion.WithResource(res)).Namespace(fleetNS).List(f.ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
			if err != nil {
				return n, err
			}
			n += len(l.Items)
			if cont = l.Continue; cont == "" {
				break
			}
		}
	}
	return n, nil
}

// checkChildren lists (in pages) the children the apiserver holds.
func (f *fleet) checkChildren() {
	n := 0
	for _, kind := range []string{"deployments", "statefulsets"} {
		cont := ""
		for {
			opts := metav1.ListOptions{Limit: 500, Continue: cont}
			var items int
			var err error
			if kind == "deployments" {
				var l *appsv1.DeploymentList
				l, err = f.kube.AppsV1().Deployments(fleetNS).List(f.ctx, opts)
				if err == nil {
					items, cont = len(l.Items), l.Continue
				}
			} else {
				var l *appsv1.StatefulSetList
				l, err = f.kube.AppsV1().StatefulSets(fleetNS).List(f.ctx, opts)
				if err == nil {
					items, cont = len(l.Items), l.Continue
				}
			}
			if err != nil {
				f.b.Fatal(err)
			}
			n += items
			if cont == "" {
				break
			}
		}
	}
	if n != f.children {
		f.b.Fatalf("%s: %d children in the apiserver, want %d", f.who, n, f.children)
	}
}
