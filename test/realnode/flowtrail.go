package realnode

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// echoPort is the port every echo server of the test listens on (the
// probe's and the grids' pods, examples/): a Service request's flow names
// it once the client's node has chosen a pod.
const echoPort = "8080"

// followNewFlows records, while a step runs, each new TCP flow to or from
// echoPort that a network namespace's conntrack sees (`conntrack -E`), with
// the kernel's time. An unanswered SYN's entry is gone two minutes after
// its last retransmission, often before the step's report: the trail still
// shows which pod the client's node chose and whether the SYN reached that
// pod's node (its own entry there, after the client node's masquerade).
func followNewFlows(ctx context.Context, ns *harness.NetNS) *trail {
	ctx, cancel := context.WithCancel(ctx)
	tr := &trail{cancel: cancel}
	// Line-buffered, so a line is read as the event comes; SIGTERM, on
	// which conntrack prints its count and exits.
	cmd := ns.Command(ctx, "stdbuf", "-oL", "conntrack", "-E", "-e", "NEW", "-p", "tcp", "-o", "timestamp")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		tr.add("conntrack -E: " + err.Error())
		return tr
	}
	tr.wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ev, ok := echoFlowEvent(sc.Text()); ok {
				tr.add(ev)
			}
		}
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			tr.add("conntrack -E: " + err.Error())
		}
	})
	return tr
}

// conntrackEvent is a line of `conntrack -E -o timestamp`: the kernel's
// time, then the event and its tuples.
var conntrackEvent = regexp.MustCompile(`^\[(\d+)\.(\d+)\]\s+(.*)$`)

// echoFlowEvent: a conntrack event naming echoPort, with the kernel's time
// written as UTC time of day ("kernel 13:44:04.035123 [NEW] tcp ..."), and
// whether the line was one.
func echoFlowEvent(line string) (string, bool) {
	m := conntrackEvent.FindStringSubmatch(line)
	if m == nil || !strings.Contains(m[3], "port="+echoPort+" ") && !strings.HasSuffix(m[3], "port="+echoPort) {
		return "", false
	}
	sec, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return "", false
	}
	at := time.Unix(sec, 0).UTC().Format("15:04:05")
	return "kernel " + at + "." + m[2] + " " + strings.Join(strings.Fields(m[3]), " "), true
}

// flowLines: the lines of a trail naming a client's port as the flow's
// source port, where the client's node keeps the port it masquerades.
func flowLines(trail, port string) []string {
	sport := regexp.MustCompile(`\bsport=` + regexp.QuoteMeta(port) + `\b`)
	var out []string
	for _, l := range strings.Split(trail, "\n") {
		if sport.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// followStepFlows follows the new flows (followNewFlows) of every network
// namespace of the test while a step runs; stop ends that and returns each
// one's trail, by the namespace's name.
func followStepFlows(ctx context.Context, nodes []*Node, hub *harness.NetNS) (stop func() map[string]string) {
	trails := map[string]*trail{}
	for _, n := range netNamespaces(nodes, hub) {
		trails[n.name] = followNewFlows(ctx, n.ns)
	}
	return func() map[string]string {
		out := map[string]string{}
		for name, tr := range trails {
			out[name] = tr.stop()
		}
		return out
	}
}

// flowCounts: how many lines each namespace's trail holds ("node0 812,
// node1 790, ..."), in name order: a trail of 0 where a node served the
// echo servers means conntrack -E saw nothing there.
func flowCounts(events map[string]string) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(events)) {
		n := 0
		if events[name] != "" {
			n = strings.Count(events[name], "\n") + 1
		}
		out = append(out, fmt.Sprintf("%s %d", name, n))
	}
	return strings.Join(out, ", ")
}
