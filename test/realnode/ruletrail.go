package realnode

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// ruleTrail records, while a step runs, what a node's kube-proxy has
// programmed for one Service (iptables mode): whether its cluster IP is
// matched at all, whether it is rejected (no endpoints), and the endpoints
// it balances over, each change with the time it was seen. A request that
// fails with "network is unreachable" had no rule for the cluster IP (the
// fabric routes it nowhere) or was sent to a pod the rules no longer
// should hold; the trail tells which, for a failed step's report.
type ruleTrail struct {
	mu     sync.Mutex
	lines  []string
	last   string
	cancel context.CancelFunc
	done   chan struct{}
}

// ruleTrailEvery: one iptables-save of the node's namespace per period.
const ruleTrailEvery = 250 * time.Millisecond

func followRules(ctx context.Context, ns *harness.NetNS, namespace, name, clusterIP string) *ruleTrail {
	ctx, cancel := context.WithCancel(ctx)
	tr := &ruleTrail{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		tick := time.NewTicker(ruleTrailEvery)
		defer tick.Stop()
		for {
			rules, err := ns.Run(ctx, "iptables-save")
			if ctx.Err() != nil {
				return
			}
			state := "iptables-save: " + strings.Join(strings.Fields(fmt.Sprint(err)), " ")
			if err == nil {
				state = serviceRuleState(rules, namespace, name, clusterIP)
			}
			tr.seen(time.Now(), state)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return tr
}

func (tr *ruleTrail) seen(at time.Time, state string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if state == tr.last {
		return
	}
	tr.last = state
	tr.lines = append(tr.lines, at.Format("15:04:05.000")+" "+state)
}

// stop ends the sampling and returns one line per state seen.
func (tr *ruleTrail) stop() string {
	tr.cancel()
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.lines, "\n")
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
