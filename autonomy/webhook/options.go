package webhook

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/servicegroup/servicegroup/autonomy"
)

// Options configure the autonomy webhook.
type Options struct {
	// BindAddress serves the webhook over HTTPS; "" (the default; the
	// shipped manifests serve it on :9443) or "0" turns it off.
	BindAddress string
	// Service is "namespace/name" of the Service in front of the replicas'
	// webhook ports (port 443): where the apiserver calls.
	Service string
	// URL replaces Service when the controller runs outside the cluster:
	// https://host:port, a host the apiserver reaches.
	URL string
	// SecretNamespace/SecretName hold the webhook's CA and serving
	// certificate, shared by the replicas (SecretNamespace defaults to the
	// Service's namespace).
	SecretNamespace, SecretName string
	// ConfigurationName is the ValidatingWebhookConfiguration it registers.
	ConfigurationName string
	// DecisionWindow: how long a node that turned unreachable beside
	// reachable peers keeps its pods while the peers of a nodeunit that is
	// really cut off turn unreachable too; at least the kubelets' Lease
	// renewal interval (a quarter of nodeLeaseDurationSeconds, 10 s by
	// default) plus kube-controller-manager's --node-monitor-period (5 s).
	DecisionWindow time.Duration
	// NodeLifecycleUsers are the identities the node lifecycle controller
	// writes as: its ServiceAccount with --use-service-account-credentials
	// (kubeadm and managed control planes), kube-controller-manager's own
	// identity without.
	NodeLifecycleUsers []string
	// Timeout is the apiserver's timeout for one call (1-30 s).
	Timeout time.Duration
}

// DefaultOptions are the defaults of the controller's flags.
func DefaultOptions() Options {
	return Options{
		BindAddress:       "",
		Service:           "servicegroup-system/application-grid-controller",
		SecretName:        "application-grid-controller-webhook",
		ConfigurationName: autonomy.WebhookConfigurationName,
		DecisionWindow:    20 * time.Second,
		NodeLifecycleUsers: []string{
			"system:serviceaccount:kube-system:node-controller",
			"system:kube-controller-manager",
		},
		Timeout: 2 * time.Second,
	}
}

// AddFlags registers the options' flags.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BindAddress, "autonomy-webhook-bind-address", o.BindAddress, "Address serving the autonomy admission webhook over HTTPS, e.g. :9443 (empty or \"0\": off, and grids' servicegroup.io/autonomy-duration has no effect).")
	fs.StringVar(&o.Service, "autonomy-webhook-service", o.Service, "namespace/name of the Service (port 443) in front of the controller's webhook ports: where the apiserver calls the autonomy webhook.")
	fs.StringVar(&o.URL, "autonomy-webhook-url", o.URL, "https://host:port the apiserver calls instead of --autonomy-webhook-service (a controller running outside the cluster).")
	fs.StringVar(&o.SecretName, "autonomy-webhook-secret", o.SecretName, "Secret (in the Service's namespace, or --autonomy-webhook-secret-namespace) holding the webhook's CA and serving certificate, made by the first replica and shared.")
	fs.StringVar(&o.SecretNamespace, "autonomy-webhook-secret-namespace", o.SecretNamespace, "Namespace of --autonomy-webhook-secret (default: the Service's).")
	fs.StringVar(&o.ConfigurationName, "autonomy-webhook-configuration", o.ConfigurationName, "Name of the ValidatingWebhookConfiguration registered while some grid carries servicegroup.io/autonomy-duration.")
	fs.DurationVar(&o.DecisionWindow, "autonomy-decision-window", o.DecisionWindow, "How long a node that turned unreachable while its nodeunit's other nodes are reachable keeps its pods before it counts as a failed node: at least the kubelets' Lease renewal interval plus kube-controller-manager's --node-monitor-period.")
	fs.Func("autonomy-node-lifecycle-users", "Comma-separated identities kube-controller-manager's node lifecycle controller writes as (default "+strings.Join(o.NodeLifecycleUsers, ",")+").", func(v string) error {
		o.NodeLifecycleUsers = nil
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				o.NodeLifecycleUsers = append(o.NodeLifecycleUsers, u)
			}
		}
		return nil
	})
	fs.DurationVar(&o.Timeout, "autonomy-webhook-timeout", o.Timeout, "The apiserver's timeout for one call of the autonomy webhook (1s-30s); past it the call is ignored.")
}

// Enabled reports whether the webhook is served.
func (o *Options) Enabled() bool { return o.BindAddress != "" && o.BindAddress != "0" }

// Validate says what is wrong with the options, all at once.
func (o *Options) Validate() error {
	if !o.Enabled() {
		return nil
	}
	var errs []error
	if _, _, err := net.SplitHostPort(o.BindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--autonomy-webhook-bind-address %q: %v", o.BindAddress, err))
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--autonomy-webhook-url %q: %v", o.URL, err))
		case u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, fmt.Errorf("--autonomy-webhook-url %q: must be https://host[:port][/path] (no user, query or fragment)", o.URL))
		}
	} else if _, _, err := o.serviceRef(); err != nil {
		errs = append(errs, err)
	}
	if ns := o.secretNamespace(); ns == "" {
		errs = append(errs, errors.New("--autonomy-webhook-secret-namespace is needed with --autonomy-webhook-url"))
	} else if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("secret namespace %q: %s", ns, strings.Join(msgs, "; ")))
	}
	for flagName, name := range map[string]string{"--autonomy-webhook-secret": o.SecretName, "--autonomy-webhook-configuration": o.ConfigurationName} {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s", flagName, name, strings.Join(msgs, "; ")))
		}
	}
	if o.DecisionWindow <= 0 || o.DecisionWindow > 10*time.Minute {
		errs = append(errs, fmt.Errorf("--autonomy-decision-window %s: must be between 0s and 10m", o.DecisionWindow))
	}
	if len(o.NodeLifecycleUsers) == 0 {
		errs = append(errs, errors.New("--autonomy-node-lifecycle-users is empty: the webhook would never be called"))
	}
	for _, u := range o.NodeLifecycleUsers {
		if strings.ContainsAny(u, "'\\") {
			errs = append(errs, fmt.Errorf("--autonomy-node-lifecycle-users: %q has a quote or backslash", u))
		}
	}
	if o.Timeout < time.Second || o.Timeout > 30*time.Second {
		errs = append(errs, fmt.Errorf("--autonomy-webhook-timeout %s: must be between 1s and 30s", o.Timeout))
	}
	return errors.Join(errs...)
}

// serviceRef splits Service into namespace and name.
func (o *Options) serviceRef() (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(o.Service, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1035Label(name)) > 0 {
		return "", "", fmt.Errorf("--autonomy-webhook-service %q: must be namespace/name of a Service", o.Service)
	}
	return namespace, name, nil
}

func (o *Options) secretNamespace() string {
	if o.SecretNamespace != "" {
		return o.SecretNamespace
	}
	if o.URL != "" {
		return ""
	}
	ns, _, _ := o.serviceRef()
	return ns
}

// servingNames are the names (and addresses) the serving certificate is
// for: where the apiserver calls.
func (o *Options) servingNames() (dns []string, ips []net.IP) {
	if o.URL != "" {
		u, _ := url.Parse(o.URL)
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			return nil, []net.IP{ip}
		}
		return []string{u.Hostname()}, nil
	}
	ns, name, _ := o.serviceRef()
	return []string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"}, nil
}
