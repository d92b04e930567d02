package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/fall"
)

func TestParse(t *testing.T) {
	local := []string{"cluster.local."}
	maxAge := func(d time.Duration) *time.Duration { return &d }
	tests := []struct {
		input   string
		wantErr string // substring; "" = valid
		want    Config
	}{
		{input: "gridhosts {\nnode n1\n}", want: Config{Zones: local, Node: "n1", TTL: 5}},
		{input: "gridhosts cluster.local example.org {\nclients\nttl 30\nfallthrough\n}", want: Config{Zones: []string{"cluster.local.", "example.org."}, Clients: true, TTL: 30, Fall: fall.Root}},
		{input: "gridhosts {\nclients\nnode n1\nkubeconfig /etc/k ctx\nfallthrough in-addr.arpa\n}", want: Config{Zones: local, Node: "n1", Clients: true, TTL: 5, Fall: fall.F{Zones: []string{"in-addr.arpa."}}, Kubeconfig: &Kubeconfig{Path: "/etc/k", Context: "ctx"}}},
		{input: "gridhosts {\nnode n1\nttl 0\n}", want: Config{Zones: local, Node: "n1", TTL: 0}},

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
		{input: "gridhosts {\nnode n1\nkubeconfig /etc/k\n}", want: Config{Zones: local, Node: "n1", TTL: 5, Kubeconfig: &Kubeconfig{Path: "/etc/k"}}},
		{input: "gridhosts {\nnode n1\nkubeconfig\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nkubeconfig a b c\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nkubeconfig a\nkubeconfig b\n}", wantErr: "'kubeconfig' given twice"},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig /etc/s\n}", want: Config{Zones: local, Node: "n1", TTL: 5, ServicesKubeconfig: &Kubeconfig{Path: "/etc/s"}}},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig a b c\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nservices_kubeconfig a\nservices_kubeconfig b\n}", wantErr: "'services_kubeconfig' given twice"},
		{input: "gridhosts {\nnode n1\nfallthrough\nfallthrough\n}", wantErr: "'fallthrough' given twice"},
		{input: "gridhosts {\nnode n1\nendpoint http://x\n}", wantErr: "unknown property 'endpoint'"},
		{input: "gridhosts 10.in-addr.arpa {\nnode n1\n}", wantErr: "reverse zone"},
		{input: "gridhosts {\nnode n1\n}\ngridhosts {\nnode n1\n}", wantErr: "this plugin can only be used once per Server Block"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s\n}", want: Config{Zones: local, Node: "n1", TTL: 5, Snapshot: &Snapshot{Path: "/var/lib/g/s"}}},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/../g/s 90s\n}", want: Config{Zones: local, Node: "n1", TTL: 5, Snapshot: &Snapshot{Path: "/var/lib/g/s", Interval: 90 * time.Second}}},
		{input: "gridhosts {\nnode n1\nsnapshot\n}", wantErr: "snapshot: want PATH [INTERVAL]"},
		{input: "gridhosts {\nnode n1\nsnapshot /a 1m x\n}", wantErr: "snapshot: want PATH [INTERVAL]"},
		{input: "gridhosts {\nnode n1\nsnapshot g.snapshot\n}", wantErr: "snapshot: path 'g.snapshot' is not absolute"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/\n}", wantErr: "names a directory"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s 0s\n}", wantErr: "snapshot: interval must be a duration from 1s to 24h0m0s (e.g. 1m), not '0s'"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s 25h\n}", wantErr: "interval must be a duration"},
		{input: "gridhosts {\nnode n1\nsnapshot /var/lib/g/s 60\n}", wantErr: "not '60'"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot /b\n}", wantErr: "'snapshot' given twice"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age 48h\n}", want: Config{Zones: local, Node: "n1", TTL: 5, Snapshot: &Snapshot{Path: "/a", MaxAge: maxAge(48 * time.Hour)}}},
		{input: "gridhosts {\nnode n1\nsnapshot_max_age 48h\nsnapshot /a\n}", want: Config{Zones: local, Node: "n1", TTL: 5, Snapshot: &Snapshot{Path: "/a", MaxAge: maxAge(48 * time.Hour)}}},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age 0\n}", want: Config{Zones: local, Node: "n1", TTL: 5, Snapshot: &Snapshot{Path: "/a", MaxAge: maxAge(0)}}},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age -1h\n}", wantErr: "snapshot_max_age must be a duration, 0 for any age (e.g. 168h), not '-1h'"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age week\n}", wantErr: "not 'week'"},
		{input: "gridhosts {\nnode n1\nsnapshot /a\nsnapshot_max_age\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nsnapshot_max_age 1h\n}", wantErr: "snapshot_max_age without snapshot"},
		{input: "gridhosts {\nnode n1\nrequire_node_restricted_keys\n}", want: Config{Zones: local, Node: "n1", TTL: 5, RestrictKeys: true}},
		{input: "gridhosts {\nnode n1\nrequire_node_restricted_keys yes\n}", wantErr: "Wrong argument count"},
		{input: "gridhosts {\nnode n1\nrequire_node_restricted_keys\nrequire_node_restricted_keys\n}", wantErr: "given twice"},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.input, "\n", ";"), func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = []string{"cluster.local."}
			cfg, err := Parse(c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*cfg, tc.want) {
				t.Fatalf("got %s\nwant %s", describe(cfg), describe(&tc.want))
			}
		})
	}
}

// describe prints a Config with what its pointers point to.
func describe(cfg *Config) string {
	s := fmt.Sprintf("%+v", *cfg)
	if k := cfg.Kubeconfig; k != nil {
		s += fmt.Sprintf(" kubeconfig %+v", *k)
	}
	if k := cfg.ServicesKubeconfig; k != nil {
		s += fmt.Sprintf(" services_kubeconfig %+v", *k)
	}
	if sn := cfg.Snapshot; sn != nil {
		s += fmt.Sprintf(" snapshot %s %v", sn.Path, sn.Interval)
		if sn.MaxAge != nil {
			s += " snapshot_max_age " + sn.MaxAge.String()
		}
	}
	return s
}

// FuzzParse feeds arbitrary blocks to the Corefile parser: it may reject
// them, never panic; a block it accepts names a node or clients, and its
// snapshot path is absolute and clean.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"gridhosts {\nnode n1\n}", "gridhosts a b {\nclients\nttl 9\nfallthrough x\n}", "gridhosts {\nkubeconfig a b\n}", "gridhosts {\nnode n\nsnapshot /a/b 5m\n}", "gridhosts {\nnode n\nservices_kubeconfig a b\n}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		c := caddy.NewTestController("dns", input)
		cfg, err := Parse(c)
		if err != nil || cfg == nil {
			return
		}
		if cfg.Node == "" && !cfg.Clients {
			t.Fatalf("accepted a block with neither node nor clients: %q", input)
		}
		if s := cfg.Snapshot; s != nil && (!filepath.IsAbs(s.Path) || filepath.Clean(s.Path) != s.Path) {
			t.Fatalf("accepted snapshot path %q: %q", s.Path, input)
		}
	})
}
