package realnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	"github.com/servicegroup/servicegroup/internal/owneddir"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// The seeds' cluster: node0 in nodeunit1, node1 and node2 in nodeunit2.
var seedNodes = []struct{ name, unit string }{{"node0", "nodeunit1"}, {"node1", "nodeunit2"}, {"node2", "nodeunit2"}}

// deadNode is a plain worker of nodeunit1 (a kubelet, no data plane of
// ours) that loses power in the "dead node" step and is then deleted.
const deadNode, deadNodeUnit = "node3", "nodeunit1"

// cloudNode plays the cloud for the autonomy steps: the controller, whose
// replicas serve the autonomy webhook, is kept there (build/README.md,
// Autonomy) and the apiserver reaches its pod network.
const cloudNode = "node0"

const (
	gridKey      = "zone1"
	gridService  = "servicegrid-demo-svc"
	statefulGrid = "statefulsetgrid-demo"
	echoSelector = "appGrid=echo"
	// runTimeout bounds the run once it holds the host (its builds already
	// waited for). Warm it takes about 14 minutes; from empty caches on a
	// slow 2-core machine, sharing the CPU with the builds of the older
	// releases and SuperEdge, 27 minutes ended it in the partition step
	// with nothing wrong (the cold run of 44fcb48).
	runTimeout = 40 * time.Minute
	// staticNode is installed with the static-pod option (build/static-pods)
	// instead of the DaemonSets, and is the one that reboots.
	staticNode = "node2"
	// nodeLocalDNS is the node's CoreDNS address (host network, on the
	// node's lo: every node has its own), each kubelet's clusterDNS from
	// the guide's node-dns (DaemonSet install) or static-node-dns step.
	nodeLocalDNS = "169.254.20.10"
	requests     = 50
	guide        = "build/README.md"
	// migrationGuide is the switch from SuperEdge and back.
	migrationGuide = "build/MIGRATION.md"
)

// clusterDNS is the cluster DNS of kubeadm (Service kube-dns,
// testdata/kubeadm-coredns.yaml), the other nodes' clusterDNS at their
// first boot.
const clusterDNS = "10.96.0.10"

// edgeCoreDNS is where SuperEdge's edge-coredns answers on each edge node
// (edgeadm 0.8.2 and later: host network, its edge virtual address on the
// node, testdata/superedge.yaml), the edge nodes' clusterDNS while
// SuperEdge's data plane runs.
const edgeCoreDNS = "169.254.20.11"

// TestRealNodes installs the shipped artefacts with the operator guide's
// commands on three real kubelets with their own containerd, in two
// nodeunits, and checks the grids from inside pods; then one node reboots
// while the apiserver is away.
func TestRealNodes(t *testing.T) {
	kubelet, kubectl, kubeProxy := requireHost(t)
	// Before the run's clock starts: another run may hold the host.
	unlock, err := hostLock(t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock) // registered first, so it runs after the teardown
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	costs := &stepCosts{t: t}
	defer costs.report()

	run, err := owneddir.Make("servicegroup-realnode-")
	if err != nil {
		t.Fatal(err)
	}
	if err := requireFreeDisk(run, minFreeDisk); err != nil {
		os.RemoveAll(run)
		t.Fatal(err)
	}
	SweepLeftovers(ctx)
	before := snapshotHost(t)
	host, err := NewHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fabric *harness.Fabric
	var cp *controlplane.ControlPlane
	var reg *Registry
	var nodes []*Node
	var op *Operator
	var teardownOnce sync.Once
	teardown := func() {
		teardownOnce.Do(func() {
			costs.step("teardown", func() {
				for _, n := range nodes {
					if err := n.PowerOff(context.Background()); err != nil {
						t.Errorf("teardown %s: %v", n.Name, err)
					}
				}
				if cp != nil {
					cp.Stop()
				}
				reg.Close()
				fabric.Close()
				if err := host.Restore(context.Background()); err != nil {
					t.Errorf("teardown: %v", err)
				}
			})
		})
	}
	// Ctrl-C or a kill must not leave kubelets, containers, cgroups or
	// changed sysctls behind: restore, then die.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	stopSignals := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "realnode: %v: tearing down\n", s)
			teardown()
			if os.Getenv("SERVICEGROUP_KEEP_E2E") == "" {
				os.RemoveAll(run)
			}
			os.Exit(1)
		case <-stopSignals:
		}
	}()
	t.Cleanup(func() {
		signal.Stop(sigs)
		close(stopSignals)
		if t.Failed() && op != nil {
			for _, args := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "events", "-A"}} {
				out, _ := op.Run(context.Background(), args...)
				t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
			}
		}
		if t.Failed() {
			for _, n := range nodes {
				if p := n.Kubelet(); p != nil {
					t.Logf("----- %s kubelet -----\n%s", n.Name, p.LogTail(25))
				}
			}
			if cp != nil {
				t.Logf("control plane logs:\n%s", cp.Logs(20))
			}
		}
		teardown()
		assertRestored(t, before, host, fabric)
		switch {
		case os.Getenv("SERVICEGROUP_KEEP_E2E") != "":
			t.Logf("run directory kept: %s", run)
		case t.Failed():
			// Logs and manifests are what a failure is read from; images
			// and containerd's state are gigabytes on a shared disk.
			if pruneToLogs(run) {
				t.Logf("run directory kept, logs and manifests only: %s", run)
			} else {
				t.Logf("run directory kept whole (something is still mounted under it): %s", run)
			}
		default:
			os.RemoveAll(run)
		}
	})

	names := make([]string, len(seedNodes))
	for i, n := range seedNodes {
		names[i] = n.name
	}
	if fabric, err = harness.NewFabric(ctx, harness.FabricOptions{Nodes: append(slices.Clone(names), deadNode)}); err != nil {
		t.Fatal(err)
	}
	// The cloud's pod network is routed from the control plane, as in a
	// cloud provider's network (the apiserver calls the autonomy webhook
	// at a pod's address); the route goes with the fabric's link.
	if out, err := exec.CommandContext(ctx, "ip", "route", "add", fabric.Node(cloudNode).PodCIDR.String(), "via", fabric.Node(cloudNode).IP.String(), "dev", fabric.RootLink).CombinedOutput(); err != nil {
		t.Fatalf("route to %s's pods: %v: %s", cloudNode, err, out)
	}
	if reg, err = StartRegistry(fabric.RootIP, filepath.Join(run, "registry")); err != nil {
		t.Fatal(err)
	}
	cp, err = controlplane.Start(ctx, controlplane.Options{
		BindAddress:       fabric.RootIP.String(),
		ControllerManager: true,
		// Real kubelets: the node lifecycle controller lifts their
		// registration taint once they are Ready.
		Controllers:              "*",
		ControllerManagerArgs:    controllerManagerArgs(),
		Scheduler:                true,
		KubeletClientCertificate: true,
		Dir:                      filepath.Join(run, "cp"),
		APIServerArgs: []string{
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			// Real pods get their ServiceAccount tokens (admission on).
			"--disable-admission-plugins=",
			// The `kubernetes` Service gets the apiserver as endpoint.
			"--endpoint-reconciler-type=lease",
			// Never the machine's resolver for node names.
			"--kubelet-preferred-address-types=InternalIP",
			// Webhooks at their endpoints' addresses: no kube-proxy on
			// the control plane's host.
			"--enable-aggregator-routing=true",
			// Scaled for the partition steps (partition_test.go).
			"--default-unreachable-toleration-seconds=" + strconv.Itoa(tolerationSeconds),
			"--default-not-ready-toleration-seconds=" + strconv.Itoa(tolerationSeconds),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cp.Config)
	op, err = NewOperator(ctx, filepath.Join(run, "operator"), kubectl, cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	// The steps of the guides that ran (guide#step).
	ranSteps := map[string]bool{}
	// The nodes doctor checks while our data plane is installed.
	doctorNodes := slices.Sorted(slices.Values(names))
	// Prometheus and prometheus-operator (monitoring.go) build meanwhile,
	// when not cached, or wait for the build `make test` started.
	type monitoringResult struct {
		b   *MonitoringBuild
		err error
	}
	monitoringBuilt := make(chan monitoringResult, 1)
	go func() {
		b, err := BuildMonitoring(ctx)
		monitoringBuilt <- monitoringResult{b, err}
	}()
	costs.step("images", func() {
		if err := PushTestImages(ctx, reg, kubeProxy, controlplane.KubernetesVersion, run); err != nil {
			t.Fatal(err)
		}
		// build/README.md's first block: upstream.env edited (by a sed as
		// EDITOR), `make images` for this machine's platform into the
		// site's registry.
		op.Substitutions = map[string]string{"registry.example/edge": reg.Addr + "/servicegroup"}
		editor := fmt.Sprintf("sed -i -e s/^KUBERNETES_SERVICE_HOST=.*/KUBERNETES_SERVICE_HOST=%s/ -e s/^KUBERNETES_SERVICE_PORT=.*/KUBERNETES_SERVICE_PORT=%d/", fabric.RootIP, apiPort(cp))
		ranSteps[guide+"#before-you-start"] = true
		out, err := op.RunStep(ctx, guide, "before-you-start", "EDITOR="+editor, "PLATFORMS=linux/"+goarch(), "VERSION="+op.Version)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("before-you-start:\n%s", lastLines(out, 8))
		if err := op.CheckUpstream(fabric.RootIP.String(), apiPort(cp)); err != nil {
			t.Fatal(err)
		}
	})
	// The Helm path (build/README.md, "Install with Helm") in place of
	// kustomize's cluster steps: this build published as a release.
	var helmRel *HelmRelease
	var chartVersion string
	costs.step("helm publish", func() {
		var err error
		if helmRel, err = NewHelmRelease(ctx, op, reg.Addr+"/servicegroup", filepath.Join(run, "helm")); err != nil {
			t.Fatal(err)
		}
		helmRel.UpstreamHost, helmRel.UpstreamPort = fabric.RootIP.String(), apiPort(cp)
		if chartVersion, err = helmRel.Publish(ctx, op, op.Version); err != nil {
			t.Fatal(err)
		}
	})

	costs.step("nodes Ready", func() {
		cfg := NodeConfig{Host: host, Kubelet: kubelet, CAFile: cp.CAFile(), Registry: reg, Nameserver: fabric.GatewayIP.String()}
		all := append(slices.Clone(seedNodes), struct{ name, unit string }{deadNode, deadNodeUnit})
		for _, sn := range all {
			cert, key, err := cp.IssueClientCertificate("system:node:"+sn.name, "system:nodes")
			if err != nil {
				t.Fatal(err)
			}
			kcPath, err := cp.WriteKubeconfig(sn.name+".kubeconfig", cp.URL, cert, key)
			if err != nil {
				t.Fatal(err)
			}
			kc, err := os.ReadFile(kcPath)
			if err != nil {
				t.Fatal(err)
			}
			n := NewNode(cfg, sn.name, fabric.Node(sn.name), map[string]string{gridKey: sn.unit}, kc, filepath.Join(run, sn.name))
			n.ClusterDNS = clusterDNS
			nodes = append(nodes, n)
		}
		// The nodes boot at once, as a site's machines do: each its own
		// namespaces, directories, cgroups and processes (each kubelet
		// watched for 3 s after its start, Node.Start).
		var boots errgroup.Group
		for _, n := range nodes {
			boots.Go(func() error { return n.Start(ctx) })
		}
		if err := boots.Wait(); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, 0, "every node Ready", func(ctx context.Context) error {
			return nodesReady(ctx, client, append(slices.Clone(names), deadNode))
		})
	})

	// From now to the end, no node may run two kube-proxies at once.
	netns := map[string]string{}
	for _, n := range nodes {
		netns[n.netnsPath()] = n.Name
	}
	proxies, err := startKubeProxySampler(netns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		samples, twice := proxies.Stop()
		t.Logf("kube-proxy sampler: %d samples of every node's processes (every 200 ms), %d with two kube-proxies on one node", samples, len(twice))
		for _, line := range twice {
			t.Errorf("two kube-proxies on one node: %s", line)
		}
	})

	// What a kubeadm cluster runs before anything of ours: the stock
	// kube-proxy on every node. Then the client pods start measuring.
	var windows []window
	clients := make([]string, len(names))
	// The probe Service's clusterIP, and the logs of clients replaced by a
	// new pod of the same name (recreateClient).
	var probeIP string
	earlierLogs := map[string]string{}
	// prometheus-operator's and Prometheus's install (monitoring.go),
	// started in the kubeadm step, waited for by the prometheus-operator
	// step.
	prometheusDir := filepath.Join(run, "prometheus")
	prometheusInstalled := make(chan error, 1)
	costs.step("kubeadm kube-proxy, probe, clients", func() {
		stock, err := os.ReadFile("testdata/kubeadm-kube-proxy.yaml")
		if err != nil {
			t.Fatal(err)
		}
		stockFile := filepath.Join(run, "kubeadm-kube-proxy.yaml")
		apiserver := fmt.Sprintf("%s:%d", fabric.RootIP, apiPort(cp))
		if err := os.WriteFile(stockFile, []byte(strings.ReplaceAll(string(stock), "APISERVER", apiserver)), 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(ctx, t, op, "apply", "-f", stockFile)
		// The probe and the clients start meanwhile (their pulls beside
		// kube-proxy's: the client image shares its root file system).
		deploy, svc := probeObjects(staticNode, deadNode)
		if _, err := client.AppsV1().Deployments("default").Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if svc, err = client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i, sn := range seedNodes {
			clients[i] = "client-" + sn.name
			if _, err := client.CoreV1().Pods("default").Create(ctx, clientPod(sn.name, svc.Spec.ClusterIP), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		probeIP = svc.Spec.ClusterIP
		// kubeadm's cluster DNS once kube-proxy runs on every node, as on a
		// kubeadm cluster, where CoreDNS's pods wait for the pod network
		// (the nodes' readiness) while kube-proxy's start at once: a CoreDNS
		// started before its node has the `kubernetes` Service's rules
		// connects into nothing and tries again only after client-go's 30 s
		// dial timeout (CoreDNS not ready for 41 s in a run that applied
		// both at once).
		eventually(ctx, t, 0, "the stock kube-proxy Ready on every node", func(ctx context.Context) error {
			return daemonSetsReady(ctx, client, map[string]int{"kube-system/kube-proxy": len(names) + 1})
		})
		// Our CoreDNS image stands in for kubeadm's (pulled by the tag
		// `make images` pushed).
		kubeDNS, err := os.ReadFile("testdata/kubeadm-coredns.yaml")
		if err != nil {
			t.Fatal(err)
		}
		kubeDNSFile := filepath.Join(run, "kubeadm-coredns.yaml")
		kubeDNSText := strings.NewReplacer("COREDNS_IMAGE", reg.Addr+"/servicegroup/coredns-gridhosts:"+op.Version, "AVOID_NODE", staticNode+", "+deadNode).Replace(string(kubeDNS))
		if err := os.WriteFile(kubeDNSFile, []byte(kubeDNSText), 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(ctx, t, op, "apply", "-f", kubeDNSFile)
		// Meanwhile prometheus-operator and its Prometheus (the
		// prometheus-operator step waits for them), pushed and applied
		// while kube-dns starts, as they were right after this step:
		// kube-proxy's rules are in place for their pods, and nothing this
		// step checks reads them.
		go func() {
			prometheusInstalled <- func() error {
				built := <-monitoringBuilt
				if built.err != nil {
					return built.err
				}
				if err := PushMonitoringImages(ctx, reg, built.b); err != nil {
					return err
				}
				return InstallPrometheus(ctx, op, built.b, prometheusDir, cloudNode)
			}()
		}()
		eventually(ctx, t, 0, "the stock kube-proxy on every node, the probe's pods and the clients Ready, every client reaching the probe Service and resolving its name through the cluster DNS", func(ctx context.Context) error {
			ds, err := client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if int(ds.Status.NumberReady) != len(names)+1 {
				return fmt.Errorf("kube-proxy: %d of %d ready", ds.Status.NumberReady, len(names)+1)
			}
			return clientsProbing(ctx, client, clients, "svc", "dns")
		})
	})

	// The report of the clients' traffic during each window. No Service
	// request and no DNS query may fail in any, from a client's first
	// attempt on (a new client's window starts at its creation): every
	// kubelet names another name server before the one it names goes
	// (build/README.md). Stalled attempts (traffic.go) are listed apart.
	// The new flows the steps since the last report saw, by network
	// namespace (followStepFlows), for a request whose SYNs went unanswered.
	var flowEvents map[string]string
	reportTraffic := func(clients []string, windows []window) {
		t.Helper()
		events := flowEvents
		flowEvents = nil
		if events != nil && os.Getenv("SERVICEGROUP_REALNODE_TRAIL") != "" {
			t.Logf("what the followers recorded during the steps (each namespace's new flows to or from the echo servers' port, and the kernel's drops): %s", flowCounts(events))
		}
		report, table, err := trafficReport(ctx, client, clients, windows, earlierLogs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("traffic during each step (failed of all attempts, longest time without a success):\n%s", table)
		var lost []string     // what each window and client lost
		var failures []string // the failed requests' details, for unansweredFlows
		for _, w := range windows {
			for c, r := range report[w.name] {
				failures = append(failures, r["svc"].failures...)
				failures = append(failures, r["gsvc"].failures...)
				if r["svc"].failed > 0 {
					lost = append(lost, fmt.Sprintf("%s: %s: %d of %d Service requests failed (at %s)", w.name, c, r["svc"].failed, r["svc"].attempts, strings.Join(r["svc"].failures, "; ")))
				}
				if dns := r["dns"]; dns.failed > 0 {
					lost = append(lost, fmt.Sprintf("%s: %s: %d of %d DNS queries failed: %s", w.name, c, dns.failed, dns.attempts, strings.Join(dns.failures, "; ")))
				}
				if grid := r["grid"]; grid.failed > 0 {
					lost = append(lost, fmt.Sprintf("%s: %s: %d of %d queries of the grid's unified name failed: %s", w.name, c, grid.failed, grid.attempts, strings.Join(grid.failures, "; ")))
				}
				if gsvc := r["gsvc"]; gsvc.failed > 0 {
					lost = append(lost, fmt.Sprintf("%s: %s: %d of %d requests to the grid's Service failed or left the nodeunit (at %s)", w.name, c, gsvc.failed, gsvc.attempts, strings.Join(gsvc.failures, "; ")))
				}
			}
		}
		if len(lost) > 0 {
			t.Logf("what the nodes' network namespaces counted as lost so far:\n%s", netCounters(ctx, nodes, fabric.Hub))
			if flows := unansweredFlows(failures); len(flows) > 0 {
				t.Logf("the conntrack entries of each request whose SYNs went unanswered, per namespace:\n%s", conntrackFlows(ctx, nodes, fabric.Hub, flows, events))
				t.Logf("the pods that run now, for the addresses above:\n%s", podAddresses(ctx, client, "default"))
			}
		}
		for _, l := range lost {
			t.Error(l)
		}
	}

	// Runs a step of a guide (on a node when onNode is set, see
	// Node.Enter) and records its window (named by the step and its node)
	// for the traffic report.
	stepOnThen := func(onNode []string, then func() error, g, name string, env ...string) {
		t.Helper()
		ranSteps[g+"#"+name] = true
		w := window{name: name, start: time.Now()}
		for _, e := range env {
			if strings.HasPrefix(e, "NODE=") {
				w.name += " " + e
			}
		}
		if out, err := op.RunStepOn(ctx, onNode, g, name, env...); err != nil {
			t.Fatal(err)
		} else {
			t.Logf("%s:\n%s", w.name, lastLines(out, 12))
		}
		if then != nil {
			if err := then(); err != nil {
				t.Fatalf("%s: %v", w.name, err)
			}
		}
		w.end = time.Now()
		windows = append(windows, w)
	}
	stepOn := func(onNode []string, g, name string, env ...string) {
		t.Helper()
		stepOnThen(onNode, nil, g, name, env...)
	}
	// moveDNSAtOnce runs a guide step on each node of ns, at once, that
	// points its kubelet's clusterDNS elsewhere and restarts the kubelet;
	// then the node's client pod is recreated at once and must name want
	// as its only nameserver and resolve through it (nodeDNSStep). No wait
	// for the restarted kubelet's probes: the node's CoreDNS, and
	// SuperEdge's edge-coredns, are reached on node-local addresses, not
	// through a Service whose endpoint a not-yet-probed pod leaves. Each
	// node's step and new client have windows of their own (overlapping
	// between nodes). Several nodes only when no two of them run pods of
	// one Service the clients use: a restarted kubelet takes its pods out
	// of their Services until their readiness probes pass again.
	moveDNSAtOnce := func(ns []*Node, want, g, name string, env ...string) {
		t.Helper()
		type onNode struct {
			extra []string
			then  func() error
		}
		// Each node's stand-in systemctl and its log, written before any
		// block runs (the stand-in is one file).
		prep := make([]onNode, len(ns))
		for i, n := range ns {
			extra, then, err := nodeDNSStep(ctx, n, filepath.Join(run, "node-bin"), op.Kubectl, want)
			if err != nil {
				t.Fatal(err)
			}
			prep[i] = onNode{extra, then}
		}
		ranSteps[g+"#"+name] = true
		var mu sync.Mutex // windows, earlierLogs
		var each errgroup.Group
		for i, n := range ns {
			each.Go(func() error {
				w := window{name: name + " NODE=" + n.Name, start: time.Now()}
				out, err := op.RunStepOn(ctx, n.Enter(), g, name, append(append([]string{"NODE=" + n.Name}, prep[i].extra...), env...)...)
				if err != nil {
					return err
				}
				t.Logf("%s:\n%s", w.name, lastLines(out, 12))
				if err := prep[i].then(); err != nil {
					return fmt.Errorf("%s: %w", w.name, err)
				}
				w.end = time.Now()
				c := window{name: w.name + ": new client", start: time.Now()}
				logs := map[string]string{}
				if err := recreateClient(ctx, client, n.Name, probeIP, logs); err != nil {
					return err
				}
				c.end = time.Now()
				// The new client's first attempts count as an operator's
				// freshly started pods' would: its window runs from its
				// creation until its requests and queries are all answered.
				mu.Lock()
				windows = append(windows, w, c)
				for pod, log := range logs {
					earlierLogs[pod] += log
				}
				mu.Unlock()
				if err := resolverAnswers(ctx, op, "client-"+n.Name, want); err != nil {
					return err
				}
				t.Logf("%s: resolv.conf names %s only, which answers %s", "client-"+n.Name, want, probeName)
				return nil
			})
		}
		if err := each.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	// moveDNS is moveDNSAtOnce on node n alone.
	moveDNS := func(n *Node, want, g, name string, env ...string) {
		t.Helper()
		moveDNSAtOnce([]*Node{n}, want, g, name, env...)
	}
	stepIn := func(g, name string, env ...string) {
		t.Helper()
		stepOn(nil, g, name, env...)
	}
	step := func(name string, env ...string) {
		t.Helper()
		stepIn(guide, name, env...)
	}
	helmStepThen := func(then func() error, name, version, chart string) {
		t.Helper()
		w := window{name: name, start: time.Now()}
		out, err := helmRel.RunStep(ctx, op, name, version, chart)
		if err != nil {
			t.Fatal(err)
		}
		ranSteps["helm#"+name] = true
		t.Logf("%s:\n%s", name, lastLines(out, 12))
		if then != nil {
			if err := then(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		w.end = time.Now()
		windows = append(windows, w)
	}
	verifyRunning := func() {
		t.Helper()
		imgs, err := workloadImages(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		refs, err := helmRel.VerifyRunning(ctx, op, imgs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("signatures verified: %v", refs)
	}

	// prometheus-operator and a Prometheus on the cloud node, before the
	// chart's monitoring is turned on (its ServiceMonitors need the CRDs);
	// Prometheus starts while the install runs. Their install began while
	// the kubeadm step waited for its pods (prometheusInstalled).
	costs.step("prometheus-operator", func() {
		if err := <-prometheusInstalled; err != nil {
			t.Fatal(err)
		}
	})

	installTrail := &trailReport{t: t, title: "the kube-proxies, and the probe Service's rules on each node, during the install (times seen by the test; log lines with the kubelet's)"}
	costs.step("install", func() {
		// The one change a test machine needs: these nodes share one kernel,
		// whose conntrack table size only the host may set (the cluster's
		// KubeProxyConfiguration says so already, testdata/).
		if err := op.KubeProxyLeavesConntrackMax(); err != nil {
			t.Fatal(err)
		}
		overlay := filepath.Join(op.Dir, "bin/images/kustomization.yaml")
		if _, err := os.Stat(overlay); err != nil {
			t.Fatalf("make images wrote no kustomize overlay (build/README.md's install step applies bin/images): %v", err)
		}
		// The kube-proxies' lives and logs from before the chart's install
		// (whose last block rolls the stock ones) while each node hands over
		// from the stock one to kube-proxy-edge: a stock pod's log is gone
		// with it afterwards.
		var trails []*trail
		for _, selector := range []string{"k8s-app=kube-proxy", "app.kubernetes.io/name=kube-proxy-edge"} {
			tr, err := followPods(ctx, client, "kube-system", selector)
			if err != nil {
				t.Fatal(err)
			}
			trails = append(trails, tr)
		}
		// The nodes' new flows from the chart's install on: where a
		// request whose SYNs went unanswered was sent, and how far it got
		// (the report comes minutes later, when its conntrack entry is gone).
		stopFlows := followStepFlows(ctx, nodes, fabric.Hub)
		// And what each node's kube-proxy had programmed for the probe
		// Service meanwhile (followRules, each change with its time): a SYN
		// a node neither sent on nor translated met a rule there, which a
		// kube-proxy's next rewrite replaces, counters and all.
		ruleTrails := map[string]*trail{}
		for _, n := range nodes {
			ruleTrails[n.Name] = followRules(ctx, n.Net.NS, "default", probeService, probeIP)
		}
		defer func() {
			var text string
			for _, tr := range trails {
				text += tr.stop() + "\n"
			}
			for _, n := range nodes {
				text += "the rules of Service default/" + probeService + " on " + n.Name + ":\n" + ruleTrails[n.Name].stop() + "\n"
			}
			installTrail.stepEnded(text)
			flowEvents = stopFlows()
		}()
		helmStepThen(nil, HelmInstallStep, op.Version, chartVersion)
		// Before the nodes are labelled: only the controller restarts.
		helmStepThen(nil, HelmMonitoringStep, op.Version, chartVersion)
		step("static-node-kube-proxy", "NODE="+staticNode)
		for _, n := range names {
			if n != staticNode {
				step("install-node", "NODE="+n)
			}
		}
		// For chasing a loss in the handover: each node back to the stock
		// kube-proxy and over to kube-proxy-edge again, as many more times
		// as SERVICEGROUP_REALNODE_HANDOVERS says (the guide's blocks).
		for range extraHandovers(t) {
			for _, n := range names {
				if n != staticNode {
					step("uninstall-node", "NODE="+n)
					step("install-node", "NODE="+n)
				}
			}
		}
		// Install step 4 on each such node: its kubelet names the node's
		// CoreDNS; pods created from then on resolve through it.
		for _, n := range names {
			if n != staticNode {
				moveDNS(nodeByName(nodes, n), nodeLocalDNS, guide, "node-dns")
			}
		}

		// The static-pod option on staticNode, as build/README.md says:
		// the node identity's rights and the rendered pod, the node-local
		// DNS address (kept for every boot), the Corefile and the pod copied
		// on the node, then its kubelet's clusterDNS moved to that address.
		step("static-pods-render")
		static := nodeByName(nodes, staticNode)
		if err := static.AddLoopbackAddr(ctx, nodeLocalDNS+"/32"); err != nil {
			t.Fatal(err)
		}
		stepOn(static.Enter(), guide, "static-node-files", "NODE="+staticNode)
		eventually(ctx, t, 0, "the controller, the DaemonSets' pods on the labelled nodes and "+staticNode+"'s static pod Ready", func(ctx context.Context) error {
			return componentsReady(ctx, client, len(names)-1, staticNode)
		})
		moveDNS(static, nodeLocalDNS, guide, "static-node-dns")
		step("check-images")
		verifyRunning()
		for _, n := range names {
			out := mustRun(ctx, t, op, "-n", "kube-system", "get", "pods", "-o", "name", "--field-selector", "spec.nodeName="+n, "-l", "k8s-app=kube-proxy")
			if strings.TrimSpace(out) != "" {
				t.Errorf("%s still runs the stock kube-proxy: %s", n, out)
			}
		}
	})

	var pods map[string]corev1.Pod
	costs.step("checks", func() {
		repo, _ := harness.RepoRoot()
		mustRun(ctx, t, op, "apply", "-f", filepath.Join(repo, "examples"))
		eventually(ctx, t, 4*time.Minute, "the seeds' grids' 10 pods and the 3 client pods Running and Ready", func(ctx context.Context) error {
			var err error
			pods, err = readyPods(ctx, client, 10)
			return err
		})
		checkNodeunits(ctx, t, client, op, pods)
	})
	// The next build's images (another version stamped: other binaries,
	// other digests) and API (a new optional field with a default,
	// addNextBuildField), installed as build/README.md's Upgrade says. It
	// is made and published while the doctor step runs: doctor reads
	// neither the scratch checkout nor the registry, and nothing runs the
	// new tags before the upgrade step's helm-upgrade.
	type nextBuild struct {
		makeOut, chart string
		err            error
	}
	nextBuilt := make(chan nextBuild, 1)
	go func() {
		var b nextBuild
		if b.err = addNextBuildField(op.Dir); b.err == nil {
			if b.makeOut, b.err = op.MakeImagesVersion(ctx, reg.Addr+"/servicegroup", op.Version+"-next"); b.err == nil {
				b.chart, b.err = helmRel.Publish(ctx, op, op.Version+"-next")
			}
		}
		nextBuilt <- b
	}()
	costs.step("doctor", func() {
		checkDoctor(ctx, t, client, cp, nodeByName(nodes, "node0"), nodeByName(nodes, "node1"), nodeByName(nodes, staticNode), names)
	})

	var installed map[string]string // our workloads' images before the upgrade
	upgradeTrail := &trailReport{t: t, title: "the node CoreDNS pods during the upgrade (times seen by the test; log lines with the kubelet's)"}
	costs.step("upgrade", func() {
		before, err := workloadImages(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		installed = before
		next := <-nextBuilt
		if next.err != nil {
			t.Fatalf("the next build: %v", next.err)
		}
		t.Logf("make images (next):\n%s", lastLines(next.makeOut, 4))
		nextChart := next.chart
		tr, err := followPods(ctx, client, "edge-system", "app.kubernetes.io/name=coredns-gridhosts")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { upgradeTrail.stepEnded(tr.stop()) }()
		// The step's window lasts until the old node CoreDNS pods are gone:
		// the rollout is done once the new ones are available, the old ones
		// stop (lameduck, then their sockets close) after that.
		helmStepThen(func() error {
			return waitUntil(ctx, 3*time.Minute, func() error { return oldNodeCoreDNSGone(ctx, client) })
		}, HelmUpgradeStep, op.Version+"-next", nextChart)
		verifyRunning()
		after, err := workloadImages(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		for w, img := range after {
			ours := !strings.Contains(w, "kube-proxy")
			if changed := img != before[w]; changed != ours {
				t.Errorf("%s: %s before the upgrade, %s after (ours: %v)", w, before[w], img, ours)
			}
		}
		t.Logf("upgraded: %v", after)
		if err := checkAPIChanged(ctx, cp.Config, "default", "deploymentgrid-demo"); err != nil {
			t.Error(err)
		}
		eventually(ctx, t, 0, "the DaemonSets' pods on the labelled nodes Ready after the upgrade", func(ctx context.Context) error {
			return componentsReady(ctx, client, len(names)-1, staticNode)
		})
	})
	// Before the reboot: the static node's client restarts with it (its
	// log starts anew).
	reportTraffic(clients, windows)
	installTrail.report()
	upgradeTrail.report()
	reported := len(windows)
	costs.step("native mode", func() { nativeMode(ctx, t, client, cp, op, helmRel, op.Version+"-next", doctorNodes, ranSteps) })

	// A nodeunit cut off from the cloud keeps its pods; a node that dies
	// beside connected ones does not (build/README.md, Autonomy).
	var siteClients []string
	autonomousGrids := []string{"deploymentgrid/deploymentgrid-demo", "statefulsetgrid/" + statefulGrid}
	costs.step("autonomy", func() {
		// After the last helm upgrade (which would set them back), so that
		// the kubelet has brought them to Prometheus by the partition.
		if err := ScaleAlertFor(ctx, op, cutOffAlert, scaledCutOffFor); err != nil {
			t.Fatal(err)
		}
		if err := ScaleScrapeInterval(ctx, op, scaledScrapeInterval); err != nil {
			t.Fatal(err)
		}
		stepIn(guide, "autonomy-controller-placement", "CLOUD_NODES=kubernetes.io/hostname="+cloudNode)
		// doctor: an autonomy annotation it cannot read (the opt-in below
		// overwrites it).
		mustRun(ctx, t, op, "-n", "default", "annotate", "deploymentgrid", "deploymentgrid-demo", "servicegroup.io/autonomy-duration=forever")
		expectDoctor(ctx, t, cp.Kubeconfig, doctorNodes, "an autonomy annotation that is not a duration",
			`DeploymentGrid default/deploymentgrid-demo: servicegroup.io/autonomy-duration "forever" is not a duration`)
		for _, grid := range autonomousGrids {
			stepIn(guide, "autonomy-opt-in", "NAMESPACE=default", "GRID="+grid)
		}
		// The cloud node is in nodeunit1, which the grids now make
		// autonomous: doctor names each controller pod there, as it does
		// until the grids go (uninstall).
		placement := controllerInNodeunit(ctx, t, client)
		expectDoctor(ctx, t, cp.Kubeconfig, doctorNodes, "the controller inside a nodeunit it protects", placement...)
		checkDoctorWebhook(ctx, t, client, cp.Kubeconfig, doctorNodes)
		if err := cp.RestartControllerManager(ctx, scaledLifecycle()); err != nil {
			t.Fatal(err)
		}
		svc, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range seedNodes {
			first, ok := pods[fmt.Sprintf("%s-%s-0", statefulGrid, sn.unit)]
			if !ok {
				t.Fatalf("no pod %s-%s-0", statefulGrid, sn.unit)
			}
			p := siteClientPod(sn.name, svc.Spec.ClusterIP, probeIP, first.Status.PodIP)
			if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			siteClients = append(siteClients, p.Name)
		}
		eventually(ctx, t, 0, "the site clients requesting the ServiceGrid and resolving the names", func(ctx context.Context) error {
			return clientsProbing(ctx, client, siteClients, "svc", "dns", "grid")
		})
	})
	// The real Prometheus reads the shipped ServiceMonitors: every target up
	// over verified TLS (its rules: at the end of the partition).
	prom := &PromAPI{Client: &http.Client{Timeout: 5 * time.Second}}
	costs.step("prometheus targets", func() {
		checkPrometheus(ctx, t, client, prom)
	})
	// SuperEdge's images (the superedge step's) are packaged and pushed
	// while the partition holds, from this process to the registry
	// (nothing the partition checks reads either); the reboot takes the
	// registry away, so they are in before it.
	type superEdgeImages struct {
		build     *SuperEdgeBuild
		kubeProxy string // edge-kube-proxy's image
		err       error
	}
	superEdgePushed := make(chan superEdgeImages, 1)
	costs.step("partition", func() {
		go func() {
			var r superEdgeImages
			if r.build, r.err = BuildSuperEdge(ctx); r.err == nil {
				if r.err = PushSuperEdgeImages(ctx, reg, r.build); r.err == nil {
					r.kubeProxy, r.err = PushKubeProxyImage(ctx, reg, r.build.KubeProxy, r.build.KubeProxyVersion)
				}
			}
			superEdgePushed <- r
		}()
		// The nodeunit stays cut off until Prometheus fires the alert for
		// it (the rule's `for`, scaled to scaledCutOffFor), at most 3
		// minutes more.
		const alert = cutOffAlert
		var fired *PromAlert
		var firedAt time.Time
		var alertsThen []PromAlert
		p := &partitionStep{ctx: ctx, t: t, client: client, cp: cp, kubeconfig: cp.Kubeconfig, fabric: fabric,
			unit:    []*Node{nodeByName(nodes, "node1"), nodeByName(nodes, "node2")},
			rest:    []*Node{nodeByName(nodes, "node0"), nodeByName(nodes, deadNode)},
			holdMax: 3 * time.Minute,
			holdUntil: func(ctx context.Context) error {
				if fired != nil {
					return nil
				}
				alerts, err := prom.Alerts(ctx)
				if err != nil {
					return err
				}
				if fired = firing(alerts, alert, "nodeunit2"); fired != nil {
					firedAt, alertsThen = time.Now(), alerts
					return nil
				}
				return fmt.Errorf("%s for nodeunit2 not firing; alerts: %s", alert, describeAlerts(alerts))
			},
			// Then doctor's and Prometheus's word when the autonomy ends.
			beforeHeal: func(ctx context.Context) {
				autonomyEnded(ctx, t, cp, op, prom, "nodeunit2", autonomousGrids)
			}}
		windows := p.run()
		start := windows[0].start // the cut
		reportTraffic(siteClients, windows)
		if fired == nil {
			t.Errorf("Prometheus: %v", p.heldErr)
		} else {
			t.Logf("Prometheus: %s firing %s after the cut (pending since %s after it); the alerts then:\n%s",
				alert, firedAt.Sub(start).Round(time.Second), fired.ActiveAt.Sub(start).Round(time.Second), describeAlerts(alertsThen))
		}
		checkPrometheusRules(ctx, t, prom)
		if err := RemovePrometheus(ctx, op, prometheusDir); err != nil {
			t.Error(err)
		}
	})
	costs.step("dead node", func() {
		d := &deadNodeStep{ctx: ctx, t: t, client: client, op: op, dead: nodeByName(nodes, deadNode), caller: "site-node0", callerNode: nodeByName(nodes, "node0"), kubeconfig: cp.Kubeconfig, edgeNodes: doctorNodes,
			trail: &trailReport{t: t, title: "while " + deadNode + "'s pods were replaced and after"}}
		dying, after := d.run()
		// While the node dies, requests sent to its pods fail until the
		// node lifecycle controller marks them not Ready: Kubernetes'
		// default, shown, not held to zero. Afterwards none may fail.
		_, table, err := trafficReport(ctx, client, siteClients, []window{dying}, earlierLogs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("traffic while %s died:\n%s", deadNode, table)
		reportTraffic(siteClients, []window{after})
		d.trail.report()
		if err := cp.RestartControllerManager(ctx, controllerManagerArgs()); err != nil {
			t.Fatal(err)
		}
		for _, c := range siteClients {
			if err := client.CoreV1().Pods("default").Delete(ctx, c, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(ctx, t, 0, "the seeds' 10 grid pods and the 3 clients Running and Ready", func(ctx context.Context) error {
			var err error
			pods, err = readyPods(ctx, client, 10)
			return err
		})
	})

	nextChartVersion, _ := ChartVersionFor(op, op.Version+"-next")
	var superEdge superEdgeImages
	costs.step("reboot", func() {
		if superEdge = <-superEdgePushed; superEdge.err != nil {
			t.Fatalf("SuperEdge's images: %v", superEdge.err)
		}
		rebootWithCloudAway(ctx, t, client, cp, reg, nodeByName(nodes, staticNode), pods)
	})

	// The uninstall, as build/README.md says, with the apiserver back: the
	// DaemonSet nodes, the static node (its pod file removed, as on a real
	// node), our components, the stock kube-proxy's affinity.
	costs.step("uninstall", func() {
		if err := cp.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		// kube-controller-manager restarted at the end of the dead-node
		// step exits when the apiserver goes away before it has built its
		// controllers (a loaded machine); its supervisor (the kubelet of its
		// static pod) would start it again, and so does the test.
		if exited, err := cp.ControllerManagerExited(); exited {
			t.Logf("kube-controller-manager exited while the apiserver was away (%v): started again", err)
			if err := cp.RestartControllerManager(ctx, controllerManagerArgs()); err != nil {
				t.Fatal(err)
			}
		}
		eventually(ctx, t, 0, "every node Ready and every client's Service requests and DNS queries answered again with the apiserver back", func(ctx context.Context) error {
			if err := nodesReady(ctx, client, names); err != nil {
				return err
			}
			return clientsProbing(ctx, client, clients, "svc", "dns")
		})
		// node2 beside node0, then node1: node0 and node1 each run one of
		// the probe's pods and one of kube-dns's (kept off node2), which
		// their kubelet's restart takes out of the Services until their
		// readiness probes pass again; the guide's uninstall moves each
		// node's DNS, in no order.
		moveDNSAtOnce([]*Node{nodeByName(nodes, "node0"), nodeByName(nodes, staticNode)}, clusterDNS, guide, "uninstall-node-dns")
		moveDNS(nodeByName(nodes, "node1"), clusterDNS, guide, "uninstall-node-dns")
		func() {
			stopFlows := followStepFlows(ctx, nodes, fabric.Hub)
			defer func() { flowEvents = stopFlows() }()
			for _, n := range names {
				if n != staticNode {
					step("uninstall-node", "NODE="+n)
				}
			}
		}()
		stepOn(nodeByName(nodes, staticNode).Enter(), guide, "uninstall-static-node-files", "NODE="+staticNode)
		step("uninstall-static-node", "NODE="+staticNode)
		helmStepThen(nil, HelmUninstallStep, op.Version+"-next", nextChartVersion)
		// The lifecycle above ran the Helm path; the kustomize path's
		// cluster blocks run here on the same cluster, verbatim, with no
		// node moved onto kube-proxy-edge (the node steps are the same for
		// both paths and ran above): install, upgrade, uninstall. The
		// registry (away since the reboot) is back for their images.
		if err := reg.Restart(); err != nil {
			t.Fatal(err)
		}
		step("install-cluster")
		step("upgrade")
		// doctor: a CRD gone under the leading controller (no node uses our
		// components any more: the NodeLabelSummaries going with it are
		// read by none).
		checkDoctorCRDMissing(ctx, t, cp, op, "nodelabelsummaries.superedge.io")
		step("uninstall-cluster")
		// The node-local address off every node (on node2 it stood for
		// the persistent network configuration's).
		for _, n := range names {
			stepOn(nodeByName(nodes, n).Enter(), guide, "uninstall-node-address", "NODE="+n)
		}
		nodeByName(nodes, staticNode).ForgetLoopbackAddr(nodeLocalDNS + "/32")
		step("uninstall-stock-kube-proxy")
		// The explicit removal of the grids (orphaning their workloads)
		// and the CRDs: the workloads stay.
		step("remove-crds")
		if _, err := client.AppsV1().Deployments("default").Get(ctx, "deploymentgrid-demo-nodeunit1", metav1.GetOptions{}); err != nil {
			t.Errorf("the grid's Deployment is gone with the CRDs: %v", err)
		}
		// Nothing of SuperEdge's runs here yet: the namespace holds nothing
		// to keep, and its removal is the guide's last step.
		step("remove-namespace")
		// The stock kube-proxy is back in charge on node0: the grid's
		// Service, no longer filtered by nodeunit, reaches pods of both.
		svc, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		eventually(ctx, t, 0, "client-node0 reaches nodeunit2's pods through the stock kube-proxy", func(ctx context.Context) error {
			got, err := curlPods(ctx, op, "client-node0", "http://"+svc.Spec.ClusterIP+":80/", 20)
			if err != nil {
				return err
			}
			for p, c := range got {
				seen[p] += c
			}
			for p := range seen {
				if !podsInUnit(pods, "nodeunit1")[p] {
					return nil
				}
			}
			return fmt.Errorf("answered only by nodeunit1: %v", seen)
		})
		reportTraffic(clients, windows[reported:])
	})
	reported = len(windows)

	// SuperEdge v0.9.0 on the same nodes, its own controller, wrapper and
	// hosts daemon, as its installer (edgeadm v0.9.0) and its manifests
	// deploy them (testdata/superedge.yaml): node0 and node1 edge nodes,
	// node2 the cloud node; SuperEdge's controller makes the grids'
	// children. Then build/MIGRATION.md's steps to ours and back. The
	// registry is back with the cloud.
	apiserver := fmt.Sprintf("https://%s:%d", fabric.RootIP, apiPort(cp))
	edgeNodes := []string{"node0", "node1"}
	superEdgeOn := map[string]int{
		"edge-system/application-grid-wrapper-node": len(edgeNodes), "edge-system/edge-coredns": len(edgeNodes),
		"edge-system/edge-kube-proxy": len(edgeNodes), "edge-system/statefulset-grid-daemon": len(names),
	}
	// edge-kube-proxy stays (no pod: every edge node carries
	// servicegroup.io/kube-proxy) for a rollback; the rest goes.
	superEdgeGone := map[string]int{"edge-system/application-grid-wrapper-node": 0, "edge-system/edge-coredns": 0, "edge-system/statefulset-grid-daemon": 0}
	ours := map[string]int{"edge-system/application-grid-wrapper": len(edgeNodes), "edge-system/coredns-gridhosts": len(edgeNodes), "kube-system/kube-proxy-edge": len(edgeNodes)}
	gridURL := func() string {
		svc, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return "http://" + svc.Spec.ClusterIP + ":80/"
	}
	repo, _ := harness.RepoRoot()
	demoGrids := []string{"deploymentgrid.yaml", "statefulsetgrid.yaml", "servicegrid.yaml"}
	var superEdgeMade gridWorkloads // the grids' workloads SuperEdge's controller made
	costs.step("superedge", func() {
		if err := reg.Restart(); err != nil {
			t.Fatal(err)
		}
		se, edgeProxyImage := superEdge.build, superEdge.kubeProxy
		manifests, err := op.WriteSuperEdgeManifests("testdata/superedge.yaml", apiserver, map[string]string{
			"CONTROLLER_IMAGE": se.Image("application-grid-controller"),
			"WRAPPER_IMAGE":    se.Image("application-grid-wrapper"),
			"DAEMON_IMAGE":     se.Image("statefulset-grid-daemon"),
			"COREDNS_IMAGE":    installed["DaemonSet/edge-system/coredns-gridhosts/coredns"],
		})
		if err != nil {
			t.Fatal(err)
		}
		// edgeadm's node labels, and on each edge node its edge virtual
		// address (there the dummy interface of lite-apiserver, not run here).
		for _, n := range edgeNodes {
			mustRun(ctx, t, op, "label", "node", n, superEdgeEdgeLabel+"=enable")
			if err := nodeByName(nodes, n).AddLoopbackAddr(ctx, edgeCoreDNS+"/32"); err != nil {
				t.Fatal(err)
			}
		}
		mustRun(ctx, t, op, "label", "node", staticNode, "node-role.kubernetes.io/master=")
		// The children remove-crds orphaned go: SuperEdge's controller makes
		// the grids' children itself.
		mustRun(ctx, t, op, "-n", "default", "delete", "deployments,statefulsets,services", "-l", "superedge.io/grid-selector", "--wait=true")
		mustRun(ctx, t, op, "apply", "-f", manifests)
		if err := InstallEdgeKubeProxy(ctx, client, edgeProxyImage); err != nil {
			t.Fatal(err)
		}
		// SuperEdge's controller creates the grid CRDs at its start.
		eventually(ctx, t, 0, "SuperEdge's controller running and its grid CRDs Established", func(ctx context.Context) error {
			if _, err := op.Run(ctx, "-n", "edge-system", "wait", "--for=condition=Available", "--timeout=10s", "deployment/application-grid-controller"); err != nil {
				return err
			}
			_, err := op.Run(ctx, "wait", "--for=condition=Established", "--timeout=10s", "crd/deploymentgrids.superedge.io", "crd/statefulsetgrids.superedge.io", "crd/servicegrids.superedge.io")
			return err
		})
		for _, f := range demoGrids {
			mustRun(ctx, t, op, "apply", "-f", filepath.Join(repo, "examples", f))
		}
		eventually(ctx, t, 0, "SuperEdge's DaemonSets ready on their nodes, the stock kube-proxy on the cloud node only", func(ctx context.Context) error {
			return daemonSetsReady(ctx, client, map[string]int{"kube-system/kube-proxy": len(names) - len(edgeNodes)})
		})
		eventually(ctx, t, 0, "SuperEdge's DaemonSets ready on their nodes", func(ctx context.Context) error {
			return daemonSetsReady(ctx, client, superEdgeOn)
		})
		eventually(ctx, t, 4*time.Minute, "the grids' 10 pods (their workloads made by SuperEdge's controller) and the 3 clients Ready", func(ctx context.Context) error {
			var err error
			pods, err = readyPods(ctx, client, 10)
			return err
		})
		if superEdgeMade, err = madeBySuperEdge(ctx, client); err != nil {
			t.Fatal(err)
		}
		t.Logf("made by SuperEdge's controller: %s", superEdgeMade)
		// edge-kube-proxy reads through SuperEdge's wrapper: the grid's
		// Service stays in node0's nodeunit.
		checkClusterIP(ctx, t, op, "client-node0", gridURL(), podsInUnit(pods, "nodeunit1"))

		// What SuperEdge's installer does on each edge node: its kubelet
		// names edge-coredns. The node's client is recreated to resolve
		// through it, and from then on also resolves the grid's unified
		// name, which edge-coredns answers from the hosts daemon's file,
		// and requests the grid's Service (SuperEdge's controller made
		// it), which only its nodeunit's pods may answer.
		gridSvc, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range seedNodes[:len(edgeNodes)] {
			n := nodeByName(nodes, sn.name)
			if err := NameEdgeCoreDNS(ctx, n, edgeCoreDNS); err != nil {
				t.Fatal(err)
			}
			first, ok := pods[fmt.Sprintf("%s-%s-0", statefulGrid, sn.unit)]
			if !ok {
				t.Fatalf("no pod %s-%s-0", statefulGrid, sn.unit)
			}
			env := []corev1.EnvVar{
				{Name: gridNameEnv, Value: fmt.Sprintf("%s-0.%s.default.svc.cluster.local", statefulGrid, gridService)},
				{Name: gridIPEnv, Value: first.Status.PodIP},
				{Name: gridServiceEnv, Value: gridSvc.Spec.ClusterIP},
				{Name: gridNodesEnv, Value: strings.Join(nodesInUnit(sn.unit), " ")},
			}
			if err := recreateClientWith(ctx, client, n.Name, probeIP, earlierLogs, env); err != nil {
				t.Fatal(err)
			}
			checkResolver(ctx, t, op, "client-"+n.Name, edgeCoreDNS)
			checkGridNames(ctx, t, op, "client-"+n.Name, sn.unit, pods)
		}
	})

	costs.step("migration from SuperEdge", func() {
		// doctor on SuperEdge's cluster, as an operator would run it first:
		// none of ours, SuperEdge's grid CRDs (its controller made them; our
		// fourth, nodelabelsummaries, missing), and every SuperEdge
		// component a leftover.
		superEdgeLeft := []string{
			"daemonset edge-system/application-grid-wrapper-node: SuperEdge leftover",
			"daemonset edge-system/edge-coredns: SuperEdge leftover",
			"daemonset edge-system/statefulset-grid-daemon: SuperEdge leftover",
			"serviceaccount edge-system/application-grid-wrapper: SuperEdge leftover",
			"clusterrolebinding application-grid-wrapper: SuperEdge leftover",
		}
		expectDoctor(ctx, t, cp.Kubeconfig, nil, "SuperEdge's cluster before the migration", append(slices.Clone(superEdgeLeft),
			"daemonset edge-system/application-grid-wrapper: missing",
			"deployment servicegroup-system/application-grid-controller: missing",
			"crd deploymentgrids.superedge.io: missing or different from release",
			"crd nodelabelsummaries.superedge.io: missing or different from release",
			"crd servicegrids.superedge.io: missing or different from release",
			"crd statefulsetgrids.superedge.io: missing or different from release",
			"deployment edge-system/application-grid-controller: SuperEdge leftover")...)
		stepIn(migrationGuide, "stop-superedge-controller")
		stepIn(migrationGuide, "migrate-cluster")
		for _, n := range edgeNodes {
			stepIn(migrationGuide, "migrate-node", "NODE="+n)
			moveDNS(nodeByName(nodes, n), nodeLocalDNS, migrationGuide, "migrate-node-dns")
		}
		// Every node moved: what migrate-finish removes is what doctor
		// names.
		expectDoctor(ctx, t, cp.Kubeconfig, edgeNodes, "every edge node moved, SuperEdge's components left", superEdgeLeft...)
		stepIn(migrationGuide, "migrate-finish", "APISERVER="+apiserver, "EDGE_COREDNS="+edgeCoreDNS)
		eventually(ctx, t, 0, "ours ready on the edge nodes, SuperEdge's DaemonSets gone, edge-kube-proxy on no node", func(ctx context.Context) error {
			if err := daemonSetsReady(ctx, client, superEdgeGone); err != nil {
				return err
			}
			if err := daemonSetsIdle(ctx, client, "edge-system/edge-kube-proxy"); err != nil {
				return err
			}
			return daemonSetsReady(ctx, client, ours)
		})
		stepIn(migrationGuide, "migrate-check")
		expectDoctor(ctx, t, cp.Kubeconfig, edgeNodes, "the migration done")
		// The takeover replaced nothing SuperEdge's controller made: every
		// pod, ReplicaSet and revision is the same object, no container
		// restarted, and our controller manages the children.
		eventually(ctx, t, 0, "our controller manages every child SuperEdge's controller made", func(ctx context.Context) error {
			return takenOver(ctx, client)
		})
		now, err := readGridWorkloads(ctx, client, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := superEdgeMade.same(now); err != nil {
			t.Errorf("the takeover replaced or restarted workloads: %v", err)
		}
		// Both clients' ClusterIP requests at once, each from its own pod;
		// reported, and the grid names checked, node by node.
		var checks []*clusterIPCheck
		for _, sn := range seedNodes[:len(edgeNodes)] {
			checks = append(checks, &clusterIPCheck{caller: "client-" + sn.name, url: gridURL(), want: podsInUnit(pods, sn.unit)})
		}
		var requesting sync.WaitGroup
		for _, c := range checks {
			requesting.Go(func() { c.run(ctx, op) })
		}
		requesting.Wait()
		for i, sn := range seedNodes[:len(edgeNodes)] {
			checks[i].report(t)
			checkGridNames(ctx, t, op, "client-"+sn.name, sn.unit, pods)
		}
	})

	costs.step("rollback to SuperEdge", func() {
		stepIn(migrationGuide, "rollback-cluster", "APISERVER="+apiserver, "EDGE_COREDNS="+edgeCoreDNS)
		for _, n := range edgeNodes {
			moveDNS(nodeByName(nodes, n), edgeCoreDNS, migrationGuide, "rollback-node-dns", "EDGE_COREDNS="+edgeCoreDNS)
			stepIn(migrationGuide, "rollback-node", "NODE="+n)
		}
		stepIn(migrationGuide, "rollback-finish")
		stepIn(migrationGuide, "rollback-remove-summaries")
		eventually(ctx, t, 0, "SuperEdge's DaemonSets ready on their nodes, ours gone", func(ctx context.Context) error {
			if err := daemonSetsReady(ctx, client, superEdgeOn); err != nil {
				return err
			}
			return daemonSetsReady(ctx, client, map[string]int{"edge-system/application-grid-wrapper": 0, "edge-system/coredns-gridhosts": 0, "kube-system/kube-proxy-edge": 0})
		})
		// SuperEdge's controller manages the grids again: a template change
		// made now reaches every nodeunit's Deployment (it rolls them).
		rolledBack(ctx, t, client)
		eventually(ctx, t, 4*time.Minute, "the grids' 10 pods (the Deployments' rolled by SuperEdge's controller) and the 3 clients Ready", func(ctx context.Context) error {
			var err error
			pods, err = readyPods(ctx, client, 10)
			return err
		})
		// edge-kube-proxy reads SuperEdge's wrapper again (its rules follow
		// the rolled pods), and edge-coredns answers the edge nodes' names.
		proxyRulesInUnit(ctx, t, nodeByName(nodes, "node0"), "nodeunit1", pods)
		checkClusterIP(ctx, t, op, "client-node0", gridURL(), podsInUnit(pods, "nodeunit1"))
		for _, sn := range seedNodes[:len(edgeNodes)] {
			checkGridNames(ctx, t, op, "client-"+sn.name, sn.unit, pods)
		}
		reportTraffic(clients, windows[reported:])
	})

	// Every step the guides mark has run, the Helm blocks too: none can be
	// added untested.
	helmMarked, err := HelmSteps(op)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range helmMarked {
		if !ranSteps["helm#"+name] {
			t.Errorf("%s marks the Helm step %q, which this test never runs", guide, name)
		}
	}
	for _, g := range []string{guide, migrationGuide} {
		marked, err := op.GuideSteps(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range marked {
			if !ranSteps[g+"#"+name] {
				t.Errorf("%s marks step %q, which this test never runs", g, name)
			}
		}
	}
}

// rebootWithCloudAway: the static node loses power (kubelet, containerd,
// every container), its netfilter state is flushed, the apiserver (and the
// site's registry) stop, and the node boots again. With the apiserver still
// away: kube-proxy's rules list exactly the nodeunit's pods again, the
// ClusterIP answers only from the nodeunit, and the node-local CoreDNS
// answers the unified names (gridhosts' snapshot) and an ordinary Service's
// name (its kubernetes plugin, from the wrapper's snapshot through the
// wrapper's DNS view). Checked from the node's own network
// namespace (its host network): no pod can be exec'd without the
// apiserver, and the node's own API pods do not come back without it.
func rebootWithCloudAway(ctx context.Context, t *testing.T, client kubernetes.Interface, cp *controlplane.ControlPlane, reg *Registry, n *Node, pods map[string]corev1.Pod) {
	t.Helper()
	svc, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := client.CoreV1().Services("default").Get(ctx, probeService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unit := ""
	for _, sn := range seedNodes {
		if sn.name == n.Name {
			unit = sn.unit
		}
	}
	want := podsInUnit(pods, unit)
	var wantIPs, aliveIPs []string
	alive := map[string]bool{}
	for name := range want {
		wantIPs = append(wantIPs, pods[name].Status.PodIP)
		if pods[name].Spec.NodeName != n.Name {
			alive[name] = true
			aliveIPs = append(aliveIPs, pods[name].Status.PodIP)
		}
	}
	sort.Strings(wantIPs)
	if len(alive) == 0 {
		t.Fatalf("no pod of %s runs on another node than %s: the cluster is not what the test assumes", unit, n.Name)
	}

	// The power goes only once the node's components have persisted what
	// they serve (each writes at most every 10s, after a change): a cut right
	// after a change loses that change.
	eventually(ctx, t, 0, n.Name+": the wrapper's and gridhosts' snapshots on the node hold the grids", func(ctx context.Context) error {
		for file, needles := range map[string][]string{
			n.HostPath("/var/lib/application-grid-wrapper/snapshot.pb"): append([]string{probe.Spec.ClusterIP}, wantIPs...),
			n.HostPath("/var/lib/coredns-gridhosts/gridhosts.snapshot"): {statefulGrid + "-" + unit + "-0", statefulGrid + "-" + unit + "-1", statefulGrid + "-" + unit + "-2"},
		} {
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			for _, s := range needles {
				if !strings.Contains(string(data), s) {
					return fmt.Errorf("%s lacks %s", file, s)
				}
			}
		}
		return nil
	})
	if err := n.PowerOff(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := n.Net.NS.Run(ctx, "nft", "flush", "ruleset"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := n.Net.NS.Run(ctx, "conntrack", "-F"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := n.Net.NS.Run(ctx, "nft", "list", "ruleset"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("%s: netfilter not empty after the flush (%v):\n%s", n.Name, err, out)
	}
	cp.StopAPIServer()
	reg.Close()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := n.Net.NS.Run(ctx, "curl", "-sk", "--max-time", "3", cp.URL+"/readyz"); err == nil {
		t.Fatalf("the apiserver still answers %s: %s", n.Name, out)
	}

	eventually(ctx, t, 0, n.Name+": kube-proxy's rules balance "+gridService+" over exactly "+unit+"'s pods "+fmt.Sprint(wantIPs), func(ctx context.Context) error {
		rules, err := n.Net.NS.Run(ctx, "iptables-save")
		if err != nil {
			return err
		}
		if got := harness.ProxyEndpoints(harness.ProxyModeIPTables, rules, "default", gridService); !slicesEqual(got, wantIPs) {
			return fmt.Errorf("rules list %v", got)
		}
		return nil
	})
	url := "http://" + svc.Spec.ClusterIP + ":80/"
	seen := map[string]int{}
	eventually(ctx, t, 0, n.Name+": the ClusterIP answers from every running pod of "+unit+" "+fmt.Sprint(sortedKeys(alive))+" and from nothing outside it", func(ctx context.Context) error {
		// 20 requests at once, each a connection of its own: a request
		// kube-proxy sends to a pod of this node waits out curl's 2 s.
		outs := make([]string, 20)
		errs := make([]error, 20)
		var curls sync.WaitGroup
		for i := range outs {
			curls.Go(func() { outs[i], errs[i] = n.Net.NS.Run(ctx, "curl", "-sS", "--max-time", "2", url) })
		}
		curls.Wait()
		for i, out := range outs {
			if errs[i] != nil {
				continue // an endpoint on this node: its pod is gone until the apiserver returns
			}
			pod := ""
			for _, line := range strings.Split(out, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "pod name: "); ok {
					pod = v
				}
			}
			if !want[pod] {
				t.Fatalf("%s: %s answered by %q, outside %s %v", n.Name, url, pod, unit, sortedKeys(want))
			}
			seen[pod]++
		}
		for p := range alive {
			if seen[p] == 0 {
				return fmt.Errorf("seen %v", seen)
			}
		}
		return nil
	})
	t.Logf("%s after the reboot, apiserver away: %s answered by %v", n.Name, url, seen)
	// A Service no grid names: only the kubernetes plugin answers it.
	eventually(ctx, t, 0, fmt.Sprintf("%s: dig @%s %s answers its ClusterIP %s", n.Name, nodeLocalDNS, probeName, probe.Spec.ClusterIP), func(ctx context.Context) error {
		out, err := n.Net.NS.Run(ctx, "dig", "+short", "+time=2", "+tries=1", "@"+nodeLocalDNS, probeName)
		if err != nil {
			return err
		}
		if got := strings.Fields(out); len(got) != 1 || got[0] != probe.Spec.ClusterIP {
			return fmt.Errorf("answer %q", strings.TrimSpace(out))
		}
		return nil
	})
	t.Logf("%s after the reboot, apiserver away: %s resolves to %s through %s", n.Name, probeName, probe.Spec.ClusterIP, nodeLocalDNS)
	for i := range 3 {
		name := fmt.Sprintf("%s-%d.%s.default.svc.cluster.local", statefulGrid, i, gridService)
		pod := pods[fmt.Sprintf("%s-%s-%d", statefulGrid, unit, i)]
		eventually(ctx, t, 0, fmt.Sprintf("%s: dig @%s %s answers %s (%s)", n.Name, nodeLocalDNS, name, pod.Status.PodIP, pod.Name), func(ctx context.Context) error {
			out, err := n.Net.NS.Run(ctx, "dig", "+short", "+time=2", "+tries=1", "@"+nodeLocalDNS, name)
			if err != nil {
				return err
			}
			if got := strings.Fields(out); len(got) != 1 || got[0] != pod.Status.PodIP {
				return fmt.Errorf("answer %q", strings.TrimSpace(out))
			}
			return nil
		})
		if !alive[pod.Name] {
			continue
		}
		// The answer's address, over HTTP (curl here resolves through the
		// machine's resolver, not the node's CoreDNS).
		eventually(ctx, t, 0, fmt.Sprintf("%s: HTTP to %s's answer %s reaches %s", n.Name, name, pod.Status.PodIP, pod.Name), func(ctx context.Context) error {
			return podAnswers(ctx, n, pod.Status.PodIP, pod.Name)
		})
	}
}

// podAnswers: HTTP from node n to a grid pod's own address reaches that
// pod's echoserver.
func podAnswers(ctx context.Context, n *Node, ip, podName string) error {
	out, err := n.Net.NS.Run(ctx, "curl", "-sS", "--max-time", "2", "http://"+net.JoinHostPort(ip, strconv.Itoa(echoPort))+"/")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "pod name: "+podName+"\n") {
		return fmt.Errorf("answered %q", out)
	}
	return nil
}

func nodeByName(nodes []*Node, name string) *Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func slicesEqual(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// checkNodeunits runs the grid checks from each node's client pod.
func checkNodeunits(ctx context.Context, t *testing.T, client kubernetes.Interface, op *Operator, pods map[string]corev1.Pod) {
	t.Helper()
	svc, err := client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + svc.Spec.ClusterIP + ":80/"
	// The ClusterIP checks at once, each from its own client pod.
	var checks []*clusterIPCheck
	for _, sn := range seedNodes {
		checks = append(checks, &clusterIPCheck{name: "ClusterIP stays in " + sn.unit + " from " + sn.name,
			caller: "client-" + sn.name, url: url, want: podsInUnit(pods, sn.unit)})
	}
	checkClusterIPs(ctx, t, op, checks)
	for _, sn := range seedNodes {
		t.Run("grid names answer "+sn.unit+"'s pod on "+sn.name, func(t *testing.T) {
			checkGridNames(ctx, t, op, "client-"+sn.name, sn.unit, pods)
		})
	}
}

// checkClusterIP: from inside the caller pod's container, first every pod
// of the nodeunit answers the ClusterIP, then `requests` requests are all
// answered from the nodeunit.
func checkClusterIP(ctx context.Context, t *testing.T, op *Operator, caller, url string, want map[string]bool) {
	t.Helper()
	c := clusterIPCheck{caller: caller, url: url, want: want}
	c.run(ctx, op)
	c.report(t)
}

// clusterIPCheck is checkClusterIP's check, run apart from its report so
// that several run at once (checkClusterIPs).
type clusterIPCheck struct {
	name, caller, url string
	want              map[string]bool
	seenAll           error          // every pod of want seen, or why not
	got               map[string]int // the requests' answers by pod
	err               error          // the requests' error
	took              time.Duration
}

func (c *clusterIPCheck) run(ctx context.Context, op *Operator) {
	start := time.Now()
	defer func() { c.took = time.Since(start) }()
	seen := map[string]int{}
	c.seenAll = waitUntil(ctx, testwait.Floor, func() error {
		got, err := curlPods(ctx, op, c.caller, c.url, 20)
		if err != nil {
			return err
		}
		for p, n := range got {
			if !c.want[p] {
				return fmt.Errorf("answered by %s, outside the nodeunit %v", p, sortedKeys(c.want))
			}
			seen[p] += n
		}
		if len(seen) != len(c.want) {
			return fmt.Errorf("seen %v so far", seen)
		}
		return nil
	})
	if c.seenAll == nil {
		c.got, c.err = curlPods(ctx, op, c.caller, c.url, requests)
	}
}

func (c *clusterIPCheck) report(t *testing.T) {
	t.Helper()
	if c.seenAll != nil {
		t.Fatalf("%s reaches every pod of its nodeunit %v: %v", c.caller, sortedKeys(c.want), c.seenAll)
	}
	if c.err != nil {
		t.Fatal(c.err)
	}
	total := 0
	for p, n := range c.got {
		total += n
		if !c.want[p] {
			t.Errorf("%s: %d of %d requests to %s answered by %s, outside its nodeunit %v", c.caller, n, requests, c.url, p, sortedKeys(c.want))
		}
	}
	if total != requests {
		t.Errorf("%s: %d of %d requests answered: %v", c.caller, total, requests, c.got)
	}
	t.Logf("%s -> %s: %v", c.caller, c.url, c.got)
}

// checkClusterIPs runs checkClusterIP's checks at once (each from its own
// client pod), each reported as the subtest of its name.
func checkClusterIPs(ctx context.Context, t *testing.T, op *Operator, checks []*clusterIPCheck) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() { c.run(ctx, op) })
	}
	wg.Wait()
	var each []string
	for _, c := range checks {
		each = append(each, c.took.Round(100*time.Millisecond).String())
	}
	t.Logf("%d ClusterIP checks at once took %s (each: %s)", len(checks), time.Since(start).Round(100*time.Millisecond), strings.Join(each, ", "))
	for _, c := range checks {
		t.Run(c.name, c.report)
	}
}

// checkGridNames: statefulsetgrid-demo-{0,1,2}.servicegrid-demo-svc...,
// resolved by dig through the pod's own resolv.conf (kubelet's clusterDNS),
// answer the nodeunit's pod, and HTTP to the name reaches it.
func checkGridNames(ctx context.Context, t *testing.T, op *Operator, caller, unit string, pods map[string]corev1.Pod) {
	t.Helper()
	for i := range 3 {
		name := fmt.Sprintf("%s-%d.%s.default.svc.cluster.local", statefulGrid, i, gridService)
		podName := fmt.Sprintf("%s-%s-%d", statefulGrid, unit, i)
		pod, ok := pods[podName]
		if !ok {
			t.Fatalf("pod %s not found", podName)
		}
		eventually(ctx, t, 0, fmt.Sprintf("%s: dig %s answers %s (%s)", caller, name, pod.Status.PodIP, podName), func(ctx context.Context) error {
			out, err := op.Run(ctx, "exec", caller, "--", "dig", "+short", "+time=2", "+tries=1", name)
			if err != nil {
				return err
			}
			if got := strings.Fields(out); len(got) != 1 || got[0] != pod.Status.PodIP {
				return fmt.Errorf("answer %q", strings.TrimSpace(out))
			}
			return nil
		})
		eventually(ctx, t, 0, fmt.Sprintf("%s: curl http://%s:%d/ reaches %s", caller, name, echoPort, podName), func(ctx context.Context) error {
			got, err := curlPods(ctx, op, caller, fmt.Sprintf("http://%s:%d/", name, echoPort), 1)
			if err != nil {
				return err
			}
			if got[podName] != 1 {
				return fmt.Errorf("answered by %v", got)
			}
			return nil
		})
	}
}

// curlPods makes n requests from inside the caller pod and counts the
// answering pods ("pod name:" lines).
func curlPods(ctx context.Context, op *Operator, caller, url string, n int) (map[string]int, error) {
	script := fmt.Sprintf(`for i in $(seq %d); do curl -sS --max-time 5 %s || echo FAILED; done`, n, url)
	out, err := op.Run(ctx, "exec", caller, "--", "sh", "-c", script)
	if err != nil {
		return nil, err
	}
	got := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "pod name: "); ok {
			got[v]++
		} else if strings.Contains(line, "FAILED") || strings.HasPrefix(line, "curl:") {
			return nil, fmt.Errorf("curl %s from %s: %s", url, caller, line)
		}
	}
	return got, nil
}

// readyPods waits for the seeds' echo pods (want of them) and the client
// pods, all Running and Ready, and returns them by name.
func readyPods(ctx context.Context, client kubernetes.Interface, want int) (map[string]corev1.Pod, error) {
	list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	echo, clients := 0, 0
	for _, p := range list.Items {
		if !podReady(&p) {
			continue
		}
		out[p.Name] = p
		if p.Labels["appGrid"] == "echo" {
			echo++
		} else if p.Labels["app"] == "realnode-client" {
			clients++
		}
	}
	if echo != want || clients != len(seedNodes) {
		return nil, fmt.Errorf("%d of %d echo pods and %d of %d client pods ready", echo, want, clients, len(seedNodes))
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podsInUnit are the echo pods on nodes of the nodeunit.
// nodesInUnit are the seed nodes of the nodeunit unit.
func nodesInUnit(unit string) []string {
	var out []string
	for _, n := range seedNodes {
		if n.unit == unit {
			out = append(out, n.name)
		}
	}
	return out
}

func podsInUnit(pods map[string]corev1.Pod, unit string) map[string]bool {
	units := map[string]string{deadNode: deadNodeUnit}
	for _, n := range seedNodes {
		units[n.name] = n.unit
	}
	out := map[string]bool{}
	for name, p := range pods {
		if p.Labels["appGrid"] == "echo" && units[p.Spec.NodeName] == unit {
			out[name] = true
		}
	}
	return out
}

func nodesReady(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, name := range names {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s not Ready", name)
		}
	}
	return nil
}

// oldNodeCoreDNSGone: every node CoreDNS pod runs the DaemonSet's image and
// none is terminating.
func oldNodeCoreDNSGone(ctx context.Context, client kubernetes.Interface) error {
	ds, err := client.AppsV1().DaemonSets("edge-system").Get(ctx, "coredns-gridhosts", metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := ds.Spec.Template.Spec.Containers[0].Image
	pods, err := client.CoreV1().Pods("edge-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=coredns-gridhosts"})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != want {
			return fmt.Errorf("%s on %s (%s) still there", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image)
		}
	}
	return nil
}

// componentsReady: the controller Deployment available, the three
// DaemonSets ready on the labelled nodes, the static node's mirror pod Ready.
func componentsReady(ctx context.Context, client kubernetes.Interface, nodes int, staticNode string) error {
	mirror, err := client.CoreV1().Pods("kube-system").Get(ctx, "servicegroup-edge-"+staticNode, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !podReady(mirror) {
		return fmt.Errorf("static pod %s not Ready: %v", mirror.Name, mirror.Status.ContainerStatuses)
	}
	d, err := client.AppsV1().Deployments("servicegroup-system").Get(ctx, "application-grid-controller", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if d.Status.AvailableReplicas < 1 {
		return fmt.Errorf("controller: %d available", d.Status.AvailableReplicas)
	}
	for _, ds := range []struct{ ns, name string }{
		{"edge-system", "application-grid-wrapper"}, {"kube-system", "kube-proxy-edge"}, {"edge-system", "coredns-gridhosts"},
	} {
		got, err := client.AppsV1().DaemonSets(ds.ns).Get(ctx, ds.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if int(got.Status.NumberReady) != nodes {
			return fmt.Errorf("%s/%s: %d of %d ready", ds.ns, ds.name, got.Status.NumberReady, nodes)
		}
	}
	return nil
}

// workloadImages are the images of our workloads' containers, by
// kind/namespace/name/container.
func workloadImages(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	out := map[string]string{}
	add := func(kind, ns, name string, spec corev1.PodSpec) {
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			out[kind+"/"+ns+"/"+name+"/"+c.Name] = c.Image
		}
	}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=servicegroup"}
	ds, err := client.AppsV1().DaemonSets("").List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, d := range ds.Items {
		add("DaemonSet", d.Namespace, d.Name, d.Spec.Template.Spec)
	}
	deps, err := client.AppsV1().Deployments("").List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, d := range deps.Items {
		add("Deployment", d.Namespace, d.Name, d.Spec.Template.Spec)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no workload labelled %s", sel.LabelSelector)
	}
	return out, nil
}

func apiPort(cp *controlplane.ControlPlane) int {
	var port int
	_, p, _ := strings.Cut(strings.TrimPrefix(cp.URL, "https://"), "]:")
	if p == "" {
		_, p, _ = strings.Cut(strings.TrimPrefix(cp.URL, "https://"), ":")
	}
	fmt.Sscan(p, &port)
	return port
}

func mustRun(ctx context.Context, t *testing.T, op *Operator, args ...string) string {
	t.Helper()
	out, err := op.Run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually is the shared bounded poll (at least testwait.Floor).
var eventually = testwait.Eventually

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// requireHost skips (CI unset) or fails (CI=true) without root, the Debian
// packages of hack/host-packages.txt a real node needs, or the cached
// Kubernetes binaries; it returns the kubelet, kubectl and kube-proxy.
func requireHost(t *testing.T) (kubelet, kubectl, kubeProxy string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces, cgroups, containerd)")
	}
	for _, tool := range []harness.Tool{harness.ToolIP, harness.ToolIPTables, harness.ToolNFT, harness.ToolConntrack,
		{Command: "containerd"}, {Command: "runc"}, {Command: "/usr/lib/cni/bridge"}, {Command: "mmdebstrap"}} {
		if len(harness.MissingTools(tool)) > 0 {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s; hack/host-deps.sh installs it)", tool.Command, tool.Package()))
		}
	}
	for _, c := range []string{"nsenter", "unshare", "ctr", "make"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	bins := map[string]string{}
	for _, b := range []string{controlplane.KubeAPIServer, "kubelet", controlplane.Kubectl, controlplane.KubeProxy} {
		p, err := controlplane.Binary(b)
		if err != nil {
			missing = append(missing, err.Error())
		}
		bins[b] = p
	}
	if len(missing) > 0 {
		if os.Getenv("CI") == "" {
			t.Skipf("real nodes need: %s; CI=true makes this a failure", strings.Join(missing, "; "))
		}
		t.Fatalf("real nodes required under CI, missing: %s", strings.Join(missing, "; "))
	}
	return bins["kubelet"], bins[controlplane.Kubectl], bins[controlplane.KubeProxy]
}
