package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// A real Prometheus and prometheus-operator on the cluster (issue 43):
// both built by hack/monitoring-tools.sh from their Go modules, packaged
// as images under the names the operator and its example Deployment pull
// (quay.io, which the nodes resolve through the test's registry), the
// operator installed from its module's example RBAC and Deployment, and a
// Prometheus that selects the chart's ServiceMonitors and PrometheusRule
// by their label, as they ship.

// MonitoringBuild is what hack/monitoring-tools.sh built.
type MonitoringBuild struct {
	Dir string
	// PrometheusVersion is the server's release (module v0.3XX.Y is
	// v3.XX.Y), OperatorVersion prometheus-operator's (v0.85.0).
	PrometheusVersion, OperatorVersion string
}

// BuildMonitoring runs hack/monitoring-tools.sh, which builds the servers
// once per (releases, Go version) and afterwards only prints where they
// are; it waits for a build `make test` or .ci/run started (its lock).
func BuildMonitoring(ctx context.Context) (*MonitoringBuild, error) {
	repo, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack", "monitoring-tools.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("hack/monitoring-tools.sh: %w\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	b := &MonitoringBuild{Dir: lines[len(lines)-1]}
	env, err := os.ReadFile(filepath.Join(repo, "hack", "monitoring-versions.env"))
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(l, "PROMETHEUS="); ok {
			b.PrometheusVersion = prometheusRelease(v)
		}
		if v, ok := strings.CutPrefix(l, "PROMETHEUS_OPERATOR="); ok {
			b.OperatorVersion = v
		}
	}
	if b.PrometheusVersion == "" || b.OperatorVersion == "" {
		return nil, fmt.Errorf("hack/monitoring-versions.env pins no PROMETHEUS or PROMETHEUS_OPERATOR")
	}
	return b, nil
}

// prometheusRelease is the release of Prometheus's Go module version
// (v0.MNN.P is vM.NN.P: v0.316.0 is v3.16.0); "" for another form.
func prometheusRelease(module string) string {
	rest, ok := strings.CutPrefix(module, "v0.")
	minor, patch, ok2 := strings.Cut(rest, ".")
	n, err := strconv.Atoi(minor)
	if !ok || !ok2 || err != nil || len(minor) != 3 {
		return ""
	}
	return fmt.Sprintf("v%d.%d.%s", n/100, n%100, patch)
}

// The images, under the names prometheus-operator pulls by default
// (Prometheus: its base image and spec.version) and its example
// Deployment names.
func (b *MonitoringBuild) images() map[string]string {
	return map[string]string{
		"quay.io/prometheus/prometheus:" + b.PrometheusVersion:                        "prometheus",
		"quay.io/prometheus-operator/prometheus-operator:" + b.OperatorVersion:        "operator",
		"quay.io/prometheus-operator/prometheus-config-reloader:" + b.OperatorVersion: "prometheus-config-reloader",
	}
}

// PushMonitoringImages packages the three binaries as images (each the
// entrypoint at /bin/NAME, as their upstream images have it) and pushes
// them to reg under their upstream names.
func PushMonitoringImages(ctx context.Context, reg *Registry, b *MonitoringBuild) error {
	for upstream, bin := range b.images() {
		layer, err := cachedFileLayer(ctx, filepath.Join(b.Dir, bin), "bin/"+bin)
		if err != nil {
			return err
		}
		idx, err := platformIndex([]v1.Layer{layer}, []string{"/bin/" + bin})
		if err != nil {
			return err
		}
		ref, err := name.ParseReference(MirrorPath(reg, upstream), name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
	}
	return nil
}

// prometheusName is the Prometheus object; its pod is prometheus-NAME-0.
const prometheusName = "servicegroup"

// prometheusPod is the pod of the operator's StatefulSet.
const prometheusPod = "prometheus-" + prometheusName + "-0"

// prometheusObject selects every ServiceMonitor, PodMonitor and
// PrometheusRule labelled as ours ship, in every namespace, on node (the
// cloud side of the partition: it sees the nodeunit go). Its rules are
// evaluated every 10 s (the default is 30 s; the rules' own `for` holds).
func prometheusObject(b *MonitoringBuild, node string) string {
	return fmt.Sprintf(`apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata:
  name: %s
  namespace: default
spec:
  version: %s
  replicas: 1
  serviceAccountName: prometheus
  nodeSelector:
    kubernetes.io/hostname: %s
  evaluationInterval: 10s
  serviceMonitorSelector:
    matchLabels:
      app.kubernetes.io/part-of: servicegroup
  serviceMonitorNamespaceSelector: {}
  podMonitorSelector:
    matchLabels:
      app.kubernetes.io/part-of: servicegroup
  podMonitorNamespaceSelector: {}
  ruleSelector:
    matchLabels:
      app.kubernetes.io/part-of: servicegroup
  ruleNamespaceSelector: {}
`, prometheusName, b.PrometheusVersion, node)
}

// InstallPrometheus applies every CRD of the operator (server-side: some
// are larger than client-side apply's annotation allows), then, as one
// kustomization in dir, the operator's example RBAC and Deployment (kept
// on node, like Prometheus) and Prometheus's example RBAC, and the
// Prometheus object. It returns without waiting for the pods.
func InstallPrometheus(ctx context.Context, op *Operator, b *MonitoringBuild, dir, node string) error {
	if out, err := op.Run(ctx, "apply", "--server-side", "-f", filepath.Join(b.Dir, "operator-crds")); err != nil {
		return fmt.Errorf("the operator's CRDs: %w: %s", err, out)
	}
	if out, err := op.Run(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/prometheuses.monitoring.coreos.com", "crd/servicemonitors.monitoring.coreos.com", "crd/podmonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"); err != nil {
		return fmt.Errorf("the operator's CRDs: %w: %s", err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	resources := []string{"prometheus.yaml"}
	for _, sub := range []string{"prometheus-operator", "prometheus"} {
		files, err := filepath.Glob(filepath.Join(b.Dir, "operator-rbac", sub, "*.yaml"))
		if err != nil {
			return err
		}
		for _, f := range files {
			base := filepath.Base(f)
			// The example's own Prometheus (another selector) and the
			// operator's ServiceMonitor and Service (not what is checked).
			if base == "prometheus.yaml" || strings.HasSuffix(base, "-service-monitor.yaml") || strings.HasSuffix(base, "-service.yaml") {
				continue
			}
			if err := copyFile(f, filepath.Join(dir, base)); err != nil {
				return err
			}
			resources = append(resources, base)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yaml"), []byte(prometheusObject(b, node)), 0o644); err != nil {
		return err
	}
	kustomization := "resources:\n"
	for _, r := range resources {
		kustomization += "- " + r + "\n"
	}
	kustomization += fmt.Sprintf(`patches:
- target:
    kind: Deployment
    name: prometheus-operator
  patch: |
    - op: add
      path: /spec/template/spec/nodeSelector/kubernetes.io~1hostname
      value: %s
`, node)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return err
	}
	if out, err := op.Run(ctx, "apply", "-k", dir); err != nil {
		return fmt.Errorf("prometheus-operator and Prometheus: %w: %s", err, out)
	}
	return nil
}

// RemovePrometheus deletes what InstallPrometheus applied from dir (the
// CRDs stay).
func RemovePrometheus(ctx context.Context, op *Operator, dir string) error {
	if out, err := op.Run(ctx, "delete", "-k", dir, "--wait=false"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// PromAPI reads a Prometheus's HTTP API.
type PromAPI struct {
	URL    string // http://host:port
	Client *http.Client
}

func (p *PromAPI) get(ctx context.Context, path string, query url.Values, into any) error {
	u := p.URL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var envelope struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("GET %s: %s: %w: %.200s", path, resp.Status, err, body)
	}
	if envelope.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, envelope.Error)
	}
	return json.Unmarshal(envelope.Data, into)
}

// PromTarget is an active target of /api/v1/targets.
type PromTarget struct {
	ScrapePool string            `json:"scrapePool"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Labels     map[string]string `json:"labels"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
	// ScrapeInterval is the target's, as Prometheus's duration ("30s").
	ScrapeInterval string `json:"scrapeInterval"`
}

// Targets are the active targets.
func (p *PromAPI) Targets(ctx context.Context) ([]PromTarget, error) {
	var data struct {
		Active []PromTarget `json:"activeTargets"`
	}
	err := p.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data)
	return data.Active, err
}

// PromRuleGroup is a group of /api/v1/rules.
type PromRuleGroup struct {
	Name  string     `json:"name"`
	File  string     `json:"file"`
	Rules []PromRule `json:"rules"`
}

// PromRule is a rule of a PromRuleGroup.
type PromRule struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Query     string `json:"query"`
	// Duration is an alerting rule's `for`, in seconds.
	Duration float64 `json:"duration"`
}

// Rules are the rule groups loaded.
func (p *PromAPI) Rules(ctx context.Context) ([]PromRuleGroup, error) {
	var data struct {
		Groups []PromRuleGroup `json:"groups"`
	}
	err := p.get(ctx, "/api/v1/rules", nil, &data)
	return data.Groups, err
}

// PromAlert is an alert of /api/v1/alerts.
type PromAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

// Alerts are the pending and firing alerts.
func (p *PromAPI) Alerts(ctx context.Context) ([]PromAlert, error) {
	var data struct {
		Alerts []PromAlert `json:"alerts"`
	}
	err := p.get(ctx, "/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// Config is the configuration Prometheus runs (YAML).
func (p *PromAPI) Config(ctx context.Context) (string, error) {
	var data struct {
		YAML string `json:"yaml"`
	}
	err := p.get(ctx, "/api/v1/status/config", nil, &data)
	return data.YAML, err
}

// wantTargets are the scrape pools the shipped ServiceMonitors make
// (prometheus-operator names them serviceMonitor/NAMESPACE/NAME/ENDPOINT)
// and how many targets each must have: one per pod of the component.
func wantTargets(controllers, wrappers, corednses int) map[string]int {
	return map[string]int{
		"serviceMonitor/servicegroup-system/application-grid-controller/0": controllers,
		"serviceMonitor/edge-system/application-grid-wrapper/0":            wrappers,
		"serviceMonitor/edge-system/application-grid-wrapper/1":            wrappers,
		"serviceMonitor/edge-system/coredns-gridhosts/0":                   corednses,
	}
}

// checkTargets: every pool of want has exactly its number of targets,
// each up over https, and no other pool exists.
func checkTargets(targets []PromTarget, want map[string]int) error {
	got := map[string]int{}
	var problems []string
	for _, tg := range targets {
		if _, ok := want[tg.ScrapePool]; !ok {
			problems = append(problems, "unexpected pool "+tg.ScrapePool)
			continue
		}
		got[tg.ScrapePool]++
		if !strings.HasPrefix(tg.ScrapeURL, "https://") {
			problems = append(problems, fmt.Sprintf("%s scraped over %s", tg.ScrapePool, tg.ScrapeURL))
		}
		if tg.Health != "up" {
			problems = append(problems, fmt.Sprintf("%s %s (node %s) is %s: %s", tg.ScrapePool, tg.ScrapeURL, tg.Labels["node"], tg.Health, tg.LastError))
		}
	}
	for pool, n := range want {
		if got[pool] != n {
			problems = append(problems, fmt.Sprintf("%s: %d targets, want %d", pool, got[pool], n))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// checkVerifies: every scrape job of the configuration Prometheus runs
// verifies its targets' certificates (a CA file, insecure_skip_verify
// false).
func checkVerifies(config string) error {
	var cfg struct {
		ScrapeConfigs []struct {
			JobName   string `json:"job_name"`
			Scheme    string `json:"scheme"`
			TLSConfig struct {
				CAFile             string `json:"ca_file"`
				InsecureSkipVerify bool   `json:"insecure_skip_verify"`
			} `json:"tls_config"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		return fmt.Errorf("the configuration Prometheus runs: %w", err)
	}
	if len(cfg.ScrapeConfigs) == 0 {
		return fmt.Errorf("the configuration Prometheus runs has no scrape job")
	}
	for _, sc := range cfg.ScrapeConfigs {
		if sc.Scheme != "https" || sc.TLSConfig.CAFile == "" || sc.TLSConfig.InsecureSkipVerify {
			return fmt.Errorf("job %s: scheme %s, CA %q, insecure_skip_verify %v", sc.JobName, sc.Scheme, sc.TLSConfig.CAFile, sc.TLSConfig.InsecureSkipVerify)
		}
	}
	return nil
}

// alertRule is what the test reads of a PrometheusRule: its alerts' names,
// by group (from YAML or JSON: sigs.k8s.io/yaml reads the json tags).
type alertRule struct {
	Spec struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// shippedAlerts are the alert names of the chart's PrometheusRule
// (build/manifests/monitoring/prometheusrule.yaml, which the chart's
// template is generated from).
func shippedAlerts(repo string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(repo, "build", "manifests", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		return nil, err
	}
	var rule alertRule
	if err := yaml.Unmarshal(data, &rule); err != nil {
		return nil, err
	}
	var names []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no alert in prometheusrule.yaml")
	}
	return names, nil
}

// checkRules: every alert of want is loaded exactly once, from the
// PrometheusRule edge-system/servicegroup, with health ok, and those of
// durations with that `for`.
func checkRules(groups []PromRuleGroup, want []string, durations map[string]time.Duration) error {
	loaded := map[string]int{}
	var problems []string
	for _, g := range groups {
		if !strings.Contains(g.File, "edge-system-servicegroup") {
			continue
		}
		for _, r := range g.Rules {
			loaded[r.Name]++
			if r.Health != "ok" {
				problems = append(problems, fmt.Sprintf("%s: health %q %s", r.Name, r.Health, r.LastError))
			}
			if d, ok := durations[r.Name]; ok && time.Duration(r.Duration*float64(time.Second)) != d {
				problems = append(problems, fmt.Sprintf("%s: for %gs, want %s", r.Name, r.Duration, d))
			}
		}
	}
	for _, name := range want {
		if loaded[name] != 1 {
			problems = append(problems, fmt.Sprintf("%s loaded %d times", name, loaded[name]))
		}
	}
	if len(loaded) != len(want) {
		problems = append(problems, fmt.Sprintf("%d rules loaded from edge-system/servicegroup, %d shipped", len(loaded), len(want)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// firing is the first alert named alert for nodeunit in state firing, or
// nil.
func firing(alerts []PromAlert, alert, nodeunit string) *PromAlert {
	for i, a := range alerts {
		if a.Labels["alertname"] == alert && a.Labels["nodeunit"] == nodeunit && a.State == "firing" {
			return &alerts[i]
		}
	}
	return nil
}

// describeAlerts lists alerts as name{labels} state, active since
// activeAt (when it went pending).
func describeAlerts(alerts []PromAlert) string {
	var lines []string
	for _, a := range alerts {
		var labels []string
		for k, v := range a.Labels {
			if k != "alertname" && k != "severity" {
				labels = append(labels, k+"="+v)
			}
		}
		slices.Sort(labels)
		lines = append(lines, fmt.Sprintf("%s{%s} %s, active since %s", a.Labels["alertname"], strings.Join(labels, ","), a.State, a.ActiveAt.Format(time.TimeOnly)))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// scaledCutOffFor is ServiceGroupNodeunitCutOff's `for` on the real-node
// cluster from the autonomy step on, where the shipped rule says 2m
// (promtool's test of the rule, test/integration/alerts_test.go, checks
// that one): the partition keeps the nodeunit cut off until the alert
// fires, so this shortens the cut from about 2.5 minutes to cutFor, as
// kube-controller-manager's node lifecycle is scaled for these steps. The
// expression is the shipped one.
const scaledCutOffFor = 20 * time.Second

const cutOffAlert = "ServiceGroupNodeunitCutOff"

// scaledScrapeInterval is how often Prometheus scrapes the controller on
// the real-node cluster from the autonomy step on, where the shipped
// ServiceMonitor says 30s: the partition waits for
// ServiceGroupNodeunitAutonomyExpired, whose series the controller sets
// within 5 s, and a 30 s scrape made that wait 25-35 s. The scrape
// timeout goes down with it (Prometheus refuses one longer than the
// interval).
const scaledScrapeInterval = 5 * time.Second

// controllerScrapePool is the controller's ServiceMonitor's scrape pool.
const controllerScrapePool = "serviceMonitor/servicegroup-system/application-grid-controller/0"

// ScaleScrapeInterval sets interval and scrapeTimeout of every endpoint of
// the chart's ServiceMonitor servicegroup-system/application-grid-controller
// on the cluster (a JSON patch that first tests each endpoint's path). The
// next helm upgrade sets them back.
func ScaleScrapeInterval(ctx context.Context, op *Operator, d time.Duration) error {
	const what = "ServiceMonitor servicegroup-system/application-grid-controller"
	out, err := op.Run(ctx, "-n", "servicegroup-system", "get", "servicemonitor", "application-grid-controller", "-o", "json")
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var sm struct {
		Spec struct {
			Endpoints []struct {
				Path string `json:"path"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &sm); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(sm.Spec.Endpoints) == 0 {
		return fmt.Errorf("%s has no endpoint", what)
	}
	var patch []map[string]string
	for i, e := range sm.Spec.Endpoints {
		path := fmt.Sprintf("/spec/endpoints/%d", i)
		patch = append(patch,
			map[string]string{"op": "test", "path": path + "/path", "value": e.Path},
			map[string]string{"op": "add", "path": path + "/interval", "value": d.String()},
			map[string]string{"op": "add", "path": path + "/scrapeTimeout", "value": d.String()})
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = op.Run(ctx, "-n", "servicegroup-system", "patch", "servicemonitor", "application-grid-controller", "--type=json", "-p", string(raw))
	return err
}

// checkScrapeIntervals: every target of pool is scraped every d.
func checkScrapeIntervals(targets []PromTarget, pool string, d time.Duration) error {
	n := 0
	for _, tg := range targets {
		if tg.ScrapePool != pool {
			continue
		}
		n++
		if got, err := time.ParseDuration(tg.ScrapeInterval); err != nil || got != d {
			return fmt.Errorf("%s %s scraped every %q, want %s", pool, tg.ScrapeURL, tg.ScrapeInterval, d)
		}
	}
	if n == 0 {
		return fmt.Errorf("no target of %s", pool)
	}
	return nil
}

// ScaleAlertFor sets the `for` of alert in the chart's PrometheusRule
// edge-system/servicegroup on the cluster (a JSON patch that first tests
// the alert's name at its index). The next helm upgrade sets it back.
func ScaleAlertFor(ctx context.Context, op *Operator, alert string, d time.Duration) error {
	out, err := op.Run(ctx, "-n", "edge-system", "get", "prometheusrule", "servicegroup", "-o", "json")
	if err != nil {
		return fmt.Errorf("PrometheusRule edge-system/servicegroup: %w", err)
	}
	var rule alertRule
	if err := json.Unmarshal([]byte(out), &rule); err != nil {
		return fmt.Errorf("PrometheusRule edge-system/servicegroup: %w", err)
	}
	for gi, g := range rule.Spec.Groups {
		for ri, r := range g.Rules {
			if r.Alert != alert {
				continue
			}
			path := fmt.Sprintf("/spec/groups/%d/rules/%d", gi, ri)
			patch, err := json.Marshal([]map[string]string{
				{"op": "test", "path": path + "/alert", "value": alert},
				{"op": "replace", "path": path + "/for", "value": d.String()},
			})
			if err != nil {
				return err
			}
			_, err = op.Run(ctx, "-n", "edge-system", "patch", "prometheusrule", "servicegroup", "--type=json", "-p", string(patch))
			return err
		}
	}
	return fmt.Errorf("no alert %s in PrometheusRule edge-system/servicegroup", alert)
}
