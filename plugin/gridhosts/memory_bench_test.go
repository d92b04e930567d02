package gridhosts

import (
	"bufio"
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

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
)

// memoryPods are the grid pod counts BenchmarkMemory compares at
// (SG_MEMBENCH_PODS, comma-separated, default 1000,10000).
func memoryPods(b *testing.B) []int {
	v := os.Getenv("SG_MEMBENCH_PODS")
	if v == "" {
		return []int{1000, 10000}
	}
	var pods []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("SG_MEMBENCH_PODS=%q: want positive pod counts, comma-separated", v)
		}
		pods = append(pods, n)
	}
	return pods
}

// BenchmarkMemory reports the resident memory (VmRSS) of the built CoreDNS
// serving the unified names of 1k and 10k grid pods (SG_MEMBENCH_PODS) with gridhosts (from
// informers) against a second CoreDNS, the same binary file, serving the
// same names with the hosts plugin from a file, same Corefile shape, each
// read after every name was answered once. As many pods of the same grid
// run in another nodeunit (their names are not this node's to answer); who
// makes the children and pods is SG_BENCH_WORLD (benchWorldKind); the world
// BenchmarkDNSPerf built in this process is reused when no larger
// (sharedBenchWorld). Per size
// it reports the median of SG_MEMBENCH_RUNS runs (default 5), each with its
// own processes started in rotating order; the goal is a ratio <= 1.2 at
// 10k, printed as a ratio line (ratio_bench_test.go). SG_MEMBENCH_OLD_COREDNS names another CoreDNS build (an older
// commit) to measure the same way in the same runs;
// SG_MEMBENCH_HEAPPROFILE=PREFIX adds pprof to every process, logs their
// runtime figures and saves their heap profiles; SG_MEMBENCH_SETTLE delays
// the reading; SG_MEMBENCH_ENV adds environment to every process.
func BenchmarkMemory(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/gridhosts-memory.md")
	bin := coreDNSBinary(b)
	pods := memoryPods(b)
	world := sharedBenchWorld(b, pods[0], benchWorldKind(b))
	for _, n := range pods {
		world.scale(b, n)
		hostsFile := world.hostsFile(b)
		load := newLoadRange()
		var gRuns, hRuns, oRuns, ratios, oldRatios []float64
		for run := range memoryRuns(b) {
			m := measureMemory(b, world.c, bin, hostsFile, world.names, n, run)
			load.sample()
			gRuns, hRuns, ratios = append(gRuns, m.grid.rss), append(hRuns, m.hosts.rss), append(ratios, m.grid.rss/m.hosts.rss)
			if m.old != nil {
				oRuns, oldRatios = append(oRuns, m.old.rss), append(oldRatios, m.old.rss/m.hosts.rss)
			}
		}
		benchRec.Report(median(ratios), fmt.Sprintf("rss-ratio-%dpods", n))
		benchRec.Report(median(gRuns), fmt.Sprintf("gridhosts-MiB-%dpods", n))
		benchRec.Report(median(hRuns), fmt.Sprintf("hosts-MiB-%dpods", n))
		b.Logf("%d grid pods, medians of %d runs: gridhosts %.1f MiB, hosts %.1f MiB, ratio %.2f (runs: %s)",
			n, len(ratios), median(gRuns), median(hRuns), median(ratios), formatRatios(ratios))
		if len(oRuns) > 0 {
			benchRec.Report(median(oldRatios), fmt.Sprintf("old-rss-ratio-%dpods", n))
			b.Logf("%d grid pods, older build: %.1f MiB, ratio %.2f (runs: %s)", n, median(oRuns), median(oldRatios), formatRatios(oldRatios))
		}
		if n == memoryGoalPods {
			sorted := slices.Sorted(slices.Values(ratios))
			printRatio(b, ratioLine{Name: "gridhosts-rss-" + sizeName(n), Value: median(ratios), Goal: "<=1.2",
				Extra: []string{fmt.Sprintf("min=%.3f", sorted[0]), fmt.Sprintf("max=%.3f", sorted[len(sorted)-1]),
					fmt.Sprintf("runs=%d", len(ratios)), fmt.Sprintf("gridhosts-MiB=%.1f", median(gRuns)), fmt.Sprintf("hosts-MiB=%.1f", median(hRuns)),
					"load=" + load.String(), "world=" + world.kind()}})
		}
	}
	b.ReportMetric(0, "ns/op")
}

// memoryGoalPods is the size the memory goal (<= 1.2x the hosts plugin's)
// holds at.
const memoryGoalPods = 10000

// memoryRuns is how many runs BenchmarkMemory measures per size
// (SG_MEMBENCH_RUNS, default 5); each run starts its own processes.
func memoryRuns(b *testing.B) int {
	runs := 5
	if v := os.Getenv("SG_MEMBENCH_RUNS"); v != "" {
		var err error
		if runs, err = strconv.Atoi(v); err != nil || runs < 1 {
			b.Fatalf("SG_MEMBENCH_RUNS=%q: want a positive number", v)
		}
	}
	return runs
}

// memorySettle is how long after the queries the RSS is read
// (SG_MEMBENCH_SETTLE, a Go duration; default 0).
func memorySettle(b *testing.B) time.Duration {
	v := os.Getenv("SG_MEMBENCH_SETTLE")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("SG_MEMBENCH_SETTLE=%q: %v", v, err)
	}
	return d
}

// memoryReading is one CoreDNS process's memory, in MiB.
type memoryReading struct {
	rss, anon, file, peak float64
}

func readMemory(b *testing.B, pid int) memoryReading {
	b.Helper()
	mib := func(field string) float64 { return float64(procStatusKiB(b, pid, field)) / 1024 }
	return memoryReading{rss: mib("VmRSS:"), anon: mib("RssAnon:"), file: mib("RssFile:"), peak: mib("VmHWM:")}
}

func (m memoryReading) String() string {
	return fmt.Sprintf("RSS %.1f MiB (anon %.1f, file %.1f; peak %.1f)", m.rss, m.anon, m.file, m.peak)
}

// memoryRun is one run's readings; old is nil without an older build.
type memoryRun struct {
	grid, hosts memoryReading
	old         *memoryReading
}

// measureMemory starts gridhosts' CoreDNS, the hosts plugin's (and the
// older build's, when given), in an order that rotates with run so none
// always syncs first, answers every name once on each, waits
// memorySettle, reads each process's memory and stops them.
func measureMemory(b *testing.B, c *cluster, bin, hostsFile string, names []string, n, run int) memoryRun {
	b.Helper()
	profile := os.Getenv("SG_MEMBENCH_HEAPPROFILE")
	env := strings.Fields(os.Getenv("SG_MEMBENCH_ENV")) // e.g. GODEBUG=gctrace=1, on every process alike
	type member struct {
		role, bin, body string
		server, pprof   string
		p               *coreDNS
	}
	gridBody := fmt.Sprintf(`gridhosts {
    kubeconfig %s
    node node-1
  }`, c.cp.Kubeconfig)
	hostsBody := fmt.Sprintf(`hosts %s {
    ttl 5
    reload 0
  }`, hostsFile)
	members := []*member{{role: "gridhosts", bin: bin, body: gridBody}, {role: "hosts", bin: bin, body: hostsBody}}
	if old := os.Getenv("SG_MEMBENCH_OLD_COREDNS"); old != "" {
		members = append(members, &member{role: "older gridhosts", bin: old, body: gridBody})
	}
	order := append(members[run%len(members):], members[:run%len(members)]...)
	for _, m := range order {
		port, ready := freePort(b), freePort(b)
		pprofLine := ""
		if profile != "" { // on every process alike: the comparison stays fair
			m.pprof = fmt.Sprintf("127.0.0.1:%d", freePort(b))
			pprofLine = "pprof " + m.pprof
		}
		m.server = fmt.Sprintf("127.0.0.1:%d", port)
		m.p = startCoreDNS(b, m.bin, fmt.Sprintf(`cluster.local:%d {
  bind 127.0.0.1
  ready 127.0.0.1:%d
  %s
  %s
}
`, port, ready, pprofLine, m.body), fmt.Sprintf("http://127.0.0.1:%d/ready", ready), env...)
	}
	for _, m := range order {
		expect(b, "", m.server, names[n-1], dns.TypeA, memoryPodIP(n-1))
		load(b, m.server, names, len(names), 4) // every name answered once
	}
	time.Sleep(memorySettle(b))
	readings := map[string]memoryReading{}
	for _, m := range order {
		readings[m.role] = readMemory(b, m.p.Cmd.Process.Pid)
	}
	var out memoryRun
	out.grid, out.hosts = readings["gridhosts"], readings["hosts"]
	if o, ok := readings["older gridhosts"]; ok {
		out.old = &o
	}
	for _, m := range order {
		detail := ""
		if m.pprof != "" {
			detail = " " + memStats(b, "http://"+m.pprof+"/debug/pprof/heap?debug=1")
			saveHeapProfile(b, "http://"+m.pprof+"/debug/pprof/heap?gc=1",
				fmt.Sprintf("%s-%s-%d-%d.pprof", profile, strings.ReplaceAll(m.role, " ", "-"), n, run))
		}
		b.Logf("%d grid pods, run %d: %s %s%s", n, run, m.role, readings[m.role], detail)
	}
	for _, m := range order {
		m.p.Cmd.Process.Signal(os.Interrupt)
		select {
		case <-m.p.Done:
		case <-time.After(10 * time.Second):
			m.p.Cmd.Process.Kill()
			<-m.p.Done
		}
	}
	return out
}

// memStats picks the runtime's heap and stack figures (MiB) from a heap
// profile in text form (heap?debug=1 ends with runtime.MemStats).
func memStats(b *testing.B, url string) string {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var parts []string
	s := bufio.NewScanner(resp.Body)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		f := strings.Fields(strings.TrimPrefix(s.Text(), "# "))
		if len(f) < 3 || f[1] != "=" {
			continue
		}
		switch f[0] {
		case "HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "NextGC", "Sys", "Stack", "GCSys", "NumGC":
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				continue
			}
			if f[0] == "NumGC" {
				parts = append(parts, fmt.Sprintf("%s=%.0f", f[0], v))
			} else {
				parts = append(parts, fmt.Sprintf("%s=%.1f", f[0], v/(1<<20)))
			}
		}
	}
	return strings.Join(parts, " ")
}

// median of xs (not empty).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func formatRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}

// saveHeapProfile writes the heap profile CoreDNS's pprof plugin serves at
// url to path (go tool pprof -sample_index=inuse_space).
func saveHeapProfile(b *testing.B, url, path string) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("heap profile: %v (HTTP %d)", err, resp.StatusCode)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		b.Fatal(err)
	}
}

// memoryPodIP is the address of pod i.
func memoryPodIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 1+i/62500, i/250%250, i%250+1)
}

// foreignPodIP is the address of pod i of the other nodeunit.
func foreignPodIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 101+i/62500, i/250%250, i%250+1)
}

// createPodsConcurrently creates the pods [from, to) of StatefulSet set on
// node with addresses ipOf(i) and status filled as createPod does, eight at
// a time.
func createPodsConcurrently(b *testing.B, c *cluster, set *appsv1.StatefulSet, node string, ipOf func(int) string, from, to int) {
	b.Helper()
	ctx := context.Background()
	next := make(chan int)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p := newPod(set, i, node, ipOf(i))
				status := p.Status
				p.Status, p.UID = corev1.PodStatus{}, ""
				created, err := c.kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
				if err == nil {
					created.Status = status
					_, err = c.kube.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{})
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// procStatusKiB returns field (VmRSS:, VmHWM: for the peak) of process pid
// in KiB.
func procStatusKiB(b *testing.B, pid int, field string) int {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return kb
		}
	}
	b.Fatalf("no %s for pid %d", field, pid)
	return 0
}
