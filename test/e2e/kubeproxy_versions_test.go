package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// TestKubeProxyVersions runs every supported kube-proxy release (the control
// plane's own and those in hack/kube-proxy-versions.txt) through the wrapper,
// in iptables and nftables mode: one cluster per mode whose nodes each run a
// different release. The releases rotate by one node between the modes and
// the last node moves from nodeunit2 to nodeunit1 half-way, so every release
// serves both nodeunits within the two runs. For each node it asserts what
// TestServiceGroup asserts for the ServiceGrid's ClusterIP (kube-proxy's own
// rules list exactly the nodeunit's pod IPs, every answer comes from the
// nodeunit), that kube-proxy talked to the wrapper only, got no error status
// and synced its rules, that the wrapper refused it nothing, and that
// kube-proxy logged no error.
func TestKubeProxyVersions(t *testing.T) {
	// Parallel: it runs after the package's sequential tests, which gives
	// the older releases' build (in the background on a fresh machine,
	// hack/older-release-bins.sh) that much longer before it is waited for.
	t.Parallel()
	releases := requireKubeProxyReleases(t)
	for shift, mode := range []string{harness.ProxyModeIPTables, harness.ProxyModeNFTables} {
		t.Run(mode, func(t *testing.T) { testKubeProxyVersions(t, mode, releases, shift) })
	}
}

// requireKubeProxyReleases skips (CI unset) or fails (CI=true) when a
// release's binary has not been built and cannot be; a build under way (or,
// under CI, a missing binary) is waited for, until ten minutes before the
// test binary's deadline (what the matrix needs): from empty caches on a
// slow machine the build takes longer than any fixed bound short of that.
func requireKubeProxyReleases(t *testing.T) []harness.KubeProxyRelease {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Hour)
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(-10*time.Minute))
	defer cancel()
	releases, err := harness.KubeProxyReleases(ctx)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("kube-proxy releases missing: %v", err)
		}
		t.Fatal(err)
	}
	for _, r := range releases {
		got, err := harness.BuiltVersion(r.Binary)
		if err != nil {
			t.Fatal(err)
		}
		if got != r.Version {
			t.Fatalf("%s was built from k8s.io/kubernetes %s, not %s", r.Binary, got, r.Version)
		}
	}
	return releases
}

// versionNodes gives node i release (i+shift) mod n: SuperEdge's three nodes
// (node0 in nodeunit1, node1 and node2 in nodeunit2), plus nodes alternating
// between the nodeunits when there are more releases than that.
func versionNodes(releases []harness.KubeProxyRelease, shift int) ([]harness.NodeSpec, map[string]harness.KubeProxyRelease) {
	nodes := harness.DemoNodes()
	for i := len(nodes); i < len(releases); i++ {
		unit := fmt.Sprintf("nodeunit%d", 1+i%2)
		nodes = append(nodes, harness.NodeSpec{Name: fmt.Sprintf("node%d", i), Labels: map[string]string{harness.GridKey: unit, harness.ZoneKey: unit}})
	}
	byNode := map[string]harness.KubeProxyRelease{}
	for i := range nodes {
		r := releases[(i+shift)%len(releases)]
		nodes[i].KubeProxy = r.Binary
		byNode[nodes[i].Name] = r
	}
	return nodes, byNode
}

func testKubeProxyVersions(t *testing.T, mode string, releases []harness.KubeProxyRelease, shift int) {
	nodes, release := versionNodes(releases, shift)
	ctx, c := startCluster(t, harness.Options{
		Nodes:      nodes,
		ProxyMode:  mode,
		Components: harness.Components{Controller: true, Wrapper: true},
	})
	if err := c.WaitGridCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyExamples(ctx, harness.DemoExamples...); err != nil {
		t.Fatal(err)
	}
	units, err := c.Nodeunits(ctx, harness.GridKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		t.Logf("%s (%s): kube-proxy %s, %s mode", n.Name, units[n.Name], release[n.Name].Version, mode)
	}
	pods := waitGridPods(ctx, t, c, units)
	svc, err := c.Client.CoreV1().Services("default").Get(ctx, gridService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80")

	for _, n := range c.Nodes {
		t.Run(fmt.Sprintf("%s kube-proxy %s in %s", n.Name, release[n.Name].Version, units[n.Name]), func(t *testing.T) {
			want := podsInUnit(pods, units, units[n.Name])
			assertProxyRules(ctx, t, c, n, gridService, want)
			assertClosedLoop(ctx, t, n, url, want)
		})
	}

	// The last node joins nodeunit1: its kube-proxy follows its own Node's
	// label through the wrapper's Node watch.
	moved := c.Nodes[len(c.Nodes)-1]
	if units[moved.Name] != "nodeunit1" {
		t.Run(fmt.Sprintf("%s kube-proxy %s moved to nodeunit1", moved.Name, release[moved.Name].Version), func(t *testing.T) {
			if err := c.SetNodeLabel(ctx, moved.Name, harness.GridKey, "nodeunit1"); err != nil {
				t.Fatal(err)
			}
			if units, err = c.Nodeunits(ctx, harness.GridKey); err != nil {
				t.Fatal(err)
			}
			want := podsInUnit(pods, units, "nodeunit1")
			assertProxyRules(ctx, t, c, moved, gridService, want)
			assertClosedLoop(ctx, t, moved, url, want)
		})
	}

	for _, n := range c.Nodes {
		t.Run(fmt.Sprintf("%s kube-proxy %s synced through the wrapper", n.Name, release[n.Name].Version), func(t *testing.T) {
			assertThroughWrapper(ctx, t, n)
		})
	}
}

// assertThroughWrapper checks a node's kube-proxy after it has served the
// ClusterIP: every request it made went to the wrapper and got a 2xx, it
// synced its rules with Service and endpoint changes, the wrapper refused
// nothing and failed nothing, and kube-proxy logged no error.
func assertThroughWrapper(ctx context.Context, t *testing.T, n *harness.Node) {
	t.Helper()
	kp, err := n.KubeProxyMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	requests := kp.Select("rest_client_requests_total", nil)
	if len(requests) == 0 {
		t.Fatalf("%s: kube-proxy reports no rest_client_requests_total", n.Name)
	}
	for _, s := range requests {
		if s.Labels["host"] != harness.WrapperAddr {
			t.Errorf("%s: kube-proxy sent %v requests (%v) to %s, not to the wrapper at %s", n.Name, s.Value, s.Labels, s.Labels["host"], harness.WrapperAddr)
		}
		if !strings.HasPrefix(s.Labels["code"], "2") {
			t.Errorf("%s: kube-proxy got %v answers %q (%v)", n.Name, s.Value, s.Labels["code"], s.Labels)
		}
	}
	for _, name := range []string{
		"kubeproxy_sync_proxy_rules_duration_seconds_count",
		"kubeproxy_sync_proxy_rules_service_changes_total",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
	} {
		if v := kp.Sum(name, nil); v <= 0 {
			t.Errorf("%s: kube-proxy %s = %v, want > 0 (it never synced what the wrapper served)", n.Name, name, v)
		}
	}
	t.Logf("%s: kube-proxy %v; its requests: %v", n.Name, buildInfo(kp), requestCounts(requests))

	wm, err := n.WrapperMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := wm.Sum("application_grid_wrapper_requests_total", map[string]string{"verb": "denied"}); v > 0 {
		t.Errorf("%s: the wrapper refused kube-proxy %v requests:\n%s", n.Name, v, strings.Join(logLines(n.Wrapper.Log(), "Refused"), "\n"))
	}
	for _, s := range wm.Select("application_grid_wrapper_requests_total", nil) {
		// "other" is /healthz, /readyz and /metrics: the harness polls /readyz
		// (503 until the caches sync) before kube-proxy starts.
		if s.Labels["resource"] == "other" {
			continue
		}
		if strings.HasPrefix(s.Labels["code"], "5") || s.Labels["code"] == "406" {
			t.Errorf("%s: the wrapper answered %v requests with %s (%v)", n.Name, s.Value, s.Labels["code"], s.Labels)
		}
	}

	var errs []string
	for _, e := range harness.KlogErrors(n.KubeProxy.Log()) {
		if !slices.ContainsFunc(harmlessKubeProxyErrors, func(all []string) bool {
			return !slices.ContainsFunc(all, func(s string) bool { return !strings.Contains(e, s) })
		}) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		t.Errorf("%s: kube-proxy logged %d errors:\n%s", n.Name, len(errs), strings.Join(errs, "\n"))
	}
}

// harmlessKubeProxyErrors are error entries kube-proxy logs in this harness
// about its flags and netfilter, never about an answer from the API it reads:
// an entry is harmless when it contains every string of one of these.
var harmlessKubeProxyErrors = [][]string{
	// Advice about the harness's flags: no --nodeport-addresses.
	{`"Kube-proxy configuration may be incomplete or incorrect" err="nodePortAddresses is unset`},
	// nftables mode's first sync in a fresh namespace looks for its own
	// table before creating it (worded differently by release).
	{`"Failed to list existing nftables objects"`, "Error: No such file or directory", " kube-proxy\n"},
	{`"Failed to list existing sets" err="receiveAckAware: netlink receive: no such file or directory"`},
}

func buildInfo(m harness.Metrics) string {
	if s := m.Select("kubernetes_build_info", nil); len(s) > 0 {
		return s[0].Labels["git_version"]
	}
	return "(no kubernetes_build_info)"
}

// requestCounts summarises rest_client_requests_total as "METHOD CODE: N".
func requestCounts(samples []harness.Sample) []string {
	var out []string
	for _, s := range samples {
		out = append(out, fmt.Sprintf("%s %s: %v", s.Labels["method"], s.Labels["code"], s.Value))
	}
	slices.Sort(out)
	return out
}

func logLines(log, substr string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}
