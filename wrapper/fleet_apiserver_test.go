package wrapper_test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// apiserverLoad is what the kube-apiserver process has used so far and
// holds now: from /proc and its own /metrics.
type apiserverLoad struct {
	cpuSeconds float64 // user+system since it started
	rssBytes   float64
	heapBytes  float64 // go_memstats_heap_inuse_bytes, -1 if not exported
	watches    float64 // apiserver_longrunning_requests{verb="WATCH"}
	registered float64 // apiserver_registered_watchers, -1 if not exported
	requests   map[string]float64
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

func readAPIServerLoad(tb testing.TB, cp *controlplane.ControlPlane, admin kubernetes.Interface) apiserverLoad {
	tb.Helper()
	pid := cp.APIServerPID()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command (which may hold spaces) start at state.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	l := apiserverLoad{cpuSeconds: (utime + stime) / clockTicks, requests: map[string]float64{}}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 64)
			l.rssBytes = v * 1024
		}
	}
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	l.heapBytes, l.registered = -1, -1
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:sp], "{")
		switch name {
		case "go_memstats_heap_inuse_bytes":
			l.heapBytes = v
		case "apiserver_registered_watchers":
			l.registered = max(l.registered, 0) + v
		case "apiserver_longrunning_requests":
			if strings.Contains(labels, `verb="WATCH"`) {
				l.watches += v
			}
		case "apiserver_request_total":
			for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
				if verb, ok := strings.CutPrefix(kv, "verb="); ok {
					l.requests[strings.Trim(verb, `"`)] += v
				}
			}
		}
	}
	return l
}
