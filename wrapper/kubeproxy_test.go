package wrapper_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// listenInNetns opens a TCP listener inside network namespace ns, so the
// in-process wrapper serves inside the namespace while it talks to the
// apiserver on the host's loopback.
func listenInNetns(ns, addr string) (ln net.Listener, err error) {
	err = inNetns(ns, func() error {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// kubeProxyHost is the kube-proxy binary; the test is skipped unless it
// can run one in a network namespace (root, the binary, ip, iptables-save
// and the further tools named).
func kubeProxyHost(t *testing.T, why string, tools ...string) string {
	t.Helper()
	proxyBin, err := controlplane.Binary(controlplane.KubeProxy)
	if err != nil {
		testenv.Missing(t, "%v", err)
	}
	testenv.Root(t, why)
	testenv.Tools(t, append([]string{"ip", "iptables-save"}, tools...)...)
	return proxyBin
}

// newNetns makes the network namespace prefix-PID with lo up, deleted when
// t ends.
func newNetns(t testing.TB, prefix string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	return ns
}

// wrapperKubeconfig writes a kubeconfig by which kube-proxy reads from
// the wrapper at addr over plain HTTP, and returns its path.
func wrapperKubeconfig(t testing.TB, addr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kube-proxy.kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: wrapper, cluster: {server: "http://`+addr+`"}}]
users: [{name: kube-proxy, user: {}}]
contexts: [{name: wrapper, context: {cluster: wrapper, user: kube-proxy}}]
current-context: wrapper
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeProxyInNetns is a real kube-proxy (iptables mode, node0) in its own
// network namespace.
type kubeProxyInNetns struct {
	ns   string
	proc *controlplane.Process
}

// startKubeProxyInNetns runs kube-proxy from bin in ns with kubeconfig
// (and args added) until t ends; its log is shown when t failed.
func startKubeProxyInNetns(t testing.TB, bin, ns, kubeconfig string, args ...string) *kubeProxyInNetns {
	t.Helper()
	p := controlplane.StartProcessForTest(t, "kube-proxy-"+ns, exec.Command("ip", append([]string{"netns", "exec", ns, bin, "--kubeconfig", kubeconfig,
		"--proxy-mode=iptables", "--hostname-override=node0",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256",
		"--conntrack-max-per-core=0", "--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0s", "--conntrack-tcp-timeout-close-wait=0s"}, args...)...))
	return &kubeProxyInNetns{ns: ns, proc: p}
}

// alive fails t as soon as kube-proxy has exited (it exits, for one, on a
// DELETED of its own Node or on a request it cannot live without),
// whatever was being waited for.
func (k *kubeProxyInNetns) alive(t testing.TB) {
	t.Helper()
	if exited, err := k.proc.Exited(); exited {
		t.Fatalf("kube-proxy in %s exited (%v); last lines of its log:\n%s", k.ns, err, k.proc.LogTail(40))
	}
}

// TestKubeProxyThroughWrapper runs the real kube-proxy (iptables mode) in a
// throwaway network namespace against a wrapper for node0 and checks the
// rules it writes hold only node0's nodeunit's endpoints, then follow a
// relabel.
func TestKubeProxyThroughWrapper(t *testing.T) {
	// Not parallel: it reads the process-wide wrapper metrics, which another
	// test's wrapper would change.
	proxyBin := kubeProxyHost(t, "network namespaces")
	cp, admin := startTestCluster(t, "kp")
	createService(t, admin, "kp", "svc", `["zone1"]`)
	createSlice(t, admin, "kp", "svc", "svc-a", endpoint("10.9.0.1", "node0"), endpoint("10.9.0.2", "node1"))

	ns := newNetns(t, "sgwrap")

	// startWrapper serves a new wrapper process's worth (server, listener)
	// inside the namespace; the returned func stops it.
	startWrapper := func() (stop func()) {
		srv, err := wrapper.New(wrapper.Options{NodeName: "node0", Upstream: cp.Config})
		if err != nil {
			t.Fatal(err)
		}
		var ln net.Listener
		eventually(t, "listen in the namespace", 10*time.Second, func(context.Context) (bool, error) {
			ln, err = listenInNetns(ns, "127.0.0.1:51006")
			return err == nil, err
		})
		ctx, cancel := context.WithCancel(context.Background())
		hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		go func() { _ = srv.Run(ctx) }()
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); _ = hs.Close() }) }
		t.Cleanup(stop)
		return stop
	}
	stopWrapper := startWrapper()

	kubeconfig := wrapperKubeconfig(t, "127.0.0.1:51006")
	deniedBefore := metricValue(t, "application_grid_wrapper_requests_total", map[string]string{"verb": "denied"})
	kp := startKubeProxyInNetns(t, proxyBin, ns, kubeconfig, "-v=2")
	alive := func() { kp.alive(t) }

	rules := func(want, notWant string) {
		t.Helper()
		eventually(t, "iptables rules with "+want, 30*time.Second, func(ctx context.Context) (bool, error) {
			alive()
			out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "iptables-save", "-t", "nat").CombinedOutput()
			if err != nil {
				return false, err
			}
			s := string(out)
			if !strings.Contains(s, want) || (notWant != "" && strings.Contains(s, notWant)) {
				return false, fmt.Errorf("nat table: %d bytes, want %q, not %q", len(s), want, notWant)
			}
			return true, nil
		})
	}
	rules("--to-destination 10.9.0.1:8080", "10.9.0.2:8080")
	setNodeUnit(t, admin, "node1", "nodeunit1")
	rules("--to-destination 10.9.0.2:8080", "")
	// A wrapper restart: kube-proxy's watches fail, it relists from the new
	// process (whose versions its old ones predate) and must neither exit
	// (as it would on a DELETED of its own Node) nor miss a change.
	stopWrapper()
	setNodeUnit(t, admin, "node1", "nodeunit2")
	startWrapper()
	rules("--to-destination 10.9.0.1:8080", "10.9.0.2:8080")
	alive()
	// The wrapper forwards everything kube-proxy asks for.
	if d := metricValue(t, "application_grid_wrapper_requests_total", map[string]string{"verb": "denied"}) - deniedBefore; d != 0 {
		t.Fatalf("the wrapper refused %v of kube-proxy's requests", d)
	}
}
