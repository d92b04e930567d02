package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testcoredns"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

// A handover as the node's DaemonSet does it in the host network: the new
// CoreDNS binds the same address and port beside the old one (SO_REUSEPORT,
// the kernel spreads datagrams over both sockets by the sender's address and
// port), then the old one gets SIGTERM and, after its lameduck, stops.
// Datagrams the kernel gave the old socket and the old server had not read
// when it closed the socket are lost. Stop keeps the socket open, unread,
// while the queries it is still answering finish (up to 5 s): a slow
// query in flight (here `erratic`'s 3 s delay; on a node, the new
// CoreDNS's `loop` probe, which the kernel may give the old process, forwarded
// to an upstream that does not answer; a stalled process does the same)
// widens that window from microseconds to seconds, so every handover loses
// queries unless the old socket leaves the kernel's choice before it stops
// reading.
const handoverCorefile = `slow.test:{{PORT}} {
    bind {{ADDR}}
    erratic {
        delay 1 3s
    }
}
.:{{PORT}} {
    bind {{ADDR}}
    health 127.0.0.1:{{HEALTH}} {
        lameduck 1s
    }
    ready 127.0.0.1:{{READY}}
    template IN A probe.test {
        answer "{{ .Name }} 5 IN A {{ANSWER}}"
    }
}
`

// TestHandoverLosesNoQuery runs handovers between real CoreDNS processes of
// this build (SERVICEGROUP_HANDOVER_ROUNDS of them, default 1) while a
// client sends a query every 10 ms, each from a new socket (another source
// port: either process may get it), and slow queries keep the old server
// busy; no query may go unanswered. SERVICEGROUP_HANDOVER_SLOW=0 leaves the
// slow queries out (the plain race, for measuring).
func TestHandoverLosesNoQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs CoreDNS")
	}
	rounds := 1
	if s := os.Getenv("SERVICEGROUP_HANDOVER_ROUNDS"); s != "" {
		var err error
		if rounds, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	slow := os.Getenv("SERVICEGROUP_HANDOVER_SLOW") != "0"
	bin := testbin.Path(t, "coredns")
	addr := "127.0.0.1"
	port := testcoredns.FreePort(t)
	target := net.JoinHostPort(addr, strconv.Itoa(port))
	start := func(gen int) *testcoredns.Process {
		ready := testcoredns.FreePort(t)
		conf := strings.NewReplacer("{{PORT}}", strconv.Itoa(port), "{{ADDR}}", addr,
			"{{HEALTH}}", strconv.Itoa(testcoredns.FreePort(t)), "{{READY}}", strconv.Itoa(ready),
			"{{ANSWER}}", answerOf(gen)).Replace(handoverCorefile)
		return testcoredns.Start(t, bin, conf, fmt.Sprintf("http://127.0.0.1:%d/ready", ready))
	}

	old := start(0)
	var sent, lost atomic.Int64
	var answeredBy sync.Map // answer -> *atomic.Int64
	var inflight sync.WaitGroup
	stop := make(chan struct{})
	var loops sync.WaitGroup
	// The probe: one query every 10 ms, each in its own goroutine (a lost
	// one does not hold the next back), "lost" when no answer came within
	// 10 s (a dropped datagram is never answered; a stall of 10 s is not
	// what this test measures).
	loops.Go(func() {
		c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sent.Add(1)
			inflight.Go(func() {
				m := new(dns.Msg)
				m.SetQuestion("probe.test.", dns.TypeA)
				r, _, err := c.Exchange(m, target)
				if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
					lost.Add(1)
					t.Logf("query at %s: %v %v", time.Now().Format(time.StampMilli), err, r)
					return
				}
				a := r.Answer[0].(*dns.A).A.String()
				n, _ := answeredBy.LoadOrStore(a, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			})
		}
	})
	if slow {
		// Slow queries, fire and forget, each from its own socket.
		loops.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			m := new(dns.Msg)
			m.SetQuestion("slow.test.", dns.TypeA)
			q, err := m.Pack()
			if err != nil {
				t.Error(err)
				return
			}
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if c, err := net.Dial("udp", target); err == nil {
					c.Write(q)
					c.Close()
				}
			}
		})
	}

	for gen := 1; gen <= rounds; gen++ {
		next := start(gen)
		if err := old.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-old.Done:
		case <-time.After(testwait.Floor):
			t.Fatalf("round %d: the old CoreDNS did not exit within %s of SIGTERM", gen, testwait.Floor)
		}
		old = next
	}
	time.Sleep(500 * time.Millisecond) // queries to the last one alone, too
	close(stop)
	loops.Wait()
	inflight.Wait()
	var by []string
	answeredBy.Range(func(k, v any) bool {
		by = append(by, fmt.Sprintf("%s: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("%d handovers (slow queries: %v): %d queries, %d lost; answered by %v", rounds, slow, sent.Load(), lost.Load(), by)
	if lost.Load() > 0 {
		t.Errorf("%d of %d queries lost over %d handovers", lost.Load(), sent.Load(), rounds)
	}
}

// answerOf is the address the gen-th CoreDNS answers: which process answered
// shows in the log.
func answerOf(gen int) string { return fmt.Sprintf("192.0.2.%d", gen%250+1) }
