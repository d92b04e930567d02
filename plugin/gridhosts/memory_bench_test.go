package gridhosts

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memoryPods are the grid pod counts BenchmarkMemory compares at.
var memoryPods = []int{1000, 10000}

// BenchmarkMemory reports the resident memory (VmRSS) of the built CoreDNS
// serving the unified names of 1k and 10k grid pods with gridhosts (from
// informers) against a second CoreDNS serving the same names with the hosts
// plugin from a file, same Corefile shape, each after every name was
// answered once. As many pods of the same grid run in another nodeunit
// (their names are not this node's to answer). It reports the ratio per
// size; the goal is <= 1.2. SG_MEMBENCH_OLD_COREDNS names another CoreDNS
// build (an older commit) to measure the same way in the same run;
// SG_MEMBENCH_HEAPPROFILE=PREFIX saves gridhosts' heap profile per size.
func BenchmarkMemory(b *testing.B) {
	c := startCluster(b)
	bin := coreDNSBinary(b)
	ctx := context.Background()
	must(c.kube.CoreV1().Nodes().Create(ctx, newNode("node-1", map[string]string{"zone1": "nodeunit1"}, ""), metav1.CreateOptions{}))(b)
	must(c.kube.CoreV1().Nodes().Create(ctx, newNode("node-2", map[string]string{"zone1": "nodeunit2"}, ""), metav1.CreateOptions{}))(b)
	grid := must(c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx,
		newGrid("default", "statefulsetgrid-demo", "zone1", ""), metav1.CreateOptions{}))(b)
	must(c.kube.CoreV1().Services("default").Create(ctx, newService("default", demoSvc, "zone1", false), metav1.CreateOptions{}))(b)
	last := memoryPods[len(memoryPods)-1]
	set := must(c.kube.AppsV1().StatefulSets("default").Create(ctx,
		newSet(grid, "nodeunit1", demoSvc, "", int32(last)), metav1.CreateOptions{}))(b)
	foreign := must(c.kube.AppsV1().StatefulSets("default").Create(ctx,
		newSet(grid, "nodeunit2", demoSvc, "", int32(last)), metav1.CreateOptions{}))(b)

	var names []string
	var hostsText strings.Builder
	created := 0
	for _, n := range memoryPods {
		createPodsConcurrently(b, c, set, "node-1", memoryPodIP, created, n)
		createPodsConcurrently(b, c, foreign, "node-2", foreignPodIP, created, n)
		for i := created; i < n; i++ {
			ip := memoryPodIP(i)
			name := fmt.Sprintf("statefulsetgrid-demo-%d.%s.default.svc.cluster.local.", i, demoSvc)
			names = append(names, name)
			fmt.Fprintf(&hostsText, "%s %s\n", ip, name)
		}
		created = n

		dir := b.TempDir()
		hostsFile := filepath.Join(dir, "hosts")
		if err := os.WriteFile(hostsFile, []byte(hostsText.String()), 0o600); err != nil {
			b.Fatal(err)
		}
		gp, gready, hp, hready := freePort(b), freePort(b), freePort(b), freePort(b)
		profile, pprofPort := os.Getenv("SG_MEMBENCH_HEAPPROFILE"), freePort(b)
		pprofLine := ""
		if profile != "" {
			pprofLine = fmt.Sprintf("pprof 127.0.0.1:%d", pprofPort)
		}
		gridCorefile := func(port, ready int, extra string) string {
			return fmt.Sprintf(`cluster.local:%d {
  bind 127.0.0.1
  ready 127.0.0.1:%d
  %s
  gridhosts {
    kubeconfig %s
    node node-1
  }
}
`, port, ready, extra, c.cp.Kubeconfig)
		}
		// The older build, when given, starts first and is queried and read
		// beside the others, so neither build syncs alone.
		var oldDNS *coreDNS
		var oldSrv string
		if old := os.Getenv("SG_MEMBENCH_OLD_COREDNS"); old != "" {
			op, oready := freePort(b), freePort(b)
			oldDNS = startCoreDNS(b, old, gridCorefile(op, oready, ""), fmt.Sprintf("http://127.0.0.1:%d/ready", oready))
			oldSrv = fmt.Sprintf("127.0.0.1:%d", op)
		}
		gridDNS := startCoreDNS(b, bin, gridCorefile(gp, gready, pprofLine), fmt.Sprintf("http://127.0.0.1:%d/ready", gready))
		hostsDNS := startCoreDNS(b, bin, fmt.Sprintf(`cluster.local:%d {
  bind 127.0.0.1
  ready 127.0.0.1:%d
  hosts %s {
    ttl 5
    reload 0
  }
}
`, hp, hready, hostsFile), fmt.Sprintf("http://127.0.0.1:%d/ready", hready))
		gs, hs := fmt.Sprintf("127.0.0.1:%d", gp), fmt.Sprintf("127.0.0.1:%d", hp)
		gSynced := vmRSS(b, gridDNS.Cmd.Process.Pid)
		servers := []string{gs, hs}
		if oldDNS != nil {
			servers = append(servers, oldSrv)
		}
		for _, srv := range servers {
			expect(b, "", srv, names[n-1], dns.TypeA, memoryPodIP(n-1))
			load(b, srv, names, len(names), 4) // every name answered once
		}
		g, h := vmRSS(b, gridDNS.Cmd.Process.Pid), vmRSS(b, hostsDNS.Cmd.Process.Pid)
		if profile != "" {
			saveHeapProfile(b, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", pprofPort), fmt.Sprintf("%s-%d.pprof", profile, n))
		}
		ratio := float64(g) / float64(h)
		b.ReportMetric(ratio, fmt.Sprintf("rss-ratio-%dpods", n))
		b.ReportMetric(float64(g)/1024, fmt.Sprintf("gridhosts-MiB-%dpods", n))
		b.ReportMetric(float64(h)/1024, fmt.Sprintf("hosts-MiB-%dpods", n))
		if oldDNS != nil {
			o := vmRSS(b, oldDNS.Cmd.Process.Pid)
			b.ReportMetric(float64(o)/float64(h), fmt.Sprintf("old-rss-ratio-%dpods", n))
			b.Logf("%d grid pods: older build's gridhosts RSS %.1f MiB, ratio %.2f", n, float64(o)/1024, float64(o)/float64(h))
		}
		b.Logf("%d grid pods: gridhosts RSS %.1f MiB (%.1f MiB before the queries, peak %.1f MiB), hosts %.1f MiB (peak %.1f MiB), ratio %.2f",
			n, float64(g)/1024, float64(gSynced)/1024, float64(procStatusKiB(b, gridDNS.Cmd.Process.Pid, "VmHWM:"))/1024,
			float64(h)/1024, float64(procStatusKiB(b, hostsDNS.Cmd.Process.Pid, "VmHWM:"))/1024, ratio)
	}
	b.ReportMetric(0, "ns/op")
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

// vmRSS returns the resident set size of process pid in KiB.
func vmRSS(b *testing.B, pid int) int {
	b.Helper()
	return procStatusKiB(b, pid, "VmRSS:")
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
