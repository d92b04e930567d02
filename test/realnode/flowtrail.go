package realnode

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/netip"
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
const echoPort = 8080

// followNewFlows records, while a step runs, each new TCP flow to or from
// echoPort, and each one to a Service address that the namespace did not
// translate, that its conntrack sees (`conntrack -E`, flowEvent), with the
// kernel's time. An unanswered SYN's entry is gone two minutes after its
// last retransmission, often before the step's report: the trail still
// shows which pod the client's node chose and whether the SYN reached that
// pod's node (its own entry there, after the client node's masquerade), or
// that the node sent it on to the Service address itself. Events conntrack
// could not keep up with (ENOBUFS) are noted, so "none seen" can be told
// from "none heard".
func followNewFlows(ctx context.Context, ns *harness.NetNS) *trail {
	ctx, cancel := context.WithCancel(ctx)
	tr := &trail{cancel: cancel}
	// Line-buffered, so a line is read as the event comes; SIGTERM, on
	// which conntrack prints its count and exits. A 4 MiB socket buffer
	// (conntrack doubles it) rides out a busy moment's burst of events.
	cmd := ns.Command(ctx, "stdbuf", "-oL", "conntrack", "-E", "-e", "NEW", "-p", "tcp", "-o", "timestamp", "-b", "4194304")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	// conntrack warns on stderr when the kernel dropped events it had no
	// room for: then a flow missing from the trail proves nothing.
	var stderr strings.Builder
	cmd.Stderr = &stderr
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
			if ev, ok := flowEvent(sc.Text()); ok {
				tr.add(ev)
			}
		}
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			tr.add("conntrack -E: " + err.Error())
		}
		if strings.Contains(stderr.String(), "ENOBUFS") {
			tr.add("conntrack -E lost events (ENOBUFS): this trail may miss flows")
		}
	})
	return tr
}

// conntrackEvent is a line of `conntrack -E -o timestamp`: the kernel's
// time, then the event and its tuples.
var conntrackEvent = regexp.MustCompile(`^\[(\d+)\.(\d+)\]\s+(.*)$`)

// flowEvent: a conntrack event naming echoPort, or one of a flow to a
// Service address the namespace did not translate (untranslatedService),
// with the kernel's time written as UTC time of day ("kernel
// 13:44:04.035123 [NEW] tcp ..."), and whether the line was one.
func flowEvent(line string) (string, bool) {
	m := conntrackEvent.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	port := "port=" + strconv.Itoa(echoPort)
	echo := strings.Contains(m[3], port+" ") || strings.HasSuffix(m[3], port)
	untranslated := untranslatedService(m[3])
	if !echo && !untranslated {
		return "", false
	}
	sec, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return "", false
	}
	at := time.Unix(sec, 0).UTC().Format("15:04:05")
	ev := "kernel " + at + "." + m[2] + " " + strings.Join(strings.Fields(m[3]), " ")
	if untranslated {
		ev += " (not translated: this namespace sent the Service address on as it was)"
	}
	return ev, true
}

// tupleAddrs: an event's addresses and ports, the original direction's
// then the reply's: src, dst, sport, dport.
var tupleAddrs = regexp.MustCompile(`src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+)`)

// serviceCIDR is the test cluster's Service range.
var serviceCIDR = netip.MustParsePrefix(harness.ServiceCIDR)

// untranslatedService: whether an event is of a flow to a Service address
// whose reply comes from that same address and port, so no DNAT applied.
// kube-proxy translates a Service address on the client's node, where the
// flow is first seen: one that leaves untranslated goes to the fabric hub,
// which has no route for it, and its SYNs go unanswered.
func untranslatedService(event string) bool {
	t := tupleAddrs.FindAllStringSubmatch(event, 2)
	if len(t) != 2 {
		return false
	}
	dst, err := netip.ParseAddr(t[0][2])
	return err == nil && serviceCIDR.Contains(dst) && t[1][1] == t[0][2] && t[1][3] == t[0][4]
}

// flowLines: the lines of a trail naming a client's port as the flow's
// source port, where the client's node keeps the port it masquerades, and
// what its follower said of itself (an error, events lost).
func flowLines(trail, port string) []string {
	sport := regexp.MustCompile(`\bsport=` + regexp.QuoteMeta(port) + `\b`)
	var out []string
	for _, l := range strings.Split(trail, "\n") {
		if sport.MatchString(l) || strings.Contains(l, " conntrack -E") {
			out = append(out, l)
		}
	}
	return out
}

// dropTrailKey is followStepFlows' name for the kernel's drops.
const dropTrailKey = "kernel drops"

// followStepFlows follows the new flows (followNewFlows) of every network
// namespace of the test, and the kernel's drops (followDrops), while a step
// runs; stop ends that and returns each one's trail, by the namespace's
// name (the drops' by dropTrailKey).
func followStepFlows(ctx context.Context, nodes []*Node, hub *harness.NetNS) (stop func() map[string]string) {
	trails := map[string]*trail{dropTrailKey: followDrops(ctx)}
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
