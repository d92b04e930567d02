package harness

import (
	"regexp"
	"sort"
	"strings"
)

// ProxyEndpoints extracts from kube-proxy's rules (ProxyRules output) the
// endpoint IPs it load-balances namespace/name's TCP port to, sorted and
// de-duplicated. It reads the Service's own chain, so chains kube-proxy has
// not yet garbage-collected do not count.
func ProxyEndpoints(mode, rules, namespace, name string) []string {
	svc := namespace + "/" + name
	set := map[string]bool{}
	if mode == ProxyModeNFTables {
		// chain service-HASH-ns/name/tcp/PORTNAME { ... } holds either
		//   numgen random mod N vmap { 0 : goto endpoint-HASH-ns/name/tcp/PORTNAME__IP/PORT, ... }
		// or, when no endpoint chain is needed (kube-proxy 1.37),
		//   dnat ip to numgen random mod N map { 0 : IP . PORT, ... }
		// and for a single endpoint (no map)
		//   meta l4proto tcp dnat ip to IP:PORT
		chainStart := regexp.MustCompile(`^\s*chain service-[0-9A-Za-z]+-` + regexp.QuoteMeta(svc) + `/tcp/\S* \{`)
		endpoint := regexp.MustCompile(`endpoint-[0-9A-Za-z]+-` + regexp.QuoteMeta(svc) + `/tcp/[^_\s]*__([0-9a-f.:]+)/\d+`)
		direct := regexp.MustCompile(`\d+ : ([0-9.]+) \. \d+`)
		single := regexp.MustCompile(`dnat (?:ip )?to ([0-9.]+):\d+`)
		in := false
		for _, line := range strings.Split(rules, "\n") {
			switch {
			case chainStart.MatchString(line):
				in = true
			case in && strings.TrimSpace(line) == "}":
				in = false
			case in:
				for _, re := range []*regexp.Regexp{endpoint, direct, single} {
					for _, m := range re.FindAllStringSubmatch(line, -1) {
						set[m[1]] = true
					}
				}
			}
		}
	} else {
		// -A KUBE-SEP-X -p tcp -m comment --comment "ns/name[:port]" -m tcp -j DNAT --to-destination IP:PORT
		dnat := regexp.MustCompile(`--comment "?` + regexp.QuoteMeta(svc) + `(:[^" ]*)?"? .*-j DNAT --to-destination ([0-9.]+):\d+`)
		for _, line := range strings.Split(rules, "\n") {
			if m := dnat.FindStringSubmatch(line); m != nil {
				set[m[2]] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for ip := range set {
		out = append(out, ip)
	}
	sort.Strings(out)
	return out
}
