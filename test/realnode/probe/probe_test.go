package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// silentServer is a UDP socket that never answers (a lost datagram).
func silentServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
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
		if ok, detail := c.query(ctx, tc.name, tc.want); ok != tc.ok || detail != tc.detail {
			t.Errorf("query %s (want %s) = %v %q, want %v %q", tc.name, tc.want, ok, detail, tc.ok, tc.detail)
		}
	}

	silent := silentServer(t)
	sh, sp, _ := net.SplitHostPort(silent)
	start := time.Now()
	ok, detail := Config{Servers: []string{silent}}.query(ctx, "probe.default.svc.cluster.local", "10.96.0.5")
	took := time.Since(start)
	if want := fmt.Sprintf("server=%s#%s error=timed out answer=", sh, sp); ok || detail != want {
		t.Errorf("silent server: %v %q, want a failure %q", ok, detail, want)
	}
	if took < QueryTimeout || took > QueryTimeout+time.Second {
		t.Errorf("silent server: gave up after %s, want %s", took, QueryTimeout)
	}
	if ok, detail := (Config{Servers: []string{silent, good}}).query(ctx, "probe.default.svc.cluster.local", "10.96.0.5"); !ok {
		t.Errorf("silent server, then a good one: failed %q", detail)
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
	if ok, detail := c.query(context.Background(), "probe", "10.96.0.5"); ok || detail != "error=no nameserver in "+conf {
		t.Errorf("no nameserver: %v %q", ok, detail)
	}
	if ok, detail := (Config{ResolvConf: conf + ".missing"}).query(context.Background(), "probe", "10.96.0.5"); ok || !strings.HasPrefix(detail, "error=") {
		t.Errorf("no resolv.conf: %v %q", ok, detail)
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
		if ok, detail := c.svc(ctx); ok != want.ok || detail != want.detail {
			t.Errorf("request %d: %v %q, want %v %q", i, ok, detail, want.ok, want.detail)
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
	if ok, detail := (Config{RequestAddr: refused}).svc(ctx); ok || !strings.HasPrefix(detail, "error=") || !strings.Contains(detail, "connection refused") {
		t.Errorf("closed port: %v %q, want a refused connection", ok, detail)
	}
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
