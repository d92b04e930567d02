package gridhosts

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
)

// dnsperfNames is how many unified names the dnsperf benchmark serves
// (SG_DNSPERF_NAMES), as many pods of another nodeunit beside them.
const dnsperfNames = 1000

// dnsperfPairs is how many interleaved gridhosts/hosts runs it compares
// (SG_DNSPERF_PAIRS).
const dnsperfPairs = 8

// dnsperfSeconds is how long each dnsperf run lasts (SG_DNSPERF_SECONDS).
const dnsperfSeconds = 10

// envInt is the integer in environment variable name, def when unset.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

var dnsperfQPS = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
var dnsperfAllNoError = regexp.MustCompile(`Response codes:\s+NOERROR [0-9]+ \(100\.00%\)\n`)
var dnsperfLatency = regexp.MustCompile(`Average Latency \(s\):\s+([0-9.]+)`)

// BenchmarkDNSPerf drives the built CoreDNS (pinned to CPU 0) with dnsperf
// (pinned to CPU 1) on 1k unified names: gridhosts from informers against
// the hosts plugin serving the same names from a file, in the same binary
// and Corefile shape, runs interleaved; it reports the median ratio of the
// pairs and its spread, and prints it as a ratio line (ratio.go). Needs
// `dnsperf` (Debian package dnsperf). SG_DNSPERF_NAMES, SG_DNSPERF_PAIRS,
// SG_DNSPERF_SECONDS (each run's length, 10) and SG_DNSPERF_MODE (node, the default, clients, or both as
// "node,clients": one world, each mode's CoreDNS in turn) change the load;
// SG_BENCH_WORLD (benchWorldKind) who makes the grid's children and pods
// (a world BenchmarkMemory of the same process reuses: sharedBenchWorld);
// every answer must be NOERROR. SG_DNSPERF_PROFILE=DIR saves a CPU profile
// of CoreDNS (the pprof plugin, 8 s) under each side's load alone, before
// the pairs.
func BenchmarkDNSPerf(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/gridhosts-qps.md")
	names, pairs := envInt(b, "SG_DNSPERF_NAMES", dnsperfNames), envInt(b, "SG_DNSPERF_PAIRS", dnsperfPairs)
	seconds := envInt(b, "SG_DNSPERF_SECONDS", dnsperfSeconds)
	modes := strings.Split(os.Getenv("SG_DNSPERF_MODE"), ",")
	if os.Getenv("SG_DNSPERF_MODE") == "" {
		modes = []string{"node"}
	}
	for _, mode := range modes {
		if mode != "node" && mode != "clients" {
			b.Fatalf("SG_DNSPERF_MODE=%q: want node, clients or both, comma-separated", os.Getenv("SG_DNSPERF_MODE"))
		}
	}
	perf, err := exec.LookPath("dnsperf")
	if err != nil {
		b.Skip("dnsperf not installed (apt-get install dnsperf)")
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		b.Skip("taskset not installed")
	}
	w := sharedBenchWorld(b, names, benchWorldKind(b))
	hostsFile := w.hostsFile(b)
	var data strings.Builder
	for _, n := range w.names {
		fmt.Fprintf(&data, "%s A\n", n)
	}
	dataFile := filepath.Join(b.TempDir(), "queries")
	if err := os.WriteFile(dataFile, []byte(data.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	run := func(server string, seconds int) (qps, latency float64) {
		host, port, _ := strings.Cut(server, ":")
		out, err := exec.Command(taskset, "-c", "1", perf, "-s", host, "-p", port, "-d", dataFile,
			"-c", "2", "-q", "100", "-l", strconv.Itoa(seconds)).CombinedOutput()
		if err != nil {
			b.Fatalf("dnsperf: %v\n%s", err, out)
		}
		q, l := dnsperfQPS.FindSubmatch(out), dnsperfLatency.FindSubmatch(out)
		if q == nil || l == nil {
			b.Fatalf("dnsperf output not understood:\n%s", out)
		}
		if !dnsperfAllNoError.Match(out) {
			b.Fatalf("not every answer was NOERROR:\n%s", out)
		}
		qps, _ = strconv.ParseFloat(string(q[1]), 64)
		latency, _ = strconv.ParseFloat(string(l[1]), 64)
		return qps, latency
	}
	for _, mode := range modes {
		s := serveBench(b, w, hostsFile, "0", mode == "clients")
		for _, srv := range []string{s.gridhosts, s.hosts} {
			expect(b, "", srv, s.names[7], dns.TypeA, memoryPodIP(7))
			expect(b, "", srv, s.names[len(s.names)-1], dns.TypeA, memoryPodIP(len(s.names)-1))
		}
		run(s.gridhosts, 2) // warm up both
		run(s.hosts, 2)
		if dir := os.Getenv("SG_DNSPERF_PROFILE"); dir != "" {
			// A CPU profile of the process under each side's load alone.
			for side, srv := range map[string]string{"gridhosts": s.gridhosts, "hosts": s.hosts} {
				done := make(chan struct{})
				go func() { defer close(done); run(srv, 10) }()
				time.Sleep(time.Second)
				resp, err := http.Get("http://" + s.pprof + "/debug/pprof/profile?seconds=8")
				if err != nil {
					b.Fatal(err)
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
				<-done
				path := filepath.Join(dir, fmt.Sprintf("cpu-%s-%s-%d.pprof", side, mode, names))
				if err := os.WriteFile(path, data, 0o644); err != nil {
					b.Fatal(err)
				}
				b.Logf("CPU profile under %s's load: %s", side, path)
			}
		}
		load := newLoadRange()
		var ratios []float64
		for i := range pairs {
			// Alternate which goes first, so drift does not favour one.
			order := []string{s.gridhosts, s.hosts}
			if i%2 == 1 {
				order = []string{s.hosts, s.gridhosts}
			}
			got := map[string][2]float64{}
			for _, srv := range order {
				q, l := run(srv, seconds)
				got[srv] = [2]float64{q, l}
				load.sample()
			}
			g, h := got[s.gridhosts], got[s.hosts]
			ratios = append(ratios, g[0]/h[0])
			b.Logf("pair %d: gridhosts %.0f qps (avg %.3f ms), hosts %.0f qps (avg %.3f ms), ratio %.3f, load %s",
				i, g[0], g[1]*1000, h[0], h[1]*1000, g[0]/h[0], load.last())
		}
		s.stop()
		slices.Sort(ratios)
		median := ratios[len(ratios)/2]
		benchRec.Report(median, mode+"-median-ratio")
		benchRec.Report(ratios[0], mode+"-min-ratio")
		benchRec.Report(ratios[len(ratios)-1], mode+"-max-ratio")
		b.Logf("%s mode, %d names: gridhosts/hosts QPS over %d interleaved pairs: median %.3f, min %.3f, max %.3f", mode, names, len(ratios), median, ratios[0], ratios[len(ratios)-1])
		printRatio(b, ratioLine{Name: fmt.Sprintf("gridhosts-qps-%s-%s", mode, sizeName(names)), Value: median, Goal: ">=1.0",
			Extra: []string{fmt.Sprintf("min=%.3f", ratios[0]), fmt.Sprintf("max=%.3f", ratios[len(ratios)-1]),
				fmt.Sprintf("pairs=%d", len(ratios)), "load=" + load.String(), "world=" + w.kind()}})
	}
	b.ReportMetric(0, "ns/op")
}
