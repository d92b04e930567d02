// Command application-grid-controller keeps DeploymentGrids, StatefulSetGrids
// and ServiceGrids reconciled: one child per nodeunit (one Service per
// ServiceGrid). See controller/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/autonomy/webhook"
	"github.com/servicegroup/servicegroup/controller"
	"github.com/servicegroup/servicegroup/internal/logging"
	"github.com/servicegroup/servicegroup/internal/securemetrics"
	"github.com/servicegroup/servicegroup/internal/version"
)

func main() {
	o := controller.DefaultOptions()
	var kubeconfig, master string
	var qps float64
	var burst int
	var showVersion bool
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	logOptions := logging.AddFlags(fs)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig file (empty: in-cluster configuration).")
	fs.StringVar(&master, "master", "", "Address of the apiserver (overrides the kubeconfig's server).")
	fs.Float64Var(&qps, "kube-api-qps", 50, "Queries per second to the apiserver.")
	fs.IntVar(&burst, "kube-api-burst", 100, "Burst of queries to the apiserver.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Concurrent reconciles per grid kind.")
	fs.DurationVar(&o.Resync, "resync", o.Resync, "Informer resync period: how often every grid is re-checked.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader with a Lease before reconciling (run several replicas safely).")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-elect-namespace", o.LeaderElectionNamespace, "Namespace of the leader election Lease.")
	fs.StringVar(&o.LeaderElectionName, "leader-elect-name", o.LeaderElectionName, "Name of the leader election Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "Lease duration.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader retries renewing before giving up.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "Interval between leader election attempts.")
	fs.BoolVar(&o.ManageCRDs, "manage-crds", o.ManageCRDs, "Install/update the superedge.io CRDs at start and re-apply them when they drift (false: leave them to GitOps).")
	fs.DurationVar(&o.CRDCheckInterval, "crd-check-interval", o.CRDCheckInterval, "How often to check the CRDs for drift.")
	fs.BoolVar(&o.RequireNodeRestrictedGridKeys, "require-node-restricted-grid-keys", o.RequireNodeRestrictedGridKeys, "Accept only grids whose gridUniqKey is under node-restriction.kubernetes.io/ (a label the NodeRestriction admission plugin forbids kubelets to set on their own Node); others get an UntrustedGridUniqKey Warning and no children. Without it a compromised node can label itself into any nodeunit.")
	fs.DurationVar(&o.DeletionGracePeriod, "nodeunit-deletion-grace-period", o.DeletionGracePeriod, "Delete a nodeunit's workload only after the nodeunit has had no nodes this long (0: at once); deleting the grid deletes its children at once.")
	fs.StringVar(&o.SuperEdgeLock, "superedge-lock", o.SuperEdgeLock, "namespace/name of SuperEdge's application-grid-controller leader lock (Endpoints or ConfigMap): do nothing while a live SuperEdge controller holds it (\"\" skips the check).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address serving /metrics (\"0\" disables).")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "Address serving /healthz and /readyz (\"0\" disables).")
	secureMetrics := securemetrics.DefaultOptions()
	secureMetrics.AddFlags(fs)
	autonomyOpts := webhook.DefaultOptions()
	autonomyOpts.AddFlags(fs)
	fs.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:])
	if showVersion {
		fmt.Println(version.Version)
		return
	}
	if err := logOptions.Apply(); err != nil {
		fmt.Fprintln(os.Stderr, "application-grid-controller:", err)
		os.Exit(2)
	}

	if err := autonomyOpts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "application-grid-controller:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx)

	cfg, err := clientcmd.BuildConfigFromFlags(master, kubeconfig)
	if err != nil {
		logger.Error(err, "Building the apiserver configuration")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.UserAgent = "application-grid-controller/" + version.Version
	o.Config = cfg

	m, err := controller.NewManager(o)
	if err != nil {
		logger.Error(err, "Starting")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	if secureMetrics.Enabled() {
		sm, err := securemetrics.New(secureMetrics, cfg, promhttp.HandlerFor(controller.Registry(), promhttp.HandlerOpts{}))
		if err != nil {
			logger.Error(err, "Starting")
			klog.FlushAndExit(klog.ExitFlushTimeout, 1)
		}
		go func() {
			if err := sm.Serve(ctx); err != nil {
				logger.Error(err, "Serving secure metrics")
				stop()
			}
		}()
	}
	if autonomyOpts.Enabled() {
		wh, err := controller.NewAutonomyWebhook(ctx, o, autonomyOpts)
		if err != nil {
			logger.Error(err, "Starting")
			klog.FlushAndExit(klog.ExitFlushTimeout, 1)
		}
		go func() {
			if err := wh.Run(ctx); err != nil {
				logger.Error(err, "Serving the autonomy webhook")
				stop()
			}
		}()
	}
	logger.Info("Starting application-grid-controller", "version", version.Version,
		"metrics", m.Addr("metrics"), "health", m.Addr("health"), "leaderElect", o.LeaderElect)
	if err := m.Run(ctx); err != nil {
		logger.Error(err, "Stopped")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
