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
// PID namespace) and counts those named kube-proxy per node, by their
// network namespace.
type kubeProxySampler struct {
	stop chan struct{}
	done chan struct{}

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

func (s *kubeProxySampler) sample(byInode map[uint64]string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	perNode := map[string][]string{}
	for _, p := range procs {
		comm, err := os.ReadFile(p + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "kube-proxy" {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p+"/ns/net", &st); err != nil {
			continue // gone meanwhile
		}
		if node, ok := byInode[st.Ino]; ok {
			perNode[node] = append(perNode[node], filepath.Base(p))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for node, pids := range perNode {
		if len(pids) > 1 {
			sort.Strings(pids)
			s.twice = append(s.twice, fmt.Sprintf("%s %s: kube-proxy processes %s", time.Now().Format("15:04:05.000"), node, strings.Join(pids, ", ")))
		}
	}
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
