package superedge

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// A controller that does not converge is recorded with where it stopped:
// its progress over time, the children each grid lacks, and what its own
// log says about the grids it gave up on.

// convergeProgress follows a converge: when the controller last wrote a
// child, and a line every -fleet.progress.
type convergeProgress struct {
	f              *fleet
	start          time.Time
	pid            int
	api0           procUsage
	lastLog        time.Time
	childWrites    int
	lastChildWrite time.Time
	prev           writeCounts
}

func (f *fleet) newProgress(start time.Time, pid int, api0 procUsage) *convergeProgress {
	return &convergeProgress{f: f, start: start, pid: pid, api0: api0, lastLog: start, lastChildWrite: start}
}

func (p *convergeProgress) observe(c writeCounts) {
	if c.ChildWrites != p.childWrites {
		p.childWrites, p.lastChildWrite = c.ChildWrites, time.Now()
	}
	if *fleetProgress <= 0 || time.Since(p.lastLog) < *fleetProgress {
		return
	}
	p.lastLog = time.Now()
	present, err := p.f.presentChildren()
	if err != nil {
		p.f.logf("%s progress: counting the children: %v", p.f.who, err)
	}
	ctl, api := readProc(p.pid), readProc(p.f.cp.APIServerPID())
	p.f.logf("%s progress at %s: %d/%d children in the apiserver, %d child creates answered 201; writes %d (%d since the last line: %s); controller %.1f CPU-s, RSS %.0f MiB; apiserver %.1f CPU-s, RSS %.0f MiB; load %s",
		p.f.who, time.Since(p.start).Round(time.Second), present, p.f.children, c.ChildCreates, c.All, c.All-p.prev.All,
		c.minus(p.prev).top(6), ctl.CPU.Seconds(), float64(ctl.RSS)/(1<<20), (api.CPU - p.api0.CPU).Seconds(), float64(api.RSS)/(1<<20), loadAverage())
	p.prev = c
}

// stalled: no child written for -fleet.stall.
func (p *convergeProgress) stalled() bool {
	return *fleetStall > 0 && time.Since(p.lastChildWrite) > *fleetStall
}

// notConverged records a controller that did not converge: past
// -fleet.converge-limit, or (stalled) with no child written for
// -fleet.stall. The children present and lacking per grid, its writes, CPU
// and memory so far, and the lines of its log that say why.
func (f *fleet) notConverged(pid int, api0 procUsage, apiPeak *rssPeak, after time.Duration, stalled bool, proc *controlplane.Process) {
	// The writes first: the controller goes on creating while the count
	// pages through the children.
	c, _ := f.audit.scan()
	perGrid, err := f.childrenPerGrid()
	if err != nil {
		f.logf("%s: counting the children: %v", f.who, err)
	}
	n := 0
	for _, k := range perGrid {
		n += k
	}
	ctlUse, apiUse := readProc(pid), readProc(f.cp.APIServerPID())
	if stalled {
		f.fig("converge: STALLED, no child written for", fleetStall.Seconds(), "s")
		f.fig("converge: stalled at", after.Seconds(), "s")
	} else {
		f.fig("converge: NOT converged within", fleetLimit.Seconds(), "s")
	}
	f.fig("converge: children present", float64(n), "children")
	var lacking []string
	for g := range f.gridsN {
		if k := perGrid[gridName(g)]; k < f.units {
			lacking = append(lacking, fmt.Sprintf("%s %d", gridName(g), f.units-k))
		}
	}
	f.logf("%s: children lacking per grid (of %d each): %s", f.who, f.units, strings.Join(lacking, ", "))
	f.fig("converge: grids lacking children", float64(len(lacking)), "grids")
	f.writes("converge (not converged)", c, f.children)
	f.fig("converge: controller CPU", ctlUse.CPU.Seconds(), "CPU-s")
	f.fig("converge: controller peak RSS", float64(ctlUse.HWM)/(1<<20), "MiB")
	f.fig("converge: apiserver CPU", (apiUse.CPU - api0.CPU).Seconds(), "CPU-s")
	f.fig("converge: apiserver peak RSS", float64(apiPeak.take())/(1<<20), "MiB")
	f.logSays(proc)
}

// childrenPerGrid counts the children the apiserver holds by grid (a
// child is named GRID-NODEUNIT by both controllers).
func (f *fleet) childrenPerGrid() (map[string]int, error) {
	out := map[string]int{}
	for _, res := range []string{"deployments", "statefulsets"} {
		cont := ""
		for {
			l, err := f.meta.Resource(appsv1.SchemeGroupVersion.WithResource(res)).Namespace(fleetNS).List(f.ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
			if err != nil {
				return out, err
			}
			for _, it := range l.Items {
				if g, _, ok := strings.Cut(it.Name, "-unit-"); ok {
					out[g]++
				}
			}
			if cont = l.Continue; cont == "" {
				break
			}
		}
	}
	return out, nil
}

// giveUp matches what a controller logs when it stops retrying a grid
// (SuperEdge: its work queue's MaxRetries, 15, then "Dropping ... out of
// the queue") or fails a sync.
var giveUp = regexp.MustCompile(`Dropping .* out of the queue|Error syncing`)

// logSays logs how often the controller's log gave up on or failed a
// grid's sync, by grid, and the last such lines.
func (f *fleet) logSays(proc *controlplane.Process) {
	data, err := os.ReadFile(proc.LogPath)
	if err != nil {
		f.logf("%s: its log: %v", f.who, err)
		return
	}
	dropped, failed := map[string]int{}, map[string]int{}
	var last []string
	grid := regexp.MustCompile(`grid-\d\d\b`)
	for _, line := range strings.Split(string(data), "\n") {
		if !giveUp.MatchString(line) {
			continue
		}
		g := grid.FindString(line)
		if strings.Contains(line, "Dropping") {
			dropped[g]++
		} else {
			failed[g]++
		}
		last = append(last, line)
		if len(last) > 5 {
			last = last[1:]
		}
	}
	format := func(m map[string]int) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	f.logf("%s's log: syncs dropped after the last retry, by grid: [%s]; failed syncs retried, by grid: [%s]; the last such lines:\n%s",
		f.who, format(dropped), format(failed), strings.Join(last, "\n"))
}

// loadAverage is the machine's 1-, 5- and 15-minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// keepLog copies the controller's log into -fleet.logs.
func (f *fleet) keepLog(proc *controlplane.Process) {
	if *fleetLogs == "" {
		return
	}
	data, err := os.ReadFile(proc.LogPath)
	if err == nil {
		err = os.WriteFile(filepath.Join(*fleetLogs, f.who+".log"), data, 0o644)
	}
	if err != nil {
		f.logf("%s: keeping its log: %v", f.who, err)
	}
}
