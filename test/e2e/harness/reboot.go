package harness

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A node "reboots" in the tests: its wrapper, kube-proxy and CoreDNS stop,
// its netfilter rule tables and conntrack entries are emptied, and the three
// start again from the shipped configuration.

// StopNodeComponents stops the node's CoreDNS, kube-proxy and wrapper.
func (c *Cluster) StopNodeComponents(n *Node) {
	if n.DNS != nil {
		n.DNS.Process.Stop(10 * time.Second)
	}
	n.KubeProxy.Stop(10 * time.Second)
	n.Wrapper.Stop(10 * time.Second)
}

// StartNodeComponents starts the node's wrapper, kube-proxy and CoreDNS
// again (after StopNodeComponents), as the cluster first started them.
func (c *Cluster) StartNodeComponents(ctx context.Context, n *Node) error {
	return c.startNodeComponents(ctx, n)
}

// FlushRules empties the node's netfilter tables (iptables-nft and nftables
// both live in nf_tables) and its conntrack table, as after a reboot.
func (n *FabricNode) FlushRules(ctx context.Context) error {
	if out, err := n.NS.Run(ctx, "nft", "flush", "ruleset"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	// conntrack -F exits 0 with a message on stderr, even with nothing to flush.
	if out, err := n.NS.Run(ctx, "conntrack", "-F"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return n.RulesEmpty(ctx)
}

// RulesEmpty returns nil when the node has no netfilter rule at all: an
// empty nft ruleset and no iptables rule.
func (n *FabricNode) RulesEmpty(ctx context.Context) error {
	nft, err := n.NS.Run(ctx, "nft", "list", "ruleset")
	if err != nil {
		return err
	}
	if strings.TrimSpace(nft) != "" {
		return fmt.Errorf("%s: nft ruleset not empty:\n%s", n.Name, nft)
	}
	ipt, err := n.NS.Run(ctx, "iptables-save")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(ipt, "\n") {
		if strings.HasPrefix(l, "-A ") {
			return fmt.Errorf("%s: iptables rules left:\n%s", n.Name, ipt)
		}
	}
	return nil
}

// Unreachable returns nil when a TCP connection from the node to addr fails
// within timeout (e.g. the `kubernetes` ClusterIP while no rule exists).
func (n *FabricNode) Unreachable(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := n.NS.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	conn.Close()
	return fmt.Errorf("%s: %s reachable", n.Name, addr)
}

// RestartWrapper stops the node's wrapper and starts it again, leaving
// kube-proxy running: kube-proxy's watches break and must resume on the new
// wrapper.
func (c *Cluster) RestartWrapper(ctx context.Context, n *Node) error {
	n.Wrapper.Stop(10 * time.Second)
	p, err := c.startWrapper(ctx, n)
	if err != nil {
		return err
	}
	c.track(p)
	n.Wrapper = p
	return nil
}
