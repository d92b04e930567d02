package realnode

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// ruleTrailEvery: one iptables-save of the node's namespace per period.
const ruleTrailEvery = 250 * time.Millisecond

// followRules records, while a step runs, what a node's kube-proxy has
// programmed for one Service (iptables mode): whether its cluster IP is
// matched at all, whether it is rejected (no endpoints), and the endpoints
// it balances over, each change with the time it was seen. A request that
// fails with "network is unreachable" had no rule for the cluster IP (the
// fabric routes it nowhere) or was sent to a pod the rules no longer
// should hold; the trail tells which, for a failed step's report.
func followRules(ctx context.Context, ns *harness.NetNS, namespace, name, clusterIP string) *trail {
	ctx, cancel := context.WithCancel(ctx)
	tr := &trail{cancel: cancel}
	tr.wg.Go(func() {
		tick := time.NewTicker(ruleTrailEvery)
		defer tick.Stop()
		last := ""
		for {
			rules, err := ns.Run(ctx, "iptables-save")
			if ctx.Err() != nil {
				return
			}
			state := "iptables-save: " + strings.Join(strings.Fields(fmt.Sprint(err)), " ")
			if err == nil {
				state = serviceRuleState(rules, namespace, name, clusterIP)
			}
			if state != last {
				tr.add(state)
				last = state
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return tr
}

// serviceRuleState summarises iptables-save's rules for a Service:
// "cluster IP matched=yes|no rejected=yes|no endpoints=[...]".
func serviceRuleState(rules, namespace, name, clusterIP string) string {
	dest := regexp.MustCompile(`^-A KUBE-SERVICES -d ` + regexp.QuoteMeta(clusterIP) + `/32 .*-j (\S+)`)
	matched, rejected := "no", "no"
	for _, line := range strings.Split(rules, "\n") {
		m := dest.FindStringSubmatch(line)
		switch {
		case m == nil:
		case m[1] == "REJECT" || m[1] == "DROP":
			rejected = "yes"
		default:
			matched = "yes"
		}
	}
	return fmt.Sprintf("cluster IP matched=%s rejected=%s endpoints=%v", matched, rejected,
		harness.ProxyEndpoints(harness.ProxyModeIPTables, rules, namespace, name))
}
