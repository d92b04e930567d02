package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// dnsServer answers A queries on 127.0.0.1 over UDP: names maps a name
// (without the final dot) to its addresses; any other name is NXDOMAIN.
func dnsServer(t *testing.T, names map[string][]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.TrimSuffix(q.Question[0].Name, ".")
		addrs, ok := names[name]
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		for _, a := range addrs {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(a)})
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// silentServer is a UDP socket that never answers (a lost datagram);
// asked gets a value for each datagram that reaches it (while it has room).
func silentServer(t *testing.T) (addr string, asked <-chan struct{}) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	arrived := make(chan struct{}, 16)
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	}()
	return pc.LocalAddr().String(), arrived
}

// TestQuery: a query succeeds only when the answer section is exactly the
// expected address; a failure names the status, the server and the
// answer, or the server that gave none; a silent server is given
// QueryTimeout, then the next one is asked.
func TestQuery(t *testing.T) {
	ctx := context.Background()
	good := dnsServer(t, map[string][]string{
		"probe.default.svc.cluster.local": {"10.96.0.5"},
		"two.default.svc.cluster.local":   {"10.244.0.1", "10.244.1.1"},
		"empty.default.svc.cluster.local": {},
	})
	host, port, _ := net.SplitHostPort(good)
	server := fmt.Sprintf("server=%s#%s(%s)", host, port, host)
	c := Config{Servers: []string{good}}
	for _, tc := range []struct {
		name, want string
		ok         bool
		detail     string
	}{
		{"probe.default.svc.cluster.local", "10.96.0.5", true, ""},
		{"probe.default.svc.cluster.local", "10.96.0.6", false, "status=NOERROR " + server + " answer=10.96.0.5"},
		{"two.default.svc.cluster.local", "10.244.0.1", false, "status=NOERROR " + server + " answer=10.244.0.1,10.244.1.1"},
		{"empty.default.svc.cluster.local", "10.244.0.1", false, "status=NOERROR " + server + " answer="},
		{"gone.default.svc.cluster.local", "10.244.0.1", false, "status=NXDOMAIN " + server + " answer="},
	} {
		// A wrong answer is an answer: never a timeout.
		if o := c.query(ctx, tc.name, tc.want); o.ok != tc.ok || o.detail != tc.detail || o.timedOut {
			t.Errorf("query %s (want %s) = %+v, want %v %q", tc.name, tc.want, o, tc.ok, tc.detail)
		}
	}

	silent, _ := silentServer(t)
	sh, sp, _ := net.SplitHostPort(silent)
	start := time.Now()
	o := Config{Servers: []string{silent}}.query(ctx, "probe.default.svc.cluster.local", "10.96.0.5")
	took := time.Since(start)
	if want := fmt.Sprintf("server=%s#%s error=timed out answer=", sh, sp); o.ok || o.detail != want || !o.timedOut {
		t.Errorf("silent server: %+v, want a timed-out failure %q", o, want)
	}
	if took < QueryTimeout || took > QueryTimeout+time.Second {
		t.Errorf("silent server: gave up after %s, want %s", took, QueryTimeout)
	}
	if o := (Config{Servers: []string{silent, good}}).query(ctx, "probe.default.svc.cluster.local", "10.96.0.5"); !o.ok {
		t.Errorf("silent server, then a good one: failed %q", o.detail)
	}
	// One server silent, the next answering wrongly: an answer came.
	if o := (Config{Servers: []string{silent, good}}).query(ctx, "gone.default.svc.cluster.local", "10.96.0.5"); o.ok || o.timedOut {
		t.Errorf("silent server, then NXDOMAIN: %+v, want a failure that is not a timeout", o)
	}
}

// TestQueryResolvConf: the name servers are the resolv.conf's, read at each
// query; none is a failure saying so.
func TestQueryResolvConf(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("search default.svc.cluster.local\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Config{ResolvConf: conf}
	if o := c.query(context.Background(), "probe", "10.96.0.5"); o.ok || o.timedOut || o.detail != "error=no nameserver in "+conf {
		t.Errorf("no nameserver: %+v", o)
	}
	if o := (Config{ResolvConf: conf + ".missing"}).query(context.Background(), "probe", "10.96.0.5"); o.ok || o.timedOut || !strings.HasPrefix(o.detail, "error=") {
		t.Errorf("no resolv.conf: %+v", o)
	}
}

// TestRequest: any answer below 400 is a success; an HTTP error fails with
// its status, a refused connection with the error; each request opens a
// connection of its own.
func TestRequest(t *testing.T) {
	var mu sync.Mutex
	status := []int{http.StatusOK, http.StatusFound, http.StatusServiceUnavailable}
	conns := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		conns[r.RemoteAddr] = true
		if status[0] == http.StatusFound {
			w.Header().Set("Location", "http://192.0.2.1/") // never followed
		}
		w.WriteHeader(status[0])
		status = status[1:]
	}))
	defer srv.Close()
	c := Config{RequestAddr: strings.TrimPrefix(srv.URL, "http://")}
	ctx := context.Background()
	for i, want := range []struct {
		ok     bool
		detail string
	}{{true, ""}, {true, ""}, {false, "status=503"}} {
		if o := c.svc(ctx); o.ok != want.ok || o.detail != want.detail || o.timedOut {
			t.Errorf("request %d: %+v, want %v %q", i, o, want.ok, want.detail)
		}
	}
	if len(conns) != 3 {
		t.Errorf("3 requests came on %d connections, want 3", len(conns))
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	if o := (Config{RequestAddr: refused}).svc(ctx); o.ok || o.timedOut || !strings.HasPrefix(o.detail, "error=") || !strings.Contains(o.detail, "connection refused") {
		t.Errorf("closed port: %+v, want a refused connection", o)
	}
	if o := (Config{RequestAddr: refused}).svc(ctx); !strings.HasSuffix(o.detail, " connected=no") {
		t.Errorf("closed port: detail %q, want it to say no connection was made", o.detail)
	}

	// Connected, never answered: the detail says when the connection was
	// made, from where, and that the request went out.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, unanswered, until the listener closes
		}
	}()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	o := (Config{RequestAddr: silent.Addr().String()}).svc(short)
	if o.ok || !o.timedOut || !regexp.MustCompile(` connected=\d+(\.\d+)?m?s from=127\.0\.0\.1:\d+ wrote=\d+(\.\d+)?[µm]?s$`).MatchString(o.detail) {
		t.Errorf("unanswered request: %+v, want a timeout whose detail says the connection was made and the request written", o)
	}

	// SYNs dropped (a listener whose accept queue is full): the detail
	// names the flow's local address and the kernel's SYN_SENT, with the
	// SYN and its retransmission a second later.
	full := fullListener(t)
	handshake, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	o = (Config{RequestAddr: full}).svc(handshake)
	if o.ok || !o.timedOut || !regexp.MustCompile(` connected=no from=127\.0\.0\.1:\d+ tcp=SYN_SENT syns=[2-9]$`).MatchString(o.detail) {
		t.Errorf("dropped SYNs: %+v, want a timeout whose detail names the local address, SYN_SENT and 2 SYNs", o)
	}
}

// fullListener is a TCP listener on 127.0.0.1 with a backlog of 0 and one
// connection nobody accepts: the kernel drops every further SYN.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	queued, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { queued.Close() })
	return addr
}

// TestRequestClosesSockets: the socket duplicates the traces keep are
// closed with their requests.
func TestRequestClosesSockets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	c := Config{RequestAddr: strings.TrimPrefix(srv.URL, "http://")}
	c.svc(context.Background()) // the transport's and the server's first goroutines and descriptors
	before := openFiles(t)
	for range 20 {
		if o := c.svc(context.Background()); !o.ok {
			t.Fatalf("request: %+v", o)
		}
	}
	// The server closes its side of each connection as the client does,
	// a moment later.
	deadline := time.Now().Add(5 * time.Second)
	for openFiles(t) > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after := openFiles(t); after > before {
		t.Errorf("%d open descriptors after 20 requests, %d before", after, before)
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(fds)
}

// TestRunLines: Run writes one line per attempt of each loop the config
// asks for, in the format the test reads, and stops with its context.
func TestRunLines(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	good := dnsServer(t, map[string][]string{"probe.default.svc.cluster.local": {"10.96.0.5"}})
	cfg := FromEnv(strings.TrimPrefix(srv.URL, "http://"), "probe.default.svc.cluster.local", "10.96.0.5", func(string) string { return "" })
	cfg.Servers = []string{good}
	ctx, cancel := context.WithTimeout(context.Background(), 3*Interval)
	defer cancel()
	var out strings.Builder
	start := time.Now()
	Run(ctx, cfg, &out)
	end := time.Now()
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ms int64
		var kind, result string
		if n, err := fmt.Sscanf(line, "%d %s %s", &ms, &kind, &result); n != 3 || err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if at := time.UnixMilli(ms); at.Before(start.Truncate(time.Millisecond)) || at.After(end) || result != "ok" {
			t.Errorf("line %q: want ok, between %s and %s", line, start, end)
		}
		kinds[kind]++
	}
	if len(kinds) != 2 || kinds["svc"] < 2 || kinds["dns"] < 2 {
		t.Errorf("attempts by kind %v, want svc and dns, at least 2 each", kinds)
	}
}

// lateContext's deadline has passed but its timer has not cancelled it
// yet (Err nil, Done open), as a context.WithDeadline can look for a while
// on a loaded machine.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (c lateContext) Deadline() (time.Time, bool) { return c.deadline, true }

// TestRunEndsAtItsDeadline: an attempt ended once the run's deadline had
// passed (here by the query's connection deadline, set from it) is cut
// short by the run's end, not a failed attempt, even before the context's
// timer has cancelled it: Run writes no line and returns.
func TestRunEndsAtItsDeadline(t *testing.T) {
	silent, _ := silentServer(t)
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := lateContext{Context: base, deadline: time.Now().Add(-time.Millisecond)}
	cfg := Config{Name: "probe.default.svc.cluster.local", NameIP: "10.96.0.5", Servers: []string{silent}}
	var out strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, cfg, &out)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cancel() // ends it through Err, as the timer would
		<-done
		t.Fatal("Run went on past its deadline")
	}
	if out.Len() != 0 {
		t.Errorf("Run wrote %q after its deadline, want nothing", out.String())
	}
}

// TestStallWatchHeld: the time the process was held up between two
// instants is the overlap of the stalls recorded, and of one still open
// (the watch not woken since); wake-ups closer than stallMin are none.
func TestStallWatchHeld(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := newStallWatch(at(0))
	for _, ms := range []int{50, 100, 150, 2150, 2200, 2250, 2300} {
		w.woke(at(ms))
	}
	for _, tc := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 150, 0},
		{0, 3000, 2700 * time.Millisecond},    // the stall of 150-2150, and one open since 2300
		{1000, 2200, 1150 * time.Millisecond}, // the first's end
		{2150, 2300, 0},
		{2200, 2600, 300 * time.Millisecond}, // open since 2300
		{2200, 2500, 0},                      // 200 ms since the last wake-up: not yet a stall
	} {
		if got := w.held(at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("held(%d, %d) = %s, want %s", tc.from, tc.to, got, tc.want)
		}
	}
	// Stalls older than keepStalls are forgotten.
	w.woke(at(2300).Add(keepStalls + 3*time.Second))
	if len(w.stalls) != 1 {
		t.Errorf("%d stalls remembered, want only the newest", len(w.stalls))
	}
}

// proberHelperEnv makes this test binary run the probe loops (see
// TestProberHelper) against the addresses it names.
const proberHelperEnv = "PROBE_TEST_HELPER"

// TestProberHelper is not a test: TestStalledAttempt runs this binary with
// proberHelperEnv set ("svc-addr dns-addr"), and it then probes those,
// writing its lines to stdout, until TestStalledAttempt has seen what it
// waits for and ends it (at most a minute).
func TestProberHelper(t *testing.T) {
	addrs := strings.Fields(os.Getenv(proberHelperEnv))
	if len(addrs) != 2 {
		t.Skip("run by TestStalledAttempt only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	Run(ctx, Config{RequestAddr: addrs[0], Name: "probe.default.svc.cluster.local", NameIP: "10.96.0.5", Servers: []string{addrs[1]}}, os.Stdout)
}

// TestStalledAttempt: a prober stopped (SIGSTOP, as a host holding every
// process) while its attempts wait on servers that never answer logs them
// "stall" with how long it was held, not "fail"; the attempts after it,
// which wait their whole timeout while running, fail as before.
func TestStalledAttempt(t *testing.T) {
	// A TCP server that accepts and never answers, and a UDP one that never
	// answers: every attempt times out.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			accepted <- struct{}{}
		}
	}()
	silent, asked := silentServer(t)

	// Its output goes to a file, read while it runs: the prober writes
	// each line in one write.
	outPath := filepath.Join(t.TempDir(), "prober.out")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	output := func() string {
		b, _ := os.ReadFile(outPath)
		return string(b)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProberHelper$", "-test.v=false")
	cmd.Env = append(os.Environ(), proberHelperEnv+"="+l.Addr().String()+" "+silent)
	cmd.Stdout = outFile
	cmd.Stderr = outFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ended here on a failure, after its last line was read otherwise (a
	// second Kill and Wait only return errors).
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// Both first attempts in flight: hold the process for 1.5 s.
	for _, c := range []<-chan struct{}{accepted, asked} {
		select {
		case <-c:
		case <-time.After(30 * time.Second):
			t.Fatalf("the prober's first attempts never reached the servers: %s", output())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// The attempts of each kind, from the complete lines so far.
	attempts := func() map[string][]string {
		byKind := map[string][]string{}
		out := output()
		for _, line := range strings.Split(out[:strings.LastIndex(out, "\n")+1], "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && (f[1] == "svc" || f[1] == "dns") {
				byKind[f[1]] = append(byKind[f[1]], line)
			}
		}
		return byKind
	}
	// Until each kind has logged an attempt after the stall (each waits
	// its whole timeout, 3 s at most), however slowly the machine runs
	// the prober; a minute at most.
	var byKind map[string][]string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if byKind = attempts(); len(byKind["svc"]) >= 2 && len(byKind["dns"]) >= 2 {
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	out := output()
	for _, kind := range []string{"svc", "dns"} {
		lines := byKind[kind]
		if len(lines) < 2 {
			t.Errorf("%s: %d attempts logged, want the stalled one and at least one after: %q", kind, len(lines), out)
			continue
		}
		first := strings.Fields(lines[0])
		held, err := time.ParseDuration(strings.TrimPrefix(first[len(first)-1], "held="))
		if first[2] != "stall" || err != nil || held < StallLimit {
			t.Errorf("%s: first attempt %q, want a stall held at least %s", kind, lines[0], StallLimit)
		}
		fails := 0
		for _, line := range lines[1:] {
			if strings.Fields(line)[2] == "fail" {
				fails++
			}
		}
		if fails == 0 {
			t.Errorf("%s: no attempt after the stall failed: %q", kind, lines[1:])
		}
	}
}
