package harness

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// Proxy modes kube-proxy runs in.
const (
	ProxyModeIPTables = "iptables"
	ProxyModeNFTables = "nftables"
)

// kube-proxy's ports inside each node namespace (each namespace has its own
// loopback, so every node uses the same ones).
const (
	kubeProxyHealthz = "127.0.0.1:10256"
	kubeProxyMetrics = "127.0.0.1:10249"
)

// startKubeProxy runs the real kube-proxy (bin, or the control plane's when
// empty) inside the node's namespace, never in the root namespace (it would
// add chains to the host's tables). The flags keep it from touching
// host-global conntrack sysctls.
func startKubeProxy(ctx context.Context, node *FabricNode, bin, mode, kubeconfig, clusterCIDR, dir string) (*Process, error) {
	if bin == "" {
		var err error
		if bin, err = controlplane.Binary(controlplane.KubeProxy); err != nil {
			return nil, err
		}
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + node.Name,
		"--proxy-mode=" + mode,
		"--cluster-cidr=" + clusterCIDR,
		"--healthz-bind-address=" + kubeProxyHealthz,
		"--metrics-bind-address=" + kubeProxyMetrics,
		"--conntrack-max-per-core=0",
		"--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0s",
		"--conntrack-tcp-timeout-close-wait=0s",
		"--v=2",
	}
	// The command's context only bounds start-up; Stop ends it.
	p, err := startProcess("kube-proxy-"+node.Name, node.NS.Command(context.WithoutCancel(ctx), bin, args...), dir)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: node.NS.DialContext}}
	if err := waitProcessReady(ctx, p, "kube-proxy /healthz on "+node.Name, 2*time.Minute, func() error {
		return httpOK(client, "http://"+kubeProxyHealthz+"/healthz")
	}); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// KubeProxyConfigMap holds the kubeconfig kube-proxy on edge nodes uses.
const KubeProxyConfigMap = "build/manifests/kube-proxy/configmap.yaml"

// writeShippedKubeProxyKubeconfig writes the kubeconfig of the shipped
// kube-proxy ConfigMap for a node, with the wrapper's files (the pinned
// certificate) under the wrapper's hostPath directory hostDir, and checks
// it points at the wrapper over TLS.
func writeShippedKubeProxyKubeconfig(dir, node string, wrapper *shippedContainer, hostDir string) (string, error) {
	objs, err := readManifestObjects(KubeProxyConfigMap)
	if err != nil {
		return "", err
	}
	var data string
	for _, o := range objs {
		if o.kind != "ConfigMap" {
			continue
		}
		var cm corev1.ConfigMap
		if err := sigsyaml.UnmarshalStrict(o.data, &cm); err != nil {
			return "", fmt.Errorf("%s: %w", KubeProxyConfigMap, err)
		}
		data = cm.Data["kubeconfig.conf"]
	}
	cfg, err := clientcmd.Load([]byte(data))
	if err != nil {
		return "", fmt.Errorf("%s kubeconfig.conf: %w", KubeProxyConfigMap, err)
	}
	for name, cl := range cfg.Clusters {
		if cl.Server != "https://"+WrapperAddr || cl.CertificateAuthority == "" || cl.InsecureSkipTLSVerify {
			return "", fmt.Errorf("%s: cluster %s: want server https://%s with a pinned certificate-authority, got %+v", KubeProxyConfigMap, name, WrapperAddr, cl)
		}
		mapped, err := wrapper.withHostPaths(hostDir, []string{cl.CertificateAuthority})
		if err != nil {
			return "", err
		}
		if mapped[0] == cl.CertificateAuthority {
			return "", fmt.Errorf("%s: certificate-authority %s is not on a hostPath of the wrapper", KubeProxyConfigMap, cl.CertificateAuthority)
		}
		cl.CertificateAuthority = mapped[0]
	}
	path := filepath.Join(dir, "kube-proxy-"+node+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// waitProcessReady polls check until it succeeds, the process exits, or the
// timeout passes.
func waitProcessReady(ctx context.Context, p *Process, what string, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited before %s: %v\n%s", p.Name, what, err, p.LogTail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %w (last: %v)\n%s", what, ctx.Err(), last, p.LogTail(30))
		case <-tick.C:
		}
	}
}

// httpOK is controlplane.HTTPOK.
var httpOK = controlplane.HTTPOK
