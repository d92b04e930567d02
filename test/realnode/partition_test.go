package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/internal/gridcli"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// The node lifecycle timings of the partition steps, scaled down from
// Kubernetes' defaults for test time; everything else about
// kube-controller-manager is as it ships (every controller, node lifecycle
// and taint eviction included, as their ServiceAccounts):
//   - every kubelet's nodeLeaseDurationSeconds is 8 (it renews every 2 s;
//     default 40, every 10 s), for the whole run (config.go);
//   - the apiserver gives pods 15 s of toleration for the unreachable and
//     not-ready taints (--default-*-toleration-seconds; default 300), for the
//     whole run, as it adds them when a pod is created;
//   - kube-controller-manager marks a node unreachable 10 s after its last
//     renewal (--node-monitor-grace-period; default 50 s) and checks every
//     second (--node-monitor-period; default 5 s), during these steps only:
//     it is restarted with them and again without.
//
// Kubernetes' eviction window (grace period and toleration) is so 25 s
// here, where it is 350 s by default; the controller's decision window is
// its default, 20 s.
const (
	tolerationSeconds = 15
	lifecycleGrace    = 10 * time.Second
	evictionWindow    = lifecycleGrace + tolerationSeconds*time.Second
	// cutFor: a nodeunit stays cut off for three eviction windows.
	cutFor = 3 * evictionWindow
)

// scaledLifecycle are kube-controller-manager's flags during the steps.
func scaledLifecycle() []string {
	return append(controllerManagerArgs(),
		"--node-monitor-grace-period="+lifecycleGrace.String(),
		"--node-monitor-period=1s")
}

// controllerManagerArgs are the run's kube-controller-manager flags beyond
// test/controlplane's: each controller with its own ServiceAccount, as
// kubeadm and managed control planes run them (the autonomy webhook is
// called for the node lifecycle controller's identity).
func controllerManagerArgs() []string {
	return []string{"--use-service-account-credentials=true"}
}

// The cut node set and what it is cut from.
const cutTable = "sgrn_cut"

// cutOff drops, in each node's network namespace, every packet from or to
// outside (addresses and CIDRs): before NAT on the way in, after it on the
// way out, so a Service address DNATed to a pod outside is dropped too. The
// nodes still reach each other and their pods.
func cutOff(ctx context.Context, nodes []*Node, outside []string) error {
	rules := fmt.Sprintf(`table inet %[1]s {
	set outside { type ipv4_addr; flags interval; elements = { %[2]s } }
	chain in { type filter hook prerouting priority -300; policy accept; ip saddr @outside drop; }
	chain out { type filter hook postrouting priority 300; policy accept; ip daddr @outside drop; }
}
`, cutTable, strings.Join(outside, ", "))
	for _, n := range nodes {
		cmd := n.Net.NS.Command(ctx, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("cut %s: %w: %s", n.Name, err, out)
		}
	}
	return nil
}

// heal lifts cutOff.
func heal(ctx context.Context, nodes []*Node) error {
	for _, n := range nodes {
		if out, err := n.Net.NS.Run(ctx, "nft", "delete", "table", "inet", cutTable); err != nil {
			return fmt.Errorf("heal %s: %w: %s", n.Name, err, out)
		}
	}
	return nil
}

// siteClientPod is a client of the grids, for the partition steps: its
// "svc" loop requests the ServiceGrid's ClusterIP, "dns" resolves the probe
// Service's name (an ordinary Service: probeIP), "grid" the unified name of its
// nodeunit's first StatefulSetGrid pod (which must answer gridIP).
func siteClientPod(node, gridClusterIP, probeIP, gridIP string) *corev1.Pod {
	p := clientPod(node, gridClusterIP)
	p.Spec.Containers[0].Command = probeCommand(gridClusterIP, probeName, probeIP)
	p.Name = "site-" + node
	p.Labels = map[string]string{"app": "realnode-site-client"}
	p.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: gridNameEnv, Value: fmt.Sprintf("%s-0.%s.default.svc.cluster.local", statefulGrid, gridService)},
		{Name: gridIPEnv, Value: gridIP},
	}
	return p
}

// podLife is what must not change of a pod while its nodeunit is cut off.
type podLife struct {
	uid      types.UID
	restarts int32
	ready    bool
}

// podLives are the lives of every pod on nodes, by namespace/name.
func podLives(ctx context.Context, client kubernetes.Interface, nodes []string) (map[string]podLife, error) {
	out := map[string]podLife{}
	for _, node := range nodes {
		l, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return nil, err
		}
		for _, p := range l.Items {
			life := podLife{uid: p.UID, ready: podReady(&p)}
			for _, c := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
				life.restarts += c.RestartCount
			}
			if p.DeletionTimestamp != nil {
				life.ready = false
			}
			out[p.Namespace+"/"+p.Name] = life
		}
	}
	return out, nil
}

// sameLives says how now differs from before: pods gone, replaced, added,
// restarted or not Ready.
func sameLives(before, now map[string]podLife) error {
	var diffs []string
	for name, b := range before {
		n, ok := now[name]
		switch {
		case !ok:
			diffs = append(diffs, name+" gone")
		case n.uid != b.uid:
			diffs = append(diffs, name+" replaced")
		case n.restarts != b.restarts:
			diffs = append(diffs, fmt.Sprintf("%s restarted (%d to %d)", name, b.restarts, n.restarts))
		case b.ready && !n.ready:
			diffs = append(diffs, name+" not Ready")
		}
	}
	for name := range now {
		if _, ok := before[name]; !ok {
			diffs = append(diffs, name+" new")
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return fmt.Errorf("%s", strings.Join(diffs, "; "))
	}
	return nil
}

// nodeMetrics reads a metrics endpoint on the node's loopback (the
// wrapper's 51007, kube-proxy's 10249) and returns the sum of the samples
// of name whose labels contain every one of labels ("k=\"v\"").
func nodeMetrics(ctx context.Context, n *Node, url, name string, labels ...string) (float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: n.Net.NS.DialContext}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	found := false
line:
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue line
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", n.Name, line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("%s: no %s%v at %s", n.Name, name, labels, url)
	}
	return sum, nil
}

// endpointChanges is what reached a node's kube-proxy of EndpointSlices:
// the changes kube-proxy counted and the events its wrapper sent.
type endpointChanges struct{ kubeProxy, wrapper float64 }

func readEndpointChanges(ctx context.Context, n *Node) (endpointChanges, error) {
	kp, err := nodeMetrics(ctx, n, "http://127.0.0.1:10249/metrics", "kubeproxy_sync_proxy_rules_endpoint_changes_total")
	if err != nil {
		return endpointChanges{}, err
	}
	w, err := nodeMetrics(ctx, n, "http://127.0.0.1:51007/metrics", "application_grid_wrapper_watch_events_sent_total", `resource="endpointslices"`)
	if err != nil {
		return endpointChanges{}, err
	}
	return endpointChanges{kubeProxy: kp, wrapper: w}, nil
}

// nodeunitHeld: while cut off, the nodes are unreachable to the cloud (once
// the grace period has passed) yet without the NoExecute taint.
func nodeunitHeld(ctx context.Context, client kubernetes.Interface, names []string) (unreachable int, err error) {
	for _, name := range names {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
				unreachable++
			}
		}
		for _, taint := range n.Spec.Taints {
			if taint.Effect == corev1.TaintEffectNoExecute {
				return 0, fmt.Errorf("%s has %s:%s", name, taint.Key, taint.Effect)
			}
		}
	}
	return unreachable, nil
}

// hasEventFor: an Event with reason on kind/name exists.
func hasEventFor(ctx context.Context, client kubernetes.Interface, namespace, kind, name, reason string) error {
	l, err := client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name + ",reason=" + reason})
	if err != nil {
		return err
	}
	if len(l.Items) == 0 {
		return fmt.Errorf("no %s Event on %s %s", reason, kind, name)
	}
	return nil
}

// partitionStep is a nodeunit cut off from the cloud and from the other
// nodeunits (its nodes still reach each other) for cutFor, and its return.
// clients are the site clients (one in each nodeunit); its windows (cut
// off, reconnect, after) go to the traffic report, where no request or
// query of theirs may fail.
type partitionStep struct {
	ctx        context.Context
	t          *testing.T
	client     kubernetes.Interface
	cp         *controlplane.ControlPlane
	kubeconfig string
	fabric     *harness.Fabric
	unit       []*Node // the nodeunit cut off
	rest       []*Node // every other node
	// holdUntil, when set, keeps the nodeunit cut off past cutFor until it
	// returns nil, at most holdMax longer (the cut's real condition held
	// until a check outside, e.g. an alert firing, has seen it).
	holdUntil func(ctx context.Context) error
	holdMax   time.Duration
	// heldErr is holdUntil's last error when the cut ended without it
	// passing.
	heldErr error
	// beforeHeal, when set, runs once the hold is over and checked, the
	// nodeunit still cut off.
	beforeHeal func(ctx context.Context)
}

func (p *partitionStep) run() []window {
	t, ctx := p.t, p.ctx
	var unitNames []string
	for _, n := range p.unit {
		unitNames = append(unitNames, n.Name)
	}
	outside := []string{p.fabric.RootIP.String(), p.fabric.GatewayIP.String()}
	for _, n := range p.rest {
		outside = append(outside, n.Net.IP.String(), n.Net.PodCIDR.String())
	}
	before, err := podLives(ctx, p.client, unitNames)
	if err != nil {
		t.Fatal(err)
	}
	// The counters once they rest (kube-controller-manager just restarted).
	changes := map[string]endpointChanges{}
	eventually(ctx, t, 0, "kube-proxy's EndpointSlice changes on the nodeunit's nodes at rest for 5 s", func(ctx context.Context) error {
		for _, n := range p.unit {
			was, err := readEndpointChanges(ctx, n)
			if err != nil {
				return err
			}
			if was != changes[n.Name] {
				changes[n.Name] = was
				return fmt.Errorf("%s: %v changes so far", n.Name, was.kubeProxy)
			}
		}
		time.Sleep(5 * time.Second)
		for _, n := range p.unit {
			if now, err := readEndpointChanges(ctx, n); err != nil || now != changes[n.Name] {
				changes[n.Name] = now
				return fmt.Errorf("%s: still changing (%v)", n.Name, err)
			}
		}
		return nil
	})
	slicesBefore, err := sliceStates(ctx, p.client)
	if err != nil {
		t.Fatal(err)
	}
	gridEndpoints := map[string]int{}
	for _, n := range p.unit {
		if gridEndpoints[n.Name], err = serviceEndpointsInRules(ctx, n, gridService); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("kube-proxy's rules send %s to %v endpoints on %v", gridService, gridEndpoints, unitNames)

	// kube-proxy's rules for the ServiceGrid, sampled on each node of the
	// nodeunit from the cut to the end of the after window.
	sampling, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	fewest := make(chan map[string]int, 1)
	go func() { fewest <- sampleRules(sampling, t, p.unit, gridService, 300*time.Millisecond) }()
	// The nodeunit's pods as the cloud sees them, every half second from
	// the cut to the end of the after window: the first change is the
	// failure (a pod marked not Ready at the reconnect and Ready again a
	// second later must not hide between two looks).
	firstChange := make(chan string, 1)
	go func() {
		start := time.Now()
		for sampling.Err() == nil {
			now, err := podLives(context.WithoutCancel(sampling), p.client, unitNames)
			if err == nil {
				if err := sameLives(before, now); err != nil {
					firstChange <- fmt.Sprintf("%s after the cut: %v", time.Since(start).Round(100*time.Millisecond), err)
					return
				}
			}
			select {
			case <-sampling.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		firstChange <- ""
	}()
	cut := window{name: "nodeunit cut off", start: time.Now()}
	if err := cutOff(ctx, p.unit, outside); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v cut off from %v for %s", unitNames, outside, cutFor)
	heldSince := time.Time{}
	sawStatus, sawDoctor := false, false
	holding := func() bool {
		if time.Since(cut.start) < cutFor {
			if p.holdUntil != nil {
				p.heldErr = p.holdUntil(ctx)
			}
			return true
		}
		if p.holdUntil == nil || time.Since(cut.start) >= cutFor+p.holdMax {
			return false
		}
		p.heldErr = p.holdUntil(ctx)
		return p.heldErr != nil
	}
	for holding() {
		unreachable, err := nodeunitHeld(ctx, p.client, unitNames)
		if err != nil {
			t.Fatalf("%s after the cut: %v", time.Since(cut.start).Round(time.Second), err)
		}
		now, err := podLives(ctx, p.client, unitNames)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameLives(before, now); err != nil {
			t.Fatalf("%s after the cut, the nodeunit's pods as the cloud sees them: %v", time.Since(cut.start).Round(time.Second), err)
		}
		if unreachable == len(unitNames) {
			if heldSince.IsZero() {
				heldSince = time.Now()
				t.Logf("every node of the nodeunit unreachable %s after the cut", heldSince.Sub(cut.start).Round(time.Second))
			}
			if !sawStatus {
				sawStatus = gridStatusShowsCutOff(ctx, t, p.kubeconfig)
			}
			if !sawDoctor {
				sawDoctor = doctorShowsCutOff(ctx, p.kubeconfig)
			}
		}
		time.Sleep(2 * time.Second)
	}
	if heldSince.IsZero() || time.Since(heldSince) < 2*evictionWindow {
		t.Fatalf("the nodeunit was unreachable to the cloud for %s of the cut, less than two eviction windows (%s)", time.Since(heldSince).Round(time.Second), 2*evictionWindow)
	}
	if !sawStatus || !sawDoctor {
		t.Errorf("while cut off: kubectl grid status showed it %v, doctor %v", sawStatus, sawDoctor)
	}
	for _, n := range unitNames {
		if err := hasEventFor(ctx, p.client, "", "Node", n, "NodeunitCutOff"); err != nil {
			t.Error(err)
		}
	}
	if p.beforeHeal != nil {
		p.beforeHeal(ctx)
	}
	cut.end = time.Now()

	back := window{name: "nodeunit reconnects", start: time.Now()}
	if err := heal(ctx, p.unit); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, 0, "the nodeunit's nodes Ready and untainted again", func(ctx context.Context) error {
		return nodesReady(ctx, p.client, unitNames)
	})
	back.end = time.Now()
	t.Logf("steady again %s after the link returned (nodes Ready, no unreachable taint)", back.end.Sub(back.start).Round(100*time.Millisecond))
	after := window{name: "after the reconnect", start: back.end}
	time.Sleep(15 * time.Second)
	after.end = time.Now()
	stopSampling()
	if change := <-firstChange; change != "" {
		t.Errorf("the nodeunit's pods as the cloud sees them, %s", change)
	}
	for node, n := range <-fewest {
		t.Logf("%s: kube-proxy's rules sent %s to at least %d endpoints from the cut on (%d before it)", node, gridService, n, gridEndpoints[node])
		if n < gridEndpoints[node] {
			t.Errorf("%s: kube-proxy's rules for %s fell to %d endpoints during the cut or after it, %d before", node, gridService, n, gridEndpoints[node])
		}
	}
	slicesAfter, err := sliceStates(ctx, p.client)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range slicesBefore {
		if a, ok := slicesAfter[name]; !ok || a != b {
			t.Logf("EndpointSlice %s changed across the cut: %s -> %s", name, b, a)
		}
		if lost := lostEndpoints(b, slicesAfter[name], unitNames); lost != "" {
			t.Errorf("EndpointSlice %s lost endpoints of the nodeunit across the cut: %s", name, lost)
		}
	}

	now, err := podLives(ctx, p.client, unitNames)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameLives(before, now); err != nil {
		t.Errorf("the nodeunit's pods after the reconnect: %v", err)
	}
	for _, n := range p.unit {
		got, err := readEndpointChanges(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		was := changes[n.Name]
		t.Logf("%s: EndpointSlice changes kube-proxy counted during the cut and the reconnect: %v (its wrapper sent %v EndpointSlice events, to kube-proxy and the node's CoreDNS)", n.Name, got.kubeProxy-was.kubeProxy, got.wrapper-was.wrapper)
	}
	return []window{cut, back, after}
}

// gridStatusShowsCutOff: kubectl grid status of the DeploymentGrid names
// the cut-off nodeunit, since when and until when.
func gridStatusShowsCutOff(ctx context.Context, t *testing.T, kubeconfig string) bool {
	out, err := runGridCLI(ctx, kubeconfig, "status", "dg/deploymentgrid-demo")
	if err != nil {
		t.Logf("kubectl grid status: %v", err)
		return false
	}
	if !strings.Contains(out, "nodeunit nodeunit2: cut off since") || !strings.Contains(out, "autonomous until") {
		return false
	}
	t.Logf("kubectl grid status dg/deploymentgrid-demo while cut off:\n%s", out)
	return true
}

// autonomyEnded: the nodeunit cut off, its grids' autonomy lowered to the
// least (autonomy.MinDuration, a minute, less than the cut has lasted) ends it, as a cut longer
// than the autonomy does: doctor says so, and Prometheus fires the critical
// ServiceGroupNodeunitAutonomyExpired. Meanwhile kube-controller-manager is
// stopped, so the eviction an ended autonomy lets through does not run (the
// partition step's pods must stay). Then the grids' autonomy is put back
// and kube-controller-manager started again: a new instance, observing the
// unreachable nodes afresh, which the webhook holds off again.
func autonomyEnded(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, op *Operator, prom *PromAPI, unit string, grids []string) {
	t.Helper()
	kubeconfig := cp.Kubeconfig
	annotation := autonomy.DurationAnnotation
	was := map[string]string{}
	for _, g := range grids {
		was[g] = mustRun(ctx, t, op, "-n", "default", "get", g, "-o", "jsonpath={.metadata.annotations."+strings.ReplaceAll(annotation, ".", `\.`)+"}")
		if was[g] == "" {
			t.Fatalf("%s has no %s", g, annotation)
		}
	}
	annotate := func(duration func(grid string) string) {
		t.Helper()
		for _, g := range grids {
			mustRun(ctx, t, op, "-n", "default", "annotate", g, annotation+"="+duration(g), "--overwrite")
		}
	}
	asBefore := func(g string) string { return was[g] }
	cp.StopControllerManager()
	restored := false
	defer func() {
		if !restored {
			annotate(asBefore)
			_ = cp.RestartControllerManager(context.WithoutCancel(ctx), scaledLifecycle())
		}
	}()
	start := time.Now()
	annotate(func(string) string { return autonomy.MinDuration.String() })
	annotated := time.Since(start)
	// doctorSays: doctor reports the nodeunit cut off, its finding saying
	// what.
	subject := "nodeunit " + gridKey + "=" + unit + ": cut off since "
	var seen string
	var tries []string // each doctor run's time, and why it was not the one wanted
	doctorSays := func(what string) func(context.Context) error {
		tries = nil
		var problems []string
		check := func(ctx context.Context) (err error) {
			if _, problems, err = doctorProblems(ctx, kubeconfig); err != nil {
				return err
			}
			for _, p := range problems {
				if strings.HasPrefix(p, subject) && strings.Contains(p, what) {
					seen = p
					return nil
				}
			}
			return fmt.Errorf("no %q...%q among %q", subject, what, problems)
		}
		return func(ctx context.Context) error {
			began := time.Now()
			err := check(ctx)
			took := time.Since(began)
			try := fmt.Sprintf("%s (%v)", took.Round(100*time.Millisecond), err)
			if took > 10*time.Second && err == nil {
				// A run this slow waited out a timeout: its findings say where.
				try = fmt.Sprintf("%s (findings %q)", took.Round(100*time.Millisecond), problems)
			}
			tries = append(tries, try)
			return err
		}
	}
	eventually(ctx, t, 0, "kubectl grid doctor: "+unit+"'s autonomy ended", doctorSays(", autonomy ended "))
	t.Logf("kubectl grid doctor, %s's autonomy lowered to 1m (%s; annotated in %s, then doctor's runs: %s): %q", unit, time.Since(start).Round(100*time.Millisecond), annotated.Round(100*time.Millisecond), strings.Join(tries, ", "), seen)
	const alert = "ServiceGroupNodeunitAutonomyExpired"
	eventually(ctx, t, 2*time.Minute, "Prometheus: "+alert+" for "+unit+" firing", func(ctx context.Context) error {
		alerts, err := prom.Alerts(ctx)
		if err != nil {
			return err
		}
		if firing(alerts, alert, unit) == nil {
			return fmt.Errorf("not firing; alerts: %s", describeAlerts(alerts))
		}
		return nil
	})
	t.Logf("Prometheus: %s for %s firing %s after the autonomy was lowered", alert, unit, time.Since(start).Round(time.Second))
	annotate(asBefore)
	eventually(ctx, t, 0, "kubectl grid doctor: "+unit+" autonomous again", doctorSays(", autonomous until "))
	restored = true
	if err := cp.RestartControllerManager(ctx, scaledLifecycle()); err != nil {
		t.Fatal(err)
	}
}

func doctorShowsCutOff(ctx context.Context, kubeconfig string) bool {
	_, problems, err := doctorProblems(ctx, kubeconfig)
	if err != nil {
		return false
	}
	for _, p := range problems {
		if strings.HasPrefix(p, "nodeunit "+gridKey+"=nodeunit2: cut off since") {
			return true
		}
	}
	return false
}

// deadNodeStep: in a nodeunit whose other nodes stay connected, one node
// loses power. Its pods get Kubernetes' default handling (not Ready, then
// evicted and replaced); the nodeunit's Services stop sending to it. Then
// the operator takes the node out of service and deletes it (gone for
// good, build/RUNBOOK.md): the StatefulSet's pod, which waits for its
// node's word, is replaced too.
type deadNodeStep struct {
	ctx    context.Context
	t      *testing.T
	client kubernetes.Interface
	op     *Operator
	dead   *Node
	caller string // a client pod in the same nodeunit
	// callerNode runs caller: its kube-proxy's rules show when the
	// replaced pods reach the data path.
	callerNode *Node
	// For doctor: the admin's kubeconfig and the edge nodes.
	kubeconfig string
	edgeNodes  []string
	// trail: from the dead node's deletion to the window's end, what the
	// caller's kube-proxy programmed for the ServiceGrid and the data
	// planes' lives and logs, for a failed window's report.
	trail *trailReport
}

// outOfServiceTaint is kubectl taint's spelling of Kubernetes' taint for
// a node shut down for good (node.kubernetes.io/out-of-service).
const outOfServiceTaint = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"

func (d *deadNodeStep) run() (dying, after window) {
	t, ctx := d.t, d.ctx
	l, err := d.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + d.dead.Name, LabelSelector: echoSelector})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) == 0 {
		t.Fatalf("no grid pod on %s to lose", d.dead.Name)
	}
	var ips []string
	for _, p := range l.Items {
		ips = append(ips, p.Status.PodIP)
	}
	dying = window{name: "a node of nodeunit1 dies", start: time.Now()}
	if err := d.dead.PowerOff(ctx); err != nil {
		t.Fatal(err)
	}
	// Not Ready after the grace period and the decision window; gone from
	// the Services' endpoints then.
	var notReady, evicted time.Duration
	eventually(ctx, t, 0, d.dead.Name+"'s grid pods not Ready and out of the ServiceGrid's endpoints", func(ctx context.Context) error {
		if err := outOfEndpoints(ctx, d.client, gridService, ips); err != nil {
			return err
		}
		notReady = time.Since(dying.start)
		return nil
	})
	eventually(ctx, t, 0, d.dead.Name+"'s grid pods evicted", func(ctx context.Context) error {
		for _, p := range l.Items {
			got, err := d.client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (got.UID != p.UID || got.DeletionTimestamp != nil)) {
				continue
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("%s not evicted", p.Name)
		}
		evicted = time.Since(dying.start)
		return nil
	})
	if err := hasEventFor(ctx, d.client, "", "Node", d.dead.Name, "AutonomyNodeFailure"); err != nil {
		t.Error(err)
	}
	placement := controllerInNodeunit(ctx, t, d.client)
	expectDoctor(ctx, t, d.kubeconfig, d.edgeNodes, "a dead node in nodeunit1",
		append(slices.Clone(placement), "nodeunit "+gridKey+"=nodeunit1: 1/2 nodes unreachable since")...)
	t.Logf("%s powered off: its pods out of the endpoints after %s, evicted after %s (grace period %s + decision window 20s + toleration %ds)",
		d.dead.Name, notReady.Round(time.Second), evicted.Round(time.Second), lifecycleGrace, tolerationSeconds)
	dying.end = time.Now()

	// Gone for good, as build/RUNBOOK.md says: the operator taints the node
	// out of service (Kubernetes' non-graceful node shutdown), so pod
	// garbage collection deletes its evicted pods at its next pass and the
	// StatefulSet's, which waits for its predecessor's name, starts
	// elsewhere in the nodeunit; then deletes the Node. Deleting the Node
	// alone works too, after the collector's 40 s quarantine of pods on
	// deleted nodes.
	outOfService := time.Now()
	mustRun(ctx, t, d.op, "taint", "node", d.dead.Name, outOfServiceTaint)
	var pods map[string]corev1.Pod
	eventually(ctx, t, 4*time.Minute, "the seeds' 10 grid pods Ready again without "+d.dead.Name, func(ctx context.Context) error {
		var err error
		pods, err = readyPods(ctx, d.client, 10)
		return err
	})
	t.Logf("%s out of service: every grid pod Ready again %s later", d.dead.Name, time.Since(outOfService).Round(time.Second))
	if err := d.client.CoreV1().Nodes().Delete(ctx, d.dead.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectDoctor(ctx, t, d.kubeconfig, d.edgeNodes, "the dead node deleted", placement...)
	svc, err := d.client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := followRules(ctx, d.callerNode.Net.NS, "default", gridService, svc.Spec.ClusterIP)
	var planes []*trail
	for _, f := range []struct{ namespace, selector string }{
		{"edge-system", "app.kubernetes.io/name=application-grid-wrapper"},
		{"kube-system", "app.kubernetes.io/name=kube-proxy-edge"},
	} {
		tr, err := followPods(ctx, d.client, f.namespace, f.selector)
		if err != nil {
			t.Fatal(err)
		}
		planes = append(planes, tr)
	}
	defer func() {
		text := fmt.Sprintf("%s's kube-proxy rules for %s (cluster IP %s):\n%s\nthe wrappers and kube-proxy-edge pods (times seen by the test; log lines with the kubelet's):",
			d.callerNode.Name, gridService, svc.Spec.ClusterIP, rules.stop())
		for _, tr := range planes {
			text += "\n" + tr.stop()
		}
		d.trail.stepEnded(text)
	}()
	// A pod Ready in the API reaches a node's rules through the
	// EndpointSlice controller, the wrapper and kube-proxy's next sync;
	// where every pod of the nodeunit was replaced, the rules reject the
	// Service meanwhile (a run's curl right after readiness was refused).
	// The window after the death starts once the caller's kube-proxy
	// balances over exactly the nodeunit's new pods.
	proxyRulesInUnit(ctx, t, d.callerNode, deadNodeUnit, pods)
	d.unitPodsServing(pods)
	// Likewise the names: a replaced pod's name was absent meanwhile, and
	// the node's CoreDNS caches that denial (cache 30, capped by the
	// zone's SOA minimum): the window starts once each client whose pod
	// was replaced resolves it to the new address.
	moved := d.movedGridPods(pods)
	d.resolvingMoved(moved)
	after = window{name: "after the node died", start: time.Now(), movedGrid: moved}
	// A refused request (three runs since 2026-12-07 12:00, every pod
	// answering at its own address just before) is told apart by what the
	// kernel dropped: a kube-proxy REJECT is a NETFILTER_DROP of the SYN
	// (via ip_forward), a pod not listening a NO_SOCKET at tcp_v4_rcv.
	drops := followDrops(ctx)
	got, err := curlPods(ctx, d.op, d.caller, "http://"+svc.Spec.ClusterIP+":80/", requests)
	dropped := drops.stop()
	if err != nil {
		t.Fatalf("%v\nthe kernel's drops of IPv4 packets meanwhile, any namespace:\n%s", err,
			strings.Join(dropsDuring(dropped, after.start.UTC().Format(timeOfDay), time.Now().UTC().Format(timeOfDay)), "\n"))
	}
	total := 0
	for _, c := range got {
		total += c
	}
	if total != requests {
		t.Errorf("%s: %d of %d requests to the ServiceGrid answered after %s died: %v", d.caller, total, requests, d.dead.Name, got)
	}
	time.Sleep(5 * time.Second)
	after.end = time.Now()
	return dying, after
}

// unitPodsServing waits until each of the dead node's nodeunit's grid pods
// answers HTTP at its own address, from the caller's node. SuperEdge's
// examples, applied as-is, give their pods no readiness probe, so Kubernetes
// counts a pod Ready once its container has started, before its server
// listens: two runs' first request to the Service, a second after the last
// replaced pod started and with the rules already right, was refused at once.
// The window after the death tests the data path, so it starts once every
// backend serves; how long that took after the rules is logged.
func (d *deadNodeStep) unitPodsServing(pods map[string]corev1.Pod) {
	t, start := d.t, time.Now()
	refused := map[string]string{} // pod: its first failed answer
	for name := range podsInUnit(pods, deadNodeUnit) {
		ip := pods[name].Status.PodIP
		eventually(d.ctx, t, 0, fmt.Sprintf("%s: %s answers at http://%s:%d/", d.callerNode.Name, name, ip, echoPort), func(ctx context.Context) error {
			err := podAnswers(ctx, d.callerNode, ip, name)
			if _, seen := refused[name]; err != nil && !seen {
				refused[name] = strings.TrimSpace(err.Error())
			}
			return err
		})
	}
	t.Logf("each of %s's grid pods answering at its own address %s after the rules were right; not at first: %v",
		deadNodeUnit, time.Since(start).Round(100*time.Millisecond), refused)
}

// movedGridPods: for each site client whose grid name's pod (its
// nodeunit's first StatefulSetGrid pod, siteClientPod) now runs at another
// address than the client was started with, that address.
func (d *deadNodeStep) movedGridPods(pods map[string]corev1.Pod) map[string]string {
	moved := map[string]string{}
	for _, sn := range seedNodes {
		name := "site-" + sn.name
		c, err := d.client.CoreV1().Pods("default").Get(d.ctx, name, metav1.GetOptions{})
		if err != nil {
			d.t.Fatal(err)
		}
		var was string
		for _, e := range c.Spec.Containers[0].Env {
			if e.Name == gridIPEnv {
				was = e.Value
			}
		}
		p, ok := pods[fmt.Sprintf("%s-%s-0", statefulGrid, sn.unit)]
		if !ok {
			d.t.Fatalf("no pod %s-%s-0", statefulGrid, sn.unit)
		}
		if now := p.Status.PodIP; now != was {
			d.t.Logf("%s: %s-%s-0 replaced: %s, was %s (the client's grid name must answer the new address)", name, statefulGrid, sn.unit, now, was)
			moved[name] = now
		}
	}
	return moved
}

// resolvingMoved waits until each client of moved logs a query of its grid
// name answered with the new address, after the wait began.
func (d *deadNodeStep) resolvingMoved(moved map[string]string) {
	since := time.Now()
	for c, addr := range moved {
		eventually(d.ctx, d.t, 0, c+": its grid name answers "+addr, func(ctx context.Context) error {
			log, err := d.client.CoreV1().Pods("default").GetLogs(c, &corev1.PodLogOptions{TailLines: ptrTo(int64(30))}).DoRaw(ctx)
			if err != nil {
				return err
			}
			samples := expectMoved(parseProbeLog(string(log))["grid"], addr)
			if n := len(samples); n == 0 || !samples[n-1].ok || samples[n-1].at.Before(since) {
				return fmt.Errorf("its latest grid queries: %v", samples)
			}
			return nil
		})
	}
}

// outOfEndpoints: none of ips is a ready endpoint of Service name.
func outOfEndpoints(ctx context.Context, client kubernetes.Interface, name string, ips []string) error {
	l, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return err
	}
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if slices.Contains(ips, a) {
					return fmt.Errorf("%s still a ready endpoint of %s", a, name)
				}
			}
		}
	}
	return nil
}

// runGridCLI runs kubectl grid in-process and returns what it printed.
func runGridCLI(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := gridcli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String() + errOut.String(), err
}

// sliceState is an EndpointSlice's version and endpoints ("ip@node:ready"
// sorted), by namespace/name.
func sliceStates(ctx context.Context, client kubernetes.Interface) (map[string]string, error) {
	l, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range l.Items {
		var eps []string
		for _, e := range s.Endpoints {
			node := ""
			if e.NodeName != nil {
				node = *e.NodeName
			}
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			eps = append(eps, fmt.Sprintf("%s@%s:%v", strings.Join(e.Addresses, ","), node, ready))
		}
		slices.Sort(eps)
		out[s.Namespace+"/"+s.Name] = "[" + strings.Join(eps, " ") + "]"
	}
	return out, nil
}

// lostEndpoints names the endpoints on nodes that were ready in before and
// are missing or not ready in after.
func lostEndpoints(before, after string, nodes []string) string {
	var lost []string
	for _, e := range strings.Fields(strings.Trim(before, "[]")) {
		addr, rest, _ := strings.Cut(e, "@")
		node, ready, _ := strings.Cut(rest, ":")
		if ready != "true" || !slices.Contains(nodes, node) {
			continue
		}
		if !strings.Contains(after, addr+"@"+node+":true") {
			lost = append(lost, addr+"@"+node)
		}
	}
	return strings.Join(lost, " ")
}

// serviceEndpointsInRules counts the endpoints kube-proxy's rules on n send
// Service name (namespace default) to: the distinct DNAT targets of its
// rules, in iptables or nftables mode.
func serviceEndpointsInRules(ctx context.Context, n *Node, name string) (int, error) {
	out, err := n.Net.NS.Run(ctx, "iptables-save", "-t", "nat")
	if err != nil {
		return 0, err
	}
	targets := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "default/"+name) {
			continue
		}
		if _, to, ok := strings.Cut(line, "--to-destination "); ok {
			targets[strings.Fields(to)[0]] = true
		}
	}
	if len(targets) == 0 {
		nft, err := n.Net.NS.Run(ctx, "nft", "list", "table", "ip", "kube-proxy")
		if err == nil {
			for _, line := range strings.Split(nft, "\n") {
				if strings.Contains(line, "default/"+name) {
					if _, to, ok := strings.Cut(line, "dnat to "); ok {
						targets[strings.Fields(to)[0]] = true
					}
				}
			}
		}
	}
	return len(targets), nil
}

// sampleRules counts, every interval until ctx ends, the endpoints
// kube-proxy's rules on each node send Service name to, and returns the
// fewest seen per node. Each change of a node's count is logged, with the
// Service's EndpointSlices as that node's wrapper serves them then.
func sampleRules(ctx context.Context, t *testing.T, nodes []*Node, name string, interval time.Duration) map[string]int {
	fewest, last := map[string]int{}, map[string]int{}
	start := time.Now()
	for {
		for _, n := range nodes {
			bg := context.WithoutCancel(ctx)
			c, err := serviceEndpointsInRules(bg, n, name)
			if err != nil {
				continue
			}
			if f, ok := fewest[n.Name]; !ok || c < f {
				fewest[n.Name] = c
			}
			if l, ok := last[n.Name]; ok && l != c {
				t.Logf("%s +%s: kube-proxy's rules send %s to %d endpoints (were %d); its wrapper serves: %s",
					n.Name, time.Since(start).Round(10*time.Millisecond), name, c, l, servedSlices(bg, n, name))
			}
			last[n.Name] = c
		}
		select {
		case <-ctx.Done():
			return fewest
		case <-time.After(interval):
		}
	}
}

// servedSlices are Service name's EndpointSlices as the node's wrapper
// serves them to its kube-proxy (over its pinned certificate, from inside
// the node's network namespace), one "name rv [endpoints]" each.
func servedSlices(ctx context.Context, n *Node, name string) string {
	cfg := &rest.Config{
		Host:            "https://127.0.0.1:51006",
		TLSClientConfig: rest.TLSClientConfig{CAFile: n.HostPath("/var/lib/application-grid-wrapper/pki/serving.crt")},
		Dial:            n.Net.NS.DialContext,
		Timeout:         5 * time.Second,
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err.Error()
	}
	l, err := c.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, s := range l.Items {
		var eps []string
		for _, e := range s.Endpoints {
			node := ""
			if e.NodeName != nil {
				node = *e.NodeName
			}
			eps = append(eps, fmt.Sprintf("%s@%s", strings.Join(e.Addresses, ","), node))
		}
		out = append(out, fmt.Sprintf("%s rv=%s %v", s.Name, s.ResourceVersion, eps))
	}
	return fmt.Sprintf("(list rv %s) %s", l.ResourceVersion, strings.Join(out, "; "))
}
