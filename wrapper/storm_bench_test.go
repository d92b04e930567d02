package wrapper_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/wrapper"
)

// upstreamRequests sorts one wrapper's upstream requests: full lists
// (LIST, or a WATCH with sendInitialEvents, client-go's streaming list),
// watches resumed from a resourceVersion, and those that failed; and
// counts its open watches.
type upstreamRequests struct {
	mu                        sync.Mutex
	lists, resumes, failed    int
	open                      int
	lastResume, lastFullList  time.Time
	fullListBytes, otherBytes int64
}

func (u *upstreamRequests) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			q := r.URL.Query()
			watch := q.Get("watch") == "true" || q.Get("watch") == "1"
			full := !watch || q.Get("sendInitialEvents") == "true"
			resp, err := rt.RoundTrip(r)
			u.mu.Lock()
			defer u.mu.Unlock()
			switch {
			case err != nil || resp.StatusCode >= 400:
				u.failed++
			case full:
				u.lists++
				u.lastFullList = time.Now()
			default:
				u.resumes++
				u.lastResume = time.Now()
			}
			if err != nil {
				return resp, err
			}
			if watch && resp.StatusCode < 400 {
				u.open++
			}
			var once sync.Once
			resp.Body = &countingBody{ReadCloser: resp.Body, add: func(n int) {
				u.mu.Lock()
				defer u.mu.Unlock()
				if full {
					u.fullListBytes += int64(n)
				} else {
					u.otherBytes += int64(n)
				}
			}}
			if watch && resp.StatusCode < 400 {
				resp.Body = &closeHook{ReadCloser: resp.Body, closed: func() {
					once.Do(func() {
						u.mu.Lock()
						u.open--
						u.mu.Unlock()
					})
				}}
			}
			return resp, nil
		})
	})
	return cfg
}

type upstreamTally struct {
	lists, resumes, failed, open int
	fullListBytes, otherBytes    int64
	lastResume, lastFullList     time.Time
}

func (u *upstreamRequests) tally() upstreamTally {
	u.mu.Lock()
	defer u.mu.Unlock()
	return upstreamTally{u.lists, u.resumes, u.failed, u.open, u.fullListBytes, u.otherBytes, u.lastResume, u.lastFullList}
}

type closeHook struct {
	io.ReadCloser
	closed func()
}

func (c *closeHook) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if err != nil {
		c.closed()
	}
	return n, err
}

func (c *closeHook) Close() error {
	c.closed()
	return c.ReadCloser.Close()
}

// BenchmarkReconnectStorm: SG_STORM_WRAPPERS (1,000) real wrappers, in
// this process, each for its own node of a SG_STORM_NODES (1,000) node
// fleet, over one simulated cloud link to the apiserver. The link is cut
// for SG_STORM_OUTAGE seconds (30) while nodes report status, Services
// change and pods become ready, then restored. Reported: how each wrapper
// came back (watches resumed from their resourceVersion against full
// relists), the bytes it pulled, how long until every watch was open
// again, and the kube-apiserver's requests and CPU for the reconnection.
// Then, with a kube-proxy-shaped consumer behind each current wrapper (and
// a CoreDNS-shaped one behind every other) and as many straight to the
// apiserver, the apiserver restarted and restarted with etcd compacted
// meanwhile (runRestartScenarios), its port closed for SG_STORM_DOWN
// seconds (10), and an outage of minutes, etcd compacted and the port
// closed SG_STORM_LONG_DOWN seconds (120; 0 leaves it out): the consumers
// behind the wrappers must not relist.
func BenchmarkReconnectStorm(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/wrapper-reconnect-storm.md")
	nodesN, wrappersN := envInt("SG_STORM_NODES", 1000), envInt("SG_STORM_WRAPPERS", 1000)
	outage := time.Duration(envInt("SG_STORM_OUTAGE", 30)) * time.Second
	auditArgs, auditLog := stormAuditArgs(b)
	f := startFleet(b, nodesN, 100, auditArgs...)
	link := newCutLink() // the edge nodes' link to the apiserver
	type edgeWrapper struct {
		node   int
		resume bool // unanswered watches read as refused connections (the default)
		// summariesInFull: NodeLabelSummaries listed in full at a relist
		summariesInFull bool
		up              *upstreamRequests
		kinds           *resourceTap
		w               *runningWrapper
	}
	// Every other wrapper as it was before unanswered watches read as refused, to
	// compare in the same run.
	var edge []*edgeWrapper
	for i := range min(wrappersN, nodesN) {
		// One transport per wrapper, as client-go shares one between the
		// wrapper's clients (a Dial in the config would give each its own).
		tlsConfig, err := rest.TLSConfigFor(f.cp.Config)
		if err != nil {
			b.Fatal(err)
		}
		cfg := rest.CopyConfig(f.cp.Config)
		cfg.TLSClientConfig = rest.TLSClientConfig{}
		cfg.Transport = &http.Transport{DialContext: link.dial, TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true,
			MaxIdleConnsPerHost: 25, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second}
		cfg.UserAgent = stormWrapperAgent + "/" + fleetNodeName(i)
		e := &edgeWrapper{node: i, resume: i%2 == 0, up: &upstreamRequests{}, kinds: newResourceTap()}
		// Of the current ones, every fourth lists the summaries in full at a
		// relist, as before (runRestartScenarios compares).
		e.summariesInFull = e.resume && (i/2)%4 == 2
		wrapper.SetResumeUnansweredWatches(e.resume)
		opts := wrapper.Options{Upstream: e.kinds.wrap(e.up.wrap(cfg))}
		if e.summariesInFull {
			opts = wrapper.WithSummariesRelistedInFull(opts)
		}
		e.w = startWrapper(b, f.cp, fleetNodeName(i), "", opts)
		edge = append(edge, e)
	}
	wrapper.SetResumeUnansweredWatches(true)
	eventually(b, "every wrapper synced", 10*time.Minute, func(context.Context) (bool, error) {
		for _, e := range edge {
			if !e.w.srv.Ready() {
				return false, nil
			}
		}
		return true, nil
	})
	group := func(resume bool) func(*edgeWrapper) bool {
		return func(e *edgeWrapper) bool { return e.resume == resume }
	}
	sumOf := func(in func(*edgeWrapper) bool) (t upstreamTally) {
		for _, e := range edge {
			if !in(e) {
				continue
			}
			x := e.up.tally()
			t.lists += x.lists
			t.resumes += x.resumes
			t.failed += x.failed
			t.open += x.open
			t.fullListBytes += x.fullListBytes
			t.otherBytes += x.otherBytes
			if x.lastFullList.After(t.lastFullList) {
				t.lastFullList = x.lastFullList
			}
			if x.lastResume.After(t.lastResume) {
				t.lastResume = x.lastResume
			}
		}
		return t
	}
	sum := func() upstreamTally { return sumOf(func(*edgeWrapper) bool { return true }) }
	// No list and no failure for 5s (watches renewed at their timeout,
	// 5-10 minutes, are resumptions and go on all the time).
	var watchesPer []int
	eventually(b, "every wrapper watching", 10*time.Minute, func(context.Context) (bool, error) {
		before := sum()
		time.Sleep(5 * time.Second)
		after := sum()
		return after.lists+after.failed == before.lists+before.failed, nil
	})
	for _, e := range edge {
		watchesPer = append(watchesPer, e.up.tally().open)
	}
	b.Logf("%d wrappers in this process, %d nodes, %d Services; each wrapper holds %v upstream watches; process RSS %.0f MiB; load average %s",
		len(edge), nodesN, f.servicesN, slices.Compact(slices.Sorted(slices.Values(watchesPer))), selfRSSMiB(), loadAverage())

	for range b.N {
		l0 := readAPIServerLoad(b, f.cp, f.admin)
		t0 := map[bool]upstreamTally{true: sumOf(group(true)), false: sumOf(group(false))}
		link.setCut(true)
		cutAt := time.Now()
		// What happens meanwhile: every node reports, 20 Services change,
		// 10 pods become ready (5 in nodeunit 0, 5 in nodeunit 5).
		f.statusRound(b, func(int) bool { return true })
		f.touchServices(b, 20)
		var ips []string
		for k := range 10 {
			ips = append(ips, f.addPod(b, k, (k%2)*(fleetUnits-1)+fleetUnits*(20+k)))
		}
		time.Sleep(time.Until(cutAt.Add(outage)))
		lDown := readAPIServerLoad(b, f.cp, f.admin)
		tDown := map[bool]upstreamTally{true: sumOf(group(true)), false: sumOf(group(false))}
		link.setCut(false)
		back := time.Now()
		var allOpen time.Duration
		eventually(b, "every wrapper watching again", 10*time.Minute, func(context.Context) (bool, error) {
			for x, e := range edge {
				if e.up.tally().open < watchesPer[x] {
					return false, nil
				}
			}
			allOpen = time.Since(back)
			return true, nil
		})
		// Every wrapper of nodeunit 0 serves the pods that became ready there.
		eventually(b, "the outage's changes served", 5*time.Minute, func(ctx context.Context) (bool, error) {
			for _, e := range edge {
				if fleetUnitOf(e.node) != 0 {
					continue
				}
				l, err := clientFor(b, e.w.URL(), "").DiscoveryV1().EndpointSlices(fleetNS).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				found := 0
				for _, sl := range l.Items {
					for _, ep := range sl.Endpoints {
						for _, ip := range ips {
							if slices.Contains(ep.Addresses, ip) {
								found++
							}
						}
					}
				}
				if found != len(ips)/2 {
					return false, fmt.Errorf("%s serves %d of the %d pods of nodeunit 0", fleetNodeName(e.node), found, len(ips)/2)
				}
			}
			return true, nil
		})
		time.Sleep(5 * time.Second)
		l1 := readAPIServerLoad(b, f.cp, f.admin)
		since := func(t time.Time) string {
			if t.Before(back) {
				return "none"
			}
			return t.Sub(back).Round(100 * time.Millisecond).String()
		}
		b.Logf("outage %v (link cut, dials fail with no route to host); every watch open again %v after the link came back",
			outage, allOpen.Round(100*time.Millisecond))
		for _, resume := range []bool{true, false} {
			t1, td, t0, n := sumOf(group(resume)), tDown[resume], t0[resume], 0.0
			for _, e := range edge {
				if e.resume == resume {
					n++
				}
			}
			name := "unanswered watches as refused (now)"
			if !resume {
				name = "errors as they are (before)"
			}
			b.Logf("%-36s per wrapper: during the outage %.2f failed attempts; after it %.2f full lists (%.0f bytes), %.2f watches resumed from their resourceVersion (%.0f bytes with the missed events), %.2f failed; last full list %s, last resumption %s after the link came back",
				name, float64(td.failed-t0.failed)/n, float64(t1.lists-td.lists)/n, float64(t1.fullListBytes-td.fullListBytes)/n,
				float64(t1.resumes-td.resumes)/n, float64(t1.otherBytes-td.otherBytes)/n, float64(t1.failed-td.failed)/n,
				since(t1.lastFullList), since(t1.lastResume))
			unit := "/wrapper-resume"
			if !resume {
				unit = "/wrapper-before"
			}
			benchRec.Report(float64(t1.lists-td.lists)/n, "relists"+unit)
			benchRec.Report(float64(t1.resumes-td.resumes)/n, "resumes"+unit)
		}
		b.Logf("kube-apiserver for the reconnection of all %d: %.1f s CPU (%.1f s during the outage's changes), RSS %.0f -> %.0f MiB, requests LIST %.0f WATCH %.0f GET %.0f; watches %.0f before, %.0f after",
			len(edge), l1.cpuSeconds-lDown.cpuSeconds, lDown.cpuSeconds-l0.cpuSeconds, lDown.rssBytes/(1<<20), l1.rssBytes/(1<<20),
			l1.requests["LIST"]-lDown.requests["LIST"], l1.requests["WATCH"]-lDown.requests["WATCH"], l1.requests["GET"]-lDown.requests["GET"],
			l0.watches, l1.watches)
		benchRec.Report(allOpen.Seconds(), "s-until-all-watching")
		benchRec.Report(l1.cpuSeconds-lDown.cpuSeconds, "apiserver-cpu-s")

		// The apiserver restarted, then restarted with etcd compacted: the
		// wrappers as they are now, with consumers behind them beside as
		// many straight to the apiserver (the others stopped first).
		var ws []stormWrapper
		for _, e := range edge {
			if e.resume {
				ws = append(ws, stormWrapper{node: e.node, w: e.w, up: e.up, kinds: e.kinds, summariesInFull: e.summariesInFull})
			} else {
				e.w.Stop()
			}
		}
		down, longDown := time.Duration(envInt("SG_STORM_DOWN", 10))*time.Second, time.Duration(envInt("SG_STORM_LONG_DOWN", 120))*time.Second
		scenarios := []stormScenario{{"restart", down, false}, {"compaction", down, true}}
		if longDown > 0 {
			scenarios = append(scenarios, stormScenario{"outage", longDown, true})
		}
		runRestartScenarios(b, benchRec, f, ws, auditLog, scenarios)
	}
}

// selfRSSMiB is this process's resident memory.
func selfRSSMiB() float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(status)) {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 64)
			return v / 1024
		}
	}
	return -1
}
