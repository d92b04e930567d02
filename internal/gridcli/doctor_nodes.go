package gridcli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/autonomy"
)

// doctor holds the clients and the report of one `kubectl grid doctor`.
type doctor struct {
	kube   kubernetes.Interface
	c      *clients
	ext    apiextensionsclient.Interface
	exec   podExecutor
	report *doctorReport
	lease  *leaseState // controllerLease's, read once
}

// staticPodName labels the static-pod option's pod.
const staticPodName = "servicegroup-edge"

// snapshotMarker is what the wrapper's /readyz says while it serves its
// on-disk snapshot (wrapper/snapshot_serve.go).
const snapshotMarker = "serving the snapshot"

// execsAtOnce bounds the concurrent kubectl-exec checks of wrappers.
const execsAtOnce = 8

// checkEdgeNodes checks every node the wrapper DaemonSet selects.
func (d *doctor) checkEdgeNodes(ctx context.Context) error {
	ds, err := orNil(d.kube.AppsV1().DaemonSets(edgeNamespace).Get(ctx, wrapperName, metav1.GetOptions{}))
	if err != nil {
		return err
	}
	if ds == nil {
		d.report.add("daemonset "+edgeNamespace+"/"+wrapperName, "kubectl apply --server-side -k build/manifests/default (build/README.md, Install)", "missing: no edge node has a wrapper")
		return nil
	}
	selector := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
	nodes, err := d.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return fmt.Errorf("listing edge nodes: %w", err)
	}
	edgePods, err := podsByNode(ctx, d.kube, edgeNamespace, "")
	if err != nil {
		return err
	}
	proxyPods, err := podsByNode(ctx, d.kube, "kube-system", nameLabel+"="+kubeProxyEdgeName)
	if err != nil {
		return err
	}
	stockPods, err := podsByNode(ctx, d.kube, "kube-system", stockKubeProxyLabel)
	if err != nil {
		return err
	}
	// The static-pod option runs all three in one pod (build/static-pods).
	staticPods, err := podsByNode(ctx, d.kube, "", nameLabel+"="+staticPodName)
	if err != nil {
		return err
	}
	edgeNodes := map[string]bool{}
	for _, n := range nodes.Items {
		edgeNodes[n.Name] = true
	}
	for name := range staticPods {
		if !edgeNodes[name] {
			edgeNodes[name] = true
			// The Node itself, not a stand-in with its name: its Ready
			// condition tells whether the node can be asked (ask, below).
			// A stand-in looked reachable, so on a cut-off site doctor
			// waited out its exec timeout (30 s) on the static pod.
			n, err := d.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
			case err != nil:
				return fmt.Errorf("getting node %s (a static pod's): %w", name, err)
			}
			nodes.Items = append(nodes.Items, *n)
		}
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	coredns, err := orNil(d.kube.AppsV1().DaemonSets(edgeNamespace).Get(ctx, corednsName, metav1.GetOptions{}))
	if err != nil {
		return err
	}
	if coredns == nil {
		d.report.add("daemonset "+edgeNamespace+"/"+corednsName, "kubectl apply --server-side -k build/manifests/default (build/README.md, Install)", "missing: no edge node has its own CoreDNS")
	}
	kubeProxyLabel := "the node label kube-proxy-edge selects"
	if kp, err := orNil(d.kube.AppsV1().DaemonSets("kube-system").Get(ctx, kubeProxyEdgeName, metav1.GetOptions{})); err != nil {
		return err
	} else if kp != nil {
		kubeProxyLabel = labels.SelectorFromSet(kp.Spec.Template.Spec.NodeSelector).String()
	}

	var wrappers []corev1.Pod
	for _, n := range nodes.Items {
		d.report.EdgeNodes = append(d.report.EdgeNodes, n.Name)
		subject := "node " + n.Name
		pods := edgePods[n.Name]
		if p := firstPod(stockPods[n.Name]); p != nil {
			d.report.add(subject, "apply build/manifests/kube-proxy/kube-proxy-patch.yaml to the stock kube-proxy DaemonSet (build/README.md, Install)", "the stock kube-proxy (pod %s) runs on an edge node, beside or instead of kube-proxy-edge", p.Name)
		}
		// A wrapper on a node the apiserver marks unreachable (its Ready
		// condition Unknown: no kubelet status within the grace period) is
		// not asked: an exec there waits out its timeout (30 s) for
		// nothing, which made doctor that slow on a site cut off.
		ask := func(p *corev1.Pod) {
			if an := autonomy.NodeOf(&n); an.Unreachable {
				d.report.add(subject, "restore the node's link to the apiserver, then run doctor again",
					"cannot ask wrapper %s whether it serves its snapshot: the node is unreachable (Ready Unknown since %s)", p.Name, an.Since.UTC().Format(time.RFC3339))
				return
			}
			wrappers = append(wrappers, *p)
		}
		if sp := firstPod(staticPods[n.Name]); sp != nil {
			if !podIsReady(sp) {
				d.report.add(subject, "kubectl -n "+sp.Namespace+" logs "+sp.Name+" --all-containers; build/RUNBOOK.md#wrapper-not-ready", "static pod %s (wrapper, kube-proxy-edge, CoreDNS) is not ready", sp.Name)
			} else {
				ask(sp)
			}
			continue
		}
		w := withName(pods, wrapperName)
		switch {
		case w == nil:
			d.report.add(subject, fmt.Sprintf("kubectl -n %s describe daemonset %s (tolerations, node selector), and the node's kubelet", edgeNamespace, wrapperName), "no %s pod", wrapperName)
		case !podIsReady(w):
			d.report.add(subject, fmt.Sprintf("kubectl -n %s logs %s; build/RUNBOOK.md#wrapper-not-ready", edgeNamespace, w.Name), "%s pod %s is not ready", wrapperName, w.Name)
		default:
			ask(w)
		}
		if coredns != nil {
			switch c := withName(pods, corednsName); {
			case c == nil:
				d.report.add(subject, fmt.Sprintf("kubectl -n %s describe daemonset %s", edgeNamespace, corednsName), "no %s pod", corednsName)
			case !podIsReady(c):
				d.report.add(subject, fmt.Sprintf("kubectl -n %s logs %s; build/RUNBOOK.md#coredns-not-ready", edgeNamespace, c.Name), "%s pod %s is not ready", corednsName, c.Name)
			}
		}
		switch p := firstPod(proxyPods[n.Name]); {
		case p == nil:
			d.report.add(subject, "label the node for kube-proxy-edge ("+kubeProxyLabel+"; build/README.md, Install)", "no kube-proxy-edge pod: kube-proxy there does not go through the wrapper")
		case !podIsReady(p):
			d.report.add(subject, "kubectl -n kube-system logs "+p.Name+"; build/RUNBOOK.md#kube-proxy-edge-sync-errors", "kube-proxy-edge pod %s is not ready", p.Name)
		}
	}
	d.checkSnapshots(ctx, wrappers)
	return nil
}

// checkSnapshots asks each ready wrapper's /readyz, through kubectl exec,
// whether it serves its snapshot.
func (d *doctor) checkSnapshots(ctx context.Context, wrappers []corev1.Pod) {
	type answer struct {
		pod      corev1.Pod
		out, err string
	}
	answers := make([]answer, len(wrappers))
	sem := make(chan struct{}, execsAtOnce)
	var wg sync.WaitGroup
	for i, p := range wrappers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := d.exec.readyz(ctx, &p)
			answers[i] = answer{pod: p, out: out}
			if err != nil {
				answers[i].err = err.Error()
			}
		})
	}
	wg.Wait()
	for _, a := range answers {
		subject := "node " + a.pod.Spec.NodeName
		switch {
		case a.err != "":
			d.report.add(subject, fmt.Sprintf("kubectl -n %s exec %s -c wrapper -- /application-grid-wrapper --get-loopback=http://127.0.0.1:51007/readyz (needs create on pods/exec)", a.pod.Namespace, a.pod.Name), "cannot ask wrapper %s whether it serves its snapshot: %s", a.pod.Name, a.err)
		case strings.Contains(a.out, snapshotMarker):
			d.report.add(subject, "make the apiserver reachable from the node and acceptable to the wrapper; build/RUNBOOK.md#wrapper-serving-a-snapshot", "wrapper %s serves its on-disk snapshot, not the apiserver's data (%s)", a.pod.Name, strings.TrimSpace(a.out))
		}
	}
}

// podsByNode lists a namespace's pods (matching selector) by node name.
func podsByNode(ctx context.Context, kube kubernetes.Interface, namespace, selector string) (map[string][]corev1.Pod, error) {
	l, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing pods in %s: %w", namespace, err)
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]corev1.Pod{}
	for _, p := range l.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out, nil
}

// withName is the pod of the component name (its app.kubernetes.io/name),
// a ready one first.
func withName(pods []corev1.Pod, name string) *corev1.Pod {
	var matching []corev1.Pod
	for _, p := range pods {
		if p.Labels[nameLabel] == name {
			matching = append(matching, p)
		}
	}
	return firstPod(matching)
}

// firstPod prefers a ready pod (an update runs old and new side by side).
func firstPod(pods []corev1.Pod) *corev1.Pod {
	if len(pods) == 0 {
		return nil
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return podIsReady(&p) })
	if i < 0 {
		i = 0
	}
	return &pods[i]
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
