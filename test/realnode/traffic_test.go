package realnode

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestMeasure: failures counted (with what the client logged of each), and the longest time without a success
// runs from the window's start to the first success, between successes,
// and from the last to the window's end.
func TestMeasure(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }
	log := "1000000 svc ok\n1000500 svc fail\n1001000 svc fail status=SERVFAIL server=169.254.20.10#53(169.254.20.10) answer=\n1003000 svc ok\n1003500 dns ok\n1004000 svc ok\nnot a sample\n1009000 svc ok\n"
	samples := parseProbeLog(log)
	if len(samples["svc"]) != 6 || len(samples["dns"]) != 1 {
		t.Fatalf("parsed %v", samples)
	}
	got := measure(samples["svc"], window{start: at(200), end: at(5000)})
	failures := []string{
		at(500).UTC().Format("15:04:05.000"),
		at(1000).UTC().Format("15:04:05.000") + " status=SERVFAIL server=169.254.20.10#53(169.254.20.10) answer=",
	}
	want := probeResult{attempts: 4, failed: 2, gap: 2800 * time.Millisecond, workedBefore: true, failures: failures}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("measure = %+v, want %+v", got, want)
	}
	// No success in the window: the whole window is the gap.
	got = measure(samples["svc"], window{start: at(400), end: at(1500)})
	if want := (probeResult{attempts: 2, failed: 2, gap: 1100 * time.Millisecond, workedBefore: true, failures: failures}); !reflect.DeepEqual(got, want) {
		t.Errorf("measure = %+v, want %+v", got, want)
	}
}

// TestGuideStep reads a marked block (indented in a list too) and refuses
// a marker without its block.
func TestGuideStep(t *testing.T) {
	dir := t.TempDir()
	guide := "<!-- step: a -->\n```sh\necho a\n```\n\n1. item\n   <!-- step: b -->\n   ```sh\n   echo b\n     indented\n   ```\n<!-- step: c -->\ntext\n```sh\necho c\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "g.md"), []byte(guide), 0o644); err != nil {
		t.Fatal(err)
	}
	op := &Operator{Dir: dir}
	for name, want := range map[string]string{"a": "echo a\n", "b": "echo b\n  indented\n"} {
		if got, err := op.GuideStep("g.md", name); err != nil || got != want {
			t.Errorf("step %s: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := op.GuideStep("g.md", "c"); err == nil {
		t.Error("step c (text between marker and block): no error")
	}
	if _, err := op.GuideStep("g.md", "d"); err == nil {
		t.Error("unmarked step d: no error")
	}
	names, err := op.GuideSteps("g.md")
	if err != nil || len(names) != 3 || names[0] != "a" || names[1] != "b" || names[2] != "c" {
		t.Errorf("GuideSteps = %v, %v", names, err)
	}
}
