package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
	"github.com/servicegroup/servicegroup/test/realnode/probe"
)

// What the kernel counted as lost in a node's network namespace, for a
// step that lost a request or a query: a Service request whose connection
// was never made went missing between the client and the pod (conntrack
// refusing an entry, a rule dropping it, no route, a link
// dropping), one made but unanswered points at
// the server instead (the prober's detail says which, probe/trace.go).

// conntrackLosses are the conntrack statistics that count packets lost or
// turned away (the others count lookups and entries).
var conntrackLosses = []string{"invalid", "insert_failed", "drop", "early_drop", "icmp_error", "clashres", "search_restart"}

// stackLosses are the counters of /proc/net/snmp and /proc/net/netstat
// that count a packet the IP or TCP stack dropped or turned away: a full
// listen queue, no route, a discard, an ICMP unreachable sent or received,
// or one not sent for the kernel's ICMP rate limits (a REJECT's answer
// withheld: the client sees a dropped packet, not a refusal).
var stackLosses = []string{
	"Ip InDiscards", "Ip InAddrErrors", "Ip OutDiscards", "Ip OutNoRoutes", "IpExt InNoRoutes",
	"Icmp InDestUnreachs", "Icmp OutDestUnreachs", "Icmp OutRateLimitGlobal", "Icmp OutRateLimitHost",
	"TcpExt ListenOverflows", "TcpExt ListenDrops", "TcpExt TCPBacklogDrop", "TcpExt TCPReqQFullDrop",
}

// netNamespace is a network namespace of the test's, by the name a report
// gives it.
type netNamespace struct {
	name string
	ns   *harness.NetNS
}

// netNamespaces: the fabric's hub, then each node's.
func netNamespaces(nodes []*Node, hub *harness.NetNS) []netNamespace {
	nss := []netNamespace{{"fabric hub", hub}}
	for _, n := range nodes {
		nss = append(nss, netNamespace{n.Name, n.Net.NS})
	}
	return nss
}

// netCounters: per network namespace (the nodes', and the fabric's hub
// bridging them), the non-zero loss counters so far: conntrack's summed
// over the CPUs, the IP and TCP stack's (discards, no route, full listen queues), the
// packets each dropping or rejecting iptables rule matched and each link's
// drops; "none" when all are zero. The pods' own namespaces (a listen
// queue overflowing in a server) are not read.
func netCounters(ctx context.Context, nodes []*Node, hub *harness.NetNS) string {
	var b strings.Builder
	// Each source: what the report calls it, the command that reads it in
	// the namespace, and what of its output counts a loss.
	sources := []struct {
		what  string
		cmd   []string
		parse func(string) []string
	}{
		{"conntrack", []string{"cat", "/proc/net/stat/nf_conntrack"}, conntrackCounters},
		{"stack", []string{"cat", "/proc/net/snmp", "/proc/net/netstat"}, stackCounters},
		{"iptables", []string{"iptables-save", "-c"}, ruleDrops},
		{"links", []string{"ip", "-j", "-s", "link", "show"}, func(out string) []string { return linkDrops([]byte(out)) }},
		{"neighbours", []string{"ip", "-j", "neigh", "show"}, func(out string) []string { return unresolvedNeighbours([]byte(out)) }},
	}
	for _, n := range netNamespaces(nodes, hub) {
		var found []string
		for _, src := range sources {
			out, err := n.ns.Run(ctx, src.cmd[0], src.cmd[1:]...)
			if err != nil {
				found = append(found, src.what+": "+err.Error())
			} else {
				found = append(found, src.parse(out)...)
			}
		}
		if len(found) == 0 {
			found = []string{"none"}
		}
		fmt.Fprintf(&b, "  %s: %s\n", n.name, strings.Join(found, ", "))
	}
	// The neighbour table is the kernel's, all namespaces together: a
	// packet queued for an address that never answered ARP is dropped
	// (unresolved_discards) without a namespace's counter moving.
	if stat, err := os.ReadFile("/proc/net/stat/arp_cache"); err == nil {
		found := perCPULosses(string(stat), neighbourLosses, "")
		if len(found) == 0 {
			found = []string{"none"}
		}
		fmt.Fprintf(&b, "  the kernel's neighbour table (every namespace): %s\n", strings.Join(found, ", "))
	}
	// So are the CPUs' backlogs, where a veth hands each packet to the
	// other end's namespace: full, they drop it.
	if stat, err := os.ReadFile("/proc/net/softnet_stat"); err == nil {
		fmt.Fprintf(&b, "  the CPUs' receive backlogs (every namespace): dropped=%d\n", softnetDropped(string(stat)))
	}
	fmt.Fprintf(&b, "  the echo servers' own namespaces: %s\n", echoServerCounters())
	return b.String()
}

// neighbourLosses are the columns of /proc/net/stat/arp_cache that count a
// packet or a resolution lost.
var neighbourLosses = []string{"res_failed", "unresolved_discards", "table_fulls", "forced_gc_runs"}

// perCPULosses reads a /proc/net/stat file (a header of names, then a line
// of hexadecimal counters per CPU) and returns the non-zero columns of
// losses, summed over the CPUs, as "<prefix><name>=<sum>".
func perCPULosses(stat string, losses []string, prefix string) []string {
	lines := strings.Split(strings.TrimSpace(stat), "\n")
	names := strings.Fields(lines[0])
	sums := make([]uint64, len(names))
	for _, l := range lines[1:] {
		for i, f := range strings.Fields(l) {
			if v, err := strconv.ParseUint(f, 16, 64); err == nil && i < len(sums) {
				sums[i] += v
			}
		}
	}
	var out []string
	for _, want := range losses {
		if i := slices.Index(names, want); i >= 0 && sums[i] > 0 {
			out = append(out, fmt.Sprintf("%s%s=%d", prefix, want, sums[i]))
		}
	}
	return out
}

// softnetDropped reads /proc/net/softnet_stat (a line of hexadecimal
// counters per CPU, the second the packets its full backlog dropped) and
// returns their sum.
func softnetDropped(stat string) uint64 {
	var sum uint64
	for _, l := range strings.Split(strings.TrimSpace(stat), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			if v, err := strconv.ParseUint(f[1], 16, 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// unresolvedNeighbours reads `ip -j neigh show` and returns each entry
// that is not resolved (INCOMPLETE, FAILED, PROBE: packets to it wait or
// are dropped) as "<address> <link> <state>".
func unresolvedNeighbours(js []byte) []string {
	var entries []struct {
		Dst   string   `json:"dst"`
		Dev   string   `json:"dev"`
		State []string `json:"state"`
	}
	if err := json.Unmarshal(js, &entries); err != nil {
		return []string{"neighbours: " + err.Error()}
	}
	var out []string
	for _, e := range entries {
		for _, s := range e.State {
			if s == "INCOMPLETE" || s == "FAILED" || s == "PROBE" {
				out = append(out, fmt.Sprintf("neighbour %s %s %s", e.Dst, e.Dev, s))
			}
		}
	}
	return out
}

// echoServerCounters: for each echo server process on the machine (the
// Services' pods), its network namespace's non-zero stackLosses (a full
// listen queue drops a SYN there), by its addresses; "none" when all are
// zero. /proc/PID/net is the process's namespace: no nsenter needed.
func echoServerCounters() string {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err.Error()
	}
	var found []string
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "echoserver" {
			continue
		}
		var text strings.Builder
		for _, f := range []string{"snmp", "netstat"} {
			b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "net", f))
			if err != nil {
				continue
			}
			text.Write(b)
		}
		if losses := stackCounters(text.String()); len(losses) > 0 {
			trie, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "net", "fib_trie"))
			found = append(found, fmt.Sprintf("pid %s (%s): %s", p.Name(), strings.Join(localAddresses(string(trie)), " "), strings.Join(losses, " ")))
		}
	}
	if len(found) == 0 {
		return "none"
	}
	return strings.Join(found, ", ")
}

// localAddresses reads /proc/net/fib_trie and returns the namespace's own
// addresses (the "/32 host LOCAL" leaves), loopback left out.
func localAddresses(trie string) []string {
	var out []string
	last := ""
	for _, l := range strings.Split(trie, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "|--":
			last = f[1]
		case strings.Contains(l, "/32 host LOCAL") && last != "" && !strings.HasPrefix(last, "127.") && !slices.Contains(out, last):
			out = append(out, last)
		}
	}
	return out
}

// conntrackCounters reads /proc/net/stat/nf_conntrack and returns the
// non-zero conntrackLosses as "conntrack <name>=<sum>".
func conntrackCounters(stat string) []string {
	if len(strings.Split(strings.TrimSpace(stat), "\n")) < 2 {
		return []string{"conntrack: no counters"}
	}
	return perCPULosses(stat, conntrackLosses, "conntrack ")
}

// stackCounters reads /proc/net/snmp and /proc/net/netstat (for each
// group, a line of names, then one of values, each starting "<group>:")
// and returns the non-zero stackLosses as "<group> <name>=<value>".
func stackCounters(text string) []string {
	values := map[string]string{}
	var names []string // the last header line's names, with its group
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		group := strings.TrimSuffix(f[0], ":")
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			names = append([]string{group}, f[1:]...)
			continue
		}
		if len(names) == 0 || names[0] != group {
			continue
		}
		for i, v := range f[1:] {
			if i+1 < len(names) {
				values[group+" "+names[i+1]] = v
			}
		}
	}
	var out []string
	for _, c := range stackLosses {
		if v, ok := values[c]; ok && v != "0" {
			out = append(out, c+"="+v)
		}
	}
	return out
}

// ruleDrop is a rule of `iptables-save -c` that drops or rejects, with the
// packets it has matched: "[packets:bytes] -A CHAIN ... -j DROP|REJECT".
var ruleDrop = regexp.MustCompile(`^\[(\d+):\d+\] (-A \S+ .*-j (?:DROP|REJECT)\b.*)$`)

// policyDrop is a built-in chain of `iptables-save -c` whose policy drops,
// with the packets the policy took: ":CHAIN DROP [packets:bytes]".
var policyDrop = regexp.MustCompile(`^:(\S+) DROP \[(\d+):\d+\]$`)

// ruleDrops reads `iptables-save -c` and returns each dropping or
// rejecting rule that has matched a packet as "<table> <rule>: <n>
// packets" (kube-proxy's drop of conntrack's INVALID packets, the REJECT of
// a Service without endpoints, ...), and each chain whose DROP policy took
// one as "<table> <chain> policy DROP: <n> packets".
func ruleDrops(save string) []string {
	var out []string
	table := ""
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "*") {
			table = strings.TrimPrefix(l, "*")
			continue
		}
		if m := ruleDrop.FindStringSubmatch(l); m != nil && m[1] != "0" {
			out = append(out, fmt.Sprintf("%s %s: %s packets", table, m[2], m[1]))
		}
		if m := policyDrop.FindStringSubmatch(l); m != nil && m[2] != "0" {
			out = append(out, fmt.Sprintf("%s %s policy DROP: %s packets", table, m[1], m[2]))
		}
	}
	return out
}

// linkDrops reads `ip -j -s link show` and returns each link's non-zero
// error and drop counters as "<link> rx dropped=<n>".
func linkDrops(js []byte) []string {
	var links []struct {
		Name  string `json:"ifname"`
		Stats struct {
			RX map[string]uint64 `json:"rx"`
			TX map[string]uint64 `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(js, &links); err != nil {
		return []string{"links: " + err.Error()}
	}
	var out []string
	for _, l := range links {
		for _, dir := range []struct {
			name  string
			stats map[string]uint64
		}{{"rx", l.Stats.RX}, {"tx", l.Stats.TX}} {
			for _, c := range []string{"errors", "dropped", "missed", "over_errors", "carrier_errors"} {
				if v := dir.stats[c]; v > 0 {
					out = append(out, fmt.Sprintf("%s %s %s=%d", l.Name, dir.name, c, v))
				}
			}
		}
	}
	return out
}

// unansweredFlow matches a failure detail of the prober's whose SYNs went
// unanswered (probe/trace.go): its local address names the flow.
var unansweredFlow = regexp.MustCompile(`^(\d\d:\d\d:\d\d\.\d{3}) .*from=(\d+\.\d+\.\d+\.\d+):(\d+) tcp=SYN_SENT`)

// synFlow is a request whose SYNs went unanswered: the client's address and
// port, and when the prober gave up on it (a time of day, "15:04:05.000").
type synFlow struct{ addr, port, at string }

// unansweredFlows: each failure whose SYNs went unanswered, in order, once
// each.
func unansweredFlows(failures []string) []synFlow {
	var out []synFlow
	for _, f := range failures {
		m := unansweredFlow.FindStringSubmatch(f)
		if m == nil || slices.ContainsFunc(out, func(s synFlow) bool { return s.addr == m[2] && s.port == m[3] }) {
			continue
		}
		out = append(out, synFlow{addr: m[2], port: m[3], at: m[1]})
	}
	return out
}

// synWindow: from the first SYN of a flow the prober gave up on at at (a
// request's whole time, and half a second of slack) to then.
func synWindow(at string) (from, to string) {
	end, err := time.Parse(timeOfDay, at)
	if err != nil {
		return at, at
	}
	return end.Add(-probe.RequestTimeout - 500*time.Millisecond).Format(timeOfDay), at
}

// conntrackFlows: for each flow whose SYNs went unanswered, the conntrack
// entries every namespace still holds for it (`conntrack -L`) and the new
// flows it saw during the step (events, by namespace: followNewFlows),
// both by the client's port, which the client's node keeps when it
// masquerades: which pod the client's node sent it to, and how far it got
// (an entry on the pod's node means the SYN arrived there). An unanswered
// SYN's entry lasts 120 s after its last retransmission, so an older
// flow's entries may be gone everywhere; its events stay. Then the
// packets the kernel dropped while its SYNs were sent (followDrops), where
// a SYN no namespace confirmed shows: the drops of SYNs sent (a SYN sent, a
// retransmission) at its times.
func conntrackFlows(ctx context.Context, nodes []*Node, hub *harness.NetNS, flows []synFlow, events map[string]string) string {
	var b strings.Builder
	for _, f := range flows {
		fmt.Fprintf(&b, "  from %s:%s:\n", f.addr, f.port)
		for _, n := range netNamespaces(nodes, hub) {
			out, err := n.ns.Run(ctx, "conntrack", "-L", "-p", "tcp", "--sport", f.port)
			var lines []string // the entries, without conntrack's count of them
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if l != "" && !strings.HasPrefix(l, "conntrack v") {
					lines = append(lines, l)
				}
			}
			entries := strings.Join(lines, "\n")
			switch {
			case err != nil && entries == "":
				entries = err.Error()
			case entries == "":
				entries = "none"
			}
			fmt.Fprintf(&b, "    %s: %s\n", n.name, strings.ReplaceAll(entries, "\n", "\n      "))
			if ev, ok := events[n.name]; ok {
				seen := strings.Join(flowLines(ev, f.port), "\n")
				if seen == "" {
					seen = "none"
				}
				fmt.Fprintf(&b, "    %s, new flows seen during the step: %s\n", n.name, strings.ReplaceAll(seen, "\n", "\n      "))
			}
		}
		if trail, ok := events[dropTrailKey]; ok {
			from, to := synWindow(f.at)
			drops := strings.Join(dropsDuring(trail, from, to), "\n")
			if drops == "" {
				drops = "none"
			}
			fmt.Fprintf(&b, "    the kernel's drops of IPv4 packets from %s to %s, any namespace: %s\n", from, to, strings.ReplaceAll(drops, "\n", "\n      "))
		}
	}
	return b.String()
}

// podAddresses: a namespace's pods, one line each with its node, address,
// phase and creation time, for the report of a flow that went unanswered
// (an address no pod has is a pod gone before the client's node knew).
func podAddresses(ctx context.Context, client kubernetes.Interface, namespace string) string {
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "  " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  %s on %s: %s %s, created %s\n", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase, p.CreationTimestamp.UTC().Format("15:04:05"))
	}
	return b.String()
}
