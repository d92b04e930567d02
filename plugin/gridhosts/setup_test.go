package gridhosts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

func TestParse(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		input   string
		wantErr string // substring; "" = valid
		zones   []string
		node    string
		clients bool
		ttl     uint32
		fall    fall.F
		// snapshot PATH and interval; "" = none
		snapPath  string
		snapEvery time.Duration
		// snapMaxAge: 0 the default, -1 any age
		snapMaxAge time.Duration
		restrict   bool
		// services: services_kubeconfig given
		services bool
	}{
		{input: "gridhosts {\nnode n1\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 5},
		{input: "gridhosts cluster.local example.org {\nclients\nttl 30\nfallthrough\n}", zones: []string{"cluster.local.", "example.org."}, clients: true, ttl: 30, fall: fall.Root},
		{input: "gridhosts {\nclients\nnode n1\nkubeconfig " + kubeconfig + " ctx\nfallthrough in-addr.arpa\n}", zones: []string{"cluster.local."}, node: "n1", clients: true, ttl: 5, fall: fall.F{Zones: []string{"in-addr.arpa."}}},
		{input: "gridhosts {\nnode n1\nttl 0\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 0},

		{input: "gridhosts", wantErr: "one of 'node NAME' or 'clients' is required"},
		{input: "gridhosts {\nttl 5\n}", wantErr: "one of 'node NAME' or 'clients' is required"},
		{input: "gridhosts {\nnode\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode a b\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode Not_A_Node\n}", wantErr: "node: invalid name 'Not_A_Node'"},
		{input: "gridhosts {\nnode n1\nnode n2\n}", wantErr: "'node' given twice"},
		{input: "gridhosts {\nclients x\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nclients\nclients\n}", wantErr: "'clients' given twice"},
		{input: "gridhosts {\nnode n1\nttl\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nttl -1\n}", wantErr: "ttl must be a number of seconds from 0 to 3600, not '-1'"},
		{input: "gridhosts {\nnode n1\nttl 3601\n}", wantErr: "ttl must be"},
		{input: "gridhosts {\nnode n1\nttl 5s\n}", wantErr: "ttl must be"},
		{input: "gridhosts {\nnode n1\nkubeconfig\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nkubeconfig a b c\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nkubeconfig a\nkubeconfig b\n}", wantErr: "'kubeconfig' given twice"},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig " + kubeconfig + "\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 5, services: true},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig a b c\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig a\nservices_kubeconfig b\n}", wantErr: "'services_kubeconfig' given twice"},
		{input: "gridhosts {\nnode n1\nfallthrough\nfallthrough\n}", wantErr: "'fallthrough' given twice"},
		{input: "gridhosts {\nnode n1\nendpoint http://x\n}", wantErr: "unknown property 'endpoint'"},
		{input: "gridhosts 10.in-addr.arpa {\nnode n1\n}", wantErr: "reverse zone"},
		{input: "gridhosts {\nnode n1\n}\ngridhosts {\nnode n1\n}", wantErr: "this plugin can only be used once per Server Block"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 5, snapPath: "/var/lib/g/s", snapEvery: 10 * time.Second},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/../g/s 90s\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 5, snapPath: "/var/lib/g/s", snapEvery: 90 * time.Second},
		{input: "gridhosts {\nnode n1\nsnapshot\n}", wantErr: "snapshot: want PATH [INTERVAL]"},
		{input: "gridhosts {\nnode n1\nsnapshot /a 1m x\n}", wantErr: "snapshot: want PATH [INTERVAL]"},
		{input: "gridhosts {\nnode n1\nsnapshot g.snapshot\n}", wantErr: "snapshot: path 'g.snapshot' is not absolute"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/\n}", wantErr: "names a directory"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s 0s\n}", wantErr: "snapshot: interval must be a duration from 1s to 24h0m0s (e.g. 1m), not '0s'"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s 25h\n}", wantErr: "interval must be a duration"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s 60\n}", wantErr: "not '60'"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot /b\n}", wantErr: "'snapshot' given twice"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age 48h\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 5, snapPath: "/a", snapEvery: 10 * time.Second, snapMaxAge: 48 * time.Hour},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age 0\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 5, snapPath: "/a", snapEvery: 10 * time.Second, snapMaxAge: -1},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age -1h\n}", wantErr: "snapshot_max_age must be a duration, 0 for any age (e.g. 168h), not '-1h'"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age week\n}", wantErr: "not 'week'"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nsnapshot_max_age 1h\n}", wantErr: "snapshot_max_age without snapshot"},
		{input: "gridhosts {\nnode n1\nrequire_node_restricted_keys\n}", zones: []string{"cluster.local."}, node: "n1", ttl: 5, restrict: true},
		{input: "gridhosts {\nnode n1\nrequire_node_restricted_keys yes\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nrequire_node_restricted_keys\nrequire_node_restricted_keys\n}", wantErr: "given twice"},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.input, "\n", ";"), func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = []string{"cluster.local."}
			g, err := parse(c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(g.Zones, ",") != strings.Join(tc.zones, ",") || g.Node != tc.node || g.Clients != tc.clients || g.TTL != tc.ttl || !g.Fall.Equal(tc.fall) || g.RestrictKeys != tc.restrict {
				t.Fatalf("got zones %v node %q clients %v ttl %d fall %v restrict %v", g.Zones, g.Node, g.Clients, g.TTL, g.Fall, g.RestrictKeys)
			}
			if (g.ServicesConfig != nil) != tc.services || (tc.services && g.ClientConfig != nil) {
				t.Fatalf("services config %v, kubeconfig %v; want services config %v only", g.ServicesConfig, g.ClientConfig, tc.services)
			}
			switch {
			case tc.snapPath == "" && g.snapshot != nil:
				t.Fatalf("snapshot %+v, want none", g.snapshot)
			case tc.snapPath != "" && (g.snapshot == nil || g.snapshot.Path != tc.snapPath || g.snapshot.Interval != tc.snapEvery ||
				g.snapshot.Life.MaxAge != wantMaxAge(tc.snapMaxAge) ||
				!g.snapshot.Owner.Equal(snapshot.Owner{Node: tc.node, Clients: tc.clients, Zones: tc.zones})):
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

// FuzzParse feeds arbitrary blocks to the Corefile parser: it may reject
// them, never panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"gridhosts {\nnode n1\n}", "gridhosts a b {\nclients\nttl 9\nfallthrough x\n}", "gridhosts {\nkubeconfig a b\n}", "gridhosts {\nnode n\nsnapshot /a/b 5m\n}", "gridhosts {\nnode n\nservices_kubeconfig a b\n}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		c := caddy.NewTestController("dns", input)
		g, err := parse(c)
		if err == nil && g != nil && g.Node == "" && !g.Clients {
			t.Fatalf("accepted a block with neither node nor clients: %q", input)
		}
	})
}
