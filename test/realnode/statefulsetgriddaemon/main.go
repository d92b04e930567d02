// Command statefulsetgriddaemon stands in for SuperEdge's
// statefulset-grid-daemon in the real-node test (no SuperEdge image exists
// here): on its node it writes the hosts file edge-coredns's hosts plugin
// reads, one line "IP {grid}-{i}.{service}.{namespace}.svc.cluster.local"
// per pod of each grid StatefulSet of the node's nodeunit, as SuperEdge's
// daemon does. Simplified: it lists every second instead of watching, and
// skips the daemon's checks on the grid object and the Service's labels
// (the grids' CRDs may be gone while SuperEdge's data plane runs here).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// gridSelector is the label SuperEdge's controller puts on a grid's
// children, naming the grid.
const gridSelector = "superedge.io/grid-selector"

func main() {
	hostname := flag.String("hostname", "", "this node's name")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	hosts := flag.String("hosts-path", "/data/edge/hosts", "hosts file edge-coredns reads")
	flag.Parse()
	logger := klog.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		logger.Error(err, "Reading the kubeconfig")
		os.Exit(1)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	last := ""
	for ; ; time.Sleep(time.Second) {
		text, err := records(ctx, client, *hostname)
		if err != nil {
			logger.Error(err, "Listing the grid's pods")
			continue
		}
		if text == last {
			continue
		}
		if err := writeFile(*hosts, text); err != nil {
			logger.Error(err, "Writing the hosts file", "path", *hosts)
			continue
		}
		last = text
		logger.Info("Wrote the hosts file", "path", *hosts, "records", strings.Count(text, "\n"))
	}
}

// records is the hosts file's content for node: the pods of every grid
// StatefulSet whose node selector matches the node's labels, under the
// grid's unified names.
func records(ctx context.Context, client kubernetes.Interface, node string) (string, error) {
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	sets, err := client.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{LabelSelector: gridSelector})
	if err != nil {
		return "", err
	}
	var lines []string
	for _, set := range sets.Items {
		grid := set.Labels[gridSelector]
		value, ok := strings.CutPrefix(set.Name, grid+"-")
		if !ok || set.Spec.ServiceName == "" || !selects(set.Spec.Template.Spec.NodeSelector, n.Labels, value) {
			continue
		}
		pods, err := client.CoreV1().Pods(set.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, p := range pods.Items {
			ordinal, ok := strings.CutPrefix(p.Name, set.Name+"-")
			if !ok || !ownedBy(&p, set.Name) || p.Status.PodIP == "" {
				continue
			}
			lines = append(lines, fmt.Sprintf("%s %s-%s.%s.%s.svc.cluster.local\n", p.Status.PodIP, grid, ordinal, set.Spec.ServiceName, set.Namespace))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, ""), nil
}

// selects: some node selector entry names the nodeunit value and the node
// carries it.
func selects(selector, labels map[string]string, value string) bool {
	for k, v := range selector {
		if v == value && labels[k] == value {
			return true
		}
	}
	return false
}

func ownedBy(p *corev1.Pod, set string) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "StatefulSet" && ref.Name == set
}

// writeFile replaces the file whole (rename), so that CoreDNS never reads
// half of it.
func writeFile(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".hosts-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
