package harness

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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
	if err := waitProcessReady(ctx, p, "kube-proxy /healthz on "+node.Name, time.Minute, func() error {
		return httpOK(client, "http://"+kubeProxyHealthz+"/healthz")
	}); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// writeInsecureKubeconfig writes a kubeconfig for a plain-HTTP server on the
// node's loopback (the wrapper answers with its own credentials upstream).
func writeInsecureKubeconfig(dir, name, server string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["local"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	cfg.CurrentContext = "local"
	path := filepath.Join(dir, name)
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
