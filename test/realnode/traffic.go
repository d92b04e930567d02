package realnode

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/realnode/probe"
)

// The client pods measure what an application on the node sees while the
// operator works: a request to a plain Service (probeService, its pods
// anywhere) and a DNS query of its name through the pod's own resolver
// (kubelet's clusterDNS), each every ~0.2 s, each logged with its time.
const (
	probeService = "probe"
	probeName    = probeService + ".default.svc.cluster.local"
	probeLabel   = "realnode-probe"
)

// measuringPodResources are the CPU requests of the pods that measure the
// data path (the clients and the probe's echo servers), as an application
// that must answer in time sets them. Without requests they were
// BestEffort: inside each node's kubepods cgroup the BestEffort group has
// cpu.shares 2 and the Burstable one the sum of its pods' requests (235 on
// node0), so while our components started on a node (the install, the
// upgrade) its clients and echo servers got about 1% of the node's CPU,
// the four nodes sharing two cores with the rest of the suite: an answer
// could then miss its 2-3 s timeout though nothing was lost on the way.
func measuringPodResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}
}

// probeObjects are the probe's Deployment (two echo servers, kept off the
// node that reboots: a step's report then shows the step, not the reboot's
// aftermath) and Service.
func probeObjects(avoid ...string) (*appsv1.Deployment, *corev1.Service) {
	two := int32(2)
	zero := int64(0)
	labels := map[string]string{"app": probeLabel}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: probeService},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &zero,
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
							NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
								Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpNotIn, Values: avoid,
							}}}},
						},
					}},
					Containers: []corev1.Container{{
						Name: "echo", Image: echoImages[0], ImagePullPolicy: corev1.PullIfNotPresent,
						Resources: measuringPodResources(),
						Ports:     []corev1.ContainerPort{{ContainerPort: echoPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(echoPort)}}},
					}},
				},
			},
		},
	}
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: probeService},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(echoPort)}},
		},
	}
	return d, s
}

// probeCommand is the client container's main process: the image's prober
// (package probe, test/realnode/prober) requesting requestIP ("svc") and
// resolving name, which must answer nameIP ("dns"), through the pod's own
// resolver, each every ~0.2 s, one log line per attempt,
// "<unix ms> svc|dns|grid|gsvc ok|fail|stall [detail]". Its "grid" loop runs when
// the pod's environment names a grid name and the address it must resolve
// to (gridNameEnv, gridIPEnv); its "gsvc" loop, a request to the
// ServiceGrid's Service that fails also when the echo pod that answered
// runs outside the caller's nodeunit (what checkClusterIP checks at fixed
// points, here all along), when it names that Service and the nodeunit's
// nodes (gridServiceEnv, gridNodesEnv). An attempt fails when no answer
// came within 3 s (a request) or 2 s (a query, one datagram), or the answer
// was wrong: an HTTP error, a DNS answer other than exactly the expected
// address; its line says what was seen. An attempt that timed out while
// the prober itself was held up for a second or more (the host stopping
// every process) is a "stall": not counted as failed, listed apart.
func probeCommand(requestIP, name, nameIP string) []string {
	return []string{proberPath, "-svc", requestIP, "-name", name, "-name-ip", nameIP}
}

// The client's environment for its grid and gsvc loops (package probe).
const (
	gridNameEnv    = probe.GridNameEnv
	gridIPEnv      = probe.GridIPEnv
	gridServiceEnv = probe.GridServiceEnv
	gridNodesEnv   = probe.GridNodesEnv
)

// window is a stretch of the run (one operator step) to report on.
type window struct {
	name       string
	start, end time.Time
	// movedGrid: per client, the address its grid name must answer in
	// this window when the pod it names was replaced since the client
	// started (its own check still expects the old pod's address): a query
	// answered with exactly the new address is right, one the client
	// logged right (the old address) is wrong.
	movedGrid map[string]string
}

// probeResult is what one client saw of one kind of request in a window.
type probeResult struct {
	attempts, failed int
	// gap is the longest time without a success (from the window's start
	// to the first success, between two, from the last to its end).
	gap time.Duration
	// failures: each failed attempt's time and what the client logged.
	failures []string
	// held: the stalled attempts' (probe.StallLimit), neither failed nor
	// answered, each as in failures.
	held []string
}

type probeSample struct {
	at      time.Time
	ok      bool
	stalled bool   // timed out while the prober itself was held up
	detail  string // a failure's, as the client logged it
}

// parseProbeLog reads the client's log into samples by kind (svc, dns,
// grid, gsvc).
func parseProbeLog(log string) map[string][]probeSample {
	out := map[string][]probeSample{}
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		ms, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		out[f[1]] = append(out[f[1]], probeSample{at: time.UnixMilli(ms), ok: f[2] == "ok", stalled: f[2] == "stall", detail: strings.Join(f[3:], " ")})
	}
	return out
}

func measure(samples []probeSample, w window) probeResult {
	var r probeResult
	last := w.start
	for _, s := range samples {
		if s.at.Before(w.start) {
			continue
		}
		if s.at.After(w.end) {
			continue
		}
		r.attempts++
		if s.stalled {
			r.held = append(r.held, strings.TrimSpace(s.at.UTC().Format(timeOfDay)+" "+s.detail))
			continue
		}
		if !s.ok {
			r.failed++
			r.failures = append(r.failures, strings.TrimSpace(s.at.UTC().Format(timeOfDay)+" "+s.detail))
			continue
		}
		r.gap = max(r.gap, s.at.Sub(last))
		last = s.at
	}
	r.gap = max(r.gap, w.end.Sub(last))
	return r
}

// expectMoved judges a client's grid queries against addr, the address of
// the replaced pod the name must now answer: the client logs a query ok
// when it answered the old pod's address, and its detail
// "status=NOERROR server=... answer=A" when it answered A.
func expectMoved(samples []probeSample, addr string) []probeSample {
	out := make([]probeSample, len(samples))
	for i, s := range samples {
		f := strings.Fields(s.detail)
		switch {
		case s.ok:
			s.ok, s.detail = false, "answer=the replaced pod's old address, want "+addr
		case !s.stalled && len(f) >= 2 && f[0] == "status=NOERROR" && f[len(f)-1] == "answer="+addr:
			s.ok, s.detail = true, ""
		}
		out[i] = s
	}
	return out
}

// trafficReport reads every client's log (after the logs of its earlier
// pods of the same name, earlier: see recreateClient) and returns, per
// window and client, what its Service requests and DNS queries saw.
func trafficReport(ctx context.Context, client kubernetes.Interface, clients []string, windows []window, earlier map[string]string) (map[string]map[string]map[string]probeResult, string, error) {
	logs := map[string]map[string][]probeSample{}
	for _, c := range clients {
		raw, err := client.CoreV1().Pods("default").GetLogs(c, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("logs of %s: %w", c, err)
		}
		logs[c] = parseProbeLog(earlier[c] + string(raw))
	}
	results, table := trafficTable(logs, windows)
	return results, table, nil
}

// probeKinds are the client loops' kinds, in the report's column order:
// the plain Service, the probe's name, the grid's unified name, the
// ServiceGrid's Service.
var probeKinds = []string{"svc", "dns", "grid", "gsvc"}

// trafficTable measures each client's samples (by kind, parseProbeLog) in
// each window: the results by window, client and kind, and the report's
// table ("-" for a kind the client did not run), followed by the stalled
// attempts, if any.
func trafficTable(logs map[string]map[string][]probeSample, windows []window) (map[string]map[string]map[string]probeResult, string) {
	clients := make([]string, 0, len(logs))
	for c := range logs {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	results := map[string]map[string]map[string]probeResult{}
	var b strings.Builder
	var held []string
	fmt.Fprintf(&b, "%-34s %-14s %27s %27s %27s %27s\n", "step", "client", "Service: failed/tries gap", "DNS: failed/tries gap", "grid name: failed/tries gap", "grid Service: failed/tries gap")
	for _, w := range windows {
		results[w.name] = map[string]map[string]probeResult{}
		for _, c := range clients {
			results[w.name][c] = map[string]probeResult{}
			fmt.Fprintf(&b, "%-34s %-14s", w.name, c)
			for _, kind := range probeKinds {
				samples := logs[c][kind]
				if addr := w.movedGrid[c]; kind == "grid" && addr != "" {
					samples = expectMoved(samples, addr)
				}
				r := measure(samples, w)
				results[w.name][c][kind] = r
				for _, h := range r.held {
					held = append(held, fmt.Sprintf("%s: %s: %s at %s", w.name, c, kind, h))
				}
				col := "-"
				// svc and dns run in every client: their columns show even
				// an empty window.
				if r.attempts > 0 || kind == "svc" || kind == "dns" {
					col = fmt.Sprintf("%10d/%-5d %9s", r.failed, r.attempts, r.gap.Round(10*time.Millisecond))
				}
				fmt.Fprintf(&b, " %27s", col)
			}
			b.WriteString("\n")
		}
	}
	if len(held) > 0 {
		fmt.Fprintf(&b, "attempts timed out while the prober itself was held up (not counted as failed):\n  %s\n", strings.Join(held, "\n  "))
	}
	return results, b.String()
}

// recreateClient replaces the client pod of node with a new one of the
// same name and environment (a pod keeps the resolver it started with:
// only a new one follows the kubelet's clusterDNS), keeping the old pod's
// log in earlier for trafficReport; it waits until the new one's requests
// and queries are answered.
func recreateClient(ctx context.Context, client kubernetes.Interface, node, clusterIP string, earlier map[string]string) error {
	old, err := client.CoreV1().Pods("default").Get(ctx, "client-"+node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return recreateClientWith(ctx, client, node, clusterIP, earlier, old.Spec.Containers[0].Env)
}

// recreateClientWith is recreateClient with the new pod's environment
// given (a grid name to resolve, gridNameEnv).
func recreateClientWith(ctx context.Context, client kubernetes.Interface, node, clusterIP string, earlier map[string]string, env []corev1.EnvVar) error {
	name := "client-" + node
	// The node's kubelet, which serves the log, may have just restarted.
	var raw []byte
	if err := waitUntil(ctx, 3*time.Minute, func() error {
		var err error
		raw, err = client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("logs of %s: %w", name, err)
	}
	earlier[name] += string(raw)
	// Not a forced deletion (grace 0): the pod must stay until its kubelet
	// has stopped its container. The kubelet finds a container to exec into
	// or read logs from by the pod's name alone, so while the old one runs
	// (up to 2 s after a forced deletion) it may answer for the new pod.
	if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(1))}); err != nil {
		return err
	}
	if err := waitUntil(ctx, 3*time.Minute, func() error {
		_, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s not gone yet (%v)", name, err)
	}); err != nil {
		return err
	}
	pod := clientPod(node, clusterIP)
	pod.Spec.Containers[0].Env = env
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	kinds := []string{"svc", "dns"}
	for _, e := range env {
		switch e.Name {
		case gridNameEnv:
			kinds = append(kinds, "grid")
		case gridServiceEnv:
			kinds = append(kinds, "gsvc")
		}
	}
	return waitUntil(ctx, 3*time.Minute, func() error {
		return clientsProbing(ctx, client, []string{name}, kinds...)
	})
}

// clientsProbing: each client's latest attempts of every kind given (at
// least 3 in its last 30 log lines, the newest of the last 10 s: a
// restarted pod's container logs anew) were all answered.
func clientsProbing(ctx context.Context, client kubernetes.Interface, clients []string, kinds ...string) error {
	for _, c := range clients {
		log, err := client.CoreV1().Pods("default").GetLogs(c, &corev1.PodLogOptions{TailLines: ptrTo(int64(30))}).DoRaw(ctx)
		if err != nil {
			return err
		}
		for _, kind := range kinds {
			samples := parseProbeLog(string(log))[kind]
			if len(samples) < 3 {
				return fmt.Errorf("%s: %d %s attempts logged so far", c, len(samples), kind)
			}
			if newest := samples[len(samples)-1].at; time.Since(newest) > 10*time.Second {
				return fmt.Errorf("%s: no %s attempt logged since %s", c, kind, newest.Format(time.StampMilli))
			}
			for _, smp := range samples {
				if !smp.ok {
					return fmt.Errorf("%s: a %s attempt failed at %s", c, kind, smp.at.Format(time.StampMilli))
				}
			}
		}
	}
	return nil
}

// clientPod runs on node, requesting the probe Service at clusterIP and
// resolving its name all along (probeCommand); the checks exec into it.
func clientPod(node, clusterIP string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client-" + node, Labels: map[string]string{"app": "realnode-client"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "client", Image: ClientImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:   probeCommand(clusterIP, probeName, clusterIP),
				Resources: measuringPodResources(),
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }
