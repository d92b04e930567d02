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

func (tr *trail) add(line string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, time.Now().UTC().Format("15:04:05.000")+" "+line)
}

// stop ends the recording and returns it.
func (tr *trail) stop() string {
	tr.cancel()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, "\n")
}
