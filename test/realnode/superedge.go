package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// superEdgeWrapperServer is where SuperEdge's wrapper serves kube-proxy
// (plain HTTP), named in the kube-proxy ConfigMap SuperEdge's installer edits.
const superEdgeWrapperServer = "http://127.0.0.1:51006"

// WriteSuperEdgeManifests writes testdata/superedge.yaml, the stand-in for
// an operator's SuperEdge manifests, to superedge/superedge.yaml in the
// scratch checkout (where build/MIGRATION.md's rollback expects them), with
// the apiserver's address and the images that stand in for SuperEdge's
// (images the nodes already hold). It returns the path.
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

// PointKubeProxyAt rewrites the server of kubeconfig.conf in ConfigMap
// kube-system/kube-proxy from one address to another, as SuperEdge's
// installer does to send the stock kube-proxy to its wrapper.
func PointKubeProxyAt(ctx context.Context, client kubernetes.Interface, from, to string) error {
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return err
	}
	kc := cm.Data["kubeconfig.conf"]
	if !strings.Contains(kc, "server: "+from+"\n") {
		return fmt.Errorf("kube-system/kube-proxy kubeconfig.conf names no server %s:\n%s", from, kc)
	}
	cm.Data["kubeconfig.conf"] = strings.Replace(kc, "server: "+from+"\n", "server: "+to+"\n", 1)
	_, err = client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
	return err
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
// (its kubelet's --cluster-dns): the kubelet names edge-coredns's
// clusterIP addr, written into kubeadm's block list in the node's
// /var/lib/kubelet/config.yaml, and restarts.
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
