package realnode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// checkPrometheus: the Prometheus InstallPrometheus started (on the cloud
// node, whose pods the test reaches) scrapes one target per pod of each
// component the shipped ServiceMonitors select, every one up over TLS
// verified against the signer's CA (the configuration it runs says so for
// every job), and has loaded every alert of the shipped PrometheusRule
// with health ok. prom's URL is set to the pod's address.
func checkPrometheus(ctx context.Context, t *testing.T, client kubernetes.Interface, prom *PromAPI) {
	t.Helper()
	eventually(ctx, t, 3*time.Minute, "Prometheus running on "+cloudNode, func(ctx context.Context) error {
		p, err := client.CoreV1().Pods("default").Get(ctx, prometheusPod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !podReady(p) || p.Status.PodIP == "" {
			return fmt.Errorf("%s on %q not Ready (%s)", prometheusPod, p.Spec.NodeName, p.Status.Phase)
		}
		prom.URL = "http://" + net.JoinHostPort(p.Status.PodIP, "9090")
		return nil
	})
	want := func(ctx context.Context) (map[string]int, error) {
		d, err := client.AppsV1().Deployments("servicegroup-system").Get(ctx, "application-grid-controller", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, ds := range []string{"application-grid-wrapper", "coredns-gridhosts"} {
			d, err := client.AppsV1().DaemonSets("edge-system").Get(ctx, ds, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			n[ds] = int(d.Status.DesiredNumberScheduled)
		}
		return wantTargets(int(*d.Spec.Replicas), n["application-grid-wrapper"], n["coredns-gridhosts"]), nil
	}
	var targets []PromTarget
	eventually(ctx, t, 3*time.Minute, "every target of the shipped ServiceMonitors up", func(ctx context.Context) error {
		w, err := want(ctx)
		if err != nil {
			return err
		}
		if targets, err = prom.Targets(ctx); err != nil {
			return err
		}
		return checkTargets(targets, w)
	})
	var lines []string
	for _, tg := range targets {
		lines = append(lines, fmt.Sprintf("%s %s job=%s node=%s %s", tg.ScrapePool, tg.ScrapeURL, tg.Labels["job"], tg.Labels["node"], tg.Health))
	}
	t.Logf("Prometheus's targets:\n%s", strings.Join(lines, "\n"))
	config, err := prom.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkVerifies(config); err != nil {
		t.Error(err)
	}
}

// checkPrometheusRules: Prometheus has loaded every alert of the shipped
// PrometheusRule, each healthy, ServiceGroupNodeunitCutOff's `for` scaled,
// and scrapes the controller every scaledScrapeInterval (the autonomy
// step's patches). Checked at the end of the partition, not
// before it: the kubelet brings the patch to Prometheus's rule files
// within its ConfigMap sync (about 40 s after the patch), which the
// partition's first seconds cover, and a pending alert keeps its start
// across the reload, so the alert fires as soon either way.
func checkPrometheusRules(ctx context.Context, t *testing.T, prom *PromAPI) {
	t.Helper()
	repo, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := shippedAlerts(repo)
	if err != nil {
		t.Fatal(err)
	}
	scaled := map[string]time.Duration{cutOffAlert: scaledCutOffFor}
	eventually(ctx, t, 3*time.Minute, "the shipped rules loaded, "+cutOffAlert+"'s for scaled", func(ctx context.Context) error {
		groups, err := prom.Rules(ctx)
		if err != nil {
			return err
		}
		return checkRules(groups, alerts, scaled)
	})
	t.Logf("Prometheus loaded the %d alerts of PrometheusRule edge-system/servicegroup, each with health ok (%s's for %s)", len(alerts), cutOffAlert, scaledCutOffFor)
	// The autonomy step's other patch, which the partition's alert waits
	// relied on.
	targets, err := prom.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkScrapeIntervals(targets, controllerScrapePool, scaledScrapeInterval); err != nil {
		t.Error(err)
	}
}

func TestPrometheusRelease(t *testing.T) {
	for module, want := range map[string]string{"v0.316.0": "v3.16.0", "v0.305.1": "v3.5.1", "v0.54.1": "", "v2.0.0": ""} {
		if got := prometheusRelease(module); got != want {
			t.Errorf("prometheusRelease(%s) = %q, want %q", module, got, want)
		}
	}
}

func TestCheckTargets(t *testing.T) {
	want := wantTargets(1, 2, 2)
	var up []PromTarget
	for pool, n := range want {
		for range n {
			up = append(up, PromTarget{ScrapePool: pool, ScrapeURL: "https://10.0.0.1:1/metrics", Health: "up"})
		}
	}
	if err := checkTargets(up, want); err != nil {
		t.Fatalf("all up: %v", err)
	}
	down := append([]PromTarget(nil), up...)
	down[0].Health, down[0].LastError = "down", "x509: certificate signed by unknown authority"
	if err := checkTargets(down, want); err == nil || !strings.Contains(err.Error(), "x509") {
		t.Errorf("one down: %v", err)
	}
	if err := checkTargets(up[1:], want); err == nil {
		t.Error("one missing: no error")
	}
	plain := append([]PromTarget(nil), up...)
	plain[0].ScrapeURL = "http://10.0.0.1:1/metrics"
	if err := checkTargets(plain, want); err == nil {
		t.Error("plain HTTP: no error")
	}
	if err := checkTargets(append(up, PromTarget{ScrapePool: "serviceMonitor/x/y/0", Health: "up"}), want); err == nil {
		t.Error("another pool: no error")
	}
}

func TestCheckVerifies(t *testing.T) {
	ok := "scrape_configs:\n- job_name: a\n  scheme: https\n  tls_config:\n    ca_file: /etc/prometheus/certs/ca\n    insecure_skip_verify: false\n"
	if err := checkVerifies(ok); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]string{
		"insecure": strings.Replace(ok, "insecure_skip_verify: false", "insecure_skip_verify: true", 1),
		"no CA":    strings.Replace(ok, "    ca_file: /etc/prometheus/certs/ca\n", "", 1),
		"http":     strings.Replace(ok, "scheme: https", "scheme: http", 1),
		"no jobs":  "global: {}\n",
	} {
		if err := checkVerifies(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestCheckRules(t *testing.T) {
	repo, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := shippedAlerts(repo)
	if err != nil {
		t.Fatal(err)
	}
	g := PromRuleGroup{Name: "servicegroup", File: "/etc/prometheus/rules/prometheus-servicegroup-rulefiles-0/edge-system-servicegroup-abc.yaml"}
	for _, a := range alerts {
		g.Rules = append(g.Rules, PromRule{Name: a, Type: "alerting", Health: "ok", Duration: 120})
	}
	if err := checkRules([]PromRuleGroup{g}, alerts, nil); err != nil {
		t.Fatal(err)
	}
	scaled := map[string]time.Duration{alerts[0]: 45 * time.Second}
	if err := checkRules([]PromRuleGroup{g}, alerts, scaled); err == nil {
		t.Error("a rule's for not yet scaled: no error")
	}
	g.Rules[0].Duration = 45
	if err := checkRules([]PromRuleGroup{g}, alerts, scaled); err != nil {
		t.Errorf("the rule's for scaled: %v", err)
	}
	bad := g
	bad.Rules = append(bad.Rules[:0:0], g.Rules...)
	bad.Rules[0].Health = "err"
	if err := checkRules([]PromRuleGroup{bad}, alerts, nil); err == nil {
		t.Error("a rule with health err: no error")
	}
	bad.Rules = g.Rules[1:]
	if err := checkRules([]PromRuleGroup{bad}, alerts, nil); err == nil {
		t.Error("a rule missing: no error")
	}
	other := g
	other.File = "/etc/prometheus/rules/x/default-other.yaml"
	if err := checkRules([]PromRuleGroup{other}, alerts, nil); err == nil {
		t.Error("rules of another PrometheusRule only: no error")
	}
}

func TestCheckScrapeIntervals(t *testing.T) {
	other := PromTarget{ScrapePool: "serviceMonitor/edge-system/application-grid-wrapper/0", ScrapeInterval: "30s"}
	scaled := PromTarget{ScrapePool: controllerScrapePool, ScrapeURL: "https://10.0.0.1:1/metrics", ScrapeInterval: "5s"}
	shipped := scaled
	shipped.ScrapeInterval = "30s"
	for _, c := range []struct {
		targets []PromTarget
		ok      bool
	}{
		{[]PromTarget{other, scaled, scaled}, true},
		{[]PromTarget{other, scaled, shipped}, false},
		{[]PromTarget{other}, false},
		{[]PromTarget{{ScrapePool: controllerScrapePool}}, false},
	} {
		if err := checkScrapeIntervals(c.targets, controllerScrapePool, scaledScrapeInterval); (err == nil) != c.ok {
			t.Errorf("%v: %v, want ok %v", c.targets, err, c.ok)
		}
	}
}
