package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// followDrops records, while a step runs, every IPv4 packet the kernel
// drops in any network namespace (the tracepoint skb:kfree_skb): its
// reason, where it was freed, and from its call chain the netfilter hook or
// stage that dropped it and what sent it (dropEvent). A SYN dropped before
// its conntrack entry is confirmed leaves no flow for the conntrack
// followers to see; here it still shows, with the rule table (a DROP or a
// REJECT: NETFILTER_DROP via ip_forward), the bridge or the neighbour
// table that ate it. The tracing runs in an ftrace instance of its own, so
// the machine's own tracing is untouched; without tracefs the trail says
// so and holds nothing else.
func followDrops(ctx context.Context) *trail {
	ctx, cancel := context.WithCancel(ctx)
	tr := &trail{cancel: cancel}
	dt, err := startDropTrace()
	if err != nil {
		tr.add("kernel drops not followed: " + err.Error())
		return tr
	}
	cmd := exec.CommandContext(ctx, "cat", filepath.Join(dt.instance, "trace_pipe"))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		tr.add("kernel drops not followed: " + err.Error())
		dt.close()
		return tr
	}
	tr.wg.Go(func() {
		defer dt.close()
		var p dropParser
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			for _, ev := range p.line(sc.Text()) {
				tr.add(ev)
			}
		}
		for _, ev := range p.flush() {
			tr.add(ev)
		}
		_ = cmd.Wait()
	})
	return tr
}

// dropTrace is an ftrace instance following skb:kfree_skb.
type dropTrace struct {
	instance string // its directory
	unmount  string // the tracefs mounted for it, if any
	once     sync.Once
}

// benignDrops are the drop reasons of packets a socket no longer wanted
// (data after close, old sequence numbers): many, and never a lost
// request's.
var benignDrops = []string{"TCP_OLD_DATA", "TCP_OLD_SEQUENCE", "TCP_ABORT_ON_DATA"}

// startDropTrace makes an ftrace instance that records IPv4 drops with
// their call chains, on the monotonic clock, and writes a marker pairing
// that clock with the wall clock (dropParser).
func startDropTrace() (_ *dropTrace, err error) {
	dt := &dropTrace{}
	defer func() {
		if err != nil {
			dt.close()
		}
	}()
	root := "/sys/kernel/tracing"
	if _, err := os.Stat(filepath.Join(root, "instances")); err != nil {
		// Not mounted here: a tracefs of the test's own, unmounted at the end.
		dir, err := os.MkdirTemp("", "servicegroup-tracefs-")
		if err != nil {
			return nil, err
		}
		if err := syscall.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
			_ = os.Remove(dir)
			return nil, fmt.Errorf("mount tracefs: %w", err)
		}
		root, dt.unmount = dir, dir
	}
	dt.instance = filepath.Join(root, "instances", fmt.Sprintf("servicegroup-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dt.instance, 0o700); err != nil {
		return nil, err
	}
	event := filepath.Join(dt.instance, "events", "skb", "kfree_skb")
	format, err := os.ReadFile(filepath.Join(event, "format"))
	if err != nil {
		return nil, err
	}
	filter := dropFilter(string(format))
	// Socket teardown purges its queues by the thousand; older kernels
	// cannot filter on the function and keep them.
	if err := dt.write(filepath.Join(event, "filter"), filter+" && location.function != sk_stream_kill_queues"); err != nil {
		if err := dt.write(filepath.Join(event, "filter"), filter); err != nil {
			return nil, err
		}
	}
	for _, s := range [][2]string{
		{"trace_clock", "mono"},
		{"buffer_size_kb", "4096"},
		{"options/stacktrace", "1"},
		{"events/skb/kfree_skb/enable", "1"},
	} {
		if err := dt.write(filepath.Join(dt.instance, s[0]), s[1]); err != nil {
			return nil, err
		}
	}
	if err := dt.write(filepath.Join(dt.instance, "trace_marker"), fmt.Sprintf("%s %d", wallMarker, time.Now().UnixNano())); err != nil {
		return nil, err
	}
	return dt, nil
}

// dropFilter: the tracepoint's filter for IPv4 drops but benignDrops,
// whose numbers the kernel's format of the event gives.
func dropFilter(format string) string {
	reasons := map[string]string{}
	for _, m := range regexp.MustCompile(`\{ (\d+), "(\w+)" \}`).FindAllStringSubmatch(format, -1) {
		reasons[m[2]] = m[1]
	}
	filter := "protocol == 2048" // ETH_P_IP
	for _, r := range benignDrops {
		if n, ok := reasons[r]; ok {
			filter += " && reason != " + n
		}
	}
	return filter
}

func (dt *dropTrace) write(path, value string) error {
	return os.WriteFile(path, []byte(value), 0)
}

// close stops the tracing and removes the instance (and the tracefs
// mounted for it).
func (dt *dropTrace) close() {
	dt.once.Do(func() {
		if dt.instance != "" {
			_ = dt.write(filepath.Join(dt.instance, "events/skb/kfree_skb/enable"), "0")
			// The reader may hold the trace open a moment longer.
			for range 50 {
				if err := os.Remove(dt.instance); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if dt.unmount != "" {
			_ = syscall.Unmount(dt.unmount, 0)
			_ = os.Remove(dt.unmount)
		}
	})
}

// wallMarker starts the marker that pairs the trace's clock with the wall
// clock: "<marker> <Unix nanoseconds>".
const wallMarker = "servicegroup-wall"

// dropParser turns the lines of the trace into dropEvents, once the wall
// marker has set the clock; the events before it wait for it.
type dropParser struct {
	offset  time.Duration // wall minus trace clock
	timed   bool
	cur     *dropRecord
	pending []*dropRecord
}

type dropRecord struct {
	at        time.Duration // on the trace's clock
	task      string
	reason    string
	location  string
	functions []string // the call chain, innermost first
}

// traceLine is a line of trace_pipe: task-pid, CPU, flags, the trace's
// time, then what was traced.
var traceLine = regexp.MustCompile(`^\s*(.*?)\s+\[\d+\]\s+\S+\s+(\d+)\.(\d+): (.*)$`)

// kfreeSkb is the kfree_skb event's text.
var kfreeSkb = regexp.MustCompile(`^kfree_skb: .*location=(\S+) reason: (\S+)`)

// line reads one line of the trace and returns the events it completed.
func (p *dropParser) line(l string) []string {
	if fn, ok := strings.CutPrefix(strings.TrimSpace(l), "=> "); ok {
		if p.cur != nil {
			p.cur.functions = append(p.cur.functions, fn)
		}
		return nil
	}
	m := traceLine.FindStringSubmatch(l)
	if m == nil {
		return nil
	}
	sec, _ := strconv.ParseInt(m[2], 10, 64)
	frac, _ := strconv.ParseFloat("0."+m[3], 64)
	at := time.Duration(sec)*time.Second + time.Duration(frac*float64(time.Second))
	what := m[4]
	if what == "<stack trace>" {
		return nil // the lines after it belong to the event before it
	}
	out := p.flush()
	if rest, ok := strings.CutPrefix(what, "tracing_mark_write: "+wallMarker+" "); ok {
		if ns, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil && !p.timed {
			p.offset, p.timed = time.Duration(ns)-at, true
			for _, r := range p.pending {
				out = append(out, p.format(r))
			}
			p.pending = nil
		}
		return out
	}
	if k := kfreeSkb.FindStringSubmatch(what); k != nil {
		p.cur = &dropRecord{at: at, task: m[1], location: k[1], reason: k[2]}
	}
	return out
}

// flush completes the event being read, if any.
func (p *dropParser) flush() []string {
	r := p.cur
	p.cur = nil
	if r == nil {
		return nil
	}
	if !p.timed {
		p.pending = append(p.pending, r)
		return nil
	}
	return []string{p.format(r)}
}

// format: "kernel 13:44:04.035123 <task> <reason> at <function> via <hook
// or stage>, <what sent it>" (dropEvent).
func (p *dropParser) format(r *dropRecord) string {
	wall := time.Unix(0, int64(r.at+p.offset)).UTC().Format("15:04:05.000000")
	return "kernel " + wall + " " + r.task + " " + dropEvent(r.reason, r.location, r.functions)
}

// senders name what a call chain says sent the packet, outermost first.
var senders = []struct{ function, what string }{
	{"tcp_connect", "a SYN sent"},
	{"tcp_retransmit_timer", "a retransmission"},
	{"udp_sendmsg", "a datagram sent"},
	{"tcp_sendmsg_locked", "TCP data sent"},
	{"__icmp_send", "an ICMP error sent"},
	{"net_rx_action", "received"},
}

// dropEvent: "<reason> at <function> via <stage>, <sender>": the stage is
// the function that ran the netfilter hook (ip_forward: FORWARD, ip_rcv:
// PREROUTING, __ip_local_out: OUTPUT, ip_output: POSTROUTING,
// ip_local_deliver: INPUT, br_nf_*: the bridge's) when a rule dropped it,
// else the function that freed it.
func dropEvent(reason, location string, functions []string) string {
	fn := trimOffset(location)
	via := fn
	for i, f := range functions {
		if trimOffset(f) == "nf_hook_slow" && i+1 < len(functions) {
			via = trimOffset(functions[i+1])
			break
		}
	}
	from := ""
	for _, s := range senders {
		if slices.ContainsFunc(functions, func(f string) bool { return trimOffset(f) == s.function }) {
			from = ", " + s.what
			break
		}
	}
	return reason + " at " + fn + " via " + via + from
}

func trimOffset(f string) string {
	if i := strings.IndexByte(f, '+'); i > 0 {
		return f[:i]
	}
	return f
}

// dropsDuring: the lines of a drop trail whose kernel time lies within
// [from, to] (times of day, "15:04:05.000"), identical events (task aside)
// counted once with their first and last time, in order of first time.
func dropsDuring(trail, from, to string) []string {
	type seen struct {
		first, last string
		n           int
	}
	var order []string
	counts := map[string]*seen{}
	for _, l := range strings.Split(trail, "\n") {
		if strings.Contains(l, "kernel drops not followed") {
			order = append(order, l)
			counts[l] = &seen{n: 1}
			continue
		}
		_, rest, ok := strings.Cut(l, " kernel ")
		if !ok {
			continue
		}
		at, ev, ok := strings.Cut(rest, " ")
		if !ok || len(at) < len(from) || at[:len(from)] < from || at[:len(from)] > to {
			continue
		}
		// Without the task: the same drop from another task is the same event.
		if _, after, ok := strings.Cut(ev, " "); ok {
			ev = after
		}
		s, ok := counts[ev]
		if !ok {
			s = &seen{first: at}
			counts[ev] = s
			order = append(order, ev)
		}
		s.last, s.n = at, s.n+1
	}
	var out []string
	for _, ev := range order {
		s := counts[ev]
		switch {
		case s.first == "":
			out = append(out, ev)
		case s.n == 1:
			out = append(out, s.first+" "+ev)
		default:
			out = append(out, fmt.Sprintf("%s-%s %dx %s", s.first, s.last, s.n, ev))
		}
	}
	return out
}
