package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Names: every namespace and root-side link this harness creates carries the
// creating process's PID, so parallel runs never clash and leftovers of a
// crashed run can be recognised (and only those are ever removed). A
// process's first fabric is "sge2e-<pid>" with root link "sge<pid>r"; its
// later ones (a test's fabric may exist beside another test's) add their
// sequence number: "sge2e-<pid>-<n>", "sge<pid>r<n>".
const (
	namePrefix = "sge2e-"
	// root-side veth: "sge<pid>r<n>" stays under the 15-byte interface name
	// limit (a PID has at most 7 digits).
	rootLinkFormat = "sge%dr"
)

var (
	leftoverNS   = regexp.MustCompile(`^sge2e-(\d+)-`)
	leftoverLink = regexp.MustCompile(`^sge(\d+)r\d*$`)
)

// fabrics counts this process's fabrics; fabricMu makes one at a time (and
// runs one host probe at a time), so a fabric picks its subnet only once
// the one before has its address.
var (
	fabricMu sync.Mutex
	fabrics  int
)

// FabricOptions shape the test network.
type FabricOptions struct {
	// Nodes are the node names, one network namespace each.
	Nodes []string
	// ServiceCIDR is routed from every node into the fabric so that
	// kube-proxy's DNAT applies (default 10.96.0.0/16).
	ServiceCIDR string
}

// Fabric is the test network: one namespace per node and a "fabric"
// namespace holding a bridge all nodes hang off. The root namespace has one
// veth end on that bridge with an address in the test subnet and nothing but
// the connected route, so root processes (the apiserver) reach the nodes and
// the nodes reach only the apiserver's address.
//
//	root: sge<pid>r 10.250.X.1/24 ──┐
//	fabric ns: br0 10.250.X.2/24 ───┴── eth-nodeN ── nodeN ns: eth0 10.250.X.(10+N)/24
//	                                                   lo: pod IPs from 10.244.N.0/24
type Fabric struct {
	// Prefix names this fabric's namespaces ("sge2e-<pid>", "sge2e-<pid>-<n>").
	Prefix string
	// Subnet is the bridge subnet, a /24 nothing else on the machine uses.
	Subnet *net.IPNet
	// RootIP is the root namespace's address on the fabric (bind the apiserver here).
	RootIP net.IP
	// GatewayIP is the bridge's address in the fabric namespace; the service
	// CIDR is routed to it.
	GatewayIP net.IP
	// RootLink is the root-side veth.
	RootLink string
	// Hub is the fabric namespace (a place for shared services such as the
	// per-client CoreDNS, reachable from every node at GatewayIP).
	Hub *NetNS
	// Nodes in the order of FabricOptions.Nodes.
	Nodes []*FabricNode
	// ServiceCIDR as routed.
	ServiceCIDR string

	namespaces []string
}

// FabricNode is one node's namespace and addresses.
type FabricNode struct {
	Name    string
	NS      *NetNS
	IP      net.IP
	PodCIDR *net.IPNet
}

// NewFabric removes leftovers of crashed runs, then builds the network. On
// error everything it made is removed again.
func NewFabric(ctx context.Context, opts FabricOptions) (_ *Fabric, err error) {
	logger := klog.FromContext(ctx)
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	if len(opts.Nodes) == 0 || len(opts.Nodes) > 200 {
		return nil, fmt.Errorf("fabric needs 1..200 nodes, got %d", len(opts.Nodes))
	}
	fabricMu.Lock()
	defer fabricMu.Unlock()
	CleanupLeftovers(ctx)

	pid := os.Getpid()
	f := &Fabric{
		Prefix:      fmt.Sprintf("%s%d", namePrefix, pid),
		RootLink:    fmt.Sprintf(rootLinkFormat, pid),
		ServiceCIDR: opts.ServiceCIDR,
	}
	if fabrics > 0 {
		f.Prefix += "-" + strconv.Itoa(fabrics)
		f.RootLink += strconv.Itoa(fabrics)
	}
	fabrics++
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if f.Subnet, err = freeSubnet(ctx, pid); err != nil {
		return nil, err
	}
	f.RootIP = hostIP(f.Subnet, 1)
	f.GatewayIP = hostIP(f.Subnet, 2)

	if f.Hub, err = f.addNS(ctx, "fabric"); err != nil {
		return nil, err
	}
	hub := f.Hub.Name
	steps := [][]string{
		{"-n", hub, "link", "add", "br0", "type", "bridge"},
		{"-n", hub, "addr", "add", cidr(f.GatewayIP, f.Subnet), "dev", "br0"},
		{"-n", hub, "link", "set", "br0", "up"},
		// The one root-side link: created here, its peer moved straight into the hub.
		{"link", "add", f.RootLink, "type", "veth", "peer", "name", "uplink", "netns", hub},
		{"-n", hub, "link", "set", "uplink", "master", "br0", "up"},
		{"addr", "add", cidr(f.RootIP, f.Subnet), "dev", f.RootLink},
		{"link", "set", f.RootLink, "up"},
	}
	if err := runIPSteps(ctx, steps); err != nil {
		return nil, err
	}

	for i, name := range opts.Nodes {
		ns, err := f.addNS(ctx, name)
		if err != nil {
			return nil, err
		}
		n := &FabricNode{
			Name:    name,
			NS:      ns,
			IP:      hostIP(f.Subnet, byte(10+i)),
			PodCIDR: &net.IPNet{IP: net.IPv4(10, 244, byte(i), 0).To4(), Mask: net.CIDRMask(24, 32)},
		}
		f.Nodes = append(f.Nodes, n)
		hubEnd := fmt.Sprintf("eth-%d", i)
		steps := [][]string{
			{"-n", hub, "link", "add", hubEnd, "type", "veth", "peer", "name", "eth0", "netns", ns.Name},
			{"-n", hub, "link", "set", hubEnd, "master", "br0", "up"},
			{"-n", ns.Name, "addr", "add", cidr(n.IP, f.Subnet), "dev", "eth0"},
			{"-n", ns.Name, "link", "set", "eth0", "up"},
			// ClusterIPs go into the fabric, never towards the root namespace.
			{"-n", ns.Name, "route", "add", opts.ServiceCIDR, "via", f.GatewayIP.String(), "dev", "eth0"},
			// The hub answers per-client DNS queries from pod IPs.
			{"-n", hub, "route", "add", n.PodCIDR.String(), "via", n.IP.String(), "dev", "br0"},
		}
		if err := runIPSteps(ctx, steps); err != nil {
			return nil, err
		}
	}
	// Routes between nodes for each other's pod CIDRs.
	for _, a := range f.Nodes {
		for _, b := range f.Nodes {
			if a == b {
				continue
			}
			if err := a.NS.IP(ctx, "route", "add", b.PodCIDR.String(), "via", b.IP.String(), "dev", "eth0"); err != nil {
				return nil, err
			}
		}
	}
	logger.Info("Test network ready", "prefix", f.Prefix, "subnet", f.Subnet, "rootLink", f.RootLink, "rootIP", f.RootIP)
	return f, nil
}

// Node returns the named node, or nil.
func (f *Fabric) Node(name string) *FabricNode {
	for _, n := range f.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// addNS creates "<prefix>-<suffix>" with lo up, sysctls set inside it only.
func (f *Fabric) addNS(ctx context.Context, suffix string) (*NetNS, error) {
	name := f.Prefix + "-" + suffix
	if err := ipCmd(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	f.namespaces = append(f.namespaces, name)
	if err := ipCmd(ctx, "-n", name, "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	ns, err := openNetNS(name)
	if err != nil {
		return nil, err
	}
	// Inside the test namespace only: replies to pod-sourced packets come back
	// on another interface than lo, so strict reverse-path filtering must be off.
	for _, kv := range []string{"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"} {
		if out, err := ns.Run(ctx, "sysctl", "-q", "-w", kv); err != nil {
			return nil, fmt.Errorf("%w: %s", err, out)
		}
	}
	return ns, nil
}

// Close deletes the root-side link and every namespace this fabric made.
// Processes running inside them must have been stopped first.
func (f *Fabric) Close() {
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if f.RootLink != "" && linkExists(ctx, f.RootLink) {
		_ = ipCmd(ctx, "link", "del", f.RootLink)
	}
	for _, n := range f.Nodes {
		n.NS.close()
	}
	f.Hub.close()
	for i := len(f.namespaces) - 1; i >= 0; i-- {
		_ = ipCmd(ctx, "netns", "del", f.namespaces[i])
	}
	f.namespaces = nil
}

// CleanupLeftovers removes namespaces and root links named by this harness
// whose creating process no longer exists. Nothing else is touched.
func CleanupLeftovers(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if out, err := ipOutput(ctx, "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if m := leftoverNS.FindStringSubmatch(name); m != nil && !processAlive(m[1]) {
				logger.Info("Removing leftover network namespace of a crashed run", "netns", name)
				_ = ipCmd(ctx, "netns", "del", name)
			}
		}
	}
	if out, err := ipOutput(ctx, "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(fields[1], ":"), "@")
			if m := leftoverLink.FindStringSubmatch(name); m != nil && !processAlive(m[1]) {
				logger.Info("Removing leftover link of a crashed run", "link", name)
				_ = ipCmd(ctx, "link", "del", name)
			}
		}
	}
}

func processAlive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return true // not ours to judge
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", n))
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

func linkExists(ctx context.Context, name string) bool {
	return ipCmd(ctx, "link", "show", "dev", name) == nil
}

// freeSubnet picks a 10.250.X.0/24 that overlaps no address or route of the
// root namespace, starting at a PID-derived X so parallel runs differ.
func freeSubnet(ctx context.Context, pid int) (*net.IPNet, error) {
	var used []*net.IPNet
	for _, args := range [][]string{{"-4", "-o", "addr", "show"}, {"-4", "route", "show", "table", "all"}} {
		out, err := ipOutput(ctx, args...)
		if err != nil {
			return nil, err
		}
		for _, tok := range strings.Fields(out) {
			if !strings.Contains(tok, ".") {
				continue
			}
			if !strings.Contains(tok, "/") {
				tok += "/32"
			}
			if _, n, err := net.ParseCIDR(tok); err == nil {
				used = append(used, n)
			}
		}
	}
	for i := range 250 {
		x := byte(1 + (pid+i)%250)
		candidate := &net.IPNet{IP: net.IPv4(10, 250, x, 0).To4(), Mask: net.CIDRMask(24, 32)}
		clash := false
		for _, u := range used {
			if u.Contains(candidate.IP) || candidate.Contains(u.IP) {
				// 0.0.0.0/0 (default routes) contains everything: ignore it.
				if ones, _ := u.Mask.Size(); ones == 0 {
					continue
				}
				clash = true
				break
			}
		}
		if !clash {
			return candidate, nil
		}
	}
	return nil, errors.New("no free 10.250.X.0/24 subnet for the test network")
}

func hostIP(n *net.IPNet, host byte) net.IP {
	ip := make(net.IP, 4)
	copy(ip, n.IP.To4())
	ip[3] = host
	return ip
}

func cidr(ip net.IP, n *net.IPNet) string {
	ones, _ := n.Mask.Size()
	return fmt.Sprintf("%s/%d", ip, ones)
}

func runIPSteps(ctx context.Context, steps [][]string) error {
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}
