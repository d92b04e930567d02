package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// superEdgeWrapperServer is where SuperEdge's wrapper serves kube-proxy
// (plain HTTP), named in the kubeconfig edgeadm writes for edge-kube-proxy.
const superEdgeWrapperServer = "http://127.0.0.1:51006"

// WriteSuperEdgeManifests writes testdata/superedge.yaml, an operator's
// SuperEdge manifests, to superedge/superedge.yaml in the scratch checkout
// (where build/MIGRATION.md's rollback expects them), with the apiserver's
// address and the images (placeholder -> image). It returns the path.
func (o *Operator) WriteSuperEdgeManifests(fixture, apiserver string, images map[string]string) (string, error) {
	data, err := os.ReadFile(fixture)
	if err != nil {
		return "", err
	}
	text := strings.ReplaceAll(string(data), "APISERVER", strings.TrimPrefix(apiserver, "https://"))
	for placeholder, image := range images {
		if !strings.Contains(text, placeholder) {
			return "", fmt.Errorf("%s: no %s to replace", fixture, placeholder)
		}
		text = strings.ReplaceAll(text, placeholder, image)
	}
	path := filepath.Join(o.Dir, "superedge", "superedge.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(text), 0o644)
}

// The node label edgeadm puts on edge nodes, which its edge DaemonSets and
// kube-proxy's node affinity select on.
const superEdgeEdgeLabel = "superedge.io/node-edge"

// InstallEdgeKubeProxy does what edgeadm (0.7 and later) does to kube-proxy
// at install time (its UpdateKubeProxyKubeconfig and PatchKubeProxy): a copy
// of kubeadm's kube-proxy ConfigMap, ServiceAccount and DaemonSet named
// edge-system/edge-kube-proxy whose kubeconfig names SuperEdge's wrapper,
// running image, on the nodes labelled superedge.io/node-edge; the stock
// kube-proxy keeps off them. And what a SuperEdge user on a newer
// Kubernetes must add (build/MIGRATION.md, prerequisites): the feature gate
// WatchListClient=false in the copy's KubeProxyConfiguration (the wrapper
// serves no watch-list stream).
func InstallEdgeKubeProxy(ctx context.Context, client kubernetes.Interface, image string) error {
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return err
	}
	edgeCM := cm.DeepCopy()
	edgeCM.ObjectMeta = metav1.ObjectMeta{Name: "edge-kube-proxy", Namespace: "edge-system", Labels: cm.Labels}
	kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig.conf"]))
	if err != nil {
		return fmt.Errorf("kube-system/kube-proxy kubeconfig.conf: %w", err)
	}
	for _, c := range kc.Clusters {
		c.Server = superEdgeWrapperServer
	}
	kcData, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	edgeCM.Data["kubeconfig.conf"] = string(kcData)
	edgeCM.Data["config.conf"] = strings.TrimRight(cm.Data["config.conf"], "\n") + "\nfeatureGates:\n  WatchListClient: false\n"
	if _, err := client.CoreV1().ConfigMaps("edge-system").Create(ctx, edgeCM, metav1.CreateOptions{}); err != nil {
		return err
	}
	sa, err := client.CoreV1().ServiceAccounts("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return err
	}
	edgeSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.Name, Namespace: "edge-system", Labels: sa.Labels}}
	if _, err := client.CoreV1().ServiceAccounts("edge-system").Create(ctx, edgeSA, metav1.CreateOptions{}); err != nil {
		return err
	}
	ds, err := client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return err
	}
	// edgeadm's KubeProxyPatchJson: the stock kube-proxy keeps off the edge
	// nodes, edge-kube-proxy runs on them only. The stock one leaves first
	// and edge-kube-proxy is created with its node affinity: no node runs
	// two kube-proxies at once (the run's sampler fails on that).
	affinity := `{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"%s","operator":"DoesNotExist"}]}]}}}}}}}`
	if _, err := client.AppsV1().DaemonSets("kube-system").Patch(ctx, "kube-proxy", types.StrategicMergePatchType, []byte(fmt.Sprintf(affinity, superEdgeEdgeLabel)), metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := stockKubeProxyOffEdgeNodes(ctx, client); err != nil {
		return err
	}
	edgeDS := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-kube-proxy", Namespace: "edge-system", Labels: ds.Labels},
		Spec:       *ds.Spec.DeepCopy(),
	}
	pod := &edgeDS.Spec.Template.Spec
	pod.PriorityClassName = ""
	pod.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: superEdgeEdgeLabel, Operator: corev1.NodeSelectorOpExists}},
		}}},
	}}
	for _, v := range pod.Volumes {
		if v.Name == "kube-proxy" && v.ConfigMap != nil {
			v.ConfigMap.Name = "edge-kube-proxy"
		}
	}
	for i := range pod.Containers {
		if pod.Containers[i].Name == "kube-proxy" {
			pod.Containers[i].Image = image
		}
	}
	_, err = client.AppsV1().DaemonSets("edge-system").Create(ctx, edgeDS, metav1.CreateOptions{})
	return err
}

// stockKubeProxyOffEdgeNodes waits (3 minutes at most) until no pod of the
// stock kube-proxy runs on a node labelled superedge.io/node-edge.
func stockKubeProxyOffEdgeNodes(ctx context.Context, client kubernetes.Interface) error {
	edge, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: superEdgeEdgeLabel})
	if err != nil {
		return err
	}
	onEdge := map[string]bool{}
	for _, n := range edge.Items {
		onEdge[n.Name] = true
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
		if err != nil {
			return err
		}
		var left []string
		for _, p := range pods.Items {
			if onEdge[p.Spec.NodeName] {
				left = append(left, p.Name+" on "+p.Spec.NodeName)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stock kube-proxy still runs on edge nodes: %v", left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// daemonSetsReady: each DaemonSet (namespace/name) has exactly the number
// of pods given, all ready and of its current template; 0 means it must not
// exist.
func daemonSetsReady(ctx context.Context, client kubernetes.Interface, want map[string]int) error {
	for key, n := range want {
		ns, name, _ := strings.Cut(key, "/")
		ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if n == 0 {
			if err == nil {
				return fmt.Errorf("%s still exists", key)
			}
			continue
		}
		if err != nil {
			return err
		}
		st := ds.Status
		if int(st.DesiredNumberScheduled) != n || int(st.NumberReady) != n || int(st.UpdatedNumberScheduled) != n {
			return fmt.Errorf("%s: %d desired, %d ready, %d updated; want %d", key, st.DesiredNumberScheduled, st.NumberReady, st.UpdatedNumberScheduled, n)
		}
	}
	return nil
}

// NameEdgeCoreDNS does to an edge node what SuperEdge's installer does
// (its kubelet's --cluster-dns): the kubelet names edge-coredns's address
// addr (edgeadm 0.8.2 and later: the edge virtual address), written into
// kubeadm's block list in the node's /var/lib/kubelet/config.yaml, and
// restarts.
func NameEdgeCoreDNS(ctx context.Context, n *Node, addr string) error {
	path := n.HostPath("/var/lib/kubelet/config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	old, err := n.KubeletClusterDNS()
	if err != nil {
		return err
	}
	text := strings.Replace(string(data), "clusterDNS:\n- "+old+"\n", "clusterDNS:\n- "+addr+"\n", 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return err
	}
	if err := n.RestartKubelet(ctx); err != nil {
		return err
	}
	if n.ClusterDNS != addr {
		return fmt.Errorf("%s: the kubelet's clusterDNS is %s, want %s", n.Name, n.ClusterDNS, addr)
	}
	return nil
}
