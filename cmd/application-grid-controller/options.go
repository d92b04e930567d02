package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/autonomy/webhook"
	"github.com/servicegroup/servicegroup/controller"
	"github.com/servicegroup/servicegroup/internal/logging"
	"github.com/servicegroup/servicegroup/internal/securemetrics"
	"github.com/servicegroup/servicegroup/internal/version"
	"github.com/servicegroup/servicegroup/metricscert"
)

// options are everything the command is run with: AddFlags binds them,
// Validate checks them without reading or starting anything, Complete
// applies the logging flags and reads the apiserver configuration, Run
// starts the controller. Validate comes first (as in kube-controller-manager,
// which validates before it builds its client configuration): a bad flag is
// reported as such even where no kubeconfig can be read.
type options struct {
	controller controller.Options

	kubeconfig, master string
	qps                float64
	burst              int

	logging       *logging.Options
	secureMetrics securemetrics.Options
	autonomy      webhook.Options

	metricsServingSigner bool
	// secureMetricsCADNSNames: serve the secure-metrics port a certificate
	// issued from the metrics-serving CA for these names.
	secureMetricsCADNSNames stringList

	showVersion bool
}

func newOptions() *options {
	return &options{
		controller: controller.DefaultOptions(),
		// No client-side limit: the apiserver's API Priority and Fairness
		// queues and sheds the controller's requests (SIG API Machinery's
		// advice, controller-runtime's default since v0.21). A token
		// bucket would hold a fleet's cold start (20,000 children) to
		// minutes, and the Lease renewals share its bucket with those writes.
		qps:           -1,
		burst:         100,
		secureMetrics: securemetrics.DefaultOptions(),
		autonomy:      webhook.DefaultOptions(),
	}
}

// AddFlags registers every flag of the command on fs.
func (o *options) AddFlags(fs *flag.FlagSet) {
	c := &o.controller
	o.logging = logging.AddFlags(fs)
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig file (empty: in-cluster configuration).")
	fs.StringVar(&o.master, "master", o.master, "Address of the apiserver (overrides the kubeconfig's server).")
	fs.Float64Var(&o.qps, "kube-api-qps", o.qps, "Queries per second to the apiserver; negative: no client-side limit, the apiserver's API Priority and Fairness bounds the controller.")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst, "Burst of queries to the apiserver (with a positive --kube-api-qps).")
	fs.IntVar(&c.Workers, "workers", c.Workers, "Concurrent reconciles per grid kind.")
	fs.DurationVar(&c.Resync, "resync", c.Resync, "Informer resync period: how often every grid is re-checked.")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "Elect a leader with a Lease before reconciling (run several replicas safely).")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-elect-namespace", c.LeaderElectionNamespace, "Namespace of the leader election Lease.")
	fs.StringVar(&c.LeaderElectionName, "leader-elect-name", c.LeaderElectionName, "Name of the leader election Lease.")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", c.LeaseDuration, "Lease duration.")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", c.RenewDeadline, "How long the leader retries renewing before giving up.")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", c.RetryPeriod, "Interval between leader election attempts.")
	fs.BoolVar(&c.ManageCRDs, "manage-crds", c.ManageCRDs, "Install/update the superedge.io CRDs at start and re-apply them when they drift (false: leave them to GitOps).")
	fs.DurationVar(&c.CRDCheckInterval, "crd-check-interval", c.CRDCheckInterval, "How often to check the CRDs for drift.")
	fs.BoolVar(&c.RequireNodeRestrictedGridKeys, "require-node-restricted-grid-keys", c.RequireNodeRestrictedGridKeys, "Accept only grids whose gridUniqKey is under node-restriction.kubernetes.io/ (a label the NodeRestriction admission plugin forbids kubelets to set on their own Node); others get an UntrustedGridUniqKey Warning and no children. Without it a compromised node can label itself into any nodeunit.")
	fs.StringVar(&c.ZoneFromGridKey, "zone-from-grid-key", c.ZoneFromGridKey, "Keep every node's topology.kubernetes.io/zone equal to its value of this grid key (never overwriting a zone label someone else set), for ServiceGrids annotated servicegroup.io/traffic-mode=native, which must be keyed on it (\"\": write none, and remove the zone labels this controller wrote).")
	fs.DurationVar(&c.DeletionGracePeriod, "nodeunit-deletion-grace-period", c.DeletionGracePeriod, "Delete a nodeunit's workload only after the nodeunit has had no nodes this long (0: at once); deleting the grid deletes its children at once.")
	fs.DurationVar(&c.LabelSummaryDelay, "node-label-summary-delay", c.LabelSummaryDelay, "How long the NodeLabelSummary writer waits after a node's grid or topology label changes before it writes: the changes meanwhile (a relabel of many nodes) join that write (0: write at once, a write per sync during a burst).")
	fs.DurationVar(&c.GridStatusDelay, "grid-status-delay", c.GridStatusDelay, "How long a grid's status change that no reconcile decides from (nodeunit counts, the children's states and readiness, the Ready condition) waits before it is written: the changes meanwhile (a relabel of many nodes) join that write, and children are made without waiting for status writes; rollout progress and the other conditions are written at once (0: every change at once).")
	fs.StringVar(&c.SuperEdgeLock, "superedge-lock", c.SuperEdgeLock, "namespace/name of SuperEdge's application-grid-controller leader lock (Endpoints or ConfigMap): do nothing while a live SuperEdge controller holds it (\"\" skips the check).")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "Address serving /metrics (\"0\" disables).")
	fs.StringVar(&c.HealthBindAddress, "health-bind-address", c.HealthBindAddress, "Address serving /healthz and /readyz (\"0\" disables).")
	o.secureMetrics.AddFlags(fs)
	fs.BoolVar(&o.metricsServingSigner, "metrics-serving-signer", o.metricsServingSigner, "While leading, approve and sign the wrappers' secure-metrics serving certificates (CSR signer "+metricscert.SignerName+"): only names of the requesting wrapper's own node; CA in Secret servicegroup-system/servicegroup-metrics-serving-ca (made when missing), published in ConfigMaps edge-system/ and servicegroup-system/servicegroup-metrics-serving-ca.")
	fs.Var(&o.secureMetricsCADNSNames, "secure-metrics-ca-dns-names", "Comma-separated DNS names (the metrics Service's, <svc>.<ns>.svc and <svc>.<ns>.svc.cluster.local): with --secure-metrics-bind-address and --metrics-serving-signer, serve a certificate for them issued straight from the metrics-serving CA (every replica, renewed before it expires; self-signed until the CA is readable), which a scraper verifies against the published bundle with one of them as server name.")
	o.autonomy.AddFlags(fs)
	fs.BoolVar(&o.showVersion, "version", o.showVersion, "Print the version and exit.")
}

// Complete sets up logging and reads the apiserver configuration the flags
// name (the kubeconfig file, or the in-cluster configuration), with the
// flags' rate limits. Call it after Validate.
func (o *options) Complete() error {
	if err := o.logging.Apply(); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags(o.master, o.kubeconfig)
	if err != nil {
		return fmt.Errorf("apiserver configuration (--kubeconfig %q, --master %q): %w", o.kubeconfig, o.master, err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "application-grid-controller/" + version.Version
	o.controller.Config = cfg
	if o.metricsServingSigner {
		signer := metricscert.DefaultOptions()
		o.controller.MetricsServingSigner = &signer
	}
	return nil
}

// Run binds the endpoints and runs the controller until ctx ends. Call it
// after Complete.
func (o *options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	m, err := controller.NewManager(o.controller)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	serveErr := make(chan error, 2)
	if o.secureMetrics.Enabled() {
		if len(o.secureMetricsCADNSNames) > 0 {
			kube, err := kubernetes.NewForConfig(o.controller.Config)
			if err != nil {
				return err
			}
			issued, err := metricscert.ServeFromCA(ctx, kube, metricscert.DefaultOptions(), o.secureMetricsCADNSNames)
			if err != nil {
				return err
			}
			o.secureMetrics.IssuedCertificate = issued
		}
		sm, err := securemetrics.New(o.secureMetrics, o.controller.Config, promhttp.HandlerFor(controller.Registry(), promhttp.HandlerOpts{}))
		if err != nil {
			return err
		}
		go func() {
			if err := sm.Serve(ctx); err != nil {
				serveErr <- fmt.Errorf("serving secure metrics: %w", err)
				stop()
			}
		}()
	}
	if o.autonomy.Enabled() {
		wh, err := controller.NewAutonomyWebhook(ctx, o.controller, o.autonomy)
		if err != nil {
			return err
		}
		wh.Leading = m.Leading
		go func() {
			if err := wh.Run(ctx); err != nil {
				serveErr <- fmt.Errorf("serving the autonomy webhook: %w", err)
				stop()
			}
		}()
	}
	logger.Info("Starting application-grid-controller", "version", version.Version,
		"metrics", m.Addr("metrics"), "health", m.Addr("health"), "leaderElect", o.controller.LeaderElect)
	if err := m.Run(ctx); err != nil {
		return err
	}
	select {
	case err := <-serveErr:
		return err
	default:
		return nil
	}
}

// stringList is a comma-separated flag value.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}
