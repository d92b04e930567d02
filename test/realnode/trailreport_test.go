package realnode

import (
	"os"
	"testing"
)

// trailReport is a step's trails (followPods, followRules), kept to explain
// a failure. It is logged once: at the step's end when the test has failed
// by then, since a t.Fatal inside the step skips the code after it;
// otherwise by the report after the step, when the test failed or
// SERVICEGROUP_REALNODE_TRAIL asks for it.
type trailReport struct {
	t      *testing.T
	title  string
	text   string
	logged bool
}

// stepEnded keeps the trail; called from the step's defer, so it runs
// however the step ends.
func (r *trailReport) stepEnded(text string) {
	r.text = text
	if r.t.Failed() {
		r.log()
	}
}

// report logs the trail after the step when the test failed or asked.
func (r *trailReport) report() {
	if r.t.Failed() || os.Getenv("SERVICEGROUP_REALNODE_TRAIL") != "" {
		r.log()
	}
}

func (r *trailReport) log() {
	if r.logged || r.text == "" {
		return
	}
	r.logged = true
	r.t.Logf("%s:\n%s", r.title, r.text)
}
