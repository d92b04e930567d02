package harness

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// The project's programs, by package path relative to the repository root.
const (
	ControllerPkg = "./cmd/application-grid-controller"
	WrapperPkg    = "./cmd/application-grid-wrapper"
	CoreDNSPkg    = "./cmd/coredns"
)

// WrapperAddr is where each node's wrapper listens inside the node namespace
// (the address the shipped kube-proxy config points at, TLS);
// WrapperOpsAddr its plain-HTTP /readyz, /healthz and /metrics (the
// DaemonSet's probes).
const (
	WrapperAddr    = "127.0.0.1:51006"
	WrapperOpsAddr = "127.0.0.1:51007"
)

// Ports inside namespaces (each namespace has its own loopback).
const (
	coreDNSReadyAddr   = "127.0.0.1:8181"
	coreDNSHealthAddr  = "127.0.0.1:8080"
	coreDNSMetricsAddr = "127.0.0.1:9153"
)

// RepoRoot finds the repository root (the directory holding this module's
// go.mod) from the working directory upwards.
func RepoRoot() (string, error) { return testbin.RepoRoot() }

// Available reports whether this checkout has the package's main (the
// components land independently; absent means "not yet", not "broken").
func Available(pkg string) bool {
	root, err := RepoRoot()
	if err != nil {
		return false
	}
	matches, _ := filepath.Glob(filepath.Join(root, pkg, "*.go"))
	for _, m := range matches {
		if data, err := os.ReadFile(m); err == nil && strings.Contains(string(data), "package main") {
			return true
		}
	}
	return false
}

// buildComponents resolves the selected programs through testbin: the
// prebuilt ones in $SERVICEGROUP_BIN (make build's ./bin), or built once per
// process and shared by every cluster the process starts.
func (c *Cluster) buildComponents(ctx context.Context) error {
	want := map[string]string{}
	if c.opts.Components.Controller {
		want["application-grid-controller"] = ControllerPkg
	}
	if c.opts.Components.Wrapper {
		want["application-grid-wrapper"] = WrapperPkg
	}
	if c.opts.Components.CoreDNS {
		want["coredns"] = CoreDNSPkg
	}
	var names []string
	for name, pkg := range want {
		if !Available(pkg) {
			return fmt.Errorf("%s (%s): %w", name, pkg, errComponentMissing)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil
	}
	paths, err := testbin.Paths(ctx, names...)
	if err != nil {
		return err
	}
	maps.Copy(c.binaries, paths)
	return nil
}

// startController runs application-grid-controller in the root namespace
// against the apiserver.
func (c *Cluster) startController(ctx context.Context) error {
	bin := c.binaries["application-grid-controller"]
	healthPort, err := controlplane.FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	metricsPort, err := controlplane.FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	health := fmt.Sprintf("127.0.0.1:%d", healthPort)
	args := []string{
		"--kubeconfig=" + c.CP.Kubeconfig,
		"--leader-elect=false",
		"--health-bind-address=" + health,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		"--v=2",
	}
	p, err := startProcess("application-grid-controller", exec.Command(bin, args...), c.Dir)
	if err != nil {
		return err
	}
	c.track(p)
	c.Controller = p
	client := &http.Client{Timeout: 2 * time.Second}
	return waitProcessReady(ctx, p, "application-grid-controller /readyz", 2*time.Minute, func() error {
		return httpOK(client, "http://"+health+"/readyz")
	})
}

// startWrapper runs application-grid-wrapper inside the node's namespace as
// the shipped DaemonSet starts it (its args and env, in-cluster config with
// the upstream ConfigMap's address substituted by the test apiserver's).
func (c *Cluster) startWrapper(ctx context.Context, n *Node) (*Process, error) {
	bin := c.binaries["application-grid-wrapper"]
	sc, err := c.shippedNodeContainer(ctx, WrapperDaemonSet, n.Name)
	if err != nil {
		return nil, err
	}
	if len(sc.Command) != 0 || !slices.Contains(sc.Args, "--bind-address="+WrapperAddr) || !slices.Contains(sc.Args, "--metrics-bind-address="+WrapperOpsAddr) {
		return nil, fmt.Errorf("%s: want the image's entrypoint, --bind-address=%s (kube-proxy's kubeconfig points there) and --metrics-bind-address=%s (the probes), got command %v args %v", WrapperDaemonSet, WrapperAddr, WrapperOpsAddr, sc.Command, sc.Args)
	}
	run, err := c.podRunDir(ctx, "wrapper-"+n.Name, sc)
	if err != nil {
		return nil, err
	}
	hostDir := c.nodeRoot(n.Name)
	if err := c.runInitContainers(ctx, n.NS, run, hostDir, sc); err != nil {
		return nil, fmt.Errorf("%s: %w", WrapperDaemonSet, err)
	}
	args, err := sc.withHostPaths(hostDir, sc.Args)
	if err != nil {
		return nil, err
	}
	// kube-proxy's shipped kubeconfig, its pinned certificate read where
	// this wrapper writes it.
	if n.kubeProxyKubeconfig, err = writeShippedKubeProxyKubeconfig(c.Dir, n.Name, sc, hostDir); err != nil {
		return nil, err
	}
	p, err := startProcess("wrapper-"+n.Name, inClusterCommand(context.WithoutCancel(ctx), n.NS, run, sc.Env, bin, args...), c.Dir)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: n.NS.DialContext}}
	if err := waitProcessReady(ctx, p, "wrapper /readyz on "+n.Name, 2*time.Minute, func() error {
		return httpOK(client, "http://"+WrapperOpsAddr+"/readyz")
	}); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// shippedNodeContainer resolves a shipped DaemonSet's container for a node,
// with the edge RBAC in place.
func (c *Cluster) shippedNodeContainer(ctx context.Context, manifest, node string) (*shippedContainer, error) {
	if err := c.applyEdgeRBAC(ctx); err != nil {
		return nil, err
	}
	ds, err := readShippedDaemonSet(manifest)
	if err != nil {
		return nil, err
	}
	upstream, err := c.shippedUpstream()
	if err != nil {
		return nil, err
	}
	sc, err := containerFor(ds, node, upstream)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", manifest, err)
	}
	return sc, nil
}

// Corefile returns the Corefile the harness runs: gridhosts (mode is
// "node NAME" or "clients") in front of the kubernetes plugin, so grid names
// get the nodeunit's answer and every other cluster name the usual one.
func Corefile(listen, kubeconfig, mode string) string {
	return fmt.Sprintf(`.:%[1]s {
    bind %[2]s
    errors
    health %[5]s
    ready %[4]s
    gridhosts cluster.local {
        kubeconfig %[3]s
        %[6]s
        ttl 5
        fallthrough
    }
    kubernetes cluster.local {
        kubeconfig %[3]s
        ttl 5
    }
}
`, portOf(listen), hostOf(listen), kubeconfig, coreDNSReadyAddr, coreDNSHealthAddr, mode)
}

// startCoreDNS runs our CoreDNS inside ns, answering on listen, with the
// shipped Corefile (corefile/NAME adapted by adaptCorefile) when the checkout
// has one, else the harness's own. nodeName fills {$NODE_NAME}.
func (c *Cluster) startCoreDNS(ctx context.Context, ns *NetNS, name, shipped, nodeName, listen string) (*DNSServer, error) {
	bin := c.binaries["coredns"]
	mode := "node " + nodeName
	if shipped == CorefileClients {
		mode = "clients"
	}
	corefile := Corefile(listen, c.CP.Kubeconfig, mode)
	source := "harness"
	text, err := readShippedCorefile(shipped)
	if err != nil {
		return nil, err
	}
	if text != "" {
		// The node CoreDNS runs as the shipped DaemonSet: what the Corefile
		// reads through the node's wrapper (its DNS view's kubeconfig, a file
		// the wrapper writes on the node), the rest with in-cluster config,
		// its snapshot on the DaemonSet's hostPath; others keep theirs in a
		// file of the process.
		kubeconfig := c.CP.Kubeconfig
		snapshot := filepath.Join(c.Dir, "gridhosts-"+name+".snapshot")
		if shipped == CorefileNode {
			if !c.opts.Components.Wrapper {
				return nil, fmt.Errorf("corefile/%s reads through the node's wrapper: the node CoreDNS needs Components.Wrapper", shipped)
			}
			kubeconfig = ""
			if snapshot, err = c.nodeSnapshotPath(ctx, text, nodeName, snapshot); err != nil {
				return nil, fmt.Errorf("corefile/%s: %w", shipped, err)
			}
		}
		if corefile, err = adaptCorefile(text, hostOf(listen), kubeconfig, snapshot); err != nil {
			return nil, fmt.Errorf("corefile/%s: %w", shipped, err)
		}
		if shipped == CorefileNode {
			if corefile, err = c.nodeKubeconfigPaths(ctx, corefile, nodeName); err != nil {
				return nil, fmt.Errorf("corefile/%s: %w", shipped, err)
			}
		}
		source = "corefile/" + shipped
	}
	conf := filepath.Join(c.Dir, "Corefile-"+name)
	if err := os.WriteFile(conf, []byte(corefile), 0o644); err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if shipped == CorefileNode && source != "harness" {
		if cmd, err = c.nodeCoreDNSCommand(ctx, ns, name, nodeName, bin, conf); err != nil {
			return nil, err
		}
	} else {
		cmd = ns.Command(context.WithoutCancel(ctx), bin, "-conf", conf)
		cmd.Env = append(os.Environ(), "NODE_NAME="+nodeName)
	}
	p, err := startProcess("coredns-"+name, cmd, c.Dir)
	if err != nil {
		return nil, err
	}
	c.track(p)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: ns.DialContext}}
	if err := waitProcessReady(ctx, p, "CoreDNS /ready in "+ns.Name, 2*time.Minute, func() error {
		return c.coreDNSReady(client)
	}); err != nil {
		return nil, err
	}
	return &DNSServer{Process: p, Addr: listen, Mode: mode, Corefile: source}, nil
}

// nodeCoreDNSCommand starts CoreDNS as the shipped coredns-node DaemonSet
// does: its args (the Corefile path mapped to the harness's adapted copy),
// its env (NODE_NAME, the upstream ConfigMap) and in-cluster credentials.
func (c *Cluster) nodeCoreDNSCommand(ctx context.Context, ns *NetNS, name, nodeName, bin, conf string) (*exec.Cmd, error) {
	sc, err := c.shippedNodeContainer(ctx, CoreDNSDaemonSet, nodeName)
	if err != nil {
		return nil, err
	}
	args, err := sc.mountedFile("config", "Corefile", conf, sc.Args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CoreDNSDaemonSet, err)
	}
	run, err := c.podRunDir(ctx, "coredns-"+name, sc)
	if err != nil {
		return nil, err
	}
	if err := c.runInitContainers(ctx, ns, run, c.nodeRoot(nodeName), sc); err != nil {
		return nil, fmt.Errorf("%s: %w", CoreDNSDaemonSet, err)
	}
	if args, err = sc.withHostPaths(c.nodeRoot(nodeName), args); err != nil {
		return nil, err
	}
	return inClusterCommand(context.WithoutCancel(ctx), ns, run, sc.Env, bin, args...), nil
}

// nodeSnapshotPath maps the shipped Corefile's gridhosts snapshot path onto
// the node's directory for the coredns-node DaemonSet's hostPath volume. A
// snapshot outside every hostPath would not survive a reboot: an error.
// Without a snapshot line, fallback is returned (adaptCorefile ignores it).
func (c *Cluster) nodeSnapshotPath(ctx context.Context, corefile, nodeName, fallback string) (string, error) {
	var shippedPath string
	for _, l := range strings.Split(corefile, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "snapshot" {
			shippedPath = f[1]
		}
	}
	if shippedPath == "" {
		return fallback, nil
	}
	sc, err := c.shippedNodeContainer(ctx, CoreDNSDaemonSet, nodeName)
	if err != nil {
		return "", err
	}
	mapped, err := sc.withHostPaths(c.nodeRoot(nodeName), []string{shippedPath})
	if err != nil {
		return "", err
	}
	if mapped[0] == shippedPath {
		return "", fmt.Errorf("gridhosts snapshot %s is on no hostPath volume of %s: it would not survive a reboot", shippedPath, CoreDNSDaemonSet)
	}
	return mapped[0], nil
}

// nodeKubeconfigPaths maps the node Corefile's kubeconfig and
// services_kubeconfig paths (the wrapper's DNS view, files the node's
// wrapper writes) onto the node's files through the coredns-node
// DaemonSet's hostPath volumes, as the pod sees them. A kubeconfig on no
// hostPath volume is an error: the pod could not read it.
func (c *Cluster) nodeKubeconfigPaths(ctx context.Context, corefile, nodeName string) (string, error) {
	sc, err := c.shippedNodeContainer(ctx, CoreDNSDaemonSet, nodeName)
	if err != nil {
		return "", err
	}
	mapped, err := sc.withHostPaths(c.nodeRoot(nodeName), []string{corefile})
	if err != nil {
		return "", fmt.Errorf("%s: %w", CoreDNSDaemonSet, err)
	}
	for _, l := range strings.Split(mapped[0], "\n") {
		if f := strings.Fields(l); len(f) > 1 && (f[0] == "kubeconfig" || f[0] == "services_kubeconfig") && !strings.HasPrefix(f[1], c.nodeRoot(nodeName)+"/") {
			return "", fmt.Errorf("%s %s is on no hostPath volume of %s", f[0], f[1], CoreDNSDaemonSet)
		}
	}
	return mapped[0], nil
}

// nodeRoot is where a node's hostPath volumes live: a volume's path on the
// node below it, shared by the node's components (the wrapper writes the
// DNS view's kubeconfig that CoreDNS reads) and kept across their restarts.
func (c *Cluster) nodeRoot(node string) string {
	return filepath.Join(c.Dir, "node-"+node)
}

// coreDNSReady is /ready answering 200, or, while the apiserver is down,
// every plugin ready but kubernetes: the kubernetes plugin is not ready until
// its informers sync, which a CoreDNS started during an outage cannot do,
// while gridhosts serves from its snapshot (the tests check its answers).
func (c *Cluster) coreDNSReady(client *http.Client) error {
	resp, err := client.Get("http://" + coreDNSReadyAddr + "/ready")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	err = fmt.Errorf("/ready: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusServiceUnavailable || strings.TrimSpace(string(body)) != "kubernetes" {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, uerr := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); uerr == nil {
		return err // the apiserver answers: kubernetes must get ready
	}
	return nil
}

func hostOf(hostport string) string {
	h, _, _ := strings.Cut(hostport, ":")
	return h
}

func portOf(hostport string) string {
	_, p, _ := strings.Cut(hostport, ":")
	return p
}
