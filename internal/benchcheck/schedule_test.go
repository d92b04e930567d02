package benchcheck

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	run := func(name, group string) Run { return Run{Name: name, Group: group, Package: "./p/"} }
	runs := []Run{run("a", Alone), run("b", "g1"), run("c", "g2"), run("d", "g1"), run("e", Alone), run("f", "g2")}
	var got []string
	for _, p := range Schedule(runs) {
		got = append(got, p.Group+":"+strings.Join(p.Names(), ","))
	}
	want := []string{"alone:a", "g1:b,d", "g2:c,f", "alone:e"}
	if !slices.Equal(got, want) {
		t.Errorf("phases %q, want %q", got, want)
	}
	if got := Schedule(nil); len(got) != 0 {
		t.Errorf("no runs: phases %v", got)
	}
}

func TestPackages(t *testing.T) {
	phases := []Phase{
		{Group: "g", Runs: []Run{{Name: "a", Package: "./w/"}, {Name: "b", Package: "./c/"}, {Name: "c", Package: "./w/"}}},
		{Group: Alone, Runs: []Run{{Name: "d", Package: "./g/"}}},
		{Group: Alone, Runs: []Run{{Name: "e", Package: "./c/"}}},
	}
	if got, want := Packages(phases), []string{"./w/", "./c/", "./g/"}; !slices.Equal(got, want) {
		t.Errorf("packages %q, want %q", got, want)
	}
}

// events is what the fake builds and runs did, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.log, s)
}

func (e *events) index(s string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Index(e.log, s)
}

// waitUntil polls cond for up to 5 s: a fake run waiting for something
// Execute does not do fails the test instead of hanging it.
func waitUntil(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// Execute with fakes: the runs of a group overlap, a run alone has nothing
// beside it (no run, no build), a package needed later is built while a
// group runs, each package once and before its runs, and the results come
// back in the phases' order whatever order the runs ended in.
func TestExecute(t *testing.T) {
	runs := []Run{
		{Name: "fleet", Group: "counts", Package: "./wrapper/"},
		{Name: "storm", Group: "counts", Package: "./wrapper/"},
		{Name: "converge", Group: "counts", Package: "./controller/"},
		{Name: "latency", Group: Alone, Package: "./wrapper/"},
		{Name: "gridhosts", Group: Alone, Package: "./plugin/gridhosts/"},
		{Name: "snapshot", Group: Alone, Package: "./wrapper/"},
	}
	phases := Schedule(runs)
	ev := &events{}
	var problems []string
	var mu sync.Mutex
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	build := func(pkg string) string {
		ev.add("build " + pkg)
		time.Sleep(5 * time.Millisecond)
		ev.add("built " + pkg)
		return "bin:" + pkg
	}
	exec := func(r Run, bin string) string {
		if bin != "bin:"+r.Package {
			problem("run %s got binary %q", r.Name, bin)
		}
		ev.add("start " + r.Name)
		if r.Group != Alone {
			// Every run of the group starts before any ends, and the build
			// of the package only a later phase needs ends meanwhile.
			for _, other := range runs {
				if other.Group == r.Group && !waitUntil(func() bool { return ev.has("start " + other.Name) }) {
					problem("run %s: %s of its group did not start beside it", r.Name, other.Name)
				}
			}
			if !waitUntil(func() bool { return ev.has("built ./plugin/gridhosts/") }) {
				problem("run %s: ./plugin/gridhosts/ was not built while the group ran", r.Name)
			}
			// The first run of the group ends last.
			time.Sleep(time.Duration(3-slices.IndexFunc(runs, func(o Run) bool { return o.Name == r.Name })) * 10 * time.Millisecond)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
		ev.add("end " + r.Name)
		return r.Name
	}
	var started, done []string
	got := Execute(phases, build, exec, Hooks[string]{
		PhaseStart: func(i int, p Phase) { started = append(started, fmt.Sprint(i, p.Names())) },
		PhaseDone: func(i int, p Phase, results []string) {
			if !slices.Equal(results, p.Names()) {
				problem("phase %d's results %q, want %q", i, results, p.Names())
			}
			done = append(done, fmt.Sprint(i, p.Names()))
		},
	})
	for _, p := range problems {
		t.Error(p)
	}
	want := []string{"fleet", "storm", "converge", "latency", "gridhosts", "snapshot"}
	if !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
	wantPhases := []string{"0 [fleet storm converge]", "1 [latency]", "2 [gridhosts]", "3 [snapshot]"}
	if !slices.Equal(started, wantPhases) || !slices.Equal(done, wantPhases) {
		t.Errorf("phases started %q, done %q, want %q", started, done, wantPhases)
	}
	log := ev.log
	for _, pkg := range Packages(phases) {
		if n := slices.Index(log, "build "+pkg); n < 0 || slices.Index(log[n+1:], "build "+pkg) >= 0 {
			t.Errorf("%s not built once: %q", pkg, log)
		}
	}
	for _, r := range runs {
		if ev.index("built "+r.Package) > ev.index("start "+r.Name) {
			t.Errorf("run %s started before %s was built: %q", r.Name, r.Package, log)
		}
		if r.Group == Alone {
			if s, e := ev.index("start "+r.Name), ev.index("end "+r.Name); e != s+1 {
				t.Errorf("something beside run %s, which runs alone: %q", r.Name, log[s:e+1])
			}
		}
	}
	// A run alone first waits for every build, a later one's included.
	alone := Schedule([]Run{runs[3], runs[0], runs[2]})
	ev = &events{}
	Execute(alone, build, func(r Run, bin string) string {
		if r.Name == "latency" && !ev.has("built ./controller/") {
			t.Errorf("latency runs alone before ./controller/ was built: %q", ev.log)
		}
		return r.Name
	}, Hooks[string]{})
}
