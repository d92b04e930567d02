package benchcheck

import (
	"slices"
	"sync"
)

// Phase is runs bench-check starts at the same time: one run alone, or
// every run of one group.
type Phase struct {
	Group string // Alone, or the group's name
	Runs  []Run
}

// Alone reports whether the phase is one run with nothing beside it.
func (p Phase) Alone() bool { return p.Group == Alone }

// Names are the phase's runs' names, in order.
func (p Phase) Names() []string {
	var out []string
	for _, r := range p.Runs {
		out = append(out, r.Name)
	}
	return out
}

// Schedule orders runs into phases, in the runs' order: each run of group
// Alone is a phase of its own, the runs of any other group one phase at
// the place of the group's first run.
func Schedule(runs []Run) []Phase {
	var phases []Phase
	at := map[string]int{} // group -> its phase
	for _, r := range runs {
		if r.Group == Alone {
			phases = append(phases, Phase{Group: Alone, Runs: []Run{r}})
			continue
		}
		i, ok := at[r.Group]
		if !ok {
			i = len(phases)
			at[r.Group] = i
			phases = append(phases, Phase{Group: r.Group})
		}
		phases[i].Runs = append(phases[i].Runs, r)
	}
	return phases
}

// Packages are the packages the phases' runs test, in the order the phases
// first need them.
func Packages(phases []Phase) []string {
	var out []string
	for _, p := range phases {
		for _, r := range p.Runs {
			if !slices.Contains(out, r.Package) {
				out = append(out, r.Package)
			}
		}
	}
	return out
}

// Hooks are told where Execute is; each may be nil.
type Hooks[R any] struct {
	// PhaseStart is called before the phase's runs start.
	PhaseStart func(i int, p Phase)
	// PhaseDone is called once every run of the phase has ended, with
	// their results in the phase's order.
	PhaseDone func(i int, p Phase, results []R)
}

// Execute runs the phases one after the other and returns every run's
// result in the phases' order, whatever order they ended in. build makes
// a package's test binary, once per package: the builds run one after the
// other from the start, in the order the phases first need them, so that a
// package needed only later is built while the first phase's runs together
// run; a run waits for its package's build, and a run alone starts only
// once every build has ended (nothing runs beside it, builds included).
// The runs of a phase that is not Alone run at the same time.
func Execute[B, R any](phases []Phase, build func(pkg string) B, run func(Run, B) R, hooks Hooks[R]) []R {
	type built struct {
		bin  B
		done chan struct{}
	}
	pkgs := Packages(phases)
	bins := make(map[string]*built, len(pkgs))
	for _, p := range pkgs {
		bins[p] = &built{done: make(chan struct{})}
	}
	allBuilt := make(chan struct{})
	go func() {
		defer close(allBuilt)
		for _, p := range pkgs {
			bins[p].bin = build(p)
			close(bins[p].done)
		}
	}()
	binary := func(pkg string) B {
		b := bins[pkg]
		<-b.done
		return b.bin
	}
	var out []R
	for i, p := range phases {
		if p.Alone() {
			<-allBuilt
		}
		if hooks.PhaseStart != nil {
			hooks.PhaseStart(i, p)
		}
		results := make([]R, len(p.Runs))
		if p.Alone() {
			for k, r := range p.Runs {
				results[k] = run(r, binary(r.Package))
			}
		} else {
			var wg sync.WaitGroup
			for k, r := range p.Runs {
				wg.Go(func() { results[k] = run(r, binary(r.Package)) })
			}
			wg.Wait()
		}
		if hooks.PhaseDone != nil {
			hooks.PhaseDone(i, p, results)
		}
		out = append(out, results...)
	}
	<-allBuilt // with no phase, or only shared ones: no build left behind
	return out
}
