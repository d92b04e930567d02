package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/testmonitoring"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// prometheusRule is the part of the shipped PrometheusRule the tests read.
type prometheusRule struct {
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func readShipped(t *testing.T, parts ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(manifestDir(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func shippedRule(t *testing.T) (prometheusRule, map[string]any) {
	t.Helper()
	data := readShipped(t, "monitoring", "prometheusrule.yaml")
	var rule prometheusRule
	var raw map[string]any
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	return rule, raw
}

// TestAlertRules runs Prometheus's own rule tester on the shipped alerts
// (build/manifests/monitoring/alerts-test.yaml), checks every alert is
// tested firing and names a runbook section that exists.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool := testmonitoring.Promtool(t)
	rule, raw := shippedRule(t)
	spec, err := yaml.Marshal(raw["spec"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := readShipped(t, "monitoring", "alerts-test.yaml")
	if err := os.WriteFile(filepath.Join(dir, "alerts-test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts-test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	} else {
		t.Logf("promtool test rules:\n%s", out)
	}

	// Every alert is expected to fire somewhere in the tests.
	var parsed struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &parsed); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range parsed.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	anchors := runbookAnchors(t)
	n := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("%s: no promtool test expects it to fire", r.Alert)
			}
			file, anchor, ok := strings.Cut(r.Annotations["runbook"], "#")
			if !ok || file != "build/RUNBOOK.md" || !anchors[anchor] {
				t.Errorf("%s: runbook %q is not a section of build/RUNBOOK.md (sections: %v)", r.Alert, r.Annotations["runbook"], anchors)
			}
		}
	}
	if n == 0 {
		t.Fatal("the shipped PrometheusRule has no alerts")
	}
}

// runbookAnchors are the GitHub anchors of build/RUNBOOK.md's sections.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "build", "RUNBOOK.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, l := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")] = true
		}
	}
	return out
}

// ourSeries matches the series names of our components, kube-proxy's and
// Prometheus's own up in PromQL and in promtool's series notation.
var ourSeries = regexp.MustCompile(`\b(application_grid_[a-z0-9_]+|coredns_[a-z0-9_]+|kubeproxy_[a-z0-9_]+|workqueue_[a-z0-9_]+|up)\b`)

// shippedSeriesNames are the series names the shipped alerts, their tests
// and the dashboard use, each with where.
func shippedSeriesNames(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	add := func(where, text string) {
		for _, name := range ourSeries.FindAllString(text, -1) {
			if !slices.Contains(used[name], where) {
				used[name] = append(used[name], where)
			}
		}
	}
	rule, _ := shippedRule(t)
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			add("prometheusrule.yaml "+r.Alert, r.Expr)
		}
	}
	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(readShipped(t, "monitoring", "alerts-test.yaml"), &tests); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			name, _, _ := strings.Cut(s.Series, "{")
			add("alerts-test.yaml", name)
		}
	}
	for _, s := range readDashboardTest(t).InputSeries {
		name, _, _ := strings.Cut(s.Series, "{")
		add("servicegroup-test.yaml", name)
	}
	for where, expr := range dashboardQueries(t) {
		add(where, expr)
	}
	return used
}

// checkSeriesServed fails for every series name the shipped monitoring uses
// that no component serves: ours from families (what the running binaries
// answered), kube-proxy's from the pinned kube-proxy binary itself (its
// names are string constants there), up from Prometheus.
func checkSeriesServed(t *testing.T, families map[string]bool) {
	t.Helper()
	kubeProxy, err := os.ReadFile(controlplane.BinaryForTest(t, controlplane.KubeProxy))
	if err != nil {
		t.Fatal(err)
	}
	for name, where := range shippedSeriesNames(t) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && families[b] {
				base = b
			}
		}
		switch {
		case name == "up" || families[base]:
		case strings.HasPrefix(name, "kubeproxy_"):
			if !bytes.Contains(kubeProxy, []byte(strings.TrimPrefix(name, "kubeproxy_"))) {
				t.Errorf("%s (used in %v) is not a metric of kube-proxy %s", name, where, controlplane.KubernetesVersion)
			}
		default:
			t.Errorf("%s (used in %v) is served by none of our components", name, where)
		}
	}
}
