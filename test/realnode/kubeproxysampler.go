package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// kubeProxySampler proves what the handovers promise: no node ever runs two
// kube-proxies (the stock one, kube-proxy-edge, the static pod, SuperEdge's
// kube-proxy) at once, where both would program the same rules. Every
// 200 ms it reads the machine's processes (the nodes' containers run in its
// PID namespace) and counts the kube-proxy main processes per node, by
// their network namespace.
type kubeProxySampler struct {
	stop chan struct{}
	done chan struct{}

	prev map[string]string // the last sample's main processes: pid -> node

	mu      sync.Mutex
	samples int
	twice   []string // one line per node and sample with two or more
}

// startKubeProxySampler samples until Stop; nodes maps each node's network
// namespace file (/run/netns/NAME) to its name.
func startKubeProxySampler(nodes map[string]string) (*kubeProxySampler, error) {
	byInode := map[uint64]string{}
	for path, name := range nodes {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return nil, err
		}
		byInode[st.Ino] = name
	}
	s := &kubeProxySampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			s.sample(byInode)
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s, nil
}

// sample counts, per node, the kube-proxy main processes: named
// kube-proxy, with a parent that is not (a Go process forks before it
// execs iptables-restore or ipset, and the child carries the parent's name
// for that instant), and seen in the previous sample too (a process that
// lives under 200 ms programs no rules: a container's "kube-proxy
// --version" or a cleanup run). Two such processes on one node at once
// are two proxies writing the same rules.
func (s *kubeProxySampler) sample(byInode map[uint64]string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	now := map[string]string{} // pid -> node
	perNode := map[string][]string{}
	for _, p := range procs {
		// The node first: one stat, where the names cost an open, a read
		// and a close each, for every process of the machine 5 times a
		// second (a seventh of TestRealNodes' own CPU time, -race, otherwise).
		var st syscall.Stat_t
		if err := syscall.Stat(p+"/ns/net", &st); err != nil {
			continue // gone meanwhile
		}
		node, ok := byInode[st.Ino]
		if !ok {
			continue
		}
		if procComm(p) != "kube-proxy" || procComm("/proc/"+procPPID(p)) == "kube-proxy" {
			continue
		}
		pid := filepath.Base(p)
		now[pid] = node
		if s.prev[pid] == node {
			perNode[node] = append(perNode[node], pid)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prev = now
	s.samples++
	for node, pids := range perNode {
		if len(pids) > 1 {
			sort.Strings(pids)
			var cmds []string
			for _, pid := range pids {
				cmds = append(cmds, pid+" ("+procCmdline("/proc/"+pid)+")")
			}
			s.twice = append(s.twice, fmt.Sprintf("%s %s: kube-proxy processes %s", time.Now().Format(timeOfDay), node, strings.Join(cmds, ", ")))
		}
	}
}

func procComm(p string) string {
	b, err := os.ReadFile(p + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// procPPID reads the parent's PID from /proc/PID/stat, whose second field
// (the name, in parentheses) may hold spaces: the fields after its last ')'.
func procPPID(p string) string {
	b, err := os.ReadFile(p + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

func procCmdline(p string) string {
	b, err := os.ReadFile(p + "/cmdline")
	if err != nil {
		return "gone"
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// Stop ends the sampling and returns how many samples were taken and every
// one that found a node with two kube-proxies.
func (s *kubeProxySampler) Stop() (samples int, twice []string) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.twice
}
