//go:build latencystages

package latencystages

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
)

// Stage stamps for BenchmarkWatchLatency, built only with
// -tags latencystages: the first time each stage of an event's path saw the
// object carrying a given latencyStageLabel value. Normal builds compile the
// no-op stubs of stages_off.go instead.

// latencyStageLabel numbers the benchmark's changes.
const latencyStageLabel = "seq"

var stages = struct {
	sync.Mutex
	at map[string]map[string]time.Time // label value -> stage -> first time
}{at: map[string]map[string]time.Time{}}

// Stamp records that stage saw obj now.
func Stamp(obj any, stage string) {
	if m, err := meta.Accessor(obj); err == nil {
		StampSeq(m.GetLabels()[latencyStageLabel], stage)
	}
}

// StampSeq records that stage saw change seq now.
func StampSeq(seq, stage string) {
	if seq == "" {
		return
	}
	now := time.Now()
	stages.Lock()
	defer stages.Unlock()
	m := stages.at[seq]
	if m == nil {
		m = map[string]time.Time{}
		stages.at[seq] = m
	}
	if _, ok := m[stage]; !ok {
		m[stage] = now
	}
}

// Report returns p1/p50/p90/p99 of the time between each two consecutive
// stages of path over the changes stamped since Reset.
func Report(path []string) string {
	stages.Lock()
	defer stages.Unlock()
	out := ""
	for i := 1; i < len(path); i++ {
		var ds []time.Duration
		for _, m := range stages.at {
			from, ok1 := m[path[i-1]]
			to, ok2 := m[path[i]]
			if ok1 && ok2 {
				ds = append(ds, to.Sub(from))
			}
		}
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		at := func(p float64) time.Duration { return ds[int(float64(len(ds)-1)*p)] }
		out += fmt.Sprintf("%-9s -> %-9s n=%d p1=%v p50=%v p90=%v p99=%v\n", path[i-1], path[i], len(ds), at(.01), at(.5), at(.9), at(.99))
	}
	return out
}

// Reset forgets every stamp.
func Reset() {
	stages.Lock()
	defer stages.Unlock()
	stages.at = map[string]map[string]time.Time{}
}
