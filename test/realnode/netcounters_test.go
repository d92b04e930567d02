package realnode

import (
	"slices"
	"strings"
	"testing"
)

func TestConntrackCounters(t *testing.T) {
	stat := `entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
0000001a  00000000 00000005 00000000 00000002 00000000 00000000 00000000 00000000 00000001 00000000 00000000 00000000  00000000 00000000 00000000 00000000
0000001a  00000000 00000007 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000010
`
	got := conntrackCounters(stat)
	want := []string{"conntrack invalid=3", "conntrack insert_failed=1", "conntrack search_restart=16"}
	if !slices.Equal(got, want) {
		t.Errorf("conntrackCounters = %q, want %q", got, want)
	}
}

func TestLinkDrops(t *testing.T) {
	js := `[{"ifname":"lo","stats64":{"rx":{"bytes":1,"packets":1,"errors":0,"dropped":0},"tx":{"bytes":1,"packets":1,"errors":0,"dropped":0}}},
{"ifname":"cni0","stats64":{"rx":{"bytes":9,"packets":9,"errors":0,"dropped":4,"missed":0},"tx":{"bytes":9,"packets":9,"errors":0,"dropped":0,"carrier_errors":2}}}]`
	got := linkDrops([]byte(js))
	want := []string{"cni0 rx dropped=4", "cni0 tx carrier_errors=2"}
	if !slices.Equal(got, want) {
		t.Errorf("linkDrops = %q, want %q", got, want)
	}
}

func TestUnansweredFlows(t *testing.T) {
	failures := []string{
		`13:44:04.035 error=Get "http://10.96.44.158/": context deadline exceeded (Client.Timeout exceeded while awaiting headers) connected=no from=10.244.2.2:50950 tcp=SYN_SENT syns=3`,
		`13:44:05.100 error=Get "http://10.96.44.158/": dial tcp 10.96.44.158:80: connect: connection refused connected=no`,
		`13:44:06.000 error=Get "http://10.96.44.158/": context deadline exceeded connected=1ms from=10.244.2.2:50960 wrote=2ms`,
		`13:44:04.035 error=again connected=no from=10.244.2.2:50950 tcp=SYN_SENT syns=3`,
		`13:44:09.000 error=timeout connected=no from=10.244.1.7:40000 tcp=SYN_SENT syns=2`,
	}
	got := unansweredFlows(failures)
	want := []synFlow{{"10.244.2.2", "50950", "13:44:04.035"}, {"10.244.1.7", "40000", "13:44:09.000"}}
	if !slices.Equal(got, want) {
		t.Errorf("unansweredFlows = %q, want %q", got, want)
	}
}

func TestFlowEvent(t *testing.T) {
	for _, c := range []struct {
		line, want string
		ok         bool
	}{
		{"[1796319045.653189]\t    [NEW] tcp      6 120 SYN_SENT src=10.244.2.2 dst=10.96.44.158 sport=50950 dport=80 [UNREPLIED] src=10.244.0.5 dst=10.0.0.3 sport=8080 dport=50950",
			"kernel 17:30:45.653189 [NEW] tcp 6 120 SYN_SENT src=10.244.2.2 dst=10.96.44.158 sport=50950 dport=80 [UNREPLIED] src=10.244.0.5 dst=10.0.0.3 sport=8080 dport=50950", true},
		{"[1796319045.000001]\t    [NEW] tcp      6 120 SYN_SENT src=10.0.0.3 dst=10.244.0.5 sport=50950 dport=8080 [UNREPLIED] src=10.244.0.5 dst=10.0.0.3 sport=8080 dport=50950",
			"kernel 17:30:45.000001 [NEW] tcp 6 120 SYN_SENT src=10.0.0.3 dst=10.244.0.5 sport=50950 dport=8080 [UNREPLIED] src=10.244.0.5 dst=10.0.0.3 sport=8080 dport=50950", true},
		// The apiserver's port, and a port only beginning like echoPort.
		{"[1796319045.653189]\t    [NEW] tcp      6 120 SYN_SENT src=10.0.0.3 dst=10.0.0.1 sport=40000 dport=6443 [UNREPLIED] src=10.0.0.1 dst=10.0.0.3 sport=6443 dport=40000", "", false},
		{"[1796319045.653189]\t    [NEW] tcp      6 120 SYN_SENT src=10.0.0.3 dst=10.0.0.1 sport=40000 dport=80801 [UNREPLIED] src=10.0.0.1 dst=10.0.0.3 sport=80801 dport=40000", "", false},
		{"conntrack v1.4.7 (conntrack-tools): 1 flow events have been shown.", "", false},
		// A Service request the client's node did not translate: the reply
		// would come from the Service address itself (the node's
		// masquerade still rewrote the client's side).
		{"[1796319045.653189]\t    [NEW] tcp      6 120 SYN_SENT src=10.244.0.2 dst=10.96.96.117 sport=35126 dport=80 [UNREPLIED] src=10.96.96.117 dst=10.250.77.10 sport=80 dport=35126",
			"kernel 17:30:45.653189 [NEW] tcp 6 120 SYN_SENT src=10.244.0.2 dst=10.96.96.117 sport=35126 dport=80 [UNREPLIED] src=10.96.96.117 dst=10.250.77.10 sport=80 dport=35126 (not translated: this namespace sent the Service address on as it was)", true},
		// Translated Service flows to other ports (the apiserver's), and
		// an untranslated flow to an address outside the Service range.
		{"[1796319045.653189]\t    [NEW] tcp      6 120 SYN_SENT src=10.244.0.2 dst=10.96.0.1 sport=35126 dport=443 [UNREPLIED] src=10.250.77.1 dst=10.244.0.2 sport=22445 dport=35126", "", false},
		{"[1796319045.653189]\t    [NEW] tcp      6 120 SYN_SENT src=10.244.0.2 dst=10.97.0.1 sport=35126 dport=80 [UNREPLIED] src=10.97.0.1 dst=10.244.0.2 sport=80 dport=35126", "", false},
		// The same address but another port answering: translated.
		{"[1796319045.653189]\t    [NEW] tcp      6 120 SYN_SENT src=10.244.0.2 dst=10.96.96.117 sport=35126 dport=80 [UNREPLIED] src=10.96.96.117 dst=10.244.0.2 sport=81 dport=35126", "", false},
	} {
		got, ok := flowEvent(c.line)
		if got != c.want || ok != c.ok {
			t.Errorf("flowEvent(%q) = %q, %v; want %q, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

func TestFlowLines(t *testing.T) {
	trail := `17:30:45.700 kernel 17:30:45.653189 [NEW] tcp 6 120 SYN_SENT src=10.244.2.2 dst=10.96.44.158 sport=50950 dport=80 [UNREPLIED] src=10.244.0.5 dst=10.0.0.3 sport=8080 dport=50950
17:30:45.800 kernel 17:30:45.750000 [NEW] tcp 6 120 SYN_SENT src=10.244.2.2 dst=10.96.44.158 sport=509501 dport=80 [UNREPLIED] src=10.244.0.5 dst=10.0.0.3 sport=8080 dport=509501
17:30:45.900 kernel 17:30:45.850000 [NEW] tcp 6 120 SYN_SENT src=10.244.2.2 dst=10.96.44.158 sport=40000 dport=80 [UNREPLIED] src=10.244.0.5 dst=10.0.0.3 sport=8080 dport=50950
17:31:00.000 conntrack -E lost events (ENOBUFS): this trail may miss flows`
	got := flowLines(trail, "50950")
	if len(got) != 2 || !strings.Contains(got[0], "sport=50950 dport=80") || !strings.Contains(got[1], "ENOBUFS") {
		t.Errorf("flowLines = %q, want the first line and the follower's note", got)
	}
}

func TestStackCounters(t *testing.T) {
	text := `Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes
Ip: 1 64 100 0 0 7 0 2 90 80 0 3
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs OutMsgs OutErrors OutRateLimitGlobal OutRateLimitHost OutDestUnreachs
Icmp: 4 0 0 0 4 0 0 6 4
TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPBacklogDrop
TcpExt: 0 5 5 0
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
`
	got := stackCounters(text)
	want := []string{"Ip InDiscards=2", "Ip OutNoRoutes=3", "Icmp OutDestUnreachs=4", "Icmp OutRateLimitHost=6", "TcpExt ListenOverflows=5", "TcpExt ListenDrops=5"}
	if !slices.Equal(got, want) {
		t.Errorf("stackCounters = %q, want %q", got, want)
	}
}

func TestRuleDrops(t *testing.T) {
	save := `*nat
[0:0] -A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -j KUBE-SVC-NPX46M4PTMTKRN6Y
COMMIT
*filter
:INPUT ACCEPT [40:2400]
:FORWARD DROP [4:240]
:OUTPUT DROP [0:0]
:KUBE-FORWARD - [0:0]
[3:180] -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP
[0:0] -A KUBE-SERVICES -d 10.96.1.2/32 -p tcp -m comment --comment "default/empty has no endpoints" -j REJECT --reject-with icmp-port-unreachable
[2:120] -A KUBE-EXTERNAL-SERVICES -d 10.0.0.3/32 -p tcp -j REJECT --reject-with icmp-port-unreachable
[9:900] -A KUBE-FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`
	got := ruleDrops(save)
	want := []string{
		"filter FORWARD policy DROP: 4 packets",
		"filter -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP: 3 packets",
		"filter -A KUBE-EXTERNAL-SERVICES -d 10.0.0.3/32 -p tcp -j REJECT --reject-with icmp-port-unreachable: 2 packets",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ruleDrops = %q, want %q", got, want)
	}
}

func TestFlowCounts(t *testing.T) {
	got := flowCounts(map[string]string{"node1": "a\nb", "fabric hub": "", "node0": "a"})
	if want := "fabric hub 0, node0 1, node1 2"; got != want {
		t.Errorf("flowCounts = %q, want %q", got, want)
	}
}

func TestNeighbourCounters(t *testing.T) {
	stat := `entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls
00000002 00000002 00000000 00000000   00000000 00000000 00000001   00000000         00000000         00000103         00000000       00000002            00000000
00000002 00000000 00000000 00000000   00000006 00000002 00000002   00000000         00000000         00000000         00000000       0000000a            00000000
`
	got := perCPULosses(stat, neighbourLosses, "")
	want := []string{"res_failed=3", "unresolved_discards=12"}
	if !slices.Equal(got, want) {
		t.Errorf("perCPULosses(arp_cache) = %q, want %q", got, want)
	}
}

func TestUnresolvedNeighbours(t *testing.T) {
	js := `[{"dst":"10.250.3.11","dev":"eth0","lladdr":"02:fc:00:00:00:05","state":["STALE"]},{"dst":"10.244.0.7","dev":"cni0","state":["INCOMPLETE"]},{"dst":"fd00::1","dev":"eth0","state":["FAILED"]},{"dst":"10.244.0.3","dev":"cni0","lladdr":"aa:bb:cc:dd:ee:ff","state":["REACHABLE"]}]`
	got := unresolvedNeighbours([]byte(js))
	want := []string{"neighbour 10.244.0.7 cni0 INCOMPLETE", "neighbour fd00::1 eth0 FAILED"}
	if !slices.Equal(got, want) {
		t.Errorf("unresolvedNeighbours = %q, want %q", got, want)
	}
	if got := unresolvedNeighbours([]byte("not json")); len(got) != 1 || !strings.HasPrefix(got[0], "neighbours: ") {
		t.Errorf("unresolvedNeighbours(not json) = %q, want the error", got)
	}
}

func TestLocalAddresses(t *testing.T) {
	trie := `Main:
  +-- 0.0.0.0/0 3 0 5
     +-- 10.244.0.0/24 2 0 2
        |-- 10.244.0.0
           /24 link UNICAST
        |-- 10.244.0.5
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
     +-- 127.0.0.0/8 2 0 2
        |-- 127.0.0.1
           /32 host LOCAL
        |-- 10.244.0.5
           /32 host LOCAL
        |-- 10.244.0.255
           /32 link BROADCAST
`
	if got, want := localAddresses(trie), []string{"10.244.0.5"}; !slices.Equal(got, want) {
		t.Errorf("localAddresses = %q, want %q", got, want)
	}
}

func TestSoftnetDropped(t *testing.T) {
	stat := `0000000d 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000
00007be1 00000003 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001
00001000 0000000a 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000002
`
	if got := softnetDropped(stat); got != 13 {
		t.Errorf("softnetDropped = %d, want 13", got)
	}
}
