package harness

import (
	"slices"
	"testing"
)

func TestProxyEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name, mode, rules string
		want              []string
	}{{
		name: "iptables SEP chains",
		mode: ProxyModeIPTables,
		rules: `-A KUBE-SEP-AAA -p tcp -m comment --comment "default/svc" -m tcp -j DNAT --to-destination 10.244.0.3:8080
-A KUBE-SEP-BBB -p tcp -m comment --comment default/svc:http -m tcp -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-SEP-CCC -p tcp -m comment --comment "default/svc-other" -m tcp -j DNAT --to-destination 10.244.2.2:8080
-A KUBE-SEP-AAA -s 10.244.0.3/32 -m comment --comment "default/svc" -j KUBE-MARK-MASQ`,
		want: []string{"10.244.0.3", "10.244.1.2"},
	}, {
		name: "nftables direct dnat map",
		mode: ProxyModeNFTables,
		rules: `	chain service-L7225WA2-default/svc/tcp/ {
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.244.0.2 . 8080, 1 : 10.244.2.3 . 8080 }
	}
	chain service-VVJ7CJJF-default/other/tcp/ {
		meta l4proto tcp dnat ip to numgen random mod 1 map { 0 : 10.244.1.4 . 8080 }
	}`,
		want: []string{"10.244.0.2", "10.244.2.3"},
	}, {
		name: "nftables single endpoint dnat",
		mode: ProxyModeNFTables,
		rules: `	chain service-L7225WA2-default/svc/tcp/ {
		ip daddr 10.96.0.10 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
		meta l4proto tcp dnat ip to 10.244.0.2:8080
	}
	chain service-VVJ7CJJF-default/other/tcp/ {
		meta l4proto tcp dnat ip to 10.244.1.4:8080
	}`,
		want: []string{"10.244.0.2"},
	}, {
		name: "nftables endpoint chains, stale chain ignored",
		mode: ProxyModeNFTables,
		rules: `	chain service-L7225WA2-default/svc/tcp/ {
		ip daddr 10.96.0.10 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
		numgen random mod 1 vmap { 0 : goto endpoint-5OJB2KTY-default/svc/tcp/__10.244.0.2/8080 }
	}
	chain endpoint-AAAAAAAA-default/svc/tcp/__10.244.9.9/8080 {
	}`,
		want: []string{"10.244.0.2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProxyEndpoints(tc.mode, tc.rules, "default", "svc"); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
