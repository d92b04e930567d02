package realnode

import (
	"context"
	"strings"
	"sync"
	"time"
)

// trail is what a step's followers (followPods, followRules) record while
// it runs: one line per thing seen, with the time it was seen, kept for a
// failed step's report.
type trail struct {
	mu     sync.Mutex
	lines  []string
	cancel context.CancelFunc // ends the followers
	wg     sync.WaitGroup     // the followers' goroutines
}

// timeOfDay stamps the trails' and the probes' lines; dropsDuring and
// synWindow compare such stamps as strings, so every one has this form.
const timeOfDay = "15:04:05.000"

func (tr *trail) add(line string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, time.Now().UTC().Format(timeOfDay)+" "+line)
}

// stop ends the recording and returns it.
func (tr *trail) stop() string {
	tr.cancel()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, "\n")
}
