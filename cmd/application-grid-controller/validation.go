package main

import (
	"math"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/servicegroup/servicegroup/controller"
	"github.com/servicegroup/servicegroup/internal/flagcheck"
	"github.com/servicegroup/servicegroup/trafficmode"
)

// Validate checks every flag's value, reading no file and starting nothing,
// and reports every bad flag at once, each named.
func (o *options) Validate() error {
	c := &o.controller
	errs := o.logging.Validate()
	if math.IsNaN(o.qps) || math.IsInf(float64(float32(o.qps)), 0) {
		errs = append(errs, field.Invalid(flagPath("kube-api-qps"), o.qps, "must be a finite number"))
	}
	if o.burst < 0 {
		errs = append(errs, field.Invalid(flagPath("kube-api-burst"), o.burst, "must not be negative"))
	}
	if c.Workers < 1 {
		errs = append(errs, field.Invalid(flagPath("workers"), c.Workers, "must be at least 1"))
	}
	errs = append(errs, notNegative("resync", c.Resync)...)
	errs = append(errs, validateLeaderElection(c)...)
	if c.ManageCRDs {
		errs = append(errs, positive("crd-check-interval", c.CRDCheckInterval)...)
	}
	errs = append(errs, notNegative("nodeunit-deletion-grace-period", c.DeletionGracePeriod)...)
	errs = append(errs, notNegative("node-label-summary-delay", c.LabelSummaryDelay)...)
	errs = append(errs, notNegative("grid-status-delay", c.GridStatusDelay)...)
	if c.SuperEdgeLock != "" {
		if _, _, err := controller.ParseSuperEdgeLock(c.SuperEdgeLock); err != nil {
			errs = append(errs, field.Invalid(flagPath("superedge-lock"), c.SuperEdgeLock, err.Error()))
		}
	}
	if err := trafficmode.ValidZoneFromGridKey(c.ZoneFromGridKey); err != nil {
		errs = append(errs, field.Invalid(flagPath("zone-from-grid-key"), c.ZoneFromGridKey, err.Error()))
	}
	if err := flagcheck.BindAddress(flagPath("metrics-bind-address"), c.MetricsBindAddress); err != nil {
		errs = append(errs, err)
	}
	if err := flagcheck.BindAddress(flagPath("health-bind-address"), c.HealthBindAddress); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.secureMetrics.Validate()...)
	if len(o.secureMetricsCADNSNames) > 0 {
		if !o.secureMetrics.Enabled() || o.secureMetrics.CertFile != "" || !o.metricsServingSigner {
			errs = append(errs, field.Invalid(flagPath("secure-metrics-ca-dns-names"), o.secureMetricsCADNSNames.String(),
				"needs --secure-metrics-bind-address and --metrics-serving-signer (which publishes the CA), and no --secure-metrics-tls-cert-file"))
		}
		for _, name := range o.secureMetricsCADNSNames {
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(flagPath("secure-metrics-ca-dns-names"), name, msg))
			}
		}
	}
	return utilerrors.NewAggregate([]error{errs.ToAggregate(), o.autonomy.Validate()})
}

// validateLeaderElection states client-go's rules for the three durations
// (leaderelection.NewLeaderElector refuses others only once the apiserver
// has been reached) and the Lease's name. The retry period also paces the
// check of SuperEdge's lock, with or without an election.
func validateLeaderElection(c *controller.Options) field.ErrorList {
	errs := positive("leader-elect-retry-period", c.RetryPeriod)
	if !c.LeaderElect {
		return errs
	}
	errs = append(errs, positive("leader-elect-lease-duration", c.LeaseDuration)...)
	errs = append(errs, positive("leader-elect-renew-deadline", c.RenewDeadline)...)
	if c.LeaseDuration > 0 && c.RenewDeadline > 0 && c.LeaseDuration <= c.RenewDeadline {
		errs = append(errs, field.Invalid(flagPath("leader-elect-lease-duration"), c.LeaseDuration.String(),
			"must be greater than --leader-elect-renew-deadline ("+c.RenewDeadline.String()+")"))
	}
	if minRenew := time.Duration(leaderelection.JitterFactor * float64(c.RetryPeriod)); c.RetryPeriod > 0 && c.RenewDeadline > 0 && c.RenewDeadline <= minRenew {
		errs = append(errs, field.Invalid(flagPath("leader-elect-renew-deadline"), c.RenewDeadline.String(),
			"must be greater than 1.2 times --leader-elect-retry-period ("+minRenew.String()+")"))
	}
	for _, msg := range validation.IsDNS1123Label(c.LeaderElectionNamespace) {
		errs = append(errs, field.Invalid(flagPath("leader-elect-namespace"), c.LeaderElectionNamespace, msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.LeaderElectionName) {
		errs = append(errs, field.Invalid(flagPath("leader-elect-name"), c.LeaderElectionName, msg))
	}
	return errs
}

func flagPath(name string) *field.Path { return field.NewPath("--" + name) }

func positive(flag string, d time.Duration) field.ErrorList {
	if d <= 0 {
		return field.ErrorList{field.Invalid(flagPath(flag), d.String(), "must be greater than zero")}
	}
	return nil
}

func notNegative(flag string, d time.Duration) field.ErrorList {
	if d < 0 {
		return field.ErrorList{field.Invalid(flagPath(flag), d.String(), "must not be negative")}
	}
	return nil
}
