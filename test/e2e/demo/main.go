// Command demo runs SuperEdge's service group demo on this machine, for real:
// three nodes as network namespaces (node0 in nodeunit1, node1 and node2 in
// nodeunit2), a real control plane, our controller, a wrapper + real
// kube-proxy + our CoreDNS per node. It applies examples/*.yaml, prints which
// pods each node reaches through the ServiceGrid's ClusterIP and the
// StatefulSetGrid's unified names, then stays up until Ctrl-C.
//
//	go run ./test/e2e/demo            (as root)
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/gridcli"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

const (
	gridService  = "servicegrid-demo-svc"
	statefulGrid = "statefulsetgrid-demo"
	echoSelector = "appGrid=echo"
)

func main() {
	klog.InitFlags(nil)
	mode := flag.String("proxy-mode", harness.ProxyModeIPTables, "kube-proxy mode: iptables or nftables")
	requests := flag.Int("requests", 20, "requests per node to the ClusterIP")
	once := flag.Bool("once", false, "print the tables and exit instead of staying up until Ctrl-C")
	install := flag.Bool("install", true, "install missing Debian packages (iptables, nftables, conntrack, dnsutils) with apt-get")
	_ = flag.Set("v", "0")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *mode, *requests, *once, *install); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, mode string, requests int, once, install bool) error {
	if err := prepareMachine(ctx, install); err != nil {
		return err
	}
	say("Starting the cluster (control plane, 3 node namespaces, kube-proxy %s mode, controller, wrappers, CoreDNS)...", mode)
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	defer testbin.Cleanup() // the programs harness.Start builds
	c, err := harness.Start(startCtx, harness.Options{
		ProxyMode:  mode,
		Components: harness.Components{Controller: true, Wrapper: true, CoreDNS: true},
	})
	if err != nil {
		return err
	}
	defer func() {
		say("Tearing down: processes, pod servers, control plane, namespaces...")
		c.Stop()
		say("Done.")
	}()

	if err := c.WaitGridCRDs(startCtx); err != nil {
		return err
	}
	say("Applying examples/%s as-is...", strings.Join(harness.DemoExamples, ", examples/"))
	if err := c.ApplyExamples(startCtx, harness.DemoExamples...); err != nil {
		return err
	}
	units, err := c.Nodeunits(startCtx, harness.GridKey)
	if err != nil {
		return err
	}
	pods, clusterIP, err := waitSeedDemo(startCtx, c, units)
	if err != nil {
		return err
	}

	printNodes(c, units)
	printPods(pods, units)
	printClusterIP(startCtx, c, units, pods, clusterIP, requests)
	printUnifiedNames(startCtx, c, units, pods)
	printGridExplain(startCtx, c, "node0")
	printTryIt(c, clusterIP)

	if once {
		return nil
	}
	say("The cluster stays up. Press Ctrl-C to tear everything down.")
	<-ctx.Done()
	return nil
}

// prepareMachine checks root and network namespaces, installs missing
// Debian packages, and builds the control-plane binaries if needed.
func prepareMachine(ctx context.Context, install bool) error {
	if missing := harness.MissingTools(harness.AllTools...); len(missing) > 0 {
		var pkgs []string
		for _, t := range missing {
			pkgs = append(pkgs, t.Package())
		}
		if !install {
			return fmt.Errorf("missing Debian packages: %s", strings.Join(pkgs, " "))
		}
		root, err := harness.RepoRoot()
		if err != nil {
			return err
		}
		say("Installing Debian packages: %s", strings.Join(pkgs, " "))
		if err := runCmd(ctx, nil, filepath.Join(root, "hack", "host-deps.sh")); err != nil {
			return err
		}
	}
	if err := harness.CheckHost(ctx); err != nil {
		return err
	}
	if _, err := controlplane.Binary(controlplane.KubeProxy); err != nil {
		root, rerr := harness.RepoRoot()
		if rerr != nil {
			return rerr
		}
		say("Building the control-plane binaries once (hack/k8s-bins.sh, several minutes, cached)...")
		if err := runCmd(ctx, nil, filepath.Join(root, "hack", "k8s-bins.sh")); err != nil {
			return err
		}
	}
	return nil
}

// waitSeedDemo waits for one copy of each grid per nodeunit and the Service.
func waitSeedDemo(ctx context.Context, c *harness.Cluster, units map[string]string) ([]harness.PodInfo, string, error) {
	nodeunits := map[string]bool{}
	for _, u := range units {
		nodeunits[u] = true
	}
	want := (2 + 3) * len(nodeunits) // DeploymentGrid replicas + StatefulSetGrid replicas, per nodeunit
	say("Waiting for %d pods (the controller's Deployments and StatefulSets, scheduled by nodeSelector)...", want)
	for {
		pods, err := c.Pods(ctx, echoSelector)
		if err == nil {
			ready := 0
			for _, p := range pods {
				if p.Ready {
					ready++
				}
			}
			svc, serr := c.Client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
			if ready == want && serr == nil {
				return pods, svc.Spec.ClusterIP, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("SuperEdge's grids did not come up: %w\n%s", ctx.Err(), c.Logs(20))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func printNodes(c *harness.Cluster, units map[string]string) {
	heading("Nodes (one network namespace each)")
	w := table()
	fmt.Fprintln(w, "NODE\tzone1 (NODEUNIT)\tNODE IP\tPOD CIDR\tNETNS")
	for _, n := range c.Nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", n.Name, units[n.Name], n.IP, n.PodCIDR, n.NS.Name)
	}
	w.Flush()
}

func printPods(pods []harness.PodInfo, units map[string]string) {
	heading("Pods made from the grids (run by the harness's kubelet player)")
	w := table()
	fmt.Fprintln(w, "POD\tNODE\tNODEUNIT\tPOD IP")
	for _, p := range pods {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, p.Node, units[p.Node], p.IP)
	}
	w.Flush()
}

func printClusterIP(ctx context.Context, c *harness.Cluster, units map[string]string, pods []harness.PodInfo, clusterIP string, requests int) {
	url := "http://" + net.JoinHostPort(clusterIP, "80")
	heading(fmt.Sprintf("curl %s (Service %s, from ServiceGrid servicegrid-demo), %d requests from each node", url, gridService, requests))
	w := table()
	fmt.Fprintln(w, "FROM\tNODEUNIT\tANSWERED BY (pod name)\tON (node name)\tITS NODEUNIT\tREQUESTS")
	for _, n := range c.Nodes {
		// kube-proxy programs a Service and each endpoint change about a
		// second after it happens, on each node on its own: tally once this
		// node routes to every pod of its nodeunit.
		waitRoutes(ctx, n, url, nodeunitPods(pods, units, units[n.Name]))
		tally, err := tallyByPod(ctx, n, url, requests)
		if err != nil {
			fmt.Fprintf(w, "%s\t%s\terror: %v\t\t\t\n", n.Name, units[n.Name], err)
			continue
		}
		from, unit := n.Name, units[n.Name]
		for _, e := range tally {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", from, unit, e.pod, e.node, units[e.node], e.count)
			from, unit = "", ""
		}
	}
	w.Flush()
	fmt.Println("Every answer comes from a pod in the caller's own nodeunit: kube-proxy on each node")
	fmt.Println("reads EndpointSlices through that node's application-grid-wrapper, which keeps only")
	fmt.Println("endpoints on nodes with the same zone1 value (annotation topologyKeys: [\"zone1\"]).")
}

// printGridExplain runs `kubectl grid` in-process for one node: why its
// kube-proxy gets the endpoints it gets, and which pod a unified name means.
func printGridExplain(ctx context.Context, c *harness.Cluster, node string) {
	for _, args := range [][]string{
		{"explain", "svc/" + gridService, "--node", node},
		{"explain", "dns", fmt.Sprintf("%s-0.%s.default.svc.cluster.local", statefulGrid, gridService), "--node", node},
	} {
		fmt.Printf("\n$ kubectl grid %s\n", strings.Join(args, " "))
		cmd := gridcli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
		cmd.SetArgs(append([]string{"--kubeconfig", c.CP.Kubeconfig, "-n", "default"}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			fmt.Printf("kubectl grid: %v\n", err)
		}
	}
}

// nodeunitPods names the pods on nodes of nodeunit unit.
func nodeunitPods(pods []harness.PodInfo, units map[string]string, unit string) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		if units[p.Node] == unit {
			out[p.Name] = true
		}
	}
	return out
}

// waitRoutes sends requests from the node until each of want has answered,
// for a minute at most (the tally then shows what the node reaches).
func waitRoutes(ctx context.Context, n *harness.Node, url string, want map[string]bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	answered := map[string]bool{}
	for {
		pause := 200 * time.Millisecond
		if e, err := n.Get(ctx, url); err == nil {
			answered[e.Pod] = true
			if allIn(want, answered) {
				return
			}
			pause = 20 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return // the table shows what the node reaches
		case <-time.After(pause):
		}
	}
}

// allIn: every key of want is in have.
func allIn(want, have map[string]bool) bool {
	for k := range want {
		if !have[k] {
			return false
		}
	}
	return true
}

type answer struct {
	pod, node string
	count     int
}

// tallyByPod sends requests from inside the node and counts answers per pod.
func tallyByPod(ctx context.Context, n *harness.Node, url string, requests int) ([]answer, error) {
	counts := map[harness.Echo]int{}
	for range requests {
		e, err := n.Get(ctx, url)
		if err != nil {
			return nil, err
		}
		counts[harness.Echo{Pod: e.Pod, Node: e.Node}]++
	}
	var out []answer
	for e, c := range counts {
		out = append(out, answer{pod: e.Pod, node: e.Node, count: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod < out[j].pod })
	return out, nil
}

func printUnifiedNames(ctx context.Context, c *harness.Cluster, units map[string]string, pods []harness.PodInfo) {
	heading("Unified StatefulSetGrid names, resolved by each node's CoreDNS (gridhosts, node mode) and the shared one (clients mode)")
	w := table()
	fmt.Fprintln(w, "FROM\tNODEUNIT\tNAME\tNODE'S DNS\tSHARED DNS\tHTTP ANSWER (node name: pod name)")
	for _, n := range c.Nodes {
		for i := range 3 {
			name := fmt.Sprintf("%s-%d.%s.default.svc.cluster.local", statefulGrid, i, gridService)
			own := dig(ctx, n, n.DNS.Addr, name)
			shared := dig(ctx, n, c.SharedDNS.Addr, name)
			answer := "-"
			if e, err := n.GetVia(ctx, n.DNS.Addr, "http://"+net.JoinHostPort(name, "8080")+"/"); err != nil {
				answer = "error: " + err.Error()
			} else {
				answer = e.Node + ": " + e.Pod
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, units[n.Name], name, own, shared, answer)
		}
	}
	w.Flush()
	fmt.Println("The same name answers with the pod of the caller's nodeunit: statefulsetgrid-demo-{i}")
	fmt.Println("-> statefulsetgrid-demo-{nodeunit}-{i}.")
}

func dig(ctx context.Context, n *harness.Node, server, name string) string {
	ips, err := n.Dig(ctx, server, name, "A")
	if err != nil {
		return "error"
	}
	if len(ips) == 0 {
		return "(none)"
	}
	return strings.Join(ips, ",")
}

func printTryIt(c *harness.Cluster, clusterIP string) {
	heading("Try it yourself (as root, in another terminal)")
	n0, n1 := c.Nodes[0], c.Nodes[1]
	kubectl, _ := controlplane.Binary(controlplane.Kubectl)
	fmt.Printf("  ip netns exec %s curl -s http://%s | grep 'node name'\n", n0.NS.Name, clusterIP)
	fmt.Printf("  ip netns exec %s curl -s http://%s | grep 'node name'\n", n1.NS.Name, clusterIP)
	fmt.Printf("  ip netns exec %s dig +short @%s %s-0.%s.default.svc.cluster.local\n", n0.NS.Name, hostOnly(n0.DNS.Addr), statefulGrid, gridService)
	fmt.Printf("  ip netns exec %s dig +short @%s %s-0.%s.default.svc.cluster.local\n", n1.NS.Name, hostOnly(n1.DNS.Addr), statefulGrid, gridService)
	fmt.Printf("  ip netns exec %s iptables-save | grep %s   # kube-proxy's rules on node0 (nftables mode: nft list ruleset)\n", n0.NS.Name, gridService)
	fmt.Printf("  %s --kubeconfig %s get dg,ssg,sg,deploy,sts,svc,pods -o wide\n", kubectl, c.CP.Kubeconfig)
	fmt.Printf("  %s --kubeconfig %s label node node2 zone1=nodeunit1 --overwrite   # move node2 into nodeunit1\n", kubectl, c.CP.Kubeconfig)
	fmt.Printf("  logs: %s\n", c.Dir)
}

func hostOnly(hostport string) string {
	h, _, _ := net.SplitHostPort(hostport)
	return h
}

func heading(s string) {
	fmt.Printf("\n== %s\n", s)
}

func table() *tabwriter.Writer {
	return tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
}

func say(format string, args ...any) {
	fmt.Printf(">> "+format+"\n", args...)
}

func runCmd(ctx context.Context, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}
