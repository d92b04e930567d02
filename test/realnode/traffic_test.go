package realnode

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/test/realnode/probe"
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
		at(500).UTC().Format(timeOfDay),
		at(1000).UTC().Format(timeOfDay) + " status=SERVFAIL server=169.254.20.10#53(169.254.20.10) answer=",
	}
	want := probeResult{attempts: 4, failed: 2, gap: 2800 * time.Millisecond, failures: failures}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("measure = %+v, want %+v", got, want)
	}
	// No success in the window: the whole window is the gap.
	got = measure(samples["svc"], window{start: at(400), end: at(1500)})
	if want := (probeResult{attempts: 2, failed: 2, gap: 1100 * time.Millisecond, failures: failures}); !reflect.DeepEqual(got, want) {
		t.Errorf("measure = %+v, want %+v", got, want)
	}
}

// TestMeasureStalls: an attempt the prober logged "stall" (timed out while
// it was itself held up) is neither a failure nor a success: listed apart,
// the longest time without a success runs across it; the table lists it.
func TestMeasureStalls(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }
	log := "1000000 svc ok\n1004000 svc stall error=timeout held=3.9s\n1004300 svc fail error=refused\n1004600 svc ok\n"
	w := window{name: "upgrade", start: at(0), end: at(5000)}
	got := measure(parseProbeLog(log)["svc"], w)
	want := probeResult{attempts: 4, failed: 1, gap: 4600 * time.Millisecond,
		failures: []string{at(4300).UTC().Format(timeOfDay) + " error=refused"},
		held:     []string{at(4000).UTC().Format(timeOfDay) + " error=timeout held=3.9s"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("measure = %+v, want %+v", got, want)
	}
	_, table := trafficTable(map[string]map[string][]probeSample{"client-node0": parseProbeLog(log)}, []window{w})
	if !strings.Contains(table, "upgrade: client-node0: svc at "+want.held[0]) {
		t.Errorf("table does not list the stalled attempt:\n%s", table)
	}
}

// TestMovedGridPod: in a window where a client's grid name must answer a
// replaced pod's new address, a query answered with it is right, one the
// client logged right (the old address) and any other answer are wrong, a
// stall stays a stall; other clients and kinds are judged as logged.
func TestMovedGridPod(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }
	log := "1000100 grid fail status=NOERROR server=169.254.20.10#53(169.254.20.10) answer=10.244.0.24\n" +
		"1000300 grid ok\n" +
		"1000500 grid fail status=NOERROR server=169.254.20.10#53(169.254.20.10) answer=10.244.0.99\n" +
		"1000700 grid stall server=169.254.20.10#53 error=timed out answer= held=2s\n" +
		"1000800 svc ok\n"
	w := window{name: "after the node died", start: at(0), end: at(1000), movedGrid: map[string]string{"site-node0": "10.244.0.24"}}
	results, _ := trafficTable(map[string]map[string][]probeSample{
		"site-node0": parseProbeLog(log),
		"site-node1": parseProbeLog(log),
	}, []window{w})
	g := results[w.name]["site-node0"]["grid"]
	if g.attempts != 4 || g.failed != 2 || len(g.held) != 1 {
		t.Errorf("moved: %+v, want 2 of 4 failed (the old address, another one), 1 stall", g)
	}
	if len(g.failures) != 2 || !strings.Contains(g.failures[0], "old address") || !strings.HasSuffix(g.failures[1], "answer=10.244.0.99") {
		t.Errorf("moved: failures %q", g.failures)
	}
	if o := results[w.name]["site-node1"]["grid"]; o.failed != 2 || !strings.HasSuffix(o.failures[0], "answer=10.244.0.24") {
		t.Errorf("not moved: %+v, want the client's own judgement (2 failed)", o)
	}
	if s := results[w.name]["site-node0"]["svc"]; s.failed != 0 || s.attempts != 1 {
		t.Errorf("svc: %+v", s)
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

// TestGridServiceLoop runs the clients' gsvc loop (the prober's, set by
// the pod's environment) against an echo server on 127.0.0.1 and reads its
// lines as the test reads a client's log: an answer from a node of the
// caller's nodeunit is ok; one from any other node fails and names it; an
// HTTP error fails with its status. Unset, the loop does not run.
func TestGridServiceLoop(t *testing.T) {
	var mu sync.Mutex
	answers := []string{"node0", "node1", "node3", ""}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if len(answers) == 0 || answers[0] == "" {
			http.Error(w, "no endpoint", http.StatusServiceUnavailable)
			return
		}
		node := answers[0]
		answers = answers[1:]
		// The echo server's format (echoserver/main.go).
		fmt.Fprintf(w, "Hostname: echo-%[1]s\n\nPod Information:\n\tnode name: %[1]s\n\tpod name: echo-%[1]s\n\tpod namespace: default\n\tpod IP: 10.244.0.9\n\n", node)
	}))
	defer srv.Close()

	run := func(env map[string]string) []probeSample {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, w := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			probe.Run(ctx, probe.FromEnv("", "", "", func(k string) string { return env[k] }), w)
			w.Close()
		}()
		var log strings.Builder
		sc := bufio.NewScanner(r)
		for lines := 0; lines < 5 && sc.Scan(); lines++ {
			log.WriteString(sc.Text() + "\n")
		}
		cancel()
		go func() { _, _ = io.Copy(io.Discard, r) }()
		<-done
		samples := parseProbeLog(log.String())
		if len(samples) > 1 {
			t.Errorf("kinds other than gsvc logged: %q", log.String())
		}
		return samples["gsvc"]
	}

	got := run(map[string]string{gridServiceEnv: strings.TrimPrefix(srv.URL, "http://"), gridNodesEnv: "node0 node3"})
	if len(got) != 5 {
		t.Fatalf("%d gsvc samples, want 5: %+v", len(got), got)
	}
	want := []struct {
		ok     bool
		detail string
	}{
		{true, ""},
		{false, "outside=node0 node3 node=node1 pod=echo-node1"},
		{true, ""},
		{false, "status=503"},
		{false, "status=503"},
	}
	for i, w := range want {
		if got[i].ok != w.ok || got[i].detail != w.detail {
			t.Errorf("sample %d: ok=%v %q, want ok=%v %q", i, got[i].ok, got[i].detail, w.ok, w.detail)
		}
	}

	// Without the Service's address the loop does not run: Run ends at once.
	if got := run(map[string]string{gridServiceEnv: ""}); len(got) != 0 {
		t.Errorf("unset: %d gsvc samples: %+v", len(got), got)
	}
}

// TestTrafficTable: each kind measured per window and client; the grid
// Service's column shows a client's gsvc attempts, "-" for a client that
// does not run the loop.
func TestTrafficTable(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) }
	logs := map[string]map[string][]probeSample{
		"client-node0": parseProbeLog("1000000 svc ok\n1000000 dns ok\n1000100 gsvc ok\n1000500 gsvc fail outside=node0 node=node1 pod=p\n1001500 gsvc ok\n1001600 svc ok\n1001600 dns ok\n"),
		"client-node2": parseProbeLog("1000000 svc ok\n1000000 dns ok\n1001600 svc ok\n1001600 dns ok\n"),
	}
	results, table := trafficTable(logs, []window{{name: "migrate-node NODE=node0", start: at(50), end: at(2000)}})
	g := results["migrate-node NODE=node0"]["client-node0"]["gsvc"]
	if g.attempts != 3 || g.failed != 1 || g.gap != 1400*time.Millisecond {
		t.Errorf("client-node0 gsvc = %+v, want 1 of 3 failed, gap 1.4s", g)
	}
	if len(g.failures) != 1 || !strings.HasSuffix(g.failures[0], " outside=node0 node=node1 pod=p") {
		t.Errorf("failures %q", g.failures)
	}
	if r := results["migrate-node NODE=node0"]["client-node2"]["gsvc"]; r.attempts != 0 {
		t.Errorf("client-node2 gsvc = %+v, want none", r)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "grid Service: failed/tries gap") {
		t.Fatalf("table:\n%s", table)
	}
	if f := strings.Fields(lines[1]); f[len(f)-2] != "1/3" || f[len(f)-1] != "1.4s" || f[len(f)-3] != "-" {
		t.Errorf("client-node0's row %q: want grid name -, grid Service 1/3 1.4s", lines[1])
	}
	if f := strings.Fields(lines[2]); f[len(f)-1] != "-" || f[len(f)-2] != "-" {
		t.Errorf("client-node2's row %q: want - for grid name and grid Service", lines[2])
	}
}
