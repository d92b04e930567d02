package explain

import "testing"

func TestParseDNSName(t *testing.T) {
	for _, tc := range []struct {
		qname string
		want  DNSName
		err   bool
	}{
		{qname: "statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local",
			want: DNSName{Grid: "statefulsetgrid-demo", Ordinal: 0, Service: "servicegrid-demo-svc", Namespace: "default"}},
		{qname: "Web-12.Svc.NS.svc.cluster.local.", want: DNSName{Grid: "web", Ordinal: 12, Service: "svc", Namespace: "ns"}},
		{qname: "web-01.svc.ns.svc.cluster.local", err: true},  // not how StatefulSets number pods
		{qname: "web.svc.ns.svc.cluster.local", err: true},     // no ordinal
		{qname: "-1.svc.ns.svc.cluster.local", err: true},      // no grid
		{qname: "web-0.ns.svc.cluster.local", err: true},       // no service
		{qname: "web-0.svc.ns.svc.example.org", err: true},     // other zone
		{qname: "web-0.a.svc.ns.svc.cluster.local", err: true}, // too many labels
	} {
		got, err := ParseDNSName(tc.qname, "cluster.local")
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("ParseDNSName(%q) = %+v, %v; want %+v, error %v", tc.qname, got, err, tc.want, tc.err)
		}
	}
}
