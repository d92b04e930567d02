// Package controlplane runs a real etcd, kube-apiserver and, on request,
// kube-controller-manager and kube-scheduler on this machine for integration
// tests, end-to-end tests and the demo. Binaries come from hack/k8s-bins.sh.
package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/internal/owneddir"
)

// Options shape one control plane. The zero value is an etcd and
// kube-apiserver on 127.0.0.1.
type Options struct {
	// BindAddress is where the apiserver listens (default 127.0.0.1). Tests
	// that run components inside network namespaces pass their veth address.
	BindAddress string
	// ExtraSANs are added to the apiserver's serving certificate.
	ExtraSANs []net.IP
	// ServiceCIDR is --service-cluster-ip-range (default 10.96.0.0/16).
	ServiceCIDR string
	// ControllerManager also starts kube-controller-manager (EndpointSlices,
	// garbage collection, Deployment/StatefulSet/ReplicaSet controllers).
	ControllerManager bool
	// Controllers is kube-controller-manager's --controllers
	// (default "*,-nodelifecycle": there are no kubelets to keep nodes Ready).
	Controllers string
	// ControllerManagerArgs are appended to kube-controller-manager's flags
	// (e.g. --kube-api-qps for benchmarks that make thousands of pods); one
	// naming a flag the defaults set replaces that default.
	ControllerManagerArgs []string
	// Scheduler also starts kube-scheduler.
	Scheduler bool
	// APIServerBinary is the kube-apiserver to run (default the cached one
	// of KubernetesVersion; OlderAPIServers gives older releases).
	APIServerBinary string
	// APIServerArgs are appended to kube-apiserver's flags; one naming a
	// flag the defaults set replaces that default (list flags would append).
	APIServerArgs []string
	// KubeletClientCertificate gives kube-apiserver a client certificate
	// (group system:masters) for kubelets that authenticate their callers
	// (exec, logs, port-forward on real kubelets).
	KubeletClientCertificate bool
	// Dir holds certificates, data and logs (default: a new temp dir, removed on Stop).
	Dir string
	// StartTimeout bounds start-up of each component (default 3 minutes).
	// The bound only ends a failing start: on a loaded 2-core CI machine
	// (race-instrumented packages starting control planes side by side,
	// the older releases compiling beside them) kube-apiserver's
	// rbac/bootstrap-roles hook alone took over 60s, and 60s failed
	// twenty tests of a run that had nothing wrong.
	StartTimeout time.Duration
	// CRDs installs the superedge.io CRDs (build/crds) once the apiserver is
	// ready and waits until they are Established, before BeforeControllers
	// and the controllers. After the first start on a machine they are in
	// the seed put into etcd before kube-apiserver starts (seed.go).
	CRDs bool
	// NoSeed starts kube-apiserver on an empty etcd, where it bootstraps,
	// and applies the CRDs through the API: never from a seed (what a
	// seeded start saves is measured against it).
	NoSeed bool
	// BeforeControllers, if set, runs once the apiserver is ready and before
	// kube-controller-manager and kube-scheduler start: CRDs installed there
	// are watched by the garbage collector from its start, not only after
	// its next discovery resync (every 30 s).
	BeforeControllers func(ctx context.Context, cfg *rest.Config) error
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file with embedded credentials.
	Kubeconfig string
	// URL is the apiserver's https URL.
	URL string
	// Dir holds certificates, etcd data and one log file per component.
	Dir string

	opts     Options
	pki      *controlPlanePKI
	files    map[string]string
	ownDir   bool
	apiPort  int
	etcdURL  string
	mu       sync.Mutex
	procs    map[string]*Process
	stopOnce sync.Once
}

// defaultStartTimeout is Options.StartTimeout's default.
const defaultStartTimeout = 3 * time.Minute

// Start runs etcd and kube-apiserver (and the optional components) and
// returns once the apiserver answers /readyz. On error everything it started
// is stopped again.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	if opts.BindAddress == "" {
		opts.BindAddress = "127.0.0.1"
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	if opts.Controllers == "" {
		opts.Controllers = "*,-nodelifecycle"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	for _, b := range []string{Etcd, KubeAPIServer} {
		if _, err := Binary(b); err != nil {
			return nil, err
		}
	}

	cp = &ControlPlane{opts: opts, procs: map[string]*Process{}}
	if cp.Dir, cp.ownDir, err = owneddir.Use(opts.Dir, "servicegroup-cp-"); err != nil {
		return nil, err
	}
	// `return nil, err` sets cp to nil before this runs: stop what was
	// started through the pointer made above.
	started := cp
	defer func() {
		if err != nil {
			started.Stop()
			cp = nil
		}
	}()

	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(opts.BindAddress)}
	ips = append(ips, opts.ExtraSANs...)
	if first := firstServiceIP(opts.ServiceCIDR); first != nil {
		ips = append(ips, first)
	}
	if cp.pki, err = newPKI(ips); err != nil {
		return nil, fmt.Errorf("make certificates: %w", err)
	}
	if cp.files, err = cp.pki.writeFiles(cp.Dir); err != nil {
		return nil, err
	}
	if opts.KubeletClientCertificate {
		if err := cp.writeKubeletClientCertificate(); err != nil {
			return nil, err
		}
	}

	// A seed only into an etcd of its own: a Dir given with etcd's data in
	// it (a control plane started again on it) starts from that data.
	var seed []seedKV
	var seedFile string
	if _, statErr := os.Stat(filepath.Join(cp.Dir, "etcd")); !opts.NoSeed && errors.Is(statErr, fs.ErrNotExist) {
		if seedFile, err = seedPath(cp.apiServerBinary(), opts); err != nil {
			return nil, err
		}
		if seed, err = readSeed(seedFile, opts.CRDs); err != nil {
			return nil, err
		}
	}

	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if seed != nil {
		if err := cp.putSeed(ctx, seed); err != nil {
			return nil, err
		}
	}
	if cp.apiPort, err = FreePort(opts.BindAddress); err != nil {
		return nil, err
	}
	cp.URL = "https://" + net.JoinHostPort(opts.BindAddress, itoa(cp.apiPort))
	cp.Config = &rest.Config{
		Host: cp.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.pki.ca.CertPEM,
			CertData: cp.pki.adminCertPEM,
			KeyData:  cp.pki.adminKeyPEM,
		},
		QPS:   1000,
		Burst: 2000,
	}
	if cp.Kubeconfig, err = cp.WriteKubeconfig("admin.kubeconfig", cp.URL, cp.pki.adminCertPEM, cp.pki.adminKeyPEM); err != nil {
		return nil, err
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if opts.CRDs {
		ext := apiextensionsclient.NewForConfigOrDie(cp.Config)
		if seed != nil {
			if err := crds.WaitEstablished(ctx, ext, opts.StartTimeout); err != nil {
				return nil, fmt.Errorf("the seeded CRDs (%s): %w", seedFile, err)
			}
		} else if err := crds.Install(ctx, ext, opts.StartTimeout); err != nil {
			return nil, fmt.Errorf("install the CRDs: %w", err)
		}
	}
	if seed == nil && seedFile != "" {
		if err := cp.saveSeed(ctx, seedFile, opts.CRDs, opts.StartTimeout); err != nil {
			return nil, fmt.Errorf("keep the seed: %w", err)
		}
	}
	if opts.BeforeControllers != nil {
		if err := opts.BeforeControllers(ctx, rest.CopyConfig(cp.Config)); err != nil {
			return nil, fmt.Errorf("before the controllers: %w", err)
		}
	}
	if opts.ControllerManager {
		if err := cp.startControllerManager(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := cp.startScheduler(ctx); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

func firstServiceIP(cidr string) net.IP {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil
	}
	ip := n.IP.To4()
	if ip == nil {
		return nil
	}
	out := make(net.IP, 4)
	copy(out, ip)
	out[3]++
	return out
}

func (cp *ControlPlane) setProc(name string, p *Process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.procs[name] = p
}

func (cp *ControlPlane) proc(name string) *Process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.procs[name]
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	bin, _ := Binary(Etcd)
	clientPort, err := FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	peerPort, err := FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	cp.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=test",
		"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=" + cp.etcdURL,
		"--advertise-client-urls=" + cp.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=test=" + peerURL,
		"--unsafe-no-fsync",
		"--quota-backend-bytes=4294967296",
		"--log-level=warn",
	}
	client := &http.Client{Timeout: time.Second}
	return cp.run(ctx, Etcd, bin, args, "etcd /health", func(context.Context) error {
		return HTTPOK(client, cp.etcdURL+"/health")
	})
}

// StartAPIServer (re)starts kube-apiserver on its port and waits for /readyz.
// Tests that restart the apiserver call StopAPIServer then StartAPIServer.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	bin := cp.apiServerBinary()
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=" + cp.opts.BindAddress,
		"--advertise-address=" + cp.opts.BindAddress,
		"--secure-port=" + itoa(cp.apiPort),
		"--tls-cert-file=" + cp.files["serving.crt"],
		"--tls-private-key-file=" + cp.files["serving.key"],
		"--client-ca-file=" + cp.files["ca.crt"],
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.files["sa.pub"],
		"--service-account-signing-key-file=" + cp.files["sa.key"],
		"--service-cluster-ip-range=" + cp.opts.ServiceCIDR,
		"--authorization-mode=RBAC",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount",
		"--cert-dir=" + filepath.Join(cp.Dir, "apiserver-certs"),
	}
	if cp.files["kubelet-client.crt"] != "" {
		args = append(args, "--kubelet-client-certificate="+cp.files["kubelet-client.crt"],
			"--kubelet-client-key="+cp.files["kubelet-client.key"])
	}
	args = overrideArgs(args, cp.opts.APIServerArgs)
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	return cp.run(ctx, KubeAPIServer, bin, args, "kube-apiserver /readyz", func(ctx context.Context) error {
		// A restarted apiserver meets every client's relist at once; on a
		// loaded machine its answer can take seconds.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// Not ready is a 500 whose body lists every check, the failing ones
		// marked "[-]": those are what a wait that times out should name.
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		if failing := failingChecks(body); failing != "" {
			return fmt.Errorf("%w: %s", errNotReady, failing)
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(body)) != "ok" {
			return fmt.Errorf("%w: %q", errNotReady, body)
		}
		return nil
	})
}

// apiServerBinary is the kube-apiserver this control plane runs.
func (cp *ControlPlane) apiServerBinary() string {
	if cp.opts.APIServerBinary != "" {
		return cp.opts.APIServerBinary
	}
	bin, _ := Binary(KubeAPIServer)
	return bin
}

// failingChecks returns the lines of a /readyz or /livez answer that name a
// failing check ("[-]etcd failed: reason withheld"), joined by "; ".
func failingChecks(body []byte) string {
	var failing []string
	for line := range strings.Lines(string(body)) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "[-]") {
			failing = append(failing, line)
		}
	}
	return strings.Join(failing, "; ")
}

// overrideArgs appends extra to defaults, dropping each default whose flag
// name extra sets again.
func overrideArgs(defaults, extra []string) []string {
	name := func(arg string) string { n, _, _ := strings.Cut(arg, "="); return n }
	set := map[string]bool{}
	for _, a := range extra {
		set[name(a)] = true
	}
	var out []string
	for _, a := range defaults {
		if !set[name(a)] {
			out = append(out, a)
		}
	}
	return append(out, extra...)
}

func (cp *ControlPlane) writeKubeletClientCertificate() error {
	certPEM, keyPEM, err := cp.IssueClientCertificate("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"kubelet-client.crt": certPEM, "kubelet-client.key": keyPEM} {
		path := filepath.Join(cp.Dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
		cp.files[name] = path
	}
	return nil
}

// StopAPIServer stops kube-apiserver, leaving etcd and the rest running.
func (cp *ControlPlane) StopAPIServer() {
	cp.proc(KubeAPIServer).Stop(10 * time.Second)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	return cp.startKubeComponent(ctx, KubeControllerManager, "kcm-certs", overrideArgs([]string{
		"--controllers=" + cp.opts.Controllers,
		"--service-account-private-key-file=" + cp.files["sa.key"],
		"--root-ca-file=" + cp.files["ca.crt"],
		"--service-cluster-ip-range=" + cp.opts.ServiceCIDR,
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=5",
	}, cp.opts.ControllerManagerArgs)...)
}

// ControllerManagerExited reports whether kube-controller-manager has
// exited (with its error), as one that was still building its controllers
// when the apiserver went away does.
func (cp *ControlPlane) ControllerManagerExited() (bool, error) {
	p := cp.proc(KubeControllerManager)
	if p == nil {
		return false, nil
	}
	return p.Exited()
}

// StopControllerManager stops kube-controller-manager (its controllers
// pause: a DaemonSet's deleted pod is not made again) until
// RestartControllerManager starts it.
func (cp *ControlPlane) StopControllerManager() {
	cp.proc(KubeControllerManager).Stop(10 * time.Second)
}

// RestartControllerManager stops kube-controller-manager and starts it
// again with args in place of Options.ControllerManagerArgs (nil: those
// again), appending to its log. A new instance observes every node afresh,
// as after a kube-controller-manager upgrade.
func (cp *ControlPlane) RestartControllerManager(ctx context.Context, args []string) error {
	if p := cp.proc(KubeControllerManager); p != nil {
		p.Stop(10 * time.Second)
	}
	saved := cp.opts.ControllerManagerArgs
	if args != nil {
		cp.opts.ControllerManagerArgs = args
	}
	defer func() { cp.opts.ControllerManagerArgs = saved }()
	return cp.startControllerManager(ctx)
}

func (cp *ControlPlane) startScheduler(ctx context.Context) error {
	return cp.startKubeComponent(ctx, KubeScheduler, "scheduler-certs")
}

// startKubeComponent runs kube-controller-manager or kube-scheduler with the
// admin kubeconfig, no leader election, and its secure port on loopback, and
// waits for its /healthz.
func (cp *ControlPlane) startKubeComponent(ctx context.Context, name, certDir string, extraArgs ...string) error {
	bin, err := Binary(name)
	if err != nil {
		return err
	}
	port, err := FreePort("127.0.0.1")
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + itoa(port),
		"--profiling=false",
		"--cert-dir=" + filepath.Join(cp.Dir, certDir),
	}, extraArgs...)
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // self-signed, loopback only
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	return cp.run(ctx, name, bin, args, name+" /healthz", func(context.Context) error { return HTTPOK(client, url) })
}

// run starts component name, keeps it as the control plane's and waits
// up to StartTimeout for check to pass (given the waiting context).
func (cp *ControlPlane) run(ctx context.Context, name, bin string, args []string, what string, check func(context.Context) error) error {
	p, err := startProcess(name, bin, args, cp.Dir, nil)
	if err != nil {
		return err
	}
	cp.setProc(name, p)
	wctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
	defer cancel()
	return waitFor(wctx, p, what, func() error { return check(wctx) })
}

// HTTPOK checks that url answers 200 OK.
func HTTPOK(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// WriteKubeconfig writes a kubeconfig for server with the given client
// certificate (PEM), trusting the control plane's CA, into the control
// plane's directory.
func (cp *ControlPlane) WriteKubeconfig(name, server string, certPEM, keyPEM []byte) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cp.pki.ca.CertPEM}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	path := filepath.Join(cp.Dir, name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// AdminCertificate returns the admin client certificate and key (PEM).
func (cp *ControlPlane) AdminCertificate() (certPEM, keyPEM []byte) {
	return cp.pki.adminCertPEM, cp.pki.adminKeyPEM
}

// CACertificate returns the CA certificate (PEM) that signed every
// certificate of this control plane.
func (cp *ControlPlane) CACertificate() []byte { return cp.pki.ca.CertPEM }

// CAFile is the path of the CA certificate.
func (cp *ControlPlane) CAFile() string { return cp.files["ca.crt"] }

// Logs returns the last n lines of each component's log, for failure reports.
func (cp *ControlPlane) Logs(n int) string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var b strings.Builder
	for name, p := range cp.procs {
		fmt.Fprintf(&b, "----- %s (%s, %s) -----\n%s\n", name, p.LogPath, p.Status(), p.LogTail(n))
	}
	return b.String()
}

// Statuses is one line: each component's Process.Status, in start order.
func (cp *ControlPlane) Statuses() string {
	var out []string
	for _, name := range []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler} {
		if p := cp.proc(name); p != nil {
			out = append(out, name+" "+p.Status())
		}
	}
	return strings.Join(out, ", ")
}

// Stop ends every process the control plane started, by process group, and
// removes its directory if Start created it.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		for _, name := range []string{KubeScheduler, KubeControllerManager, KubeAPIServer, Etcd} {
			if p := cp.proc(name); p != nil {
				p.Stop(10 * time.Second)
			}
		}
		if cp.ownDir && os.Getenv("SERVICEGROUP_KEEP_CP") == "" {
			os.RemoveAll(cp.Dir)
		}
	})
}
