// Package probe is what the real-node test's client pods run: what an
// application on the node sees while the operator works, measured by one
// process (the image's prober command) in place of shell loops of curl and
// dig, whose forks cost about 15 ms of CPU per attempt.
//
// Loops run side by side (a failing attempt's timeout does not slow the
// other kinds), each writing one line per attempt,
// "<unix ms> svc|dns|grid|gsvc ok|fail|stall [detail]", the time taken when
// the attempt ended, an attempt every Interval plus its own duration:
//   - svc: an HTTP request to a Service's address;
//   - dns: an A query of a name, which must answer one address;
//   - grid: the same for the name and address the environment gives
//     (GridNameEnv, GridIPEnv), when it does;
//   - gsvc: a request to the ServiceGrid's Service (GridServiceEnv), which
//     must be answered by an echo pod on a node of the caller's nodeunit
//     (GridNodesEnv), when the environment names it.
//
// A request fails when no answer came within RequestTimeout, or the answer
// is an HTTP error (status 400 or above, as curl -f); a query when no
// answer came within QueryTimeout (one UDP datagram, as dig +time=2
// +tries=1) or its answer section is not exactly the expected address (what
// `dig +short` prints). The timeouts are longer than a lost SYN's or
// datagram's first retransmission, so that a slow answer on a loaded machine
// shows as a gap and only a lost one as a failure. A failure's detail says
// what was seen: the HTTP status or the error (a refused connection, a
// timeout) and how far the request got, for one that timed out before its
// connection was made the kernel's side of the handshake (trace.go); the
// DNS response's status, the server that sent it and the answer, or the
// error and the server asked. An attempt that timed out
// while the prober itself could not run for StallLimit or more of its wait
// (the host held every process) is a "stall", its detail ending with
// "held=<duration>" (stall.go).
package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// The client's environment for its grid and gsvc loops: a StatefulSetGrid's
// unified name and the address of the pod of the client's nodeunit it must
// resolve to; the ServiceGrid's Service (its ClusterIP, optionally with
// ":port") and the nodes of the client's nodeunit (space-separated), the
// only ones whose pods may answer it.
const (
	GridNameEnv    = "GRID_NAME"
	GridIPEnv      = "GRID_IP"
	GridServiceEnv = "GRID_SVC_ADDR"
	GridNodesEnv   = "GRID_SVC_NODES"
)

// The loops' pace and the attempts' timeouts.
const (
	Interval       = 200 * time.Millisecond
	RequestTimeout = 3 * time.Second
	QueryTimeout   = 2 * time.Second
)

// Config says what the loops probe; an empty field turns its loop off
// (svc and dns always run in the pods).
type Config struct {
	// RequestAddr is the svc loop's address (host or host:port).
	RequestAddr string
	// Name must resolve to NameIP (the dns loop).
	Name, NameIP string
	// GridName must resolve to GridIP (the grid loop).
	GridName, GridIP string
	// GridServiceAddr is the gsvc loop's address, GridNodes the nodes
	// whose pods may answer it.
	GridServiceAddr string
	GridNodes       []string
	// Servers are the name servers asked (host:port), in order, a
	// server tried only after the one before it gave no answer, as dig
	// does; empty: those of ResolvConf, read at each query as dig does.
	Servers    []string
	ResolvConf string
}

// FromEnv is a Config for requestAddr and name (which must answer nameIP),
// with the grid loops as getenv's values ask, resolving through the pod's
// own resolver.
func FromEnv(requestAddr, name, nameIP string, getenv func(string) string) Config {
	return Config{
		RequestAddr:     requestAddr,
		Name:            name,
		NameIP:          nameIP,
		GridName:        getenv(GridNameEnv),
		GridIP:          getenv(GridIPEnv),
		GridServiceAddr: getenv(GridServiceEnv),
		GridNodes:       strings.Fields(getenv(GridNodesEnv)),
		ResolvConf:      "/etc/resolv.conf",
	}
}

// Run runs the loops the config asks for until ctx ends, writing each
// attempt's line to w.
func Run(ctx context.Context, cfg Config, w io.Writer) {
	out := &lineWriter{w: w}
	watch := newStallWatch(time.Now())
	go watch.run(ctx.Done())
	var wg sync.WaitGroup
	loop := func(kind string, attempt func() outcome) {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				o := attempt()
				end := time.Now()
				if ended(ctx, end) {
					return // cut short by the end, not a failure
				}
				result := "ok"
				if !o.ok {
					result = "fail"
					if held := watch.held(start, end); o.timedOut && held >= StallLimit {
						result = "stall"
						o.detail += " held=" + held.Round(time.Millisecond).String()
					}
				}
				out.line(end, kind, result, o.detail)
				select {
				case <-ctx.Done():
				case <-time.After(Interval):
				}
			}
		})
	}
	if cfg.RequestAddr != "" {
		loop("svc", func() outcome { return cfg.svc(ctx) })
	}
	if cfg.Name != "" {
		loop("dns", func() outcome { return cfg.query(ctx, cfg.Name, cfg.NameIP) })
	}
	if cfg.GridName != "" {
		loop("grid", func() outcome { return cfg.query(ctx, cfg.GridName, cfg.GridIP) })
	}
	if cfg.GridServiceAddr != "" {
		loop("gsvc", func() outcome { return cfg.gridService(ctx) })
	}
	wg.Wait()
}

// ended says whether ctx had ended by now. Its deadline counts as soon as
// it has passed: a connection's own deadline (set from ctx's) can end an
// attempt before the context's timer has cancelled it, which on a loaded
// machine comes noticeably later.
func ended(ctx context.Context, now time.Time) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !now.Before(d)
}

// outcome is one attempt's: answered as expected, or not and why;
// timedOut when nothing answered and only the attempt's clock ended it.
type outcome struct {
	ok       bool
	timedOut bool
	detail   string
}

// svc is one attempt of the svc loop.
func (c Config) svc(ctx context.Context) outcome {
	_, o := request(ctx, c.RequestAddr)
	return o
}

// gridService is one attempt of the gsvc loop: a request answered by an
// echo pod on one of GridNodes.
func (c Config) gridService(ctx context.Context) outcome {
	body, o := request(ctx, c.GridServiceAddr)
	if !o.ok {
		return o
	}
	node, pod := echoField(body, "node name:"), echoField(body, "pod name:")
	if node == "" || !slices.Contains(c.GridNodes, node) {
		return outcome{detail: fmt.Sprintf("outside=%s node=%s pod=%s", strings.Join(c.GridNodes, " "), node, pod)}
	}
	return outcome{ok: true}
}

// lineWriter writes whole lines, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(at time.Time, kind, result, detail string) {
	s := strings.TrimRight(fmt.Sprintf("%d %s %s %s", at.UnixMilli(), kind, result, oneLine(detail)), " ") + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// client makes each request on a connection of its own (as a new curl
// process would: every attempt goes through the Service's rules afresh),
// with no proxy and no redirect followed. Its dialer keeps a duplicate of
// each socket in the request's trace (dialControl).
var client = &http.Client{
	Timeout: RequestTimeout,
	Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{Timeout: RequestTimeout, ControlContext: dialControl}).DialContext,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// maxBody bounds what a request reads of an answer (an echo server's is
// a few hundred bytes).
const maxBody = 1 << 20

// request GETs http://addr/; it returns the answer's body, or fails with
// the HTTP status or the error, and how far the request got (requestTrace;
// for a timeout before the connection was made, the kernel's side of the
// handshake as well).
func request(ctx context.Context, addr string) ([]byte, outcome) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return nil, outcome{detail: "error=" + err.Error()}
	}
	tr := newRequestTrace(time.Now())
	defer tr.close()
	req = req.WithContext(httptrace.WithClientTrace(context.WithValue(ctx, traceKey{}, tr), tr.clientTrace()))
	resp, err := client.Do(req)
	if err != nil {
		o := outcome{timedOut: isTimeout(err), detail: "error=" + err.Error() + " " + tr.String()}
		if o.timedOut {
			o.detail += tr.handshake()
		}
		return nil, o
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, outcome{timedOut: isTimeout(err), detail: fmt.Sprintf("status=%d error=%v %s", resp.StatusCode, err, tr)}
	}
	if resp.StatusCode >= 400 {
		return nil, outcome{detail: fmt.Sprintf("status=%d", resp.StatusCode)}
	}
	return body, outcome{ok: true}
}

// echoField is the value of the first line of an echo server's answer
// that starts with field (after blanks).
func echoField(body []byte, field string) string {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), field); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// query asks for name's A records; it succeeds when the answer section is
// exactly want.
func (c Config) query(ctx context.Context, name, want string) outcome {
	servers := c.Servers
	if len(servers) == 0 {
		conf, err := dns.ClientConfigFromFile(c.ResolvConf)
		if err != nil {
			return outcome{detail: "error=" + err.Error()}
		}
		for _, s := range conf.Servers {
			servers = append(servers, net.JoinHostPort(s, conf.Port))
		}
		if len(servers) == 0 {
			return outcome{detail: "error=no nameserver in " + c.ResolvConf}
		}
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	m.SetEdns0(1232, false)
	var detail strings.Builder
	timedOut := true // every server asked gave no answer in time
	for _, server := range servers {
		r, err := exchange(ctx, m, server)
		if err != nil {
			timedOut = timedOut && isTimeout(err)
			fmt.Fprintf(&detail, "server=%s error=%s ", hashPort(server), errorText(err))
			continue
		}
		var answer []string
		for _, rr := range r.Answer {
			// The record's data as dig prints it (its fifth field).
			if f := strings.Fields(rr.String()); len(f) >= 5 {
				answer = append(answer, f[4])
			}
		}
		if len(answer) == 1 && answer[0] == want {
			return outcome{ok: true}
		}
		host, _, _ := net.SplitHostPort(server)
		fmt.Fprintf(&detail, "status=%s server=%s(%s) answer=%s", dns.RcodeToString[r.Rcode], hashPort(server), host, strings.Join(answer, ","))
		return outcome{detail: detail.String()}
	}
	return outcome{timedOut: timedOut, detail: detail.String() + "answer="}
}

// exchange sends m to server over UDP (over TCP when the answer came
// truncated), waiting at most QueryTimeout for each.
func exchange(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: QueryTimeout}
	r, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, server)
	}
	return r, err
}

// hashPort writes host:port as dig does, host#port.
func hashPort(server string) string {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return server
	}
	return host + "#" + port
}

func errorText(err error) string {
	if isTimeout(err) {
		return "timed out"
	}
	return err.Error()
}

// isTimeout: the attempt's own clock ended it (no answer came).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
