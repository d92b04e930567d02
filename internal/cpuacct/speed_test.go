package cpuacct

import (
	"testing"
	"time"
)

// TestMeasureSpeed checks the two things hack/test.sh relies on: the figure
// is the work's CPU time (not nothing, not the wall time of a process that
// waited), and it repeats, so one threshold can split machines by it.
func TestMeasureSpeed(t *testing.T) {
	first, err := MeasureSpeed()
	if err != nil {
		t.Fatal(err)
	}
	// Below this the work was optimised away or not counted.
	if first < 50*time.Millisecond {
		t.Fatalf("MeasureSpeed = %v: the fixed work took next to no CPU time", first)
	}
	second, err := MeasureSpeed()
	if err != nil {
		t.Fatal(err)
	}
	if ratio := float64(second) / float64(first); ratio < 0.5 || ratio > 2 {
		t.Errorf("MeasureSpeed = %v, then %v: the same work should cost about the same CPU time", first, second)
	}
}
