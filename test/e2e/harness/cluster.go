// Package harness builds the end-to-end cluster on one machine: a network of
// node namespaces (Fabric), a real control plane bound to the fabric, Node
// objects, a kubelet player serving Pods as echo HTTP servers inside the node
// namespaces, and per node a real kube-proxy behind our wrapper plus our
// CoreDNS with gridhosts. Tests and the demo share it.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/owneddir"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// Options shape a cluster.
type Options struct {
	// Nodes default to DemoNodes().
	Nodes []NodeSpec
	// ProxyMode is kube-proxy's mode: ProxyModeIPTables (default) or ProxyModeNFTables.
	ProxyMode string
	// Components selects which of the project's programs run. Each must be
	// buildable from this repository (see Available).
	Components Components
	// Dir keeps logs, kubeconfigs and binaries (default: a new temp dir,
	// removed on Stop unless SERVICEGROUP_KEEP_E2E is set).
	Dir string
}

// Components are the project's programs in the cluster.
type Components struct {
	// Controller runs application-grid-controller (root namespace).
	Controller bool
	// Wrapper runs application-grid-wrapper in every node namespace and points
	// kube-proxy at it; without it kube-proxy talks to the apiserver directly.
	Wrapper bool
	// CoreDNS runs our CoreDNS with gridhosts in every node namespace ("node"
	// mode) and one in the hub namespace ("clients" mode).
	CoreDNS bool
}

// ServiceCIDR and ClusterCIDR of the test cluster.
const (
	ServiceCIDR = "10.96.0.0/16"
	ClusterCIDR = "10.244.0.0/16"
)

// Cluster is a running end-to-end cluster.
type Cluster struct {
	Fabric  *Fabric
	CP      *controlplane.ControlPlane
	Client  kubernetes.Interface
	Grids   versioned.Interface
	Kubelet *Kubelet
	// Nodes in the order of Options.Nodes.
	Nodes []*Node
	// SharedDNS is the hub's CoreDNS in "clients" mode (nil without CoreDNS).
	SharedDNS *DNSServer
	// Controller is application-grid-controller (nil without it).
	Controller *Process
	Dir        string
	ProxyMode  string

	opts        Options
	ownDir      bool
	binaries    map[string]string
	stopKubelet context.CancelFunc
	kubeletDone chan struct{}
	mu          sync.Mutex
	procs       []*Process
	stopOnce    sync.Once
	auditLog    string
	rbacState
}

// Node is one node: its namespace, labels and processes.
type Node struct {
	*FabricNode
	Spec      NodeSpec
	KubeProxy *Process
	Wrapper   *Process
	// DNS is this node's CoreDNS ("node" mode), nil without CoreDNS.
	DNS *DNSServer
	// kubeProxyKubeconfig is the shipped one, set by startWrapper.
	kubeProxyKubeconfig string
}

// DNSServer is one CoreDNS instance and where it answers.
type DNSServer struct {
	Process *Process
	// Addr is host:port, reachable from every node namespace.
	Addr string
	// Mode is "node NAME" or "clients".
	Mode string
	// Corefile says where its Corefile came from ("corefile/Corefile.node", "harness").
	Corefile string
}

// Start builds the cluster. On error everything started so far is stopped.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	logger := klog.FromContext(ctx)
	if len(opts.Nodes) == 0 {
		opts.Nodes = DemoNodes()
	}
	if opts.ProxyMode == "" {
		opts.ProxyMode = ProxyModeIPTables
	}
	// c, not the named result: "return nil, err" must not hide it from the cleanup.
	c := &Cluster{opts: opts, ProxyMode: opts.ProxyMode, binaries: map[string]string{}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.Dir, c.ownDir, err = owneddir.Use(opts.Dir, "servicegroup-e2e-"); err != nil {
		return nil, err
	}

	// Build our programs first: a compile error should not cost a cluster start.
	if err := c.buildComponents(ctx); err != nil {
		return nil, err
	}

	names := make([]string, len(opts.Nodes))
	for i, n := range opts.Nodes {
		names[i] = n.Name
	}
	if c.Fabric, err = NewFabric(ctx, FabricOptions{Nodes: names, ServiceCIDR: ServiceCIDR}); err != nil {
		return nil, err
	}

	logger.Info("Starting control plane", "bindAddress", c.Fabric.RootIP)
	audit, auditLog, err := auditArgs(filepath.Join(c.Dir, "audit"))
	if err != nil {
		return nil, err
	}
	c.auditLog = auditLog
	if c.CP, err = controlplane.Start(ctx, controlplane.Options{
		APIServerArgs:     audit,
		BindAddress:       c.Fabric.RootIP.String(),
		ExtraSANs:         []net.IP{c.Fabric.RootIP},
		ServiceCIDR:       ServiceCIDR,
		ControllerManager: true,
		Scheduler:         true,
		Dir:               filepath.Join(c.Dir, "controlplane"),
	}); err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.CP.Config); err != nil {
		return nil, err
	}
	if c.Grids, err = versioned.NewForConfig(c.CP.Config); err != nil {
		return nil, err
	}

	for i, spec := range opts.Nodes {
		fn := c.Fabric.Nodes[i]
		if err := createNode(ctx, c.Client, spec, fn); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, &Node{FabricNode: fn, Spec: spec})
	}

	c.Kubelet = NewKubelet(c.Client, c.Fabric)
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stopKubelet = cancel
	c.kubeletDone = make(chan struct{})
	go func() {
		defer close(c.kubeletDone)
		c.Kubelet.Run(kctx, 4)
	}()

	if opts.Components.Controller {
		if err := c.startController(ctx); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.startNodeComponents(ctx, n); err != nil {
			return nil, err
		}
	}
	if opts.Components.CoreDNS {
		if c.SharedDNS, err = c.startCoreDNS(ctx, c.Fabric.Hub, "hub", CorefileClients, c.Nodes[0].Name, net.JoinHostPort(c.Fabric.GatewayIP.String(), "53")); err != nil {
			return nil, err
		}
	}
	logger.Info("Cluster ready", "dir", c.Dir, "nodes", names, "proxyMode", opts.ProxyMode, "components", opts.Components)
	return c, nil
}

// startNodeComponents starts the wrapper, kube-proxy and CoreDNS of a node.
func (c *Cluster) startNodeComponents(ctx context.Context, n *Node) error {
	var kubeconfig string
	var err error
	if c.opts.Components.Wrapper {
		if n.Wrapper, err = c.startWrapper(ctx, n); err != nil {
			return err
		}
		c.track(n.Wrapper)
		kubeconfig = n.kubeProxyKubeconfig
	} else {
		cert, key := c.CP.AdminCertificate()
		if kubeconfig, err = c.CP.WriteKubeconfig("kube-proxy-"+n.Name+".kubeconfig", c.CP.URL, cert, key); err != nil {
			return err
		}
	}
	if n.KubeProxy, err = startKubeProxy(ctx, n.FabricNode, n.Spec.KubeProxy, c.ProxyMode, kubeconfig, ClusterCIDR, c.Dir); err != nil {
		return err
	}
	c.track(n.KubeProxy)
	if c.opts.Components.CoreDNS {
		if n.DNS, err = c.startCoreDNS(ctx, n.NS, n.Name, CorefileNode, n.Name, net.JoinHostPort(n.IP.String(), "53")); err != nil {
			return err
		}
	}
	return nil
}

// Node returns the named node, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *Cluster) track(p *Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

// Logs returns the tail of every process's log, for failure reports.
func (c *Cluster) Logs(n int) string {
	c.mu.Lock()
	procs := append([]*Process(nil), c.procs...)
	c.mu.Unlock()
	out := ""
	for _, p := range procs {
		out += fmt.Sprintf("----- %s (%s, %s) -----\n%s\n", p.Name, p.LogPath, p.Status(), p.LogTail(n))
	}
	if c.CP != nil {
		out += c.CP.Logs(n)
	}
	return out
}

// Stop ends everything: our processes, the kubelet player (pod servers and
// IPs), the control plane, then the network. Safe to call more than once.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	c.stopOnce.Do(func() {
		c.mu.Lock()
		procs := append([]*Process(nil), c.procs...)
		c.mu.Unlock()
		var wg sync.WaitGroup
		for i := len(procs) - 1; i >= 0; i-- {
			wg.Go(func() { procs[i].Stop(10 * time.Second) })
		}
		wg.Wait()
		if c.stopKubelet != nil {
			c.stopKubelet()
			select {
			case <-c.kubeletDone:
			case <-time.After(30 * time.Second):
			}
		}
		if c.CP != nil {
			c.CP.Stop()
		}
		c.Fabric.Close()
		if c.ownDir && os.Getenv("SERVICEGROUP_KEEP_E2E") == "" {
			os.RemoveAll(c.Dir)
		}
	})
}

// errComponentMissing marks a program that this checkout cannot build yet.
var errComponentMissing = errors.New("component not in this checkout")
