package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// nodeEnv names the node a process belongs to (beside runEnv).
const nodeEnv = "SERVICEGROUP_REALNODE_NODE"

// NodeConfig is what every node of a run shares.
type NodeConfig struct {
	// Host is the run's footprint (PID used in names).
	Host *Host
	// Kubelet is the kubelet binary.
	Kubelet string
	// CAFile is the cluster CA (kubelet's client-CA for its own API).
	CAFile string
	// Registry is where the mirrored registries and our images are pulled from.
	Registry *Registry
	// Nameserver is the only resolver host-network pods are given (an
	// address inside the test's namespaces: nothing leaves the machine).
	Nameserver string
}

// Node is one real node: a kubelet and its own containerd, both in the
// node's network namespace and in a mount namespace of the node's own
// (held by a sleeping process), with its own directories, cgroupRoot and
// CNI network.
type Node struct {
	Name   string
	Net    *harness.FabricNode
	Labels map[string]string
	// Kubeconfig holds the node's identity (system:node:NAME); the node
	// finds it at /etc/kubernetes/kubelet.conf, as on a kubeadm node.
	Kubeconfig []byte
	// ClusterDNS is the kubelet's clusterDNS (empty: none yet).
	ClusterDNS string
	// Dir holds everything of the node (its "disk").
	Dir string
	// LoopbackAddrs are addresses the node's boot configuration puts on
	// its lo (e.g. the node-local DNS address), re-added at every boot.
	LoopbackAddrs []string
	// StaticPods is where the kubelet's staticPodPath
	// (/etc/kubernetes/manifests on the node) lies on the host.
	StaticPods string

	cfg                         NodeConfig
	holder, containerd, kubelet *controlplane.Process
}

// NewNode lays out a node's directories; Start boots it.
func NewNode(cfg NodeConfig, name string, fn *harness.FabricNode, labels map[string]string, kubeconfig []byte, dir string) *Node {
	return &Node{
		Name: name, Net: fn, Labels: labels, Kubeconfig: kubeconfig, Dir: dir,
		StaticPods: filepath.Join(dir, "host/etc/kubernetes/manifests"), cfg: cfg,
	}
}

// HostPath is where a path of the node's own file system (one of
// hostPaths) lies on the host.
func (n *Node) HostPath(p string) string { return n.path("host", p) }

// CgroupRoot is the kubelet's cgroupRoot, in every v1 hierarchy.
func (n *Node) CgroupRoot() string {
	return fmt.Sprintf("/%s%d-%s", cgroupPrefix, n.cfg.Host.PID, n.Name)
}

func (n *Node) path(p ...string) string { return filepath.Join(append([]string{n.Dir}, p...)...) }

// Socket is the node's containerd socket.
func (n *Node) Socket() string { return n.path("run/containerd/containerd.sock") }

// Start boots the node: cgroups, mount namespace with the node's own
// host paths, containerd, then the kubelet (not waiting for Ready).
func (n *Node) Start(ctx context.Context) error {
	for _, d := range []string{"run/containerd", "var/lib/containerd", "etc/cni/net.d", "var/lib/cni",
		"etc/containerd/certs.d", "host/etc/kubernetes/manifests"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	for _, p := range hostPaths {
		if err := os.MkdirAll(n.path("host", p), 0o755); err != nil {
			return err
		}
	}
	if err := n.writeConfigs(); err != nil {
		return err
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	if err := n.addLoopbackAddrs(ctx); err != nil {
		return err
	}
	var err error
	// The holder owns the node's mount namespace: private propagation, so
	// nothing the kubelet or containerd mounts reaches the host, and all
	// of it goes when the node's last process does.
	holder := exec.Command("nsenter", "--net="+n.netnsPath(), "unshare", "--mount", "--propagation", "private", "sleep", "infinity")
	if n.holder, err = n.start("holder", holder); err != nil {
		return err
	}
	mntNS := fmt.Sprintf("/proc/%d/ns/mnt", n.holder.PID())
	if err := waitUntil(ctx, 10*time.Second, func() error { return sameNS(mntNS, "/proc/self/ns/mnt") }); err != nil {
		return fmt.Errorf("%s: mount namespace: %w", n.Name, err)
	}
	for _, p := range hostPaths {
		if out, err := exec.CommandContext(ctx, "nsenter", "--mount="+mntNS, "mount", "--bind", n.path("host", p), p).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: bind %s: %w: %s", n.Name, p, err, out)
		}
	}
	containerd := exec.Command("nsenter", "--net="+n.netnsPath(), "--mount="+mntNS, "containerd", "--config", n.path("etc/containerd/config.toml"))
	if n.containerd, err = n.start("containerd", containerd); err != nil {
		return err
	}
	if err := waitUntil(ctx, time.Minute, func() error {
		if done, perr := n.containerd.Exited(); done {
			return backoffStop{fmt.Errorf("containerd exited: %v\n%s", perr, n.containerd.LogTail(20))}
		}
		out, err := exec.CommandContext(ctx, "ctr", "--address", n.Socket(), "version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("%s: containerd: %w", n.Name, err)
	}
	return n.startKubelet(ctx, mntNS)
}

// startKubelet starts the kubelet and watches it for 3 s. kubeadm's kubelet
// unit is restarted when it exits (systemd's Restart=always), and it does
// exit at start while containerd's CRI is not initialized yet ("server is
// not initialized yet", seen after a reboot on a loaded machine) or when
// the CRI connection is reset at its first calls (seen on a restart under
// load): the same here, a few times.
func (n *Node) startKubelet(ctx context.Context, mntNS string) error {
	var err error
	for attempt := 1; ; attempt++ {
		if n.kubelet, err = n.start("kubelet", n.kubeletCommand(mntNS)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
		}
		done, perr := n.kubelet.Exited()
		if !done {
			return nil
		}
		if attempt == 5 {
			return fmt.Errorf("%s: kubelet exited at start %d times: %v\n%s", n.Name, attempt, perr, n.kubelet.LogTail(20))
		}
	}
}

func (n *Node) kubeletCommand(mntNS string) *exec.Cmd {
	var labels []string
	for k, v := range n.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	return exec.Command("nsenter", "--net="+n.netnsPath(), "--mount="+mntNS, n.cfg.Kubelet,
		"--config=/var/lib/kubelet/config.yaml",
		"--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--hostname-override="+n.Name,
		"--node-ip="+n.Net.IP.String(),
		"--root-dir=/var/lib/kubelet",
		"--cert-dir=/var/lib/kubelet/pki",
		"--node-labels="+strings.Join(labels, ","),
		"--v=2",
	)
}

// Kubelet is the running kubelet process (nil when powered off).
func (n *Node) Kubelet() *controlplane.Process { return n.kubelet }

// RestartKubelet stops and starts the kubelet alone, which reads its
// configuration files as they are on the node now (an operator's edit
// included); its pods keep running, as on `systemctl restart kubelet`.
// ClusterDNS follows the file, so that a later boot keeps the edit.
func (n *Node) RestartKubelet(ctx context.Context) error {
	dns, err := n.KubeletClusterDNS()
	if err != nil {
		return err
	}
	n.ClusterDNS = dns
	n.kubelet.Stop(30 * time.Second)
	return n.startKubelet(ctx, fmt.Sprintf("/proc/%d/ns/mnt", n.holder.PID()))
}

// KubeletClusterDNS is the one clusterDNS entry of the kubelet's
// configuration file on the node (kubeadm's block list).
func (n *Node) KubeletClusterDNS() (string, error) {
	path := n.HostPath("/var/lib/kubelet/config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if l == "clusterDNS:" && i+1 < len(lines) {
			if v, ok := strings.CutPrefix(lines[i+1], "- "); ok {
				return strings.TrimSpace(v), nil
			}
		}
	}
	return "", fmt.Errorf("%s: no clusterDNS entry:\n%s", path, data)
}

// PowerOff ends everything of the node at once, as a power cut does: the
// kubelet, containerd, every shim and container (SIGKILL), then what a
// reboot loses: /run (containerd's and runc's state), the pods' network
// namespaces, the CNI bridge. Disk survives: images, the kubelet's root,
// host-local IPAM, the hostPath directories.
func (n *Node) PowerOff(ctx context.Context) error {
	var errs []error
	deadline := time.Now().Add(time.Minute)
	for {
		var left []int
		for _, p := range allProcesses() {
			if p != os.Getpid() && (n.owns(p) || n.inCgroup(p)) {
				left = append(left, p)
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: processes still alive after SIGKILL: %v", n.Name, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range []*controlplane.Process{n.kubelet, n.containerd, n.holder} {
		p.Stop(time.Second) // reaps
	}
	n.kubelet, n.containerd, n.holder = nil, nil, nil
	for _, h := range cgroupTrees() {
		if err := removeCgroupTree(filepath.Join(h, n.CgroupRoot())); err != nil {
			errs = append(errs, err)
		}
	}
	for _, a := range n.LoopbackAddrs {
		if err := n.Net.NS.IP(ctx, "addr", "del", a, "dev", "lo"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(n.path("run")); err != nil {
		errs = append(errs, err)
	}
	if n.Net.NS.IP(ctx, "link", "show", "cni0") == nil {
		if err := n.Net.NS.IP(ctx, "link", "del", "cni0"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ForgetLoopbackAddr takes addr out of the node's boot configuration (the
// guide's uninstall took it off lo already).
func (n *Node) ForgetLoopbackAddr(addr string) {
	n.LoopbackAddrs = slices.DeleteFunc(n.LoopbackAddrs, func(a string) bool { return a == addr })
}

// AddLoopbackAddr puts addr on the node's lo now and at every boot.
func (n *Node) AddLoopbackAddr(ctx context.Context, addr string) error {
	n.LoopbackAddrs = append(n.LoopbackAddrs, addr)
	return n.Net.NS.IP(ctx, "addr", "add", addr, "dev", "lo")
}

func (n *Node) addLoopbackAddrs(ctx context.Context) error {
	for _, a := range n.LoopbackAddrs {
		if err := n.Net.NS.IP(ctx, "addr", "replace", a, "dev", "lo"); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) owns(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	env := "\x00" + string(data)
	return strings.Contains(env, "\x00"+runEnv+"="+strconv.Itoa(n.cfg.Host.PID)+"\x00") &&
		strings.Contains(env, "\x00"+nodeEnv+"="+n.Name+"\x00")
}

func (n *Node) inCgroup(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	root := n.CgroupRoot()
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[2] == root || strings.HasPrefix(parts[2], root+"/")) {
			return true
		}
	}
	return false
}

// start runs cmd with the run's and the node's markers, logging to the
// node's directory.
func (n *Node) start(name string, cmd *exec.Cmd) (*controlplane.Process, error) {
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", runEnv, n.cfg.Host.PID), nodeEnv+"="+n.Name)
	p, err := controlplane.StartProcess(name, cmd, n.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Name, err)
	}
	klog.Background().V(2).Info("Started", "node", n.Name, "process", name, "pid", p.PID())
	return p, nil
}

func (n *Node) netnsPath() string { return "/run/netns/" + n.Net.NS.Name }

// nodeCPUShares is the CPU weight of a node's cgroupRoot, which holds its
// pods: four times the default, the weight of the test process's whole
// session (the kernel's autogroup) beside it. A real node's pods do not
// share its CPU with the other test packages' apiservers; in a CI run at a
// load of 58 on two cores, with the default weight, the clients' DNS
// queries to CoreDNS pods went unanswered for 2 s and a prober made 3
// attempts in a window of several seconds.
const nodeCPUShares = "4096"

// makeCgroups creates the kubelet's cgroupRoot in every v1 hierarchy (the
// kubelet refuses to start otherwise), cpuset's filled from its parent,
// the cpu hierarchy's weighted (nodeCPUShares).
func (n *Node) makeCgroups() error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, n.CgroupRoot())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if shares := filepath.Join(dir, "cpu.shares"); isFile(shares) {
			if err := os.WriteFile(shares, []byte(nodeCPUShares), 0o644); err != nil {
				return fmt.Errorf("%s: %w", shares, err)
			}
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// isFile: path names a regular file (a cgroup's control file).
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func sameNS(a, b string) error {
	la, err := os.Readlink(a)
	if err != nil {
		return err
	}
	lb, err := os.Readlink(b)
	if err != nil {
		return err
	}
	if la == lb {
		return fmt.Errorf("not unshared yet")
	}
	return nil
}

// backoffStop ends waitUntil early.
type backoffStop struct{ error }

// waitUntil polls check until it succeeds, returns a backoffStop, or the
// timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop backoffStop
		if errors.As(err, &stop) {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Enter is the command prefix that runs a command on the node: in its
// network and mount namespaces (its own /etc/kubernetes, /var/lib/kubelet,
// ... bound over the host's), as a shell on the node would.
func (n *Node) Enter() []string {
	return []string{"nsenter", "--net=" + n.netnsPath(), fmt.Sprintf("--mount=/proc/%d/ns/mnt", n.holder.PID())}
}

// Freeze stops (SIGSTOP) the one process of the node's containers whose
// program is binary, as a hung process is: it holds its sockets and
// answers nothing, probes included. thaw continues it (SIGCONT).
func (n *Node) Freeze(binary string) (thaw func() error, err error) {
	var found []int
	for _, p := range allProcesses() {
		if !n.inCgroup(p) || n.owns(p) {
			continue // not in a container of this node (the kubelet, containerd)
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if filepath.Base(argv0) == binary {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s: %d processes of %s in its containers (%v), want 1", n.Name, len(found), binary, found)
	}
	pid := found[0]
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("%s: SIGSTOP %s (%d): %w", n.Name, binary, pid, err)
	}
	return func() error {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("%s: SIGCONT %s (%d): %w", n.Name, binary, pid, err)
		}
		return nil
	}, nil
}
