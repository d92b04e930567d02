package gridhosts

import (
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"

	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

func TestParseName(t *testing.T) {
	const z = "cluster.local."
	tests := []struct {
		name string
		want queryName
	}{
		{"ssg-0.svc1.ns.svc.cluster.local.", queryName{kind: nameMember, MemberQuery: index.MemberQuery{Namespace: "ns", Grid: "ssg", Ordinal: "0", Service: "svc1"}}},
		{"a-b-12.s.n.svc.cluster.local.", queryName{kind: nameMember, MemberQuery: index.MemberQuery{Namespace: "n", Grid: "a-b", Ordinal: "12", Service: "s"}}},
		{"nodeunit1-db-3.db.default.svc.cluster.local.", queryName{kind: nameMember, MemberQuery: index.MemberQuery{Namespace: "default", Grid: "nodeunit1-db", Ordinal: "3", Service: "db"}}},
		{"hl.default.svc.cluster.local.", queryName{kind: nameService, MemberQuery: index.MemberQuery{Namespace: "default", Service: "hl"}}},
		{"_http._tcp.hl.default.svc.cluster.local.", queryName{kind: nameSRV, MemberQuery: index.MemberQuery{Namespace: "default", Service: "hl"}, port: "http", proto: "tcp"}},
		{"ssg-01.s.n.svc.cluster.local.", queryName{}},
		{"ssg-.s.n.svc.cluster.local.", queryName{}},
		{"-0.s.n.svc.cluster.local.", queryName{}},
		{"ssg.s.n.svc.cluster.local.", queryName{}},
		// Ordinals go up to spec.ordinals.start + replicas - 1 (both int32).
		{"ssg-4294967295.s.n.svc.cluster.local.", queryName{kind: nameMember, MemberQuery: index.MemberQuery{Namespace: "n", Grid: "ssg", Ordinal: "4294967295", Service: "s"}}},
		{"ssg-4294967296.s.n.svc.cluster.local.", queryName{}},
		{"ssg-12345678901.s.n.svc.cluster.local.", queryName{}},
		{"ssg-0.s.n.pod.cluster.local.", queryName{}},
		{"x.ssg-0.s.n.svc.cluster.local.", queryName{}},
		{"http.tcp.hl.default.svc.cluster.local.", queryName{}},
		{"_.tcp.hl.default.svc.cluster.local.", queryName{}},
		{"n.svc.cluster.local.", queryName{}},
		{"cluster.local.", queryName{}},
		{"xcluster.local.", queryName{}},
		{"a..n.svc.cluster.local.", queryName{}},
	}
	for _, tc := range tests {
		if got := parseName(tc.name, z); got != tc.want {
			t.Errorf("parseName(%q) = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := parseName("ssg-0.s.n.svc.", "."); got.kind != nameMember || got.Grid != "ssg" {
		t.Errorf("root zone: %+v", got)
	}
}

// FuzzParseName checks that whatever the query name, the parser never
// panics and what it returns rebuilds the name it came from.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{
		"statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local.",
		"_http._tcp.hl.default.svc.cluster.local.", "hl.default.svc.cluster.local.",
		"a-1-2.b.c.svc.cluster.local.", "cluster.local.", ".", "-0.a.b.svc.cluster.local.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		const z = "cluster.local."
		q := parseName(name, z)
		var rebuilt string
		switch q.kind {
		case nameNone:
			return
		case nameMember:
			if !gridname.IsOrdinal(q.Ordinal) || q.Grid == "" {
				t.Fatalf("%q: bad member %+v", name, q)
			}
			rebuilt = q.Grid + "-" + q.Ordinal + "." + q.Service + "." + q.Namespace + ".svc." + z
		case nameService:
			rebuilt = q.Service + "." + q.Namespace + ".svc." + z
		case nameSRV:
			rebuilt = "_" + q.port + "._" + q.proto + "." + q.Service + "." + q.Namespace + ".svc." + z
		}
		if rebuilt != name {
			t.Fatalf("%q parsed to %+v, which rebuilds %q", name, q, rebuilt)
		}
		for _, l := range []string{q.Service, q.Namespace} {
			if l == "" || strings.Contains(l, ".") {
				t.Fatalf("%q: bad label %q in %+v", name, l, q)
			}
		}
	})
}

// TestZoneOfAsPluginZones: zoneOf picks the zone CoreDNS's
// plugin.Zones.Matches picks, for names at and across label boundaries,
// with escaped dots and backslashes, and nested zones.
func TestZoneOfAsPluginZones(t *testing.T) {
	zoneSets := [][]string{{"cluster.local."}, {"."}, {"local.", "cluster.local."}, {"cluster.local.", "local."}, {"example.org.", "cluster.local."}}
	names := []string{
		"cluster.local.", "a.cluster.local.", "ssg-0.s.n.svc.cluster.local.", "xcluster.local.", "a.xcluster.local.",
		`a\.cluster.local.`, `a\\.cluster.local.`, `a\\\.cluster.local.`, `\.cluster.local.`, "local.", "other.", ".",
		"cluster.local.example.org.", "a.local.", `a\046cluster.local.`,
	}
	for _, zones := range zoneSets {
		for _, name := range names {
			if got, want := zoneOf(zones, name), plugin.Zones(zones).Matches(name); got != want {
				t.Errorf("zones %q, name %q: zoneOf %q, plugin.Zones.Matches %q", zones, name, got, want)
			}
		}
	}
}
