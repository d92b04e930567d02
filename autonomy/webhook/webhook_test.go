package webhook

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	good := DefaultOptions()
	good.BindAddress = ":9443"
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults with a port: %v", err)
	}
	off := DefaultOptions()
	if off.BindAddress != "" || off.Enabled() {
		t.Fatal("the webhook is on by default")
	}
	for name, change := range map[string]func(*Options){
		"--autonomy-webhook-bind-address":     func(o *Options) { o.BindAddress = "9443" },
		"--autonomy-webhook-service":          func(o *Options) { o.Service = "no-slash" },
		"--autonomy-webhook-url":              func(o *Options) { o.URL = "http://127.0.0.1:9443"; o.SecretNamespace = "ns" },
		"--autonomy-webhook-secret-namespace": func(o *Options) { o.URL = "https://127.0.0.1:9443" },
		"--autonomy-decision-window":          func(o *Options) { o.DecisionWindow = 0 },
		"--autonomy-node-lifecycle-users":     func(o *Options) { o.NodeLifecycleUsers = []string{"a'b"} },
		"--autonomy-webhook-timeout":          func(o *Options) { o.Timeout = 31 * time.Second },
		"--autonomy-webhook-configuration":    func(o *Options) { o.ConfigurationName = "Bad_Name" },
	} {
		o := good
		change(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// A serving certificate is kept while valid for the webhook's names with
// more than servingRenewBefore left, and made anew otherwise.
func TestServingCertRenewal(t *testing.T) {
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	c := &servingCert{namespace: "ns", name: "s", dns: []string{"svc.ns.svc"}}
	s, err := c.newSecret(now)
	if err != nil {
		t.Fatal(err)
	}
	if why, err := c.renewal(s, now); err != nil || why != "" {
		t.Fatalf("fresh: %q %v", why, err)
	}
	if why, _ := c.renewal(s, now.Add(servingLifetime-servingRenewBefore+time.Hour)); !strings.HasPrefix(why, "expires") {
		t.Fatalf("near its end: %q", why)
	}
	other := &servingCert{namespace: "ns", name: "s", ips: []net.IP{net.ParseIP("127.0.0.1")}}
	if why, _ := other.renewal(s, now); !strings.HasPrefix(why, "not for") {
		t.Fatalf("another name: %q", why)
	}
	renewed, err := c.renewed(s, now.Add(300*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if string(renewed.Data[secretCAKey]) != string(s.Data[secretCAKey]) {
		t.Fatal("renewing changed the CA")
	}
	if why, err := c.renewal(renewed, now.Add(300*24*time.Hour)); err != nil || why != "" {
		t.Fatalf("renewed: %q %v", why, err)
	}
	broken := s.DeepCopy()
	broken.Data[caKeyName] = []byte("junk")
	if _, err := c.renewal(broken, now); err == nil {
		t.Fatal("a Secret with a broken CA key accepted")
	}
}
