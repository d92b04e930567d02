package gridhosts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/config"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

// TestFromConfig: a parsed block's GridHosts, with the defaults package
// config leaves unset (package config's tests cover the parsing).
func TestFromConfig(t *testing.T) {
	tests := []struct {
		input string
		node  string
		// snapshot PATH and interval; "" = none
		snapPath  string
		snapEvery time.Duration
		// snapMaxAge: 0 the default, -1 any age
		snapMaxAge time.Duration
		// kubeconfig, services: kubeconfig, services_kubeconfig given
		kubeconfig, services bool
	}{
		{input: "gridhosts {\nnode n1\n}", node: "n1"},
		{input: "gridhosts {\nclients\nttl 0\nfallthrough\nrequire_node_restricted_keys\n}"},
		{input: "gridhosts {\nclients\nnode n1\nkubeconfig /k ctx\n}", node: "n1", kubeconfig: true},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig /k\n}", node: "n1", services: true},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s\n}", node: "n1", snapPath: "/var/lib/g/s", snapEvery: 10 * time.Second},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/../g/s 90s\n}", node: "n1", snapPath: "/var/lib/g/s", snapEvery: 90 * time.Second},
		{input: "gridhosts {\nclients\nsnapshot /a\nsnapshot_max_age 48h\n}", snapPath: "/a", snapEvery: 10 * time.Second, snapMaxAge: 48 * time.Hour},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age 0\n}", node: "n1", snapPath: "/a", snapEvery: 10 * time.Second, snapMaxAge: -1},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.input, "\n", ";"), func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = []string{"cluster.local."}
			block, err := config.Parse(c)
			if err != nil {
				t.Fatal(err)
			}
			g := fromConfig(block)
			if strings.Join(g.Zones, ",") != "cluster.local." || g.Node != tc.node || g.Clients != block.Clients || g.TTL != block.TTL || !g.Fall.Equal(block.Fall) || g.RestrictKeys != block.RestrictKeys {
				t.Fatalf("got zones %v node %q clients %v ttl %d fall %v restrict %v", g.Zones, g.Node, g.Clients, g.TTL, g.Fall, g.RestrictKeys)
			}
			if (g.ClientConfig != nil) != tc.kubeconfig || (g.ServicesConfig != nil) != tc.services {
				t.Fatalf("kubeconfig %v, services config %v; want %v, %v", g.ClientConfig, g.ServicesConfig, tc.kubeconfig, tc.services)
			}
			switch {
			case tc.snapPath == "" && g.snapshot != nil:
				t.Fatalf("snapshot %+v, want none", g.snapshot)
			case tc.snapPath != "" && (g.snapshot == nil || g.snapshot.Path != tc.snapPath || g.snapshot.Interval != tc.snapEvery ||
				g.snapshot.Life.MaxAge != wantMaxAge(tc.snapMaxAge) ||
				!g.snapshot.Owner.Equal(snapshot.Owner{Node: tc.node, Clients: block.Clients, Zones: []string{"cluster.local."}})):
				t.Fatalf("snapshot %+v, want %s every %v, max age %v", g.snapshot, tc.snapPath, tc.snapEvery, wantMaxAge(tc.snapMaxAge))
			}
		})
	}
}

// wantMaxAge is a table's snapMaxAge as the snapshot's Life holds it.
func wantMaxAge(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return snapshottrust.DefaultMaxAge
	case d < 0:
		return 0 // any age
	}
	return d
}

// TestSetupFailsOnBadKubeconfig: start-up must fail with a clear message,
// not run without a cluster.
func TestSetupFailsOnBadKubeconfig(t *testing.T) {
	c := caddy.NewTestController("dns", "gridhosts {\nnode n1\nkubeconfig "+filepath.Join(t.TempDir(), "missing")+"\n}")
	err := setup(c)
	if err == nil || !strings.Contains(err.Error(), "plugin/gridhosts: kubeconfig") {
		t.Fatalf("setup error %v", err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = caddy.NewTestController("dns", "gridhosts {\nnode n1\nkubeconfig "+kubeconfig+"\nservices_kubeconfig "+filepath.Join(t.TempDir(), "missing")+"\n}")
	if err := setup(c); err == nil || !strings.Contains(err.Error(), "plugin/gridhosts: services_kubeconfig") {
		t.Fatalf("setup with a missing services_kubeconfig: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	c = caddy.NewTestController("dns", "gridhosts {\nnode n1\n}")
	if err := setup(c); err == nil || !strings.Contains(err.Error(), "not in a cluster") {
		t.Fatalf("setup without kubeconfig outside a cluster: %v", err)
	}
}
