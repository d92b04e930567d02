package realnode

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// stepCosts logs what each step of the run cost (wall time), as it goes
// and as a table at the end.
type stepCosts struct {
	t     *testing.T
	steps []string
	times []time.Duration
}

func (c *stepCosts) step(name string, fn func()) {
	c.t.Helper()
	start := time.Now()
	defer func() {
		c.add(name, time.Since(start))
	}()
	fn()
}

func (c *stepCosts) add(name string, d time.Duration) {
	c.steps = append(c.steps, name)
	c.times = append(c.times, d)
	c.t.Logf("step %q took %s", name, d.Round(10*time.Millisecond))
}

func (c *stepCosts) report() {
	var b strings.Builder
	for i, s := range c.steps {
		fmt.Fprintf(&b, "  %-12s %8s\n", s, c.times[i].Round(10*time.Millisecond))
	}
	c.t.Logf("cost per step:\n%s", b.String())
}
