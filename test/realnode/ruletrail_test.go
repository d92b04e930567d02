package realnode

import "testing"

// iptables-save lines kube-proxy (iptables mode) writes for a Service with
// two endpoints, and for one with none.
const (
	rulesTwoEndpoints = `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.102.178/32 -p tcp -m comment --comment "default/servicegrid-demo-svc:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-ABCDEFGHIJKLMNOP
-A KUBE-SERVICES -d 10.96.0.10/32 -p udp -m comment --comment "kube-system/kube-dns:dns cluster IP" -m udp --dport 53 -j KUBE-SVC-TCOU7JCQXEZGVUNU
-A KUBE-SEP-AAAAAAAAAAAAAAAA -p tcp -m comment --comment "default/servicegrid-demo-svc:http" -m tcp -j DNAT --to-destination 10.244.0.7:8080
-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "default/servicegrid-demo-svc:http" -m tcp -j DNAT --to-destination 10.244.3.4:8080
COMMIT
`
	rulesNoEndpoints = `*filter
-A KUBE-SERVICES -d 10.96.102.178/32 -p tcp -m comment --comment "default/servicegrid-demo-svc:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
COMMIT
`
)

func TestServiceRuleState(t *testing.T) {
	for _, c := range []struct{ name, rules, want string }{
		{"two endpoints", rulesTwoEndpoints, "cluster IP matched=yes rejected=no endpoints=[10.244.0.7 10.244.3.4]"},
		{"no endpoints", rulesNoEndpoints, "cluster IP matched=no rejected=yes endpoints=[]"},
		{"no rule", "*nat\nCOMMIT\n", "cluster IP matched=no rejected=no endpoints=[]"},
	} {
		if got := serviceRuleState(c.rules, "default", "servicegrid-demo-svc", "10.96.102.178"); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	// Another Service's cluster IP is not this one's.
	if got := serviceRuleState(rulesTwoEndpoints, "default", "servicegrid-demo-svc", "10.96.0.1"); got != "cluster IP matched=no rejected=no endpoints=[10.244.0.7 10.244.3.4]" {
		t.Errorf("another cluster IP: got %q", got)
	}
}
