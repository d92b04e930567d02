package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"

	"github.com/servicegroup/servicegroup/internal/lockedbuffer"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testnet"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

// TestMain removes the CoreDNS the tests built (one build for all of them).
func TestMain(m *testing.M) { testbin.Main(m) }

func TestDirectiveOrder(t *testing.T) {
	i := slices.Index(dnsserver.Directives, "gridhosts")
	if i < 0 || i+1 >= len(dnsserver.Directives) || dnsserver.Directives[i+1] != "kubernetes" {
		t.Fatalf("gridhosts not just before kubernetes: %v", dnsserver.Directives)
	}
	if n := len(slices.DeleteFunc(slices.Clone(dnsserver.Directives), func(s string) bool { return s != "gridhosts" })); n != 1 {
		t.Fatalf("gridhosts listed %d times", n)
	}
}

func TestInsertBefore(t *testing.T) {
	got, err := insertBefore([]string{"a", "b", "c"}, "x", "b")
	if err != nil || !slices.Equal(got, []string{"a", "x", "b", "c"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := insertBefore([]string{"a"}, "x", "b"); err == nil {
		t.Fatal("missing anchor accepted")
	}
	if _, err := insertBefore([]string{"x", "b"}, "x", "b"); err == nil {
		t.Fatal("duplicate accepted")
	}
}

// TestBuiltBinaryListsGridhosts checks the built command's own plugin list,
// as an operator would with `coredns -plugins`.
func TestBuiltBinaryListsGridhosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds CoreDNS")
	}
	bin := testbin.Path(t, "coredns")
	out, err := exec.CommandContext(t.Context(), bin, "-plugins").Output()
	if err != nil {
		t.Fatal(err)
	}
	plugins := strings.Fields(string(out))
	for _, want := range []string{"gridhosts", "kubernetes", "hosts", "cache", "ready"} {
		if !slices.Contains(plugins, want) {
			t.Errorf("coredns -plugins lacks %q:\n%s", want, out)
		}
	}
	for name := range leftOut {
		if slices.Contains(plugins, name) {
			t.Errorf("coredns -plugins lists %q, which plugins.go leaves out:\n%s", name, out)
		}
	}
}

// TestPluginsBuiltIn: every directive CoreDNS orders is in this build or
// left out on purpose, so that leaving out a CoreDNS upgrade's new plugin
// is a decision (plugins.go), not an accident operators meet at start.
func TestPluginsBuiltIn(t *testing.T) {
	registered := map[string]bool{}
	for _, p := range caddy.ListPlugins()["others"] {
		registered[strings.TrimPrefix(p, "dns.")] = true
	}
	for _, d := range dnsserver.Directives {
		switch {
		case registered[d] && leftOut[d] != "":
			t.Errorf("%s is built in and listed as left out", d)
		case !registered[d] && leftOut[d] == "":
			t.Errorf("directive %s is neither built in nor listed as left out", d)
		}
	}
	for d := range leftOut {
		if !slices.Contains(dnsserver.Directives, d) {
			t.Errorf("left out %s is no directive of this CoreDNS: drop it from leftOut", d)
		}
	}
}

// TestLeftOutPluginStopsStart: a Corefile naming a plugin this build leaves
// out stops CoreDNS at start with the directive's name, before it serves.
func TestLeftOutPluginStopsStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds CoreDNS")
	}
	bin := testbin.Path(t, "coredns")
	corefile := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(corefile, []byte(`.:0 {
    route53 example.org.:Z1D633PJN98FT9
    whoami
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), bin, "-conf", corefile, "-dns.port", "0").CombinedOutput()
	if err == nil {
		t.Fatalf("CoreDNS started with route53 in its Corefile:\n%s", out)
	}
	if !strings.Contains(string(out), "directive 'route53'") {
		t.Fatalf("the error does not name route53: %v\n%s", err, out)
	}
}

// TestJSONLogs runs the binary with CoreDNS's -log-format json and a
// Corefile with gridhosts alone (no kubernetes plugin, which would route klog
// itself) against an apiserver that refuses connections: the informers'
// errors, logged through klog by client-go and gridhosts, come out as JSON
// like CoreDNS's own lines, so one log pipeline reads them all.
func TestJSONLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds CoreDNS")
	}
	bin := testbin.Path(t, "coredns")
	dir := t.TempDir()
	kubeconfig := refusingKubeconfig(t, dir)
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(`.:0 {
    gridhosts cluster.local {
        kubeconfig `+kubeconfig+`
        node node0
        fallthrough
    }
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lockedbuffer.Buffer
	cmd := exec.CommandContext(t.Context(), bin, "-log-format", "json", "-conf", corefile, "-dns.port", "0")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	// gridhosts says through klog that it cannot serve yet, naming why.
	testwait.Eventually(t.Context(), t, 0, "gridhosts logs that it cannot serve grid names yet", func(context.Context) error {
		if !strings.Contains(out.String(), "Cannot serve grid names yet") {
			return fmt.Errorf("output so far:\n%s", out.String())
		}
		return nil
	})
	testbin.JSONLogMessages(t, out.String())
}

// refusingKubeconfig writes a kubeconfig into dir naming an apiserver on a
// free loopback port nothing listens on: every request is refused.
func refusingKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	port, err := testnet.FreePort("127.0.0.1", false)
	if err != nil {
		t.Fatal(err)
	}
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://`+server+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
