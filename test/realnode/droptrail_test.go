package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Lines of trace_pipe as this kernel (6.18) writes them: the wall marker,
// a UDP datagram REJECTed in a node's FORWARD chain on its way from a pod,
// with the stack trace of the drop.
const dropTraceLines = `      dropcap.sh-7090    [000] ...1. 22826.071187: tracing_mark_write: servicegroup-wall 1796677478924732976
          prober-11174   [000] ..s2. 22826.248000: kfree_skb: skbaddr=00000000a3a3ad81 rx_sk=0000000000000000 protocol=2048 location=nft_do_chain+0x46f/0x690 reason: NETFILTER_DROP
          prober-11174   [000] ..s2. 22826.248004: <stack trace>
 => trace_event_raw_event_kfree_skb
 => sk_skb_reason_drop
 => nft_do_chain
 => nft_do_chain_ipv4
 => nf_hook_slow
 => ip_forward
 => ip_sabotage_in
 => nf_hook_slow
 => ip_rcv
 => br_nf_pre_routing
 => br_handle_frame
 => net_rx_action
 => __dev_queue_xmit
 => ip_finish_output2
 => udp_send_skb
 => udp_sendmsg
          <idle>-0       [001] ..s1. 22827.000100: kfree_skb: skbaddr=000000009775fd96 rx_sk=0000000000000000 protocol=2048 location=ip_rcv_finish_core+0x260/0x470 reason: NOT_SPECIFIED`

func TestDropParser(t *testing.T) {
	var p dropParser
	var got []string
	// An event before the marker waits for it.
	early := `          prober-1       [000] ..s2. 22826.000000: kfree_skb: skbaddr=0 rx_sk=0 protocol=2048 location=neigh_invalidate+0x10/0x20 reason: NEIGH_FAILED`
	for _, l := range append([]string{early}, strings.Split(dropTraceLines, "\n")...) {
		got = append(got, p.line(l)...)
	}
	got = append(got, p.flush()...)
	// 1796677478.924732976 is 2026-12-07 21:04:38.924732976 UTC on the trace's 22826.071187.
	want := []string{
		"kernel 21:04:38.853545 prober-1 NEIGH_FAILED at neigh_invalidate via neigh_invalidate",
		"kernel 21:04:39.101545 prober-11174 NETFILTER_DROP at nft_do_chain via ip_forward, a datagram sent",
		"kernel 21:04:39.853645 <idle>-0 NOT_SPECIFIED at ip_rcv_finish_core via ip_rcv_finish_core",
	}
	if !slices.Equal(got, want) {
		t.Errorf("parsed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDropEvent(t *testing.T) {
	for _, c := range []struct {
		functions []string
		want      string
	}{
		// A SYN dropped by a rule of the client node's FORWARD chain.
		{[]string{"sk_skb_reason_drop+0x5/0x10", "nft_do_chain", "nf_hook_slow", "ip_forward+0x1/0x2", "ip_rcv", "tcp_connect", "tcp_v4_connect"},
			"NETFILTER_DROP at nft_do_chain via ip_forward, a SYN sent"},
		// Its retransmission, on the OUTPUT chain.
		{[]string{"nft_do_chain", "nf_hook_slow", "__ip_local_out", "tcp_retransmit_skb", "tcp_retransmit_timer"},
			"NETFILTER_DROP at nft_do_chain via __ip_local_out, a retransmission"},
		// No stack: where it was freed is all there is.
		{nil, "NETFILTER_DROP at nft_do_chain via nft_do_chain"},
	} {
		if got := dropEvent("NETFILTER_DROP", "nft_do_chain+0x46f/0x690", c.functions); got != c.want {
			t.Errorf("dropEvent(%q) = %q, want %q", c.functions, got, c.want)
		}
	}
}

func TestDropsDuring(t *testing.T) {
	trail := `21:04:40.000 kernel 21:04:38.900000 prober-1 NEIGH_FAILED at neigh_invalidate via neigh_invalidate
21:04:40.000 kernel 21:04:39.101545 prober-2 NETFILTER_DROP at nft_do_chain via ip_forward, a SYN sent
21:04:41.000 kernel 21:04:40.102000 ksoftirqd/0-14 NETFILTER_DROP at nft_do_chain via ip_forward, a SYN sent
21:04:43.000 kernel 21:04:42.103000 prober-2 NETFILTER_DROP at nft_do_chain via ip_forward, a SYN sent
21:04:43.000 kernel 21:04:42.200000 <idle>-0 NO_SOCKET at __udp4_lib_rcv via __udp4_lib_rcv, received
21:04:50.000 kernel 21:04:49.000000 prober-2 NETFILTER_DROP at nft_do_chain via ip_forward, a SYN sent`
	got := dropsDuring(trail, "21:04:39.000", "21:04:42.500")
	want := []string{
		"21:04:39.101545-21:04:42.103000 3x NETFILTER_DROP at nft_do_chain via ip_forward, a SYN sent",
		"21:04:42.200000 NO_SOCKET at __udp4_lib_rcv via __udp4_lib_rcv, received",
	}
	if !slices.Equal(got, want) {
		t.Errorf("dropsDuring =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := dropsDuring("21:04:40.000 kernel drops not followed: no tracefs", "21:04:39.000", "21:04:42.500"); len(got) != 1 || !strings.Contains(got[0], "not followed") {
		t.Errorf("a follower that could not start: %q, want its reason", got)
	}
}

func TestDropFilter(t *testing.T) {
	format := `print fmt: "skbaddr=%p reason: %s", __print_symbolic(REC->reason, { 2, "NOT_SPECIFIED" }, { 33, "TCP_OLD_DATA" }, { 41, "TCP_OLD_SEQUENCE" }, { 58, "NEIGH_FAILED" })`
	if got, want := dropFilter(format), "protocol == 2048 && reason != 33 && reason != 41"; got != want {
		t.Errorf("dropFilter = %q, want %q", got, want)
	}
}

// TestFollowDrops follows this kernel's drops while a datagram goes to a
// loopback port nothing listens on: the kernel drops it (NO_SOCKET).
func TestFollowDrops(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("tracing the kernel's drops needs root")
		}
		t.Skip("tracing the kernel's drops needs root")
	}
	tr := followDrops(context.Background())
	// Nothing listens on the port of a socket just closed.
	ln, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.LocalAddr().String()
	ln.Close()
	var lines string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		c, err := net.Dial("udp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("lost"))
		c.Close()
		time.Sleep(200 * time.Millisecond)
		tr.mu.Lock()
		lines = strings.Join(tr.lines, "\n")
		tr.mu.Unlock()
		if strings.Contains(lines, "NO_SOCKET at __udp4_lib_rcv via __udp4_lib_rcv, a datagram sent") {
			break
		}
	}
	tr.stop()
	if !strings.Contains(lines, "NO_SOCKET at __udp4_lib_rcv via __udp4_lib_rcv, a datagram sent") {
		t.Fatalf("no drop of a datagram to %s in the trail:\n%s", addr, lines)
	}
	// Neither its ftrace instance (which would trace on) nor its tracefs
	// mount is left behind: look through a tracefs of the test's own.
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mounts), "servicegroup-tracefs-") {
		t.Errorf("a tracefs mount left behind (%v)", err)
	}
	dir := t.TempDir()
	if err := syscall.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(dir, 0)
	entries, err := os.ReadDir(filepath.Join(dir, "instances"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("servicegroup-%d-", os.Getpid())) {
			t.Errorf("ftrace instance %s left behind", e.Name())
		}
	}
}

func TestSynWindow(t *testing.T) {
	// A request gives up after probe.RequestTimeout (3 s): its first SYN
	// went out then, half a second of slack before it.
	if from, to := synWindow("20:50:08.993"); from != "20:50:05.493" || to != "20:50:08.993" {
		t.Errorf("synWindow = %s, %s, want 20:50:05.493, 20:50:08.993", from, to)
	}
}
